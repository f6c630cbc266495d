package pubsubgrpc

import (
	"context"
	"fmt"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Ordering keys. A subscription with enable_message_ordering delivers a
// key's messages in publish order (the broker's stream order), and a key's
// next message only once the one before it is acknowledged, whichever of
// the subscription's streaming pulls (or pulls) holds it: Google's clients
// open several streams per subscription (and several processes may
// subscribe), and the client's own per-key ordering spans one stream only.
// JetStream delivers to whichever pull asks and redelivers a message
// without regard to the others of its key, so this server keeps, per
// ordered subscription, the key's outstanding message:
//
//   - a delivered message of a key that has none outstanding becomes its
//     outstanding message (the key is blocked at its stream sequence);
//   - a nack (deadline 0) of a delivered message, or a delivery of a
//     message that was delivered before, blocks its key at that message's
//     stream sequence (the lowest one, when several are blocked);
//   - while a key is blocked, a fetched message of the key with a later
//     sequence is not sent: it waits in memory (pending; at most
//     maxPendingPerSub per subscription, beyond which it goes back to the
//     broker with a short delay, holdBack, and is remembered as held);
//   - when the blocking message is acknowledged, the lowest pending or held
//     message of the key becomes the one it waits for (a pending one is
//     sent at once, by the first stream or pull with room: ready), else
//     the key is free again.
//
// The state is in memory; a process rebuilds it for a subscription before
// its first fetch from it (rebuild), so that after a restart a message
// delivered before and not acknowledged still holds its key back: from
// weir's acknowledgement record (pubsub.Broker.DeliveredUnacked), each
// key of the messages delivered and not acknowledged is blocked at the
// first of them, and the later ones are held. The record may lack an
// acknowledgement (a crash right after it): such a message never comes
// again, so a key blocked by the rebuild at a message that has not come
// again by rebuildBound after the rebuild is released (every message
// unacknowledged at the restart is delivered again within its ack
// deadline, at most 600s), and the held messages that did not come again
// either are dropped from it.

// rebuildBound is how long after a rebuild a key may stay blocked at a
// message that has not been delivered again since.
const rebuildBound = MaxAckDeadline + time.Minute

// holdBack is how long a held-back message waits before the broker offers
// it again.
const holdBack = 250 * time.Millisecond

// maxPendingPerSub bounds the messages an ordered subscription keeps in
// memory behind their keys' outstanding messages; beyond it they go back
// to the broker (held).
const maxPendingPerSub = 10_000

// readyMsg is a pending message released by an acknowledgement of its key.
type readyMsg struct {
	m   jetstream.Msg
	key string
	seq uint64
}

// orderedKeys is the blocking state of one ordered subscription.
type orderedKeys struct {
	// fetchMu serialises the fetches of the subscription's streams and
	// pulls in this process (each holds it from its pull request to the
	// broker until it has handled the batch), so that a key's messages are
	// admitted in the order the broker delivers them, which is publish
	// order: two batches admitted concurrently could let a later message
	// of a key go out before an earlier one. Taken before mu.
	fetchMu sync.Mutex
	mu      sync.Mutex
	// sent maps the stream sequence of each delivered, unacknowledged
	// message with an ordering key to its key.
	sent map[uint64]string
	// blocked maps a key to the sequence it waits for.
	blocked map[string]uint64
	// held are the sequences of a blocked key sent back, by key.
	held map[string]map[uint64]bool
	// pending are the fetched messages of a blocked key kept in memory,
	// by key and sequence; npending counts them.
	pending  map[string]map[uint64]jetstream.Msg
	npending int
	// ready are the pending messages released by an acknowledgement, to
	// send before fetching more; wake is closed (and replaced) when ready
	// gains messages, so that every stream waiting on it looks.
	ready []readyMsg
	wake  chan struct{}

	// rebuilt is true once the state was rebuilt from the broker.
	rebuilt bool
	// early are the sequences acknowledged before the rebuild.
	early map[uint64]bool
	// unseen are the sequences the rebuild found unacknowledged that have
	// not come again since; until is the rebuild's time plus rebuildBound.
	unseen map[uint64]bool
	until  time.Time
	// now is the server's clock (Options.Clock).
	now func() time.Time
}

// ordering returns the blocking state of subscription sub.
func (s *Server) ordering(sub string) *orderedKeys {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ordered == nil {
		s.ordered = make(map[string]*orderedKeys)
	}
	o := s.ordered[sub]
	if o == nil {
		o = &orderedKeys{sent: map[uint64]string{}, blocked: map[string]uint64{}, held: map[string]map[uint64]bool{},
			pending: map[string]map[uint64]jetstream.Msg{}, wake: make(chan struct{}),
			early: map[uint64]bool{}, unseen: map[uint64]bool{}, now: s.opts.Clock}
		if o.now == nil {
			o.now = time.Now
		}
		s.ordered[sub] = o
	}
	return o
}

// lockFetch takes the fetch lock of ordered subscription sub (see
// orderedKeys.fetchMu) and returns its unlock; nothing for a subscription
// without ordering.
func (s *Server) lockFetch(sub *subscription) func() {
	if !sub.ordered {
		return func() {}
	}
	o := s.ordering(sub.id)
	o.fetchMu.Lock()
	return o.fetchMu.Unlock
}

// forgetOrdering drops the ordering state of subscription sub (seek,
// deletion).
func (s *Server) forgetOrdering(sub string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.ordered, sub)
}

// ackSeq is the stream sequence in an ack ID ($JS.ACK.<stream>.<consumer>.
// <delivered>.<stream seq>.…, or with a domain and account before the
// stream); 0 when it has none.
func ackSeq(id string) uint64 {
	rest, ok := strings.CutPrefix(id, "$JS.ACK.")
	if !ok {
		return 0
	}
	tok := strings.Split(rest, ".")
	i := 3
	if len(tok) >= 10 {
		i = 5
	}
	if len(tok) <= i {
		return 0
	}
	n, _ := strconv.ParseUint(tok[i], 10, 64)
	return n
}

// admit says whether message m (ordering key key) may be sent now. A
// message it refuses waits behind its key's outstanding message, in
// memory or sent back to the broker (held back).
func (o *orderedKeys) admit(m jetstream.Msg, key string) bool {
	md, err := m.Metadata()
	if err != nil || key == "" {
		return true
	}
	seq := md.Sequence.Stream
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	if wait, blocked := o.blocked[key]; blocked && wait != seq && o.unseen[wait] && now.After(o.until) {
		// The rebuild's message did not come again: the record lacked
		// its acknowledgement.
		delete(o.unseen, wait)
		delete(o.sent, wait)
		o.release(key, now)
	}
	delete(o.unseen, seq)
	wait, blocked := o.blocked[key]
	switch {
	case blocked && seq > wait:
		delete(o.held[key], seq)
		if p := o.pending[key]; p[seq] != nil {
			p[seq] = m // delivered again (its deadline at the broker passed): the newer delivery
			return false
		}
		if o.npending < maxPendingPerSub {
			if o.pending[key] == nil {
				o.pending[key] = map[uint64]jetstream.Msg{}
			}
			o.pending[key][seq] = m
			o.npending++
			return false
		}
		if o.held[key] == nil {
			o.held[key] = map[uint64]bool{}
		}
		o.held[key][seq] = true
		_ = m.NakWithDelay(holdBack)
		return false
	case blocked && seq < wait:
		// An earlier message of the key comes again: it is now the one
		// the key waits for.
		o.blocked[key] = seq
	case !blocked:
		o.blocked[key] = seq
	}
	delete(o.held[key], seq)
	o.dropPending(key, seq)
	o.sent[seq] = key
	return true
}

// dropPending forgets pending message seq of key, if it is one. o.mu is
// held.
func (o *orderedKeys) dropPending(key string, seq uint64) {
	if p := o.pending[key]; p[seq] != nil {
		delete(p, seq)
		o.npending--
		if len(p) == 0 {
			delete(o.pending, key)
		}
	}
}

// take returns up to n released messages that are still their keys'
// next, and marks them sent, with the channel that is closed when more
// are released.
func (o *orderedKeys) take(n int) ([]readyMsg, <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if now := o.now(); len(o.unseen) > 0 && now.After(o.until) {
		// Keys the rebuild blocked at a message that never came again
		// (the record lacked its acknowledgement): their pending messages
		// are not offered again by the broker, so they are released here.
		for key, wait := range o.blocked {
			if o.unseen[wait] {
				delete(o.unseen, wait)
				delete(o.sent, wait)
				o.release(key, now)
			}
		}
	}
	var out []readyMsg
	i := 0
	for ; i < len(o.ready) && len(out) < n; i++ {
		r := o.ready[i]
		if _, sent := o.sent[r.seq]; sent || o.blocked[r.key] != r.seq {
			continue // delivered meanwhile by the broker, or no longer next
		}
		o.sent[r.seq] = r.key
		out = append(out, r)
	}
	o.ready = o.ready[i:]
	if len(o.ready) == 0 {
		o.ready = nil
	}
	return out, o.wake
}

// nacked blocks the keys of the deliveries ids, given back by the client.
func (o *orderedKeys) nacked(ids []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, id := range ids {
		seq := ackSeq(id)
		key, ok := o.sent[seq]
		if !ok {
			continue
		}
		if wait, blocked := o.blocked[key]; !blocked || seq < wait {
			o.blocked[key] = seq
		}
	}
}

// acked frees the keys that waited for the deliveries ids.
func (o *orderedKeys) acked(ids []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	for _, id := range ids {
		seq := ackSeq(id)
		if !o.rebuilt {
			o.early[seq] = true
		}
		delete(o.unseen, seq)
		key, ok := o.sent[seq]
		if !ok {
			continue
		}
		delete(o.sent, seq)
		delete(o.held[key], seq) // an earlier delivery of a held message
		o.dropPending(key, seq)  // or of a pending one
		if wait, blocked := o.blocked[key]; !blocked || wait != seq {
			continue
		}
		o.release(key, now)
	}
}

// release frees key of the message it waited for: the lowest pending or
// held message of the key, if any, becomes the one it waits for (a
// pending one is released to be sent at once). Past the rebuild's bound,
// held messages the rebuild found that have not come again are dropped
// first. o.mu is held.
func (o *orderedKeys) release(key string, now time.Time) {
	expired := now.After(o.until)
	next := uint64(0)
	for h := range o.held[key] {
		if expired && o.unseen[h] {
			delete(o.held[key], h)
			delete(o.unseen, h)
			delete(o.sent, h)
			continue
		}
		if next == 0 || h < next {
			next = h
		}
	}
	fromPending := false
	for seq := range o.pending[key] {
		if next == 0 || seq < next {
			next, fromPending = seq, true
		}
	}
	switch {
	case next == 0:
		delete(o.blocked, key)
		delete(o.held, key)
	case fromPending:
		o.blocked[key] = next
		o.ready = append(o.ready, readyMsg{m: o.pending[key][next], key: key, seq: next})
		o.dropPending(key, next)
		close(o.wake)
		o.wake = make(chan struct{})
	default:
		o.blocked[key] = next
	}
}

// readyMessages returns up to n messages of ordered subscription sub that
// acknowledgements of their keys released (see take), as deliveries of
// the subscription's current generation, and the channel that is closed
// when more are released (nil for a subscription without ordering).
func (s *Server) readyMessages(ctx context.Context, sub *subscription, n int) ([]*pubsubpb.ReceivedMessage, <-chan struct{}, error) {
	if !sub.ordered {
		return nil, nil, nil
	}
	o := s.ordering(sub.id)
	if n <= 0 {
		o.mu.Lock()
		defer o.mu.Unlock()
		return nil, o.wake, nil
	}
	gen, err := s.b.AckGeneration(ctx, sub.id)
	if err != nil {
		return nil, nil, statusOf(err)
	}
	rs, wake := o.take(n)
	out := make([]*pubsubpb.ReceivedMessage, 0, len(rs))
	for _, r := range rs {
		rm, err := received(r.m)
		if err != nil {
			_ = r.m.Nak()
			continue
		}
		_ = r.m.InProgress() // it waited in memory: its deadline at the broker starts again
		rm.AckId = ackID(r.m.Reply(), gen)
		out = append(out, rm)
	}
	return out, wake, nil
}

// giveBack hands every message kept in memory (pending or ready) back to
// the broker at once, so that another server over the same broker (the
// next run of weir) delivers them without waiting for their deadlines.
func (o *orderedKeys) giveBack() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for key, p := range o.pending {
		for _, m := range p {
			_ = m.Nak()
		}
		delete(o.pending, key)
	}
	for _, r := range o.ready {
		if _, sent := o.sent[r.seq]; !sent {
			_ = r.m.Nak()
		}
	}
	o.ready, o.npending = nil, 0
}

// givePendingBack hands the messages every ordered subscription keeps in
// memory back to the broker (Stop).
func (s *Server) givePendingBack() {
	s.mu.Lock()
	subs := make([]*orderedKeys, 0, len(s.ordered))
	for _, o := range s.ordered {
		subs = append(subs, o)
	}
	s.mu.Unlock()
	for _, o := range subs {
		o.giveBack()
	}
}

// orderedReady rebuilds, before the first fetch of this process from
// ordered subscription sub, its blocking state from the broker (see the
// ordering rules above). Acknowledgements that come meanwhile wait for it.
func (s *Server) orderedReady(ctx context.Context, sub *subscription) error {
	if !sub.ordered {
		return nil
	}
	o := s.ordering(sub.id)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.rebuilt {
		return nil
	}
	blocked := 0
	err := s.b.DeliveredUnacked(ctx, sub.id, func(seq uint64, h nats.Header) {
		key := h.Get(OrderingKeyAttribute)
		if key == "" || o.early[seq] {
			return
		}
		o.sent[seq] = key
		o.unseen[seq] = true
		if _, ok := o.blocked[key]; !ok {
			o.blocked[key] = seq
			blocked++
			return
		}
		if o.held[key] == nil {
			o.held[key] = map[uint64]bool{}
		}
		o.held[key][seq] = true
	})
	if err != nil {
		return statusOf(fmt.Errorf("ordering keys of %s: %w", sub.id, err))
	}
	o.rebuilt, o.early, o.until = true, nil, o.now().Add(rebuildBound)
	if blocked > 0 {
		s.log.Info("ordering keys held back behind messages delivered before a restart and not acknowledged",
			"subscription", sub.id, "keys", blocked, "messages", len(o.unseen))
	}
	return nil
}
