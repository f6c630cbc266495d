package pubsubgrpc

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Ordering keys after a redelivery. A subscription with
// enable_message_ordering delivers a key's messages in publish order: the
// broker's stream order. When one of them is delivered again (its deadline
// passed, or it was nacked), Pub/Sub holds the key's later messages back
// until it is acknowledged, so a subscriber never processes them before
// it. JetStream redelivers a message without regard to the others of its
// key, so this server keeps, per ordered subscription, the keys blocked by
// a redelivery:
//
//   - a nack (deadline 0) of a delivered message, or a delivery of a
//     message that was delivered before, blocks its key at that message's
//     stream sequence (the lowest one, when several are blocked);
//   - while a key is blocked, a fetched message of the key with a later
//     sequence is not sent: it goes back to the broker with a short delay
//     (holdBack) and is remembered as held;
//   - when the blocking message is acknowledged, the lowest held message
//     of the key (if any) becomes the one the key waits for, else the key
//     is free again.
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

// orderedKeys is the blocking state of one ordered subscription.
type orderedKeys struct {
	mu sync.Mutex
	// sent maps the stream sequence of each delivered, unacknowledged
	// message with an ordering key to its key.
	sent map[uint64]string
	// blocked maps a key to the sequence it waits for.
	blocked map[string]uint64
	// held are the sequences of a blocked key sent back, by key.
	held map[string]map[uint64]bool

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
			early: map[uint64]bool{}, unseen: map[uint64]bool{}, now: s.opts.Clock}
		if o.now == nil {
			o.now = time.Now
		}
		s.ordered[sub] = o
	}
	return o
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
// message it refuses has been sent back to the broker (held back).
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
	case !blocked && md.NumDelivered > 1:
		o.blocked[key] = seq
	}
	delete(o.held[key], seq)
	o.sent[seq] = key
	return true
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
		if wait, blocked := o.blocked[key]; !blocked || wait != seq {
			continue
		}
		o.release(key, now)
	}
}

// release frees key of the message it waited for: the lowest held message
// of the key, if any, becomes the one it waits for. Past the rebuild's
// bound, held messages the rebuild found that have not come again are
// dropped first.
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
	if next == 0 {
		delete(o.blocked, key)
		delete(o.held, key)
	} else {
		o.blocked[key] = next
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
