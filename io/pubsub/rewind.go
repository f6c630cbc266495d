package pubsub

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
)

// Event-time tracking and re-reading (a stop-and-replace that re-reads
// retained input, issue 10 item 2).
//
// Every ReadFromPubSub split keeps, in its checkpointed position, a small
// table: event-time bucket (RewindBucket, one minute, aligned to the epoch)
// → the smallest stream sequence it read with an event time in that
// bucket, together with its own watermark estimate. A replacement job that
// must rebuild every window the old job still held state for reads the
// table from the old job's final checkpoint: for an event time T, the
// smallest sequence over the buckets at or after bucket(T) is the first
// message it must re-read so that it sees every message with event time
// ≥ T that the old job read (PositionTrack.FirstSequenceFor).
//
// The table is pruned behind the watermark: a bucket whose end is more
// than the horizon (SourceConfig.RewindHorizon: the job's longest window
// plus allowed lateness, set by the service; default DefaultRewindHorizon,
// capped at MaxRewindHorizon) behind the split's watermark is dropped, and
// Track.From rises to its end: event times before From are no longer
// tracked, and a rewind that needs them is refused by the service. The
// table also holds at most MaxRewindBuckets buckets (oldest dropped the
// same way), so a position stays small (~30 bytes a bucket).

// Tracking bounds.
const (
	// RewindBucket is the event-time granularity of the tracking table.
	RewindBucket = contract.RewindBucketWidth
	// DefaultRewindHorizon is how far behind the watermark buckets are
	// kept when SourceConfig.RewindHorizon is not set.
	DefaultRewindHorizon = time.Hour
	// MaxRewindHorizon caps SourceConfig.RewindHorizon.
	MaxRewindHorizon = contract.MaxRewindHorizon
	// MaxRewindBuckets caps the buckets of one position.
	MaxRewindBuckets = 2 * 24 * 60
)

// Track is the event-time table of a split's position.
type Track struct {
	// From is the event time (ms) from which the table is complete: every
	// message this job's split read with an event time ≥ From is in a
	// bucket. mtime.MinTimestamp when nothing was pruned.
	From int64 `json:"from_ms"`
	// Watermark is the highest watermark estimate (ms) the subscription's
	// splits reached up to this position, across restarts (a drain's +∞ is
	// not included: it is the runner's); −∞ while a re-reading split holds.
	Watermark int64 `json:"wm_ms"`
	// Buckets are sorted by Start.
	Buckets []Bucket `json:"buckets,omitempty"`
}

// Bucket is one event-time bucket of a Track (contract.RewindBucket).
type Bucket = contract.RewindBucket

const bucketMS = contract.RewindBucketMS

func bucketOf(t mtime.Time) int64 { return contract.RewindBucketOf(t) }

// note records that sequence seq had event time t.
func (tr *Track) note(t mtime.Time, seq uint64) {
	b := bucketOf(t)
	n := len(tr.Buckets)
	if n > 0 && tr.Buckets[n-1].Start == b { // the common case: the newest bucket
		return // sequences only grow: the first one seen is the smallest
	}
	i := sort.Search(n, func(i int) bool { return tr.Buckets[i].Start >= b })
	if i < n && tr.Buckets[i].Start == b {
		if seq < tr.Buckets[i].MinSeq {
			tr.Buckets[i].MinSeq = seq
		}
		return
	}
	tr.Buckets = append(tr.Buckets, Bucket{})
	copy(tr.Buckets[i+1:], tr.Buckets[i:])
	tr.Buckets[i] = Bucket{Start: b, MinSeq: seq}
}

// prune drops the buckets that end more than horizon behind wm, and the
// oldest beyond MaxRewindBuckets, raising From past them.
func (tr *Track) prune(wm mtime.Time, horizon mtime.Duration) {
	drop := 0
	for drop < len(tr.Buckets) {
		b := tr.Buckets[drop]
		end := mtime.Time(b.Start + bucketMS)
		if wm <= mtime.MinTimestamp || end.Add(horizon) > wm {
			break
		}
		drop++
	}
	if over := len(tr.Buckets) - drop - MaxRewindBuckets; over > 0 {
		drop += over
	}
	if drop == 0 {
		return
	}
	tr.From = max(tr.From, tr.Buckets[drop-1].Start+bucketMS)
	tr.Buckets = append(tr.Buckets[:0], tr.Buckets[drop:]...)
}

// PositionTrack is what a checkpointed position says about re-reading its
// subscription (contract.PositionTrack).
type PositionTrack = contract.PositionTrack

// PositionTrack decodes a checkpointed source position of a ReadFromPubSub
// split and names its topic. It fails with ErrInvalidPosition for a
// position that is not one, and as Subscription does when the
// subscription is gone.
func (b *Broker) PositionTrack(ctx context.Context, position []byte) (PositionTrack, error) {
	p, err := decodePosition(position)
	if err != nil {
		return PositionTrack{}, err
	}
	topic, _, err := b.findSubscription(ctx, p.Subscription)
	if err != nil {
		return PositionTrack{}, err
	}
	pt := PositionTrack{Subscription: p.Subscription, Topic: topic, StreamSeq: p.StreamSeq}
	if p.Track != nil {
		pt.Tracked = true
		pt.Watermark, pt.From = mtime.Time(p.Track.Watermark), mtime.Time(p.Track.From)
		pt.Buckets = append([]Bucket(nil), p.Track.Buckets...)
	}
	return pt, nil
}

// Retained returns the oldest message topic still holds: its sequence and
// publish time; with nothing stored, the next sequence and the zero time.
func (b *Broker) Retained(ctx context.Context, topic string) (uint64, time.Time, error) {
	stream, _, err := topicNames(topic)
	if err != nil {
		return 0, time.Time{}, err
	}
	s, err := b.js.Stream(ctx, stream)
	if err != nil {
		return 0, time.Time{}, apiErr("reading topic "+topic, err)
	}
	si := s.CachedInfo()
	if si.State.Msgs == 0 {
		return si.State.LastSeq + 1, time.Time{}, nil
	}
	m, err := s.GetMsg(ctx, si.State.FirstSeq)
	if err != nil {
		return 0, time.Time{}, apiErr("reading the oldest message of topic "+topic, err)
	}
	return si.State.FirstSeq, m.Time.UTC(), nil
}

// MessageTime returns the publish time of the message of topic at stream
// sequence seq, or false when the topic no longer holds it.
func (b *Broker) MessageTime(ctx context.Context, topic string, seq uint64) (time.Time, bool, error) {
	stream, _, err := topicNames(topic)
	if err != nil {
		return time.Time{}, false, err
	}
	s, err := b.js.Stream(ctx, stream)
	if err != nil {
		return time.Time{}, false, apiErr("reading topic "+topic, err)
	}
	m, err := s.GetMsg(ctx, seq)
	if err != nil {
		return time.Time{}, false, nil //nolint:nilerr // a message that is gone is an answer
	}
	return m.Time.UTC(), true, nil
}

// SeekToSequence makes subscription sub deliver again from stream
// sequence seq: everything before it counts as acknowledged, deliveries
// not acknowledged are forgotten. A reader of the subscription sees its
// stream jump: the caller makes sure nobody reads it.
func (b *Broker) SeekToSequence(ctx context.Context, sub string, seq uint64) error {
	if seq == 0 {
		return fmt.Errorf("seeking subscription %s to sequence 0: sequences start at 1: %w", sub, ErrInvalidConfig)
	}
	b.admin.Lock() // a leaf: see Broker.admin
	defer b.admin.Unlock()
	topic, c, err := b.findSubscription(ctx, sub)
	if err != nil {
		return err
	}
	stream, _, _ := topicNames(topic)
	if _, err := b.rewindConsumer(ctx, stream, sub, seq, c, true); err != nil {
		return err
	}
	b.log.Info("subscription positioned for a re-read", "subscription", sub, "topic", topic, "from_seq", seq)
	return nil
}
