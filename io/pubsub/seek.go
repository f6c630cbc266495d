package pubsub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-dev/weir/runner/contract"
)

// Subscription snapshots and seek (Pub/Sub's semantics and names).
//
// A subscription snapshot records a subscription's acknowledgement state
// at its creation: the acknowledgement floor, the stream sequence up to
// which every message counts as acknowledged, and, for a subscription
// that acknowledges each message on its own (PerMessageAck), the messages
// above the floor acknowledged at that moment (Acked, see acked.go); every
// other later message of the topic counts as unacknowledged. Cumulative
// subscriptions (and job snapshots) have no such messages. Snapshots are
// kept in the JetStream key-value bucket WEIR_SUBSCRIPTION_SNAPSHOTS, next
// to the topics, so they live as long as the broker's store.
//
// It is the one store of subscription snapshots: weir's HTTP API and CLI,
// job snapshots (--snapshot-sources) and the Pub/Sub gRPC API (package
// pubsubgrpc, with the snapshot's labels) all read and write it, so a
// snapshot made through one is listed and can be sought to through the
// others. A seek keeps the subscription's acknowledgement mode. The bucket
// earlier versions of the gRPC API kept beside it,
// WEIR_PUBSUB_GRPC_SNAPSHOTS, is moved into it when the store is first
// opened (migrateLegacySnapshots).
//
// Seek sets a subscription's acknowledgement state: to a snapshot's (which
// must be of the same topic; a cumulative subscription cannot keep the
// messages acknowledged above the floor, and gets them again), or to a time (messages published before it
// count as acknowledged, those at or after it as unacknowledged). Either
// way the subscription forgets its deliveries and delivers again from the
// first unacknowledged message.

const snapshotBucket = "WEIR_SUBSCRIPTION_SNAPSHOTS"

// legacyGRPCSnapshotBucket is where the gRPC API kept its snapshots
// before they moved into snapshotBucket.
const legacyGRPCSnapshotBucket = "WEIR_PUBSUB_GRPC_SNAPSHOTS"

// Lifetimes of subscription snapshots.
const (
	// MaxSnapshotLifetime is the longest a subscription snapshot lives: 7
	// days, less the age of the oldest unacknowledged message it records,
	// and never past that message's expiry from the topic (its retention).
	MaxSnapshotLifetime = 7 * 24 * time.Hour
	// MinSnapshotLifetime is the shortest lifetime a new subscription
	// snapshot may have; CreateSubscriptionSnapshot refuses a shorter one
	// with ErrSnapshotExpiresTooSoon.
	MinSnapshotLifetime = time.Hour
	// maxSnapshotNameLen allows a job snapshot's "<uuid>--<subscription>".
	maxSnapshotNameLen = 255
)

// SubscriptionSnapshot is a subscription's acknowledgement state at one
// moment (contract.SubscriptionSnapshot).
type SubscriptionSnapshot = contract.SubscriptionSnapshot

// SnapshotOptions are the optional settings of a new subscription
// snapshot.
type SnapshotOptions struct {
	// Labels are kept with the snapshot (the gRPC API's labels).
	Labels map[string]string
}

// SeekTarget is where Seek moves a subscription (contract.SeekTarget).
type SeekTarget = contract.SeekTarget

// SeekResult is the state of a subscription after a seek
// (contract.SeekResult).
type SeekResult = contract.SeekResult

// ValidateSnapshotName checks a subscription snapshot name: weir's name
// rule, up to 255 characters (a job snapshot's "<uuid>--<subscription>").
func ValidateSnapshotName(name string) error { return validateSnapshotName(name) }

func validateSnapshotName(name string) error {
	if len(name) > maxSnapshotNameLen {
		return fmt.Errorf("snapshot name %.20q... is longer than %d characters: %w", name, maxSnapshotNameLen, ErrInvalidName)
	}
	if len(name) > maxNameLen {
		// Longer than a topic name is allowed: check the characters only.
		return ValidateName("snapshot", name[:maxNameLen])
	}
	return ValidateName("snapshot", name)
}

// snapshots opens the snapshot bucket, creating it on first use, and
// moves the gRPC API's legacy bucket into it when there is one.
func (b *Broker) snapshots(ctx context.Context) (jetstream.KeyValue, error) {
	kv, err := b.js.KeyValue(ctx, snapshotBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = b.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      snapshotBucket,
			Description: "weir subscription snapshots",
			History:     1,
			Storage:     jetstream.FileStorage,
			Replicas:    b.Replicas(),
		})
		if errors.Is(err, jetstream.ErrBucketExists) { // created concurrently
			kv, err = b.js.KeyValue(ctx, snapshotBucket)
		}
	}
	if err != nil {
		return nil, apiErr("opening the subscription snapshot store", err)
	}
	named := namedKV{kv}
	if err := b.migrateLegacySnapshots(ctx, named); err != nil {
		return nil, err
	}
	return named, nil
}

// legacySnapshot is a snapshot as the gRPC API stored it in
// legacyGRPCSnapshotBucket (the key is its name).
type legacySnapshot struct {
	Topic        string            `json:"topic"`
	Subscription string            `json:"subscription"`
	AckFloor     uint64            `json:"ack_floor"`
	Created      time.Time         `json:"created"`
	Expire       time.Time         `json:"expire"`
	Labels       map[string]string `json:"labels,omitempty"`
}

// migrateLegacySnapshots moves every live snapshot of the gRPC API's
// legacy bucket into kv (expired ones are dropped) and deletes the bucket.
// A name taken in kv already keeps kv's snapshot: the legacy one stays in
// the legacy bucket, which is then kept, and is logged. Concurrent
// migrations are harmless (creation is create-only).
func (b *Broker) migrateLegacySnapshots(ctx context.Context, kv jetstream.KeyValue) error {
	old, err := b.js.KeyValue(ctx, legacyGRPCSnapshotBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		return apiErr("opening the gRPC API's old snapshot store", err)
	}
	keys, err := old.Keys(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		return apiErr("listing the gRPC API's old snapshots", err)
	}
	now := b.now()
	var kept []string
	moved := 0
	for _, k := range keys {
		e, err := old.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue
		}
		if err != nil {
			return apiErr("reading the gRPC API's old snapshot "+k, err)
		}
		var ls legacySnapshot
		if err := json.Unmarshal(e.Value(), &ls); err != nil {
			b.log.Warn("dropping an unreadable snapshot of the gRPC API's old store", "snapshot", k, "error", err)
			continue
		}
		if !now.Before(ls.Expire) {
			continue
		}
		snap := SubscriptionSnapshot{Name: k, Topic: ls.Topic, Subscription: ls.Subscription, AckFloor: ls.AckFloor,
			CreateTime: ls.Created, ExpireTime: ls.Expire, Labels: ls.Labels}
		v, err := json.Marshal(snap)
		if err != nil {
			return fmt.Errorf("encoding snapshot %s: %w", k, err)
		}
		if _, err := kv.Create(ctx, k, v); errors.Is(err, jetstream.ErrKeyExists) {
			if cur, gerr := kv.Get(ctx, k); gerr == nil && string(cur.Value()) == string(v) {
				continue // a concurrent migration moved it
			}
			kept = append(kept, k)
			continue
		} else if err != nil {
			return apiErr("moving the gRPC API's snapshot "+k, err)
		}
		moved++
	}
	if len(kept) > 0 {
		b.log.Warn("snapshots of the gRPC API's old store have names taken in the subscription snapshot store: they stay in the old bucket, not listed; rename or delete the others to keep them",
			"bucket", legacyGRPCSnapshotBucket, "snapshots", kept)
		for _, k := range keys {
			if !slices.Contains(kept, k) {
				_ = old.Purge(ctx, k)
			}
		}
		return nil
	}
	if err := b.js.DeleteKeyValue(ctx, legacyGRPCSnapshotBucket); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return apiErr("deleting the gRPC API's old snapshot store", err)
	}
	b.log.Info("moved the gRPC API's snapshots into the subscription snapshot store", "from", legacyGRPCSnapshotBucket, "to", snapshotBucket, "snapshots", moved)
	return nil
}

// CreateSubscriptionSnapshot snapshots the acknowledgement state of
// subscription sub as snapshot name. Its lifetime is MaxSnapshotLifetime
// less the age of the subscription's oldest unacknowledged message,
// bounded by the topic's retention; under MinSnapshotLifetime it fails with
// ErrSnapshotExpiresTooSoon. It fails with ErrSnapshotExists when the name
// is taken, ErrSubscriptionNotFound when sub does not exist.
func (b *Broker) CreateSubscriptionSnapshot(ctx context.Context, name, sub string) (SubscriptionSnapshot, error) {
	return b.CreateSubscriptionSnapshotWith(ctx, name, sub, SnapshotOptions{})
}

// CreateSubscriptionSnapshotWith is CreateSubscriptionSnapshot with opts.
func (b *Broker) CreateSubscriptionSnapshotWith(ctx context.Context, name, sub string, opts SnapshotOptions) (SubscriptionSnapshot, error) {
	if err := validateSnapshotName(name); err != nil {
		return SubscriptionSnapshot{}, err
	}
	topic, c, err := b.findSubscription(ctx, sub)
	if err != nil {
		return SubscriptionSnapshot{}, err
	}
	ci, err := c.Info(ctx)
	if err != nil {
		return SubscriptionSnapshot{}, apiErr("reading the state of subscription "+sub, err)
	}
	var acked []SeqRange
	if ci.Config.AckPolicy == jetstream.AckExplicitPolicy {
		// After the floor is read: what the record holds is at least as
		// recent, so every run was acknowledged by the snapshot's moment.
		if acked, err = b.readAcked(ctx, sub, ci.AckFloor.Stream, true); err != nil {
			return SubscriptionSnapshot{}, err
		}
		if len(acked) > b.maxAckedRuns() {
			return SubscriptionSnapshot{}, fmt.Errorf("snapshot %s of subscription %s: %d runs of messages are acknowledged out of order above its acknowledgement floor (sequence %d), more than a snapshot holds (%d): acknowledge the oldest unacknowledged messages first (from sequence %d), or seek the subscription forward: %w",
				name, sub, len(acked), ci.AckFloor.Stream, b.maxAckedRuns(), ci.AckFloor.Stream+1, ErrSnapshotTooLarge)
		}
	}
	return b.createSnapshot(ctx, name, sub, topic, ci.AckFloor.Stream, acked, opts.Labels)
}

// PositionSubscription returns the subscription a source position (a
// checkpoint's position of a ReadFromPubSub split) reads. It fails with
// ErrInvalidPosition for a position that is not one.
func (b *Broker) PositionSubscription(position []byte) (string, error) {
	p, err := decodePosition(position)
	if err != nil {
		return "", err
	}
	return p.Subscription, nil
}

// SnapshotSourcePosition snapshots the subscription of a source position
// (a checkpoint's) as snapshot name, at exactly that position: what the
// checkpoint read counts as acknowledged, what follows as not. It returns
// the subscription, its topic and the snapshot's expire time, and fails as
// CreateSubscriptionSnapshot does.
func (b *Broker) SnapshotSourcePosition(ctx context.Context, name string, position []byte) (sub, topic string, expire time.Time, err error) {
	if err := validateSnapshotName(name); err != nil {
		return "", "", time.Time{}, err
	}
	p, err := decodePosition(position)
	if err != nil {
		return "", "", time.Time{}, err
	}
	topic, _, err = b.findSubscription(ctx, p.Subscription)
	if err != nil {
		return "", "", time.Time{}, err
	}
	snap, err := b.createSnapshot(ctx, name, p.Subscription, topic, p.StreamSeq, nil, nil)
	if err != nil {
		return "", "", time.Time{}, err
	}
	return snap.Subscription, snap.Topic, snap.ExpireTime, nil
}

func (b *Broker) createSnapshot(ctx context.Context, name, sub, topic string, floor uint64, acked []SeqRange, labels map[string]string) (SubscriptionSnapshot, error) {
	stream, _, _ := topicNames(topic)
	s, err := b.js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return SubscriptionSnapshot{}, fmt.Errorf("snapshotting subscription %s: topic %s: %w", sub, topic, ErrTopicNotFound)
	}
	if err != nil {
		return SubscriptionSnapshot{}, apiErr("snapshotting subscription "+sub, err)
	}
	si := s.CachedInfo()
	now := b.now()
	lifetime := min(MaxSnapshotLifetime, si.Config.MaxAge)
	if si.Config.MaxAge <= 0 {
		lifetime = MaxSnapshotLifetime
	}
	oldest := max(floor+1, si.State.FirstSeq)
	for _, r := range acked { // acknowledged: not the oldest unacknowledged
		if oldest >= r.First && oldest <= r.Last {
			oldest = r.Last + 1
		}
	}
	if si.State.Msgs > 0 && oldest <= si.State.LastSeq {
		m, err := s.GetMsg(ctx, oldest)
		if err != nil {
			return SubscriptionSnapshot{}, apiErr(fmt.Sprintf("reading the oldest unacknowledged message (sequence %d) of subscription %s", oldest, sub), err)
		}
		if age := now.Sub(m.Time); age > 0 {
			lifetime -= age
		}
	}
	if lifetime < MinSnapshotLifetime {
		return SubscriptionSnapshot{}, fmt.Errorf("snapshot %s of subscription %s would live only %s (7d, bounded by the topic's retention of %s, less the age of the oldest unacknowledged message): at least %s is needed; acknowledge the old messages or seek the subscription forward first: %w",
			name, sub, roundDur(max(lifetime, 0)), roundDur(si.Config.MaxAge), roundDur(MinSnapshotLifetime), ErrSnapshotExpiresTooSoon)
	}
	snap := SubscriptionSnapshot{Name: name, Topic: topic, Subscription: sub, AckFloor: floor, Acked: acked,
		CreateTime: now, ExpireTime: now.Add(lifetime), Labels: labels}
	v, err := json.Marshal(snap)
	if err != nil {
		return SubscriptionSnapshot{}, fmt.Errorf("encoding snapshot %s: %w", name, err)
	}
	kv, err := b.snapshots(ctx)
	if err != nil {
		return SubscriptionSnapshot{}, err
	}
	if _, err := b.getSnapshot(ctx, kv, name); err == nil {
		return SubscriptionSnapshot{}, fmt.Errorf("creating snapshot %s: %w", name, ErrSnapshotExists)
	} else if !errors.Is(err, ErrSnapshotNotFound) {
		return SubscriptionSnapshot{}, err
	}
	if _, err := kv.Create(ctx, name, v); errors.Is(err, jetstream.ErrKeyExists) {
		return SubscriptionSnapshot{}, fmt.Errorf("creating snapshot %s: %w", name, ErrSnapshotExists)
	} else if err != nil {
		return SubscriptionSnapshot{}, apiErr("creating snapshot "+name, err)
	}
	b.log.Info("subscription snapshot created", "snapshot", name, "subscription", sub, "topic", topic,
		"ack_floor", floor, "acked_runs", len(acked), "expire_time", snap.ExpireTime)
	return snap, nil
}

// roundDur shows a lifetime to the second.
func roundDur(d time.Duration) string { return d.Round(time.Second).String() }

func (b *Broker) now() time.Time { return b.clock.Now().ToTime() }

// getSnapshot reads snapshot name from kv; an expired one is deleted and
// reported as not found.
func (b *Broker) getSnapshot(ctx context.Context, kv jetstream.KeyValue, name string) (SubscriptionSnapshot, error) {
	e, err := kv.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return SubscriptionSnapshot{}, fmt.Errorf("snapshot %s: %w", name, ErrSnapshotNotFound)
	}
	if err != nil {
		return SubscriptionSnapshot{}, apiErr("reading snapshot "+name, err)
	}
	var snap SubscriptionSnapshot
	if err := json.Unmarshal(e.Value(), &snap); err != nil {
		return SubscriptionSnapshot{}, fmt.Errorf("decoding snapshot %s: %w", name, err)
	}
	if !b.now().Before(snap.ExpireTime) {
		if err := kv.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return SubscriptionSnapshot{}, apiErr("deleting expired snapshot "+name, err)
		}
		b.log.Info("subscription snapshot expired", "snapshot", name, "expire_time", snap.ExpireTime)
		return SubscriptionSnapshot{}, fmt.Errorf("snapshot %s: it expired at %s: %w", name, snap.ExpireTime.Format(time.RFC3339), ErrSnapshotNotFound)
	}
	return snap, nil
}

// SubscriptionSnapshot describes snapshot name. It fails with
// ErrSnapshotNotFound when there is none (or it expired).
func (b *Broker) SubscriptionSnapshot(ctx context.Context, name string) (SubscriptionSnapshot, error) {
	if err := validateSnapshotName(name); err != nil {
		return SubscriptionSnapshot{}, err
	}
	kv, err := b.snapshots(ctx)
	if err != nil {
		return SubscriptionSnapshot{}, err
	}
	return b.getSnapshot(ctx, kv, name)
}

// ListSubscriptionSnapshots lists the snapshots of topic's subscriptions,
// or of every topic when topic is "", by name. Expired snapshots are
// deleted on the way.
func (b *Broker) ListSubscriptionSnapshots(ctx context.Context, topic string) ([]SubscriptionSnapshot, error) {
	if topic != "" {
		if _, err := b.Topic(ctx, topic); err != nil {
			return nil, err
		}
	}
	kv, err := b.snapshots(ctx)
	if err != nil {
		return nil, err
	}
	keys, err := kv.Keys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return []SubscriptionSnapshot{}, nil
	}
	if err != nil {
		return nil, apiErr("listing subscription snapshots", err)
	}
	out := []SubscriptionSnapshot{}
	for _, k := range keys {
		snap, err := b.getSnapshot(ctx, kv, k)
		if errors.Is(err, ErrSnapshotNotFound) {
			continue // expired, or deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		if topic == "" || snap.Topic == topic {
			out = append(out, snap)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// DeleteSubscriptionSnapshot deletes snapshot name. It fails with
// ErrSnapshotNotFound when there is none.
func (b *Broker) DeleteSubscriptionSnapshot(ctx context.Context, name string) error {
	if err := validateSnapshotName(name); err != nil {
		return err
	}
	kv, err := b.snapshots(ctx)
	if err != nil {
		return err
	}
	if _, err := b.getSnapshot(ctx, kv, name); err != nil {
		return err
	}
	if err := kv.Delete(ctx, name); err != nil {
		return apiErr("deleting snapshot "+name, err)
	}
	b.log.Info("subscription snapshot deleted", "snapshot", name)
	return nil
}

// DropSubscriptionSnapshot deletes snapshot name if it exists: one that is
// missing (expired, deleted) is no error.
func (b *Broker) DropSubscriptionSnapshot(ctx context.Context, name string) error {
	err := b.DeleteSubscriptionSnapshot(ctx, name)
	if errors.Is(err, ErrSnapshotNotFound) {
		return nil
	}
	return err
}

// expireEvery is the least time between two sweeps of
// ExpireSubscriptionSnapshots (expired snapshots are also deleted whenever
// they are read or listed).
const expireEvery = time.Minute

// ExpireSubscriptionSnapshots deletes every snapshot whose expire time has
// passed on the broker's clock (Options.Clock). It sweeps at most once per
// minute of that clock; calls in between return at once.
func (b *Broker) ExpireSubscriptionSnapshots(ctx context.Context) error {
	now := b.now()
	b.expiry.Lock()
	due := b.expiry.last.IsZero() || now.Sub(b.expiry.last) >= expireEvery || now.Before(b.expiry.last)
	if due {
		b.expiry.last = now
	}
	b.expiry.Unlock()
	if !due {
		return nil
	}
	_, err := b.ListSubscriptionSnapshots(ctx, "")
	return err
}

// deleteTopicSnapshots deletes the snapshots of topic's subscriptions (the
// topic is being deleted).
func (b *Broker) deleteTopicSnapshots(ctx context.Context, topic string) error {
	snaps, err := b.ListSubscriptionSnapshots(ctx, "")
	if err != nil {
		return err
	}
	kv, err := b.snapshots(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, snap := range snaps {
		if snap.Topic != topic {
			continue
		}
		if err := kv.Delete(ctx, snap.Name); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			errs = append(errs, apiErr("deleting snapshot "+snap.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Seek sets the acknowledgement state of subscription sub to target: a
// snapshot's (ErrSnapshotTopicMismatch when it is of another topic,
// ErrSnapshotNotFound when there is none), or a time (messages published
// before it count as acknowledged, later ones as unacknowledged; a time
// before the oldest retained message makes everything retained
// unacknowledged). Deliveries not acknowledged are forgotten: the
// subscription delivers again from the first unacknowledged message. A
// reader of the subscription (a running job) sees its stream jump: the
// caller decides whether that is allowed.
func (b *Broker) Seek(ctx context.Context, sub string, target SeekTarget) (SeekResult, error) {
	if (target.Snapshot == "") == target.Time.IsZero() {
		return SeekResult{}, fmt.Errorf("seeking subscription %s: give a snapshot or a time, not both or neither: %w", sub, ErrInvalidConfig)
	}
	b.admin.Lock() // a leaf: see Broker.admin
	defer b.admin.Unlock()
	topic, c, err := b.findSubscription(ctx, sub)
	if err != nil {
		return SeekResult{}, err
	}
	perMessage := c.CachedInfo().Config.AckPolicy == jetstream.AckExplicitPolicy
	stream, _, _ := topicNames(topic)
	var seq uint64
	var acked []SeqRange // restored as acknowledged
	if target.Snapshot != "" {
		snap, err := b.SubscriptionSnapshot(ctx, target.Snapshot)
		if err != nil {
			return SeekResult{}, err
		}
		if snap.Topic != topic {
			return SeekResult{}, fmt.Errorf("seeking subscription %s (of topic %s) to snapshot %s: the snapshot is of topic %s: %w",
				sub, topic, snap.Name, snap.Topic, ErrSnapshotTopicMismatch)
		}
		seq = snap.AckFloor + 1
		if perMessage {
			acked = snap.Acked
		} else if len(snap.Acked) > 0 {
			b.log.Warn("seeking a cumulative subscription to a snapshot with messages acknowledged above its floor: a cumulative subscription cannot keep them acknowledged, so they are delivered again",
				"subscription", sub, "snapshot", snap.Name, "ack_floor", snap.AckFloor, "acked_runs", len(snap.Acked))
		}
	} else {
		if seq, err = b.firstAtOrAfter(ctx, stream, target.Time); err != nil {
			return SeekResult{}, fmt.Errorf("seeking subscription %s to %s: %w", sub, target.Time.Format(time.RFC3339Nano), err)
		}
	}
	if perMessage {
		// Before the rewind, so that no delivery after it hands out a
		// restored message; kept in the store after it, so that a crash
		// in between cannot skip messages of the old state.
		b.setRestored(sub, acked)
	}
	if _, err := b.rewindConsumer(ctx, stream, sub, seq, c, true); err != nil {
		if perMessage {
			b.forgetRestored(sub)
		}
		return SeekResult{}, err
	}
	if perMessage {
		if err := b.resetAckState(ctx, sub, acked); err != nil {
			return SeekResult{}, fmt.Errorf("seeking subscription %s: it was sought, but keeping its acknowledgement state failed (until the next seek, a restart of weir delivers again the messages the snapshot holds as acknowledged): %w", sub, err)
		}
	}
	// The backlog is what the topic retains after the new floor (less what
	// a snapshot restored as acknowledged), read from the topic: the
	// subscription's own pending count is recalculated by the server
	// lazily, and a seek back to where the floor already was keeps the
	// earlier count.
	st, err := b.js.Stream(ctx, stream)
	if err != nil {
		return SeekResult{}, apiErr("describing topic "+topic, err)
	}
	ss := st.CachedInfo().State
	backlog := retainedAfter(ss.FirstSeq, ss.LastSeq, ss.Msgs, seq-1, acked)
	b.log.Info("subscription sought", "subscription", sub, "topic", topic, "snapshot", target.Snapshot,
		"time", target.Time, "ack_floor", seq-1, "backlog", backlog)
	return SeekResult{Subscription: sub, Topic: topic, AckFloor: seq - 1, Backlog: backlog}, nil
}

// retainedAfter returns how many of the messages a topic retains (stream
// sequences first to last, msgs of them) come after floor and are not in
// acked: the backlog of a subscription just sought to floor.
func retainedAfter(first, last, msgs, floor uint64, acked []SeqRange) uint64 {
	from := max(floor+1, first)
	if msgs == 0 || last < from {
		return 0
	}
	n := last - from + 1
	for _, r := range acked {
		lo, hi := max(r.First, from), min(r.Last, last)
		if lo <= hi {
			n -= min(hi-lo+1, n)
		}
	}
	return min(n, msgs)
}

// firstAtOrAfter returns the stream sequence of the first message of
// stream published at or after t, or the sequence after the last one when
// there is none. It reads it through a short-lived ephemeral consumer that
// starts at t (the server finds the sequence).
func (b *Broker) firstAtOrAfter(ctx context.Context, stream string, t time.Time) (uint64, error) {
	s, err := b.js.Stream(ctx, stream)
	if err != nil {
		return 0, apiErr("reading stream "+stream, err)
	}
	si := s.CachedInfo()
	if si.State.Msgs == 0 {
		return si.State.LastSeq + 1, nil
	}
	// The ends first: the server counts in nanoseconds since 1970, which
	// a time far out (year 2999) overflows.
	first, err := s.GetMsg(ctx, si.State.FirstSeq)
	if err != nil {
		return 0, apiErr("reading the oldest message", err)
	}
	if !first.Time.Before(t) {
		return si.State.FirstSeq, nil
	}
	last, err := s.GetMsg(ctx, si.State.LastSeq)
	if err != nil {
		return 0, apiErr("reading the newest message", err)
	}
	if last.Time.Before(t) {
		return si.State.LastSeq + 1, nil
	}
	start := t
	c, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{
		DeliverPolicy:     jetstream.DeliverByStartTimePolicy,
		OptStartTime:      &start,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: time.Minute,
		MemoryStorage:     true,
	})
	if err != nil {
		return 0, apiErr("finding the first message at the time", err)
	}
	defer func() {
		if err := s.DeleteConsumer(context.WithoutCancel(ctx), c.CachedInfo().Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			b.log.Debug("deleting a seek's ephemeral consumer", "error", err)
		}
	}()
	if c.CachedInfo().NumPending == 0 {
		return si.State.LastSeq + 1, nil
	}
	batch, err := c.FetchNoWait(1)
	if err != nil {
		return 0, apiErr("finding the first message at the time", err)
	}
	for m := range batch.Messages() {
		md, err := m.Metadata()
		if err != nil {
			return 0, fmt.Errorf("reading message metadata: %w", err)
		}
		drain(batch)
		return md.Sequence.Stream, nil
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, nats.ErrTimeout) {
		return 0, apiErr("finding the first message at the time", err)
	}
	return si.State.LastSeq + 1, nil
}

// UpdateSubscriptionSnapshot changes snapshot name with change (its
// labels or expire time; the rest is kept whatever change does), retrying
// when it was changed concurrently, and returns the stored result. It
// fails with ErrSnapshotNotFound when there is none (or it expired), and
// with change's error, as is.
func (b *Broker) UpdateSubscriptionSnapshot(ctx context.Context, name string, change func(*SubscriptionSnapshot) error) (SubscriptionSnapshot, error) {
	if err := validateSnapshotName(name); err != nil {
		return SubscriptionSnapshot{}, err
	}
	kv, err := b.snapshots(ctx)
	if err != nil {
		return SubscriptionSnapshot{}, err
	}
	for attempt := 0; ; attempt++ {
		cur, err := b.getSnapshot(ctx, kv, name)
		if err != nil {
			return SubscriptionSnapshot{}, err
		}
		e, err := kv.Get(ctx, name)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			return SubscriptionSnapshot{}, fmt.Errorf("snapshot %s: %w", name, ErrSnapshotNotFound)
		}
		if err != nil {
			return SubscriptionSnapshot{}, apiErr("reading snapshot "+name, err)
		}
		next := cur
		if err := change(&next); err != nil {
			return SubscriptionSnapshot{}, err
		}
		next.Name, next.Topic, next.Subscription, next.AckFloor, next.Acked, next.CreateTime = cur.Name, cur.Topic, cur.Subscription, cur.AckFloor, cur.Acked, cur.CreateTime
		v, err := json.Marshal(next)
		if err != nil {
			return SubscriptionSnapshot{}, fmt.Errorf("encoding snapshot %s: %w", name, err)
		}
		if _, err := kv.Update(ctx, name, v, e.Revision()); err == nil {
			return next, nil
		} else if attempt >= 3 {
			return SubscriptionSnapshot{}, apiErr("updating snapshot "+name, err)
		}
		// Changed concurrently (the revision moved): read it again.
	}
}
