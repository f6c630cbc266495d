package pubsubgrpc

// OpenStreams returns how many streaming pulls of subscription sub the
// server is serving: tests wait for a finished Receive's streams to end
// before they change the subscription under it.
func (s *Server) OpenStreams(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.streams[sub])
}
