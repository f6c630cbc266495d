package pubsub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-dev/weir/runner/contract"
)

// Per-message acknowledgement state, for subscription snapshots.
//
// JetStream tells a consumer's acknowledgement floor, but not which
// messages above it were acknowledged one by one (a subscription with
// PerMessageAck, the Pub/Sub gRPC API's, acknowledges out of order). So
// weir keeps its own record of them: every per-message acknowledgement
// weir sends (the gRPC API's Acknowledge and StreamingPull, weir's Pull
// with ack) is also published, on the same connection right after the
// acknowledgements, and stored before the call returns (the gRPC API waits
// for the store and for the flush of the acknowledgements together), to the file-stored stream
// WEIR_ACK_RECORDS, subject weir.acks.<subscription>: it lives in the
// broker's store, so a restart or a kill -9 keeps it as well as the
// acknowledgements themselves. A snapshot of such a subscription reads the
// record and keeps the acknowledged sequences above the floor, as runs
// (SubscriptionSnapshot.Acked), at most MaxSnapshotAckedRuns of them.
//
// A seek to a snapshot with runs restarts the subscription after the
// floor and keeps the runs as the subscription's restored set (key-value
// bucket WEIR_SUBSCRIPTION_RESTORED, key the subscription): the delivery
// paths (AckRestored) acknowledge a message of the set themselves instead
// of handing it to a client. Any seek replaces the record with the new
// state; deleting or creating a subscription clears both.
//
// Each subscription's deliveries also have a generation (AckGeneration),
// kept with the restored set: a seek, a creation or a deletion starts a
// new one. The gRPC API labels its ack IDs with it and drops the
// acknowledgements of another generation: JetStream ignores those (the
// seek dropped the delivery) or would apply them to a later delivery of
// the same message, so recording them would make a snapshot hold as
// acknowledged a message nobody acknowledged since the seek.
//
// The restored set is cached in memory per process: weir processes that
// share one external NATS server do not see each other's seeks until they
// restart.
//
// A record may lack an acknowledgement whose call failed, and records
// whose sequences all fell under the floor are pruned: either way a
// snapshot then holds fewer acknowledged messages, so a seek to it
// delivers more again, never fewer.

const (
	ackRecordStream  = "WEIR_ACK_RECORDS"
	ackRecordSubject = "weir.acks."
	restoredBucket   = "WEIR_SUBSCRIPTION_RESTORED"
	// pruneEvery is how many records of a subscription this process writes
	// between two prunes of its records.
	pruneEvery = 1024
)

// MaxSnapshotAckedRuns bounds the runs of consecutive sequences
// acknowledged above the floor a subscription snapshot holds (each run is
// a pair of numbers, and the snapshot one key-value entry under the
// server's 1 MB payload). A snapshot that would need more is refused with
// ErrSnapshotTooLarge.
const MaxSnapshotAckedRuns = 10000

// SeqRange is a run of consecutive stream sequences (contract.SeqRange).
type SeqRange = contract.SeqRange

// toRuns turns sequences (any order, duplicates allowed) into sorted runs.
func toRuns(seqs []uint64) []SeqRange {
	if len(seqs) == 0 {
		return nil
	}
	s := slices.Clone(seqs)
	slices.Sort(s)
	s = slices.Compact(s)
	runs := []SeqRange{{First: s[0], Last: s[0]}}
	for _, q := range s[1:] {
		if last := &runs[len(runs)-1]; q == last.Last+1 {
			last.Last = q
		} else {
			runs = append(runs, SeqRange{First: q, Last: q})
		}
	}
	return runs
}

// inRuns reports whether seq is in the sorted runs.
func inRuns(runs []SeqRange, seq uint64) bool {
	i, _ := slices.BinarySearchFunc(runs, seq, func(r SeqRange, q uint64) int {
		switch {
		case r.Last < q:
			return -1
		case r.First > q:
			return 1
		}
		return 0
	})
	return i < len(runs) && runs[i].First <= seq && seq <= runs[i].Last
}

// runSeqs lists the sequences of runs.
func runSeqs(runs []SeqRange) []uint64 {
	var out []uint64
	for _, r := range runs {
		for q := r.First; ; q++ {
			out = append(out, q)
			if q == r.Last {
				break
			}
		}
	}
	return out
}

// AckIDSequence returns the stream sequence of a delivery's reply subject
// ($JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.… or, with a
// domain and account, $JS.ACK.<domain>.<account>.<stream>.<consumer>.…).
func AckIDSequence(id string) (uint64, bool) {
	rest, ok := strings.CutPrefix(id, "$JS.ACK.")
	if !ok {
		return 0, false
	}
	tok := strings.Split(rest, ".")
	i := 3
	if len(tok) >= 10 {
		i = 5
	} else if len(tok) != 7 {
		return 0, false
	}
	seq, err := strconv.ParseUint(tok[i], 10, 64)
	return seq, err == nil
}

// ackState is the broker's per-message acknowledgement bookkeeping.
type ackState struct {
	mu sync.Mutex // a leaf
	// restored caches the restored sets and generations by subscription;
	// an entry with nil runs means "none" (looked up already).
	restored map[string]restoredState
	// records counts the records written per subscription since the last
	// prune.
	records map[string]int
	// stream is true once ackRecordStream is known to exist.
	stream bool
	// maxRuns is MaxSnapshotAckedRuns but in tests.
	maxRuns int
}

// maxAckedRuns is the most runs a snapshot holds.
func (b *Broker) maxAckedRuns() int {
	if b.acks.maxRuns > 0 {
		return b.acks.maxRuns
	}
	return MaxSnapshotAckedRuns
}

// ackRecords returns the record stream, creating it on first use.
func (b *Broker) ackRecords(ctx context.Context) (jetstream.Stream, error) {
	s, err := b.js.Stream(ctx, ackRecordStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s, err = b.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name:        ackRecordStream,
			Description: "weir's record of per-message acknowledgements, for subscription snapshots",
			Subjects:    []string{ackRecordSubject + ">"},
			Storage:     jetstream.FileStorage,
			Retention:   jetstream.LimitsPolicy,
			Replicas:    b.Replicas(),
		})
	}
	if err != nil {
		return nil, apiErr("opening the acknowledgement record", err)
	}
	return s, nil
}

// RecordAcks records that the deliveries ackIDs of subscription sub (one
// that acknowledges per message) were acknowledged. Call it right after
// sending the acknowledgements on the broker's connection (Conn): it
// returns once the record is stored.
func (b *Broker) RecordAcks(ctx context.Context, sub string, ackIDs []string) error {
	wait, err := b.StartRecordAcks(ctx, sub, ackIDs)
	if err != nil {
		return err
	}
	return wait(ctx)
}

// StartRecordAcks is RecordAcks without the wait: it sends the record and
// returns a function that waits until it is stored (and then prunes the
// record when due). The caller overlaps the wait with its own (the flush
// of the acknowledgements) and must call it before telling anyone the
// acknowledgements are done, so that a snapshot right after sees them.
func (b *Broker) StartRecordAcks(ctx context.Context, sub string, ackIDs []string) (func(context.Context) error, error) {
	seqs := make([]uint64, 0, len(ackIDs))
	for _, id := range ackIDs {
		if q, ok := AckIDSequence(id); ok {
			seqs = append(seqs, q)
		}
	}
	return b.startRecord(ctx, sub, seqs)
}

func (b *Broker) recordAcked(ctx context.Context, sub string, seqs []uint64) error {
	wait, err := b.startRecord(ctx, sub, seqs)
	if err != nil {
		return err
	}
	return wait(ctx)
}

// noWait is the wait of a record with nothing to store.
func noWait(context.Context) error { return nil }

func (b *Broker) startRecord(ctx context.Context, sub string, seqs []uint64) (func(context.Context) error, error) {
	if len(seqs) == 0 {
		return noWait, nil
	}
	b.acks.mu.Lock()
	known := b.acks.stream
	b.acks.mu.Unlock()
	if !known {
		if _, err := b.ackRecords(ctx); err != nil {
			return nil, err
		}
		b.acks.mu.Lock()
		b.acks.stream = true
		b.acks.mu.Unlock()
	}
	v, err := json.Marshal(seqs)
	if err != nil {
		return nil, fmt.Errorf("encoding acknowledged sequences: %w", err)
	}
	// Sent after the acknowledgements, sent before on the same connection;
	// stored before the wait returns (a snapshot right after sees it).
	// The async window is shared with the topics' publishers: wait for
	// room rather than fail an acknowledgement in a burst.
	fut, err := b.js.PublishAsync(ackRecordSubject+NATSName(sub), v, jetstream.WithStallWait(10*time.Second))
	if err != nil {
		return nil, apiErr("recording acknowledgements of "+sub, err)
	}
	return func(ctx context.Context) error {
		select {
		case <-fut.Ok():
		case err := <-fut.Err():
			return apiErr("recording acknowledgements of "+sub, err)
		case <-ctx.Done():
			return fmt.Errorf("recording acknowledgements of %s: %w", sub, ctx.Err())
		}
		b.recorded(ctx, sub)
		return nil
	}, nil
}

// recorded counts a stored record of sub and prunes the record every
// pruneEvery of them.
func (b *Broker) recorded(ctx context.Context, sub string) {
	b.acks.mu.Lock()
	if b.acks.records == nil {
		b.acks.records = map[string]int{}
	}
	b.acks.records[sub]++
	prune := b.acks.records[sub] >= pruneEvery
	if prune {
		b.acks.records[sub] = 0
	}
	b.acks.mu.Unlock()
	if prune {
		if _, c, err := b.findSubscription(ctx, sub); err == nil {
			if ci, err := c.Info(ctx); err == nil {
				if _, err := b.readAcked(ctx, sub, ci.AckFloor.Stream, true); err != nil {
					b.log.Warn("pruning the acknowledgement record", "subscription", sub, "error", err)
				}
			}
		}
	}
}

// readAcked reads the record of sub and returns the acknowledged sequences
// above floor as runs; with prune, it also purges the leading records
// whose sequences are all at or under floor.
func (b *Broker) readAcked(ctx context.Context, sub string, floor uint64, prune bool) ([]SeqRange, error) {
	s, err := b.ackRecords(ctx)
	if err != nil {
		return nil, err
	}
	subject := ackRecordSubject + NATSName(sub)
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		return nil, apiErr("reading the acknowledgement record of "+sub, err)
	}
	pending := c.CachedInfo().NumPending
	var seqs []uint64
	var first, keepFrom uint64 // the first record; the first with a sequence above floor
	for got := uint64(0); got < pending; {
		batch, err := c.Fetch(int(min(pending-got, 1000)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, apiErr("reading the acknowledgement record of "+sub, err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				return nil, fmt.Errorf("reading the acknowledgement record of %s: %w", sub, err)
			}
			if first == 0 {
				first = md.Sequence.Stream
			}
			var rec []uint64
			if err := json.Unmarshal(m.Data(), &rec); err != nil {
				b.log.Warn("skipping an unreadable acknowledgement record", "subscription", sub, "error", err)
				continue
			}
			above := false
			for _, q := range rec {
				if q > floor {
					seqs = append(seqs, q)
					above = true
				}
			}
			if above && keepFrom == 0 {
				keepFrom = md.Sequence.Stream
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, apiErr("reading the acknowledgement record of "+sub, err)
		}
		if n == 0 {
			return nil, fmt.Errorf("reading the acknowledgement record of %s: %d of %d records arrived: %w", sub, got, pending, ErrUnavailable)
		}
		got += uint64(n)
	}
	if prune && pending > 0 {
		opts := []jetstream.StreamPurgeOpt{jetstream.WithPurgeSubject(subject)}
		if keepFrom > 0 {
			opts = append(opts, jetstream.WithPurgeSequence(keepFrom))
		}
		if keepFrom != first {
			if err := s.Purge(ctx, opts...); err != nil {
				b.log.Warn("pruning the acknowledgement record", "subscription", sub, "error", err)
			}
		}
	}
	return toRuns(seqs), nil
}

// restoredState is what a subscription's entry in restoredBucket holds:
// the restored set, and the generation of its deliveries (AckGeneration).
// Entries of earlier versions are the runs alone, a JSON array.
type restoredState struct {
	Runs []SeqRange `json:"runs,omitempty"`
	Gen  uint64     `json:"gen,omitempty"`
}

// resetAckState sets the acknowledgement bookkeeping of sub after a seek
// or (runs nil, clear) its creation or deletion: the record becomes runs,
// and so does the restored set; the subscription's deliveries start a new
// generation, so acknowledgements of the earlier ones are ignored.
func (b *Broker) resetAckState(ctx context.Context, sub string, runs []SeqRange) error {
	b.acks.mu.Lock()
	gen := uint64(time.Now().UnixNano())
	if cur, ok := b.acks.restored[sub]; ok && cur.Gen >= gen {
		gen = cur.Gen + 1
	}
	if b.acks.restored == nil {
		b.acks.restored = map[string]restoredState{}
	}
	b.acks.restored[sub] = restoredState{Runs: runs, Gen: gen}
	b.acks.mu.Unlock()
	s, err := b.ackRecords(ctx)
	if err != nil {
		return err
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSubject(ackRecordSubject+NATSName(sub))); err != nil {
		return apiErr("clearing the acknowledgement record of "+sub, err)
	}
	kv, err := b.restoredSets(ctx)
	if err != nil {
		return err
	}
	v, err := json.Marshal(restoredState{Runs: runs, Gen: gen})
	if err != nil {
		return fmt.Errorf("encoding restored acknowledgements: %w", err)
	}
	if _, err := kv.Put(ctx, sub, v); err != nil {
		return apiErr("keeping the restored acknowledgements of "+sub, err)
	}
	if len(runs) > 0 {
		rec, _ := json.Marshal(runSeqs(runs))
		if _, err := b.js.Publish(ctx, ackRecordSubject+NATSName(sub), rec); err != nil {
			return apiErr("recording the restored acknowledgements of "+sub, err)
		}
	}
	return nil
}

// setRestored sets the cached restored set of sub (nil: none), keeping
// its generation.
func (b *Broker) setRestored(sub string, runs []SeqRange) {
	b.acks.mu.Lock()
	if b.acks.restored == nil {
		b.acks.restored = map[string]restoredState{}
	}
	st := b.acks.restored[sub]
	st.Runs = runs
	b.acks.restored[sub] = st
	b.acks.mu.Unlock()
}

// forgetRestored drops the cached restored set of sub (read again from
// the store when needed).
func (b *Broker) forgetRestored(sub string) {
	b.acks.mu.Lock()
	delete(b.acks.restored, sub)
	b.acks.mu.Unlock()
}

func (b *Broker) restoredSets(ctx context.Context) (jetstream.KeyValue, error) {
	kv, err := b.js.KeyValue(ctx, restoredBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = b.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      restoredBucket,
			Description: "weir: messages a seek to a subscription snapshot restored as acknowledged",
			History:     1,
			Storage:     jetstream.FileStorage,
			Replicas:    b.Replicas(),
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = b.js.KeyValue(ctx, restoredBucket)
		}
	}
	if err != nil {
		return nil, apiErr("opening the restored acknowledgements", err)
	}
	return namedKV{kv}, nil
}

// restored returns the restored state of sub, from the cache or the store.
func (b *Broker) restored(ctx context.Context, sub string) (restoredState, error) {
	b.acks.mu.Lock()
	st, ok := b.acks.restored[sub]
	b.acks.mu.Unlock()
	if ok {
		return st, nil
	}
	kv, err := b.restoredSets(ctx)
	if err != nil {
		return restoredState{}, err
	}
	e, err := kv.Get(ctx, sub)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
	case err != nil:
		return restoredState{}, apiErr("reading the restored acknowledgements of "+sub, err)
	case strings.HasPrefix(strings.TrimSpace(string(e.Value())), "["): // an earlier version's
		if err := json.Unmarshal(e.Value(), &st.Runs); err != nil {
			return restoredState{}, fmt.Errorf("decoding the restored acknowledgements of %s: %w", sub, err)
		}
	default:
		if err := json.Unmarshal(e.Value(), &st); err != nil {
			return restoredState{}, fmt.Errorf("decoding the restored acknowledgements of %s: %w", sub, err)
		}
	}
	b.acks.mu.Lock()
	if cur, raced := b.acks.restored[sub]; raced { // a seek set it meanwhile
		st = cur
	} else {
		if b.acks.restored == nil {
			b.acks.restored = map[string]restoredState{}
		}
		b.acks.restored[sub] = st
	}
	b.acks.mu.Unlock()
	return st, nil
}

// AckGeneration returns the generation of the deliveries of subscription
// sub (one that acknowledges per message): it changes at each seek (and
// creation) of the subscription, and is 0 for one that was neither since
// this record began. A delivery made before the change is one JetStream
// no longer holds: its acknowledgement must not be sent or recorded (the
// gRPC API labels its ack IDs with the generation of their fetch and
// drops those of another).
func (b *Broker) AckGeneration(ctx context.Context, sub string) (uint64, error) {
	st, err := b.restored(ctx, sub)
	return st.Gen, err
}

// AckRestored acknowledges delivery m of subscription sub and returns
// true when a seek to a snapshot restored it as acknowledged: the caller
// must not hand it to anyone. It returns false for every other message.
func (b *Broker) AckRestored(ctx context.Context, sub string, m jetstream.Msg) (bool, error) {
	st, err := b.restored(ctx, sub)
	runs := st.Runs
	if err != nil || len(runs) == 0 {
		return false, err
	}
	md, err := m.Metadata()
	if err != nil {
		return false, fmt.Errorf("reading message metadata: %w", err)
	}
	if !inRuns(runs, md.Sequence.Stream) {
		return false, nil
	}
	if err := m.Ack(); err != nil {
		return false, apiErr("acknowledging a restored message of "+sub, err)
	}
	return true, nil
}

// DeliveredUnacked calls visit, in stream order, with the sequence and
// headers of every message of subscription sub (one that acknowledges per
// message) delivered and not acknowledged as far as the acknowledgement
// record tells: above the floor, up to the last delivered message, and
// not in the record. The record may lack an acknowledgement (one whose
// call failed, or a crash between the two), so a message visited may have
// been acknowledged; every unacknowledged delivered message is visited.
func (b *Broker) DeliveredUnacked(ctx context.Context, sub string, visit func(seq uint64, h nats.Header)) error {
	topic, c, err := b.findSubscription(ctx, sub)
	if err != nil {
		return err
	}
	ci, err := c.Info(ctx)
	if err != nil {
		return apiErr("reading the state of subscription "+sub, err)
	}
	floor, last := ci.AckFloor.Stream, ci.Delivered.Stream
	if last <= floor || ci.NumAckPending == 0 {
		return nil
	}
	runs, err := b.readAcked(ctx, sub, floor, false)
	if err != nil {
		return err
	}
	stream, _, _ := topicNames(topic)
	s, err := b.js.Stream(ctx, stream)
	if err != nil {
		return apiErr("reading the deliveries of "+sub, err)
	}
	filters := ci.Config.FilterSubjects
	if ci.Config.FilterSubject != "" {
		filters = append(filters, ci.Config.FilterSubject)
	}
	oc, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: filters,
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: floor + 1, HeadersOnly: true})
	if err != nil {
		return apiErr("reading the deliveries of "+sub, err)
	}
	for {
		batch, err := oc.Fetch(int(min(last-floor, 1000)), jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return apiErr("reading the deliveries of "+sub, err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				return fmt.Errorf("reading the deliveries of %s: %w", sub, err)
			}
			q := md.Sequence.Stream
			if q > last {
				drain(batch)
				return nil
			}
			if !inRuns(runs, q) {
				visit(q, m.Headers())
			}
			if q == last {
				drain(batch)
				return nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, nats.ErrTimeout) {
			return apiErr("reading the deliveries of "+sub, err)
		}
		if n == 0 {
			return nil // the rest expired from the topic
		}
	}
}
