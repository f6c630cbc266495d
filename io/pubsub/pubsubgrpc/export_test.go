package pubsubgrpc

import "context"

// OpenStreams returns how many streaming pulls of subscription sub the
// server is serving: tests wait for a finished Receive's streams to end
// before they change the subscription under it.
func (s *Server) OpenStreams(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.streams[sub])
}

// AutoAckAfterEnd acknowledges delivery ackID of subscription sub as the
// server does for a message the client never sees, from a request that has
// already ended (its context canceled).
func (s *Server) AutoAckAfterEnd(sub, ackID string) error {
	found, err := s.lookup(context.Background(), sub)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return s.autoAck(ctx, found, ackID)
}
