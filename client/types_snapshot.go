package client

import (
	"encoding/json"
	"fmt"
	"time"
)

// Snapshot is the record of a job snapshot, as the API serves it: a
// restore point of a job's state, source positions and graph.
type Snapshot struct {
	ID           string        `json:"id"`
	SourceJobID  string        `json:"source_job_id"`
	JobName      string        `json:"job_name"`
	Generation   int64         `json:"generation"`
	CreationTime time.Time     `json:"creation_time"`
	TTL          string        `json:"ttl"`
	ExpireTime   time.Time     `json:"expire_time"`
	State        SnapshotState `json:"state"`
	StateTime    time.Time     `json:"state_time"`
	Description  string        `json:"description,omitempty"`
	// DiskSizeBytes is the size of the snapshot's data (READY only).
	DiskSizeBytes int64 `json:"disk_size_bytes,omitempty"`
	// Steps are, per aggregation step, the keys and open windows the
	// snapshot holds (READY only).
	Steps []SnapshotStep `json:"steps,omitempty"`
	// FailureReason says why a FAILED snapshot failed.
	FailureReason  string                   `json:"failure_reason,omitempty"`
	PubsubMetadata []PubsubSnapshotMetadata `json:"pubsub_metadata"`
	// SDK is the source job's SDK (SDKGo, or "" for YAML).
	SDK string `json:"sdk,omitempty"`
	// Graph is the source job's canonical graph at the cut.
	Graph json.RawMessage `json:"graph,omitempty"`
	// Epoch is the cut's checkpoint epoch.
	Epoch uint64 `json:"epoch,omitempty"`
	// Positions are the source positions at the cut, per source step.
	Positions map[string][][]byte `json:"positions,omitempty"`
	// SinkEpoch is the sink progress at the cut: sinks had pre-committed
	// up to this epoch, whose parts the snapshot keeps.
	SinkEpoch uint64 `json:"sink_epoch,omitempty"`
	// Kind is SnapshotKindRollback for the rollback snapshot an update or
	// replacement kept of the old job; "" for a user's.
	Kind string `json:"kind,omitempty"`
	// ReplacedByJobID is, for a rollback snapshot, the job that replaced
	// the snapshot's job.
	ReplacedByJobID string `json:"replaced_by_job_id,omitempty"`
	// Broker says whose Pub/Sub positions the snapshot holds (absent for
	// a snapshot without Pub/Sub sources, or taken before it was recorded).
	Broker *SnapshotBroker `json:"broker,omitempty"`
}

// SnapshotKindRollback is Snapshot.Kind of a rollback snapshot.
const SnapshotKindRollback = "rollback"

// SnapshotState is the state of a job snapshot (Dataflow's names).
type SnapshotState string

// Snapshot states: PENDING → RUNNING → READY | FAILED; any → DELETED.
const (
	// SnapshotPending: the request is accepted; the cut is not taken yet.
	SnapshotPending SnapshotState = "PENDING"
	// SnapshotRunning: the cut is taken; its state is being copied.
	SnapshotRunning SnapshotState = "RUNNING"
	// SnapshotReady: complete; jobs can start from it.
	SnapshotReady SnapshotState = "READY"
	// SnapshotFailed: it could not be taken (failure_reason); no data.
	SnapshotFailed SnapshotState = "FAILED"
	// SnapshotDeleted: deleted or expired; its data is gone and only its
	// record remains.
	SnapshotDeleted SnapshotState = "DELETED"
)

// PubsubSnapshotMetadata names a subscription snapshot taken with a job
// snapshot (--snapshot-sources) at the cut's position of the
// subscription; SnapshotName is "<snapshot id>--<subscription>". It is
// deleted with the job snapshot, and may expire before it (a subscription
// snapshot lives at most 7 days).
type PubsubSnapshotMetadata struct {
	Subscription string    `json:"subscription"`
	Topic        string    `json:"topic"`
	SnapshotName string    `json:"snapshot_name"`
	ExpireTime   time.Time `json:"expire_time"`
}

// SnapshotBroker is the broker a snapshot's Pub/Sub positions belong to:
// its identity (a UUID the broker made at its first start and keeps with
// its data) and each source position's topic and sequences at the cut.
type SnapshotBroker struct {
	ID      string                `json:"id"`
	Sources []SnapshotSourceRange `json:"sources,omitempty"`
}

// SnapshotSourceRange is one Pub/Sub source position of a snapshot: the
// subscription and topic it reads, the last sequence it counts as read,
// and the sequences the topic stored at the cut.
type SnapshotSourceRange struct {
	Step         string `json:"step"`
	Subscription string `json:"subscription"`
	Topic        string `json:"topic"`
	Seq          uint64 `json:"seq"`
	FirstSeq     uint64 `json:"first_seq"`
	LastSeq      uint64 `json:"last_seq"`
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
	// 10,000. Empty for a cumulative subscription's snapshot
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

// SnapshotStep is what a snapshot holds of one aggregation step.
type SnapshotStep struct {
	Name        string `json:"name"`
	Keys        int64  `json:"keys"`
	OpenWindows int64  `json:"open_windows"`
}
