package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/weir-dev/weir/mtime"
)

// This file declares the vocabulary of a Pub/Sub broker's subscriptions as
// the job service's flows manage them (a replacement hands a subscription
// over, positions it from a snapshot or a sequence, re-reads from a
// checkpointed position): the flows declare the few broker methods they
// call as interfaces over these types, and the broker (io/pubsub)
// implements them, so that no flow imports the connector.

// Errors of subscription management. A broker's errors wrap them.
var (
	// ErrSubscriptionNotFound: the subscription does not exist. It is
	// ErrInputGone for whoever reads a source's failure.
	ErrSubscriptionNotFound = fmt.Errorf("subscription %w", ErrInputGone)
	// ErrSnapshotNotFound: no subscription snapshot has this name (or it
	// expired).
	ErrSnapshotNotFound = errors.New("subscription snapshot not found")
)

// MaxBrokerNameLen is the longest topic or subscription name the broker
// takes.
const MaxBrokerNameLen = 200

// SubscriptionName returns the name of the subscription a source reading a
// topic creates for a job's step: job + "--" + step, with characters not
// allowed in names replaced by '_', cut to MaxBrokerNameLen. It is stable
// across runs of the job name, so the subscription (and its backlog)
// survives updates.
func SubscriptionName(job, step string) string {
	b := []byte(job + "--" + step)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) > MaxBrokerNameLen {
		b = b[:MaxBrokerNameLen]
	}
	return string(b)
}

// DefaultAckWait is how long a delivered, unacknowledged message waits
// before the subscription delivers it again, by default.
const DefaultAckWait = 60 * time.Second

// SubscriptionConfig configures a subscription. The zero value is usable.
type SubscriptionConfig struct {
	// AckWait is how long a delivered message may stay unacknowledged before
	// it is delivered again. Default DefaultAckWait (60s). Sources acknowledge
	// at checkpoints, so keep it well above the checkpoint interval.
	AckWait time.Duration
	// FromBeginning makes the subscription deliver every message the topic
	// still retains. Default false: as in Pub/Sub, a new subscription gets
	// the messages published after its creation.
	FromBeginning bool
	// MaxAckPending caps the delivered, unacknowledged messages; delivery
	// pauses at the cap until acknowledgements arrive. Default -1: no cap
	// (cumulative acknowledgements at checkpoints leave many in flight).
	MaxAckPending int
	// PerMessageAck makes the subscription acknowledge each message on its
	// own (JetStream AckExplicit), as Google's Pub/Sub API does, instead of
	// cumulatively. The Pub/Sub gRPC API creates its subscriptions so;
	// pipelines refuse to read them (they acknowledge cumulatively at
	// checkpoints). Default false.
	PerMessageAck bool
	// Metadata is stored with the subscription (JetStream consumer
	// metadata), e.g. the Pub/Sub API's ordering flag and labels.
	Metadata map[string]string
	// StartSeq, when not 0, makes a new subscription deliver from this
	// stream sequence (over FromBeginning): a source that resumes at a
	// placed position creates its missing subscription there, so its
	// backlog is right from the moment it exists. Default 0.
	StartSeq uint64
}

// EnsureDefaults fills unset fields with their defaults.
func (c *SubscriptionConfig) EnsureDefaults() {
	if c.AckWait <= 0 {
		c.AckWait = DefaultAckWait
	}
	if c.MaxAckPending == 0 {
		c.MaxAckPending = -1
	}
}

// SubscriptionInfo describes a subscription, for listings and metrics.
type SubscriptionInfo struct {
	Name  string `json:"name"`
	Topic string `json:"topic"`
	// NumPending is the number of messages not yet delivered.
	NumPending uint64 `json:"num_pending"`
	// NumAckPending is the number of messages delivered but not yet
	// acknowledged.
	NumAckPending int `json:"num_ack_pending"`
	// Backlog is NumPending + NumAckPending: what is not yet acknowledged.
	Backlog uint64 `json:"backlog"`
	// AckFloor is the stream sequence up to which everything is acknowledged.
	AckFloor uint64 `json:"ack_floor"`
	// Delivered is the stream sequence of the last delivered message.
	Delivered uint64        `json:"delivered"`
	AckWait   time.Duration `json:"ack_wait"`
	Created   time.Time     `json:"created"`
	// PerMessageAck reports a subscription that acknowledges each message
	// on its own (SubscriptionConfig.PerMessageAck).
	PerMessageAck bool `json:"per_message_ack,omitempty"`
	// Metadata is what SubscriptionConfig.Metadata stored.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// SubscriptionSnapshot is a subscription's acknowledgement state at one
// moment.
type SubscriptionSnapshot struct {
	Name string `json:"name"`
	// Topic is the topic of the subscription; a snapshot can be sought to by
	// any subscription of this topic.
	Topic string `json:"topic"`
	// Subscription is the subscription it was taken of.
	Subscription string `json:"subscription"`
	// AckFloor is the stream sequence up to which every message counts as
	// acknowledged; later messages count as unacknowledged, but for Acked.
	AckFloor uint64 `json:"ack_floor"`
	// Acked are the runs of messages above AckFloor that were acknowledged
	// (one by one) when the snapshot was taken, in order; at most
	// MaxSnapshotAckedRuns. Empty for a cumulative subscription's snapshot
	// and for those of earlier versions.
	Acked      []SeqRange `json:"acked,omitempty"`
	CreateTime time.Time  `json:"create_time"`
	ExpireTime time.Time  `json:"expire_time"`
	// Labels are the labels the Pub/Sub gRPC API's CreateSnapshot set.
	Labels map[string]string `json:"labels,omitempty"`
}

// SeqRange is a run of consecutive stream sequences, First to Last
// inclusive. It is encoded as [first, last].
type SeqRange struct {
	First, Last uint64
}

// MarshalJSON encodes r as [first, last].
func (r SeqRange) MarshalJSON() ([]byte, error) {
	return json.Marshal([2]uint64{r.First, r.Last})
}

// UnmarshalJSON decodes [first, last].
func (r *SeqRange) UnmarshalJSON(b []byte) error {
	var a [2]uint64
	if err := json.Unmarshal(b, &a); err != nil {
		return fmt.Errorf("a sequence run is [first, last]: %w", err)
	}
	if a[1] < a[0] {
		return fmt.Errorf("sequence run [%d, %d] ends before it starts", a[0], a[1])
	}
	r.First, r.Last = a[0], a[1]
	return nil
}

// SeekTarget is where Seek moves a subscription: a snapshot's state
// (Snapshot) or a time (Time). Exactly one must be set.
type SeekTarget struct {
	Snapshot string
	Time     time.Time
}

// SeekResult is the state of a subscription after a seek.
type SeekResult struct {
	Subscription string `json:"subscription"`
	Topic        string `json:"topic"`
	// AckFloor is the stream sequence up to which everything now counts as
	// acknowledged; delivery starts again after it.
	AckFloor uint64 `json:"ack_floor"`
	// Backlog is the number of retained messages that now count as
	// unacknowledged.
	Backlog uint64 `json:"backlog"`
}

// Event-time tracking of a re-reading source's positions.
const (
	// RewindBucketWidth is the event-time granularity of a position's
	// tracking table.
	RewindBucketWidth = time.Minute
	// MaxRewindHorizon is the longest a source keeps tracking event times
	// behind its watermark: a replacement cannot re-read further back.
	MaxRewindHorizon = 24 * time.Hour
)

// RewindBucket is one event-time bucket of a position's tracking table:
// the smallest stream sequence read with an event time in it.
type RewindBucket struct {
	// Start is the bucket's first event time (ms), a multiple of
	// RewindBucketWidth.
	Start int64 `json:"t"`
	// MinSeq is the smallest stream sequence read with an event time in
	// [Start, Start+RewindBucketWidth).
	MinSeq uint64 `json:"seq"`
}

// RewindBucketMS is RewindBucketWidth in milliseconds.
const RewindBucketMS = int64(RewindBucketWidth / time.Millisecond)

// RewindBucketOf returns the start (ms) of the bucket event time t falls in.
func RewindBucketOf(t mtime.Time) int64 {
	m := int64(t) % RewindBucketMS
	if m < 0 {
		m += RewindBucketMS
	}
	return int64(t) - m
}

// PositionTrack is what a checkpointed position says about re-reading its
// subscription (a Pub/Sub broker's PositionTrack).
type PositionTrack struct {
	Subscription string
	Topic        string
	// StreamSeq is the last message the position's split handled.
	StreamSeq uint64
	// Tracked is false for a position written before event-time tracking
	// (its table is unknown).
	Tracked bool
	// Watermark is the split's watermark estimate at the position.
	Watermark mtime.Time
	// From is the event time from which Buckets are complete.
	From    mtime.Time
	Buckets []RewindBucket
}

// FirstSequenceFor returns the smallest stream sequence read with an event
// time at or after bucket(t), and false when no message with such an event
// time was read (then nothing needs re-reading for t: the caller starts
// after StreamSeq).
func (p PositionTrack) FirstSequenceFor(t mtime.Time) (uint64, bool) {
	b := RewindBucketOf(t)
	var first uint64
	found := false
	for _, bk := range p.Buckets {
		if bk.Start >= b && (!found || bk.MinSeq < first) {
			first, found = bk.MinSeq, true
		}
	}
	return first, found
}

// Covers reports whether the table is complete for event times ≥ t.
func (p PositionTrack) Covers(t mtime.Time) bool {
	return p.Tracked && (p.From <= mtime.MinTimestamp || RewindBucketOf(t) >= int64(p.From))
}
