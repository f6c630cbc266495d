package pubsubgrpc

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// streamFetchWait bounds one pull request of a streaming pull to the
// broker: messages are sent as they arrive, and a new request follows.
const streamFetchWait = time.Second

// StreamingPull implements the Subscriber service: it sends messages as
// they arrive, at most max_outstanding_messages unacknowledged at a time
// (an unacknowledged message stops counting once its deadline passes), and
// takes acknowledgements and deadline changes on the same stream. Messages
// fetched but not sent when the stream ends are delivered again at once.
func (s *Server) StreamingPull(stream pubsubpb.Subscriber_StreamingPullServer) error {
	ctx := stream.Context()
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	sub, err := s.readable(ctx, first.GetSubscription())
	if err != nil {
		return err
	}
	dl := sub.ackWait
	if secs := first.GetStreamAckDeadlineSeconds(); secs != 0 {
		if secs < 10 || secs > 600 {
			return invalid("stream_ack_deadline_seconds %d: want 10 to 600", secs)
		}
		dl = time.Duration(secs) * time.Second
	}
	sp := &streamPull{s: s, sub: sub, stream: stream, deadline: dl, max: int(first.GetMaxOutstandingMessages()),
		outstanding: make(map[string]time.Time), changed: make(chan struct{}, 1)}
	if sp.max <= 0 {
		sp.max = DefaultMaxOutstanding
	}
	s.addStream(sub.id, sp)
	defer s.removeStream(sub.id, sp)
	if err := sp.handle(ctx, first); err != nil {
		return err
	}
	recvErr := make(chan error, 1)
	go func() {
		defer func() {
			// The stream's requests are handled here, outside the call's
			// goroutine and its interceptor (streamRecover).
			if p := recover(); p != nil {
				recvErr <- s.panicked("/google.pubsub.v1.Subscriber/StreamingPull", p)
			}
		}()
		for {
			req, err := stream.Recv()
			if err == nil {
				err = sp.handle(ctx, req)
			}
			if err != nil {
				recvErr <- err
				return
			}
		}
	}()
	for {
		select {
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-ctx.Done():
			return nil
		default:
		}
		room := sp.room(time.Now())
		if room <= 0 {
			select {
			case <-sp.changed:
			case <-time.After(time.Second): // deadlines pass
			case err := <-recvErr:
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			case <-ctx.Done():
				return nil
			}
			continue
		}
		gen, err := s.b.AckGeneration(ctx, sub.id) // before the fetch: see admitted
		if err != nil {
			return statusOf(err)
		}
		if err := s.orderedReady(ctx, sub); err != nil {
			return err
		}
		// Messages an acknowledgement released first (ordering keys).
		ready, wake, err := s.readyMessages(ctx, sub, room)
		if err != nil {
			return err
		}
		if len(ready) > 0 {
			if !sp.send(stream, ready) {
				return nil
			}
			continue
		}
		if err := sp.fetchAndForward(ctx, stream, room, gen, wake); err != nil {
			return err
		}
	}
}

// streamPull is the state of one streaming pull.
type streamPull struct {
	s        *Server
	sub      *subscription
	deadline time.Duration // of each message sent, until modified
	max      int

	mu          sync.Mutex
	outstanding map[string]time.Time // guarded by mu: ack ID -> deadline
	changed     chan struct{}        // a slot freed
	// stream is the stream the confirmations of an exactly-once
	// subscription go out on; sendMu serialises its sends (the messages
	// from the pulling goroutine, the confirmations from the receiving
	// one). A leaf.
	stream pubsubpb.Subscriber_StreamingPullServer
	sendMu sync.Mutex
}

// confirm sends, for an exactly-once subscription, the confirmation of
// the acknowledgements (or deadline changes) of a request: done were
// applied, the others of ids are no longer valid.
func (p *streamPull) confirm(ids, done []string, ack bool) {
	if !p.sub.pol.exactlyOnce || len(ids) == 0 {
		return
	}
	ok := make(map[string]bool, len(done))
	for _, id := range done {
		ok[id] = true
	}
	var bad []string
	for _, id := range ids {
		if !ok[id] {
			bad = append(bad, id)
		}
	}
	resp := &pubsubpb.StreamingPullResponse{}
	if ack {
		resp.AcknowledgeConfirmation = &pubsubpb.StreamingPullResponse_AcknowledgeConfirmation{AckIds: done, InvalidAckIds: bad}
	} else {
		resp.ModifyAckDeadlineConfirmation = &pubsubpb.StreamingPullResponse_ModifyAckDeadlineConfirmation{AckIds: done, InvalidAckIds: bad}
	}
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	_ = p.stream.Send(resp) // a broken stream ends the call anyway
}

func (s *Server) addStream(sub string, sp *streamPull) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streams[sub] == nil {
		s.streams[sub] = make(map[*streamPull]struct{})
	}
	s.streams[sub][sp] = struct{}{}
}

func (s *Server) removeStream(sub string, sp *streamPull) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.streams[sub], sp)
	if len(s.streams[sub]) == 0 {
		delete(s.streams, sub)
	}
}

// streamsOf returns the open streaming pulls of subscription sub.
func (s *Server) streamsOf(sub string) []*streamPull {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*streamPull, 0, len(s.streams[sub]))
	for sp := range s.streams[sub] {
		out = append(out, sp)
	}
	return out
}

// acked frees, in every open stream of sub, the slots of ids, acknowledged
// or given back (deadline 0) outside the streams. Without this a client
// that acknowledges with Acknowledge (as Google's Go client does) keeps its
// stream's window full until the deadlines pass, and throughput falls to
// a window per ack deadline once more messages wait than the window holds.
func (s *Server) acked(sub string, ids []string) {
	for _, sp := range s.streamsOf(sub) {
		sp.free(ids)
	}
}

// extended moves the deadlines of ids in every open stream of sub to d
// from now, as ModifyAckDeadline outside the stream asked.
func (s *Server) extended(sub string, ids []string, d time.Duration) {
	if d == 0 {
		s.acked(sub, ids)
		return
	}
	until := time.Now().Add(d)
	for _, sp := range s.streamsOf(sub) {
		sp.mu.Lock()
		for _, id := range ids {
			if _, ok := sp.outstanding[id]; ok {
				sp.outstanding[id] = until
			}
		}
		sp.mu.Unlock()
	}
}

// room says how many more messages may be sent now.
func (p *streamPull) room(now time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, d := range p.outstanding {
		if now.After(d) {
			delete(p.outstanding, id)
		}
	}
	return p.max - len(p.outstanding)
}

func (p *streamPull) free(ids []string) {
	p.mu.Lock()
	for _, id := range ids {
		delete(p.outstanding, id)
	}
	p.mu.Unlock()
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// handle applies a request's acknowledgements and deadline changes.
func (p *streamPull) handle(ctx context.Context, req *pubsubpb.StreamingPullRequest) error {
	if len(req.GetModifyDeadlineAckIds()) != len(req.GetModifyDeadlineSeconds()) {
		return invalid("modify_deadline_ack_ids (%d) and modify_deadline_seconds (%d) differ in length",
			len(req.GetModifyDeadlineAckIds()), len(req.GetModifyDeadlineSeconds()))
	}
	if ids := req.GetAckIds(); len(ids) > 0 {
		if err := checkAckIDs(p.sub, ids); err != nil {
			return err
		}
		done, err := p.s.ack(ctx, p.sub, ids)
		if err != nil {
			return err
		}
		p.free(ids)
		if p.sub.ordered {
			p.s.ordering(p.sub.id).acked(done)
		}
		p.confirm(ids, done, true)
	}
	byDeadline := map[int32][]string{}
	for i, id := range req.GetModifyDeadlineAckIds() {
		secs := req.GetModifyDeadlineSeconds()[i]
		byDeadline[secs] = append(byDeadline[secs], id)
	}
	now := time.Now()
	for secs, ids := range byDeadline {
		d, err := deadline(secs)
		if err != nil {
			return err
		}
		if err := checkAckIDs(p.sub, ids); err != nil {
			return err
		}
		if err := p.s.modAck(ctx, p.sub, ids, d); err != nil {
			return err
		}
		if p.sub.pol.exactlyOnce {
			cur, err := p.s.current(ctx, p.sub, ids)
			if err != nil {
				return err
			}
			p.confirm(ids, cur, false)
		}
		if d == 0 {
			p.free(ids)
			continue
		}
		p.mu.Lock()
		for _, id := range ids {
			if _, ok := p.outstanding[id]; ok {
				p.outstanding[id] = now.Add(d)
			}
		}
		p.mu.Unlock()
	}
	return nil
}

// fetchAndForward pulls up to room messages (at most 500) from the broker
// and forwards them, holding the subscription's fetch lock throughout
// (ordering keys).
func (p *streamPull) fetchAndForward(ctx context.Context, stream pubsubpb.Subscriber_StreamingPullServer, room int, gen uint64, wake <-chan struct{}) error {
	unlock := p.s.lockFetch(p.sub)
	defer unlock()
	batch, err := p.sub.cons.Fetch(min(room, 500), jetstream.FetchMaxWait(streamFetchWait), jetstream.FetchMaxBytes(fetchMaxBytes))
	if err != nil {
		return p.s.fetchStatus(p.sub, err)
	}
	return p.forward(ctx, stream, batch, gen, wake)
}

// forward sends a fetch's messages as they arrive, in order, and the
// messages of ordering keys that acknowledgements release meanwhile (wake
// closed). When the stream ends, the rest are delivered again at once.
func (p *streamPull) forward(ctx context.Context, stream pubsubpb.Subscriber_StreamingPullServer, batch jetstream.MessageBatch, gen uint64, wake <-chan struct{}) error {
	for {
		select {
		case m, ok := <-batch.Messages():
			if !ok {
				if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, nats.ErrTimeout) {
					return p.s.fetchStatus(p.sub, err)
				}
				return nil
			}
			rm, ok, err := p.s.admitted(ctx, p.sub, m, gen)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			msgs := []*pubsubpb.ReceivedMessage{rm}
			// And whatever else has arrived already, in one response.
		more:
			for len(msgs) < 100 {
				select {
				case m, ok := <-batch.Messages():
					if !ok {
						break more
					}
					rm, ok, err := p.s.admitted(ctx, p.sub, m, gen)
					if err != nil {
						break more
					}
					if ok {
						msgs = append(msgs, rm)
					}
				default:
					break more
				}
			}
			if !p.send(stream, msgs) {
				go nakRest(batch)
				return nil
			}
		case <-wake:
			ready, next, err := p.s.readyMessages(ctx, p.sub, max(p.room(time.Now()), 1))
			if err != nil {
				go nakRest(batch)
				return err
			}
			wake = next
			if len(ready) > 0 && !p.send(stream, ready) {
				go nakRest(batch)
				return nil
			}
		case <-ctx.Done():
			go nakRest(batch)
			return nil
		}
	}
}

// send sends msgs on the stream and counts them outstanding; when the
// stream is broken it gives them back to the broker at once and returns
// false.
func (p *streamPull) send(stream pubsubpb.Subscriber_StreamingPullServer, msgs []*pubsubpb.ReceivedMessage) bool {
	now := time.Now()
	p.mu.Lock()
	for _, rm := range msgs {
		p.outstanding[rm.GetAckId()] = now.Add(p.deadline)
	}
	p.mu.Unlock()
	// The properties tell Google's clients to hand messages of one
	// ordering key to the application one at a time, in order.
	props := &pubsubpb.StreamingPullResponse_SubscriptionProperties{MessageOrderingEnabled: p.sub.ordered,
		ExactlyOnceDeliveryEnabled: p.sub.pol.exactlyOnce}
	p.sendMu.Lock()
	err := stream.Send(&pubsubpb.StreamingPullResponse{ReceivedMessages: msgs, SubscriptionProperties: props})
	p.sendMu.Unlock()
	if err != nil {
		ids := make([]string, len(msgs))
		for i, rm := range msgs {
			ids[i] = rm.GetAckId()
		}
		_ = p.s.nak(p.sub, ids, 0)
		return false
	}
	if p.deadline != p.sub.ackWait {
		ids := make([]string, len(msgs))
		for i, rm := range msgs {
			ids[i] = rm.GetAckId()
		}
		_ = p.s.nak(p.sub, ids, p.deadline) // the stream's deadline, not the subscription's
	}
	return true
}
