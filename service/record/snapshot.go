package record

import (
	"encoding/json"
	"time"
)

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
	// SnapshotDeleted: deleted or expired; its data is gone and only this
	// record (a tombstone) remains.
	SnapshotDeleted SnapshotState = "DELETED"
)

// PubsubSnapshotMetadata names a subscription snapshot taken with a job
// snapshot (--snapshot-sources) at the cut's position of the
// subscription; SnapshotName is "<snapshot id>--<subscription>". It is
// deleted with the job snapshot, and may expire before it (a subscription
// snapshot lives at most 7 days, see package pubsub).
type PubsubSnapshotMetadata struct {
	Subscription string    `json:"subscription"`
	Topic        string    `json:"topic"`
	SnapshotName string    `json:"snapshot_name"`
	ExpireTime   time.Time `json:"expire_time"`
}

// Snapshot is the registry record of a job snapshot, stored as JSON under
// snapshot/<id> and served as is by the API. Its data (state, positions,
// sink parts) lives in the store's snap/<id>/ key space.
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
	// Steps are, per aggregation step (a Combine, a GroupByKey), the keys
	// and open windows the snapshot holds, counted while its state was
	// copied (READY only; absent in snapshots taken before they were
	// counted).
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
	// replacement kept of the old job (rollback.go); "" for a user's.
	Kind string `json:"kind,omitempty"`
	// ReplacedByJobID is, for a rollback snapshot, the job that replaced
	// the snapshot's job.
	ReplacedByJobID string `json:"replaced_by_job_id,omitempty"`
	// Broker says whose Pub/Sub positions the snapshot holds: the broker's
	// identity and, per source, the topic and the sequences it stored at
	// the cut. Nil for a snapshot without Pub/Sub sources, or taken before
	// snapshots recorded it (its positions are then checked against the
	// topics only).
	Broker *SnapshotBroker `json:"broker,omitempty"`
}

// SnapshotBroker is the broker a snapshot's Pub/Sub positions belong to.
type SnapshotBroker struct {
	// ID is the broker's identity (a UUID the broker made at its first
	// start and keeps with its data).
	ID string `json:"id"`
	// Sources are the snapshot's Pub/Sub source positions, by step.
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

func SnapshotKey(id string) string { return "snapshot/" + id }

// SnapshotKindRollback marks a rollback snapshot.
const SnapshotKindRollback = "rollback"

// SnapshotStep is what a snapshot holds of one aggregation step.
type SnapshotStep struct {
	Name        string `json:"name"`
	Keys        int64  `json:"keys"`
	OpenWindows int64  `json:"open_windows"`
}
