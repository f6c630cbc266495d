package client

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/weir-dev/weir/errcode"
)

// Job is the record of one job (one run of a pipeline), as GET
// /v1/jobs/{id_or_name} answers it: with live metrics while it runs.
type Job struct {
	ID         string    `json:"id"`
	Name       string    `json:"name"`
	Type       JobType   `json:"type"`
	State      JobState  `json:"state"`
	CreateTime time.Time `json:"create_time"`
	StateTime  time.Time `json:"state_time"`
	// Generation is the name's generation counter for this job.
	Generation int64 `json:"generation"`
	// SDK is SDKGo for a Go program's job (its pipeline is built by the
	// program's code, and Pipeline is empty); empty for a YAML pipeline.
	SDK string `json:"sdk,omitempty"`
	// Program is the executable of a Go program's job, as it was started.
	Program string `json:"program,omitempty"`
	// Pipeline is the YAML text of the pipeline.
	Pipeline string `json:"pipeline"`
	// PipelineFile names the pipeline in error messages and source
	// positions (the path the client gave).
	PipelineFile string `json:"pipeline_file,omitempty"`
	// BaseDir resolves relative paths in the pipeline (the client's
	// working directory).
	BaseDir string `json:"base_dir"`
	// Graph is the pipeline's canonical graph JSON.
	Graph           json.RawMessage `json:"graph"`
	Options         JobOptions      `json:"options"`
	ReplacesJobID   string          `json:"replaces_job_id,omitempty"`
	ReplacedByJobID string          `json:"replaced_by_job_id,omitempty"`
	// Replacement is set on both jobs of a stop-and-replace or parallel
	// replacement: the strategy, the flow's phase and its times.
	Replacement *Replacement `json:"replacement,omitempty"`
	// CatchUp is set on the in-place update of a re-reading replacement
	// job that was still catching up: the re-read it carries on.
	CatchUp *CatchUp `json:"catch_up,omitempty"`
	// StateLineage is the key the job's keyed state and checkpoints are
	// kept under in the store; empty means the job name. The new job of a
	// parallel replacement under the same name runs beside the old one,
	// so it gets a key of its own, which its
	// successors (updates, replacements) keep.
	StateLineage string `json:"state_lineage,omitempty"`
	// Subscriptions maps a ReadFromPubSub step reading a topic to the
	// subscription the job reads instead of the one named after the job
	// and step (the same-name parallel replacement gives its new job its
	// own); successors keep it.
	Subscriptions map[string]string `json:"subscriptions,omitempty"`
	// CreatedFromSnapshotID names the snapshot the job started from.
	CreatedFromSnapshotID string `json:"created_from_snapshot_id,omitempty"`
	// TransformNameMapping is the --transform-name-mapping the job was
	// created with (a step of the job whose state it reads, to its name
	// here; "" for a step whose state is dropped).
	TransformNameMapping map[string]string `json:"transform_name_mapping,omitempty"`
	// Partition is the partition a bounded job runs (weir run
	// --partition): the partition of the input manifests it reads.
	Partition string `json:"partition,omitempty"`
	// Manifest is the input manifest every file source of the job reads
	// (weir run --manifest), and ManifestDigest its digest when the job
	// was submitted.
	Manifest       string `json:"manifest,omitempty"`
	ManifestDigest string `json:"manifest_digest,omitempty"`
	// Shadow says the partition run stages without publishing.
	Shadow bool `json:"shadow,omitempty"`
	// Error is why a FAILED job failed.
	Error          string          `json:"error,omitempty"`
	LastCheckpoint *CheckpointInfo `json:"last_checkpoint,omitempty"`
	// Checkpointing says whether the job takes checkpoints; a pipeline
	// whose code cannot be checkpointed runs without (CheckpointNote says why).
	Checkpointing  bool   `json:"checkpointing"`
	CheckpointNote string `json:"checkpoint_note,omitempty"`
	// InputStart is where the job's input started, in event time (RFC 3339
	// UTC with milliseconds), when the job began with no state from a
	// position past input it never reads (a subscription sought forward, or
	// left acknowledged by an earlier job of the name): every pane of a
	// window that began before it is marked cut short, and an upserting
	// sink keeps a complete revision over it. Empty when the job skipped
	// nothing. InputStartNote says what its sources found.
	InputStart     string `json:"input_start,omitempty"`
	InputStartNote string `json:"input_start_note,omitempty"`
	// Delivery is DeliveryExactlyOnce or DeliveryAtLeastOnce; DeliveryNote
	// names the steps that make it at-least-once.
	Delivery     string `json:"delivery"`
	DeliveryNote string `json:"delivery_note,omitempty"`
	// DeadLetters counts the rejects of steps without an error output
	// (sent to the dead-letter topic, or only counted and logged when the
	// service has no broker); LastDeadLetter describes the latest.
	DeadLetters    int64  `json:"dead_letters"`
	LastDeadLetter string `json:"last_dead_letter,omitempty"`
	// History lists every transition, oldest first.
	History []StateChange `json:"history"`
	// Counters are the job's per-step counters as of its latest
	// checkpoint, carried into its next execution (a restart, a rescale),
	// so that its metrics never go back.
	Counters map[string]StepCounters `json:"counters,omitempty"`
	// Metrics are the job's final metrics once it is terminal.
	Metrics *JobMetrics `json:"metrics,omitempty"`
	// PendingCommit is set while a terminal job's final checkpoint is
	// durable but its sinks have not confirmed the commit; a restarted
	// service re-commits (sinks skip committed epochs).
	PendingCommit bool `json:"pending_commit,omitempty"`
	// Condition, when set, says why an active job is not processing
	// although its state says it runs (the state store failed). It is
	// never stored: reads add it.
	Condition *Condition `json:"condition,omitempty"`
}

// JobType says whether a job's sources are all bounded.
type JobType string

// Job types, as Dataflow names them.
const (
	// TypeBatch: every source is bounded; the job ends by itself (DONE).
	TypeBatch JobType = "Batch"
	// TypeStreaming: at least one source is unbounded; the job runs until
	// drained or cancelled.
	TypeStreaming JobType = "Streaming"
)

// JobState is the state of a job, its upper-case name on the wire
// (RUNNING).
type JobState string

// Job states, Dataflow's.
const (
	// StatePending: the job is created but its execution has not started.
	StatePending JobState = "PENDING"
	// StateRunning: the job's execution runs.
	StateRunning JobState = "RUNNING"
	// StateDone: a batch job finished by itself (terminal).
	StateDone JobState = "DONE"
	// StateDraining: a drain was requested; sources stopped reading and
	// every open window fires.
	StateDraining JobState = "DRAINING"
	// StateDrained: the drain completed (terminal).
	StateDrained JobState = "DRAINED"
	// StateCancelling: a cancel was requested.
	StateCancelling JobState = "CANCELLING"
	// StateCancelled: the job was cancelled (terminal).
	StateCancelled JobState = "CANCELLED"
	// StateUpdated: the job was replaced by a newer job of its name, which
	// inherited its state (terminal).
	StateUpdated JobState = "UPDATED"
	// StateFailed: the job failed (terminal); the job's error says why.
	StateFailed JobState = "FAILED"
)

// String returns the state's upper-case name.
func (s JobState) String() string { return string(s) }

// Title returns the state in title case (Running), as `weir jobs list`
// prints it.
func (s JobState) Title() string {
	n := string(s)
	if n == "" {
		return n
	}
	return n[:1] + strings.ToLower(n[1:])
}

// Terminal reports whether s never changes again.
func (s JobState) Terminal() bool {
	switch s {
	case StateDone, StateDrained, StateCancelled, StateUpdated, StateFailed:
		return true
	}
	return false
}

// Active reports whether the job is not terminal.
func (j *Job) Active() bool { return !j.State.Terminal() }

// Delivery guarantees a job runs with (Job.Delivery).
const (
	// DeliveryExactlyOnce: every source resumes from checkpointed positions
	// and every sink commits per checkpoint epoch.
	DeliveryExactlyOnce = "exactly_once"
	// DeliveryAtLeastOnce: after a crash, elements may be written again.
	DeliveryAtLeastOnce = "at_least_once"
)

// SDKGo is Job.SDK of a Go program's job.
const SDKGo = "go"

// JobOptions are the options of a job, named after Dataflow's.
type JobOptions struct {
	// NumWorkers is the number of workers (goroutines) of the job. Default 1.
	NumWorkers int `json:"num_workers"`
	// MinNumWorkers and MaxNumWorkers bound the worker count the
	// autoscaler chooses for a streaming job (min 1 when unset); without a
	// maximum the job is not autoscaled. 0: unset.
	MinNumWorkers int `json:"min_num_workers,omitempty"`
	MaxNumWorkers int `json:"max_num_workers,omitempty"`
	// WorkerUtilizationHint is Dataflow's target utilisation of the
	// workers for autoscaling, 0.1..0.9; 0: the default, 0.8.
	WorkerUtilizationHint float64 `json:"worker_utilization_hint,omitempty"`
	// AutoscalingAlgorithm is THROUGHPUT_BASED (the default, "") or NONE.
	AutoscalingAlgorithm string `json:"autoscaling_algorithm,omitempty"`
}

// CheckpointInfo describes a job's latest durable checkpoint.
type CheckpointInfo struct {
	Epoch uint64    `json:"epoch"`
	Time  time.Time `json:"time"`
}

// StateChange is one persisted transition of a job.
type StateChange struct {
	State  JobState  `json:"state"`
	Time   time.Time `json:"time"`
	Reason string    `json:"reason,omitempty"`
}

// StepCounters are the counters of a step that a job carries across its
// executions (restarts, rescales): persisted in the job record with every
// checkpoint, so they never go back for a job ID.
type StepCounters struct {
	ElementsIn          int64            `json:"elements_in"`
	ElementsOut         int64            `json:"elements_out"`
	Rejects             int64            `json:"rejects"`
	RejectsByReason     map[string]int64 `json:"rejects_by_reason,omitempty"`
	DroppedLateElements int64            `json:"dropped_late_elements"`
}

// Condition is a cause that keeps an active job from processing: a code
// from the registry, what happened, and since when.
type Condition struct {
	Code    errcode.Code `json:"code"`
	Message string       `json:"message"`
	Since   time.Time    `json:"since"`
}

// Summary is the short form of a job that lists show.
type Summary struct {
	ID              string    `json:"id"`
	Name            string    `json:"name"`
	Type            JobType   `json:"type"`
	State           JobState  `json:"state"`
	CreateTime      time.Time `json:"create_time"`
	StateTime       time.Time `json:"state_time"`
	Generation      int64     `json:"generation"`
	ReplacesJobID   string    `json:"replaces_job_id,omitempty"`
	ReplacedByJobID string    `json:"replaced_by_job_id,omitempty"`
	Error           string    `json:"error,omitempty"`
}

// JobMetrics are a job's metrics, with Dataflow's meanings.
type JobMetrics struct {
	// Time is when the metrics were taken.
	Time time.Time `json:"time"`
	// DataWatermark is the job's data watermark: the minimum output
	// watermark of its source steps (RFC 3339, or -inf/+inf); empty when
	// no source reported one yet.
	DataWatermark string `json:"data_watermark,omitempty"`
	// DataWatermarkAgeSeconds is now minus DataWatermark (absent while
	// the watermark is ±∞).
	DataWatermarkAgeSeconds *float64 `json:"data_watermark_age_seconds,omitempty"`
	// SystemLagSeconds is the largest system lag of the job's steps.
	SystemLagSeconds float64 `json:"system_lag_seconds"`
	// BacklogElements sums the backlog of sources that report one.
	BacklogElements *int64 `json:"backlog_elements,omitempty"`
	// BacklogBytes sums the backlog bytes of sources that report them.
	BacklogBytes *int64 `json:"backlog_bytes,omitempty"`
	// EstimatedBacklogProcessingTimeSeconds is the backlog divided by the
	// sources' current throughput (Dataflow's estimated backlog
	// processing time): how long the job needs to read its backlog at
	// the current rate. Absent without a backlog, and while the job reads
	// nothing although a backlog waits (infinite; Prometheus exports +Inf).
	EstimatedBacklogProcessingTimeSeconds *float64 `json:"estimated_backlog_processing_time_seconds,omitempty"`
	// DeadLetters counts rejects sent to the dead-letter topic (or counted).
	DeadLetters int64 `json:"dead_letters"`
	// SinkWaitSeconds is the time the job's sources waited for its sinks
	// since the execution started, summed over its workers: its buffering
	// sinks held more than the server's --max-sink-buffer, so it read
	// nothing until a checkpoint committed what they held.
	SinkWaitSeconds float64 `json:"sink_wait_seconds"`
	// SinkBufferedBytes is what the job's buffering sinks hold now, to be
	// committed by the next checkpoint; absent for a job without one.
	SinkBufferedBytes *int64        `json:"sink_buffered_bytes,omitempty"`
	Steps             []StepMetrics `json:"steps"`
}

// StepMetrics are the metrics of one step.
type StepMetrics struct {
	Name        string `json:"name"`
	ElementsIn  int64  `json:"elements_in"`
	ElementsOut int64  `json:"elements_out"`
	Rejects     int64  `json:"rejects"`
	// RejectsByReason counts Rejects by reason; absent when none.
	RejectsByReason     map[string]int64 `json:"rejects_by_reason,omitempty"`
	DroppedLateElements int64            `json:"dropped_late_elements"`
	// Watermark is the step's output watermark (sources, keyed steps and
	// steps with side inputs have one); empty otherwise.
	Watermark string `json:"watermark,omitempty"`
	// WatermarkMillis is Watermark in milliseconds since the epoch.
	WatermarkMillis *int64 `json:"watermark_millis,omitempty"`
	// DataWatermarkAgeSeconds is now minus Watermark (finite watermarks only).
	DataWatermarkAgeSeconds *float64 `json:"data_watermark_age_seconds,omitempty"`
	// ThroughputPerSecond is elements_in per second over the last
	// sampling interval (the checkpoint interval).
	ThroughputPerSecond float64 `json:"throughput_per_second"`
	// SystemLagSeconds approximates the longest time an element has been
	// waiting for this step.
	SystemLagSeconds float64 `json:"system_lag_seconds"`
	// BacklogElements is the source's unread elements, when it reports them.
	BacklogElements *int64 `json:"backlog_elements,omitempty"`
	// RewindSkippedElements counts the messages a re-reading source of a
	// replacement job skipped because every window they belong to had
	// expired before the cut (never dead-lettered); absent when none.
	RewindSkippedElements *int64 `json:"rewind_skipped_elements,omitempty"`
	// DuplicateIDConflicts counts the messages a source dropped as
	// duplicates of an ID seen within its dedupe window although their
	// data differed (an ID reused for another message); absent when none.
	DuplicateIDConflicts *int64 `json:"duplicate_id_conflicts,omitempty"`
	// CatchUp is a re-reading source's progress: the last sequence read
	// and the old job's last one, until which no pane fires; absent for a
	// source that does not re-read.
	CatchUp *SourceCatchUp `json:"catch_up,omitempty"`
	// PendingTimers is the number of timers set and not fired; absent
	// until the runner reports it.
	PendingTimers *int64 `json:"pending_timers,omitempty"`
	// Keys is the number of keys a keyed step (GroupByKey, Combine,
	// stateful ParDo, windowed aggregation) holds state for; absent for
	// other steps. Kept incrementally by the runner: reading it scans
	// nothing.
	Keys *int64 `json:"keys,omitempty"`
	// StateBytes is the size of a keyed step's state as the job's last
	// checkpoint stored it: the bytes of its keys and values, or, for
	// state of several megabytes, the store's estimate of the disk space
	// it takes (StateBytesEstimated). Set for a running job's keyed steps
	// in GET /v1/jobs/{id}.
	StateBytes *int64 `json:"state_bytes,omitempty"`
	// StateBytesEstimated says StateBytes is the store's estimate.
	StateBytesEstimated bool `json:"state_bytes_estimated,omitempty"`
	// OpenWindows is how many windows an aggregation step (Combine,
	// GroupByKey) holds open over all its keys, as its job's last
	// checkpoint stored them: counted, or for many keys estimated from the
	// first ones (OpenWindowsEstimated). Set with StateBytes.
	OpenWindows *int64 `json:"open_windows,omitempty"`
	// OpenWindowsEstimated says OpenWindows is estimated.
	OpenWindowsEstimated bool `json:"open_windows_estimated,omitempty"`
	// UserMetrics are the counters and distributions the step's code
	// updates (the Go SDK's Counter and Distribution) in the job's current
	// execution (a restart, rescale or update starts them again); absent
	// when it updates none.
	UserMetrics []UserMetric `json:"user_metrics,omitempty"`
}

// UserMetric is one user-defined metric of a step: a counter's value, or
// a distribution's count, sum, min and max.
type UserMetric struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Kind is "counter" or "distribution".
	Kind  string `json:"kind"`
	Value *int64 `json:"value,omitempty"`
	Count *int64 `json:"count,omitempty"`
	Sum   *int64 `json:"sum,omitempty"`
	Min   *int64 `json:"min,omitempty"`
	Max   *int64 `json:"max,omitempty"`
}

// SourceCatchUp is a re-reading source's progress (StepMetrics.CatchUp).
type SourceCatchUp struct {
	// ReadSequence is the last stream sequence the source read.
	ReadSequence uint64 `json:"read_seq"`
	// HoldUntil is the last sequence the old job read: until the source
	// has read it, its watermark is held and no pane fires.
	HoldUntil uint64 `json:"hold_until_seq"`
	// CaughtUp says the re-read is done.
	CaughtUp bool `json:"caught_up"`
	// ExpiredMessages counts the messages the re-read had to read again
	// but the topic no longer held (event catch_up_expired).
	ExpiredMessages uint64 `json:"expired_messages,omitempty"`
}

// Event is one job event, as the API serves it.
type Event struct {
	// Seq numbers the job's events from 1, in order; GET
	// /v1/jobs/{id}/events?after=SEQ continues after one.
	Seq      uint64         `json:"seq"`
	Time     time.Time      `json:"time"`
	Type     EventType      `json:"type"`
	Severity Severity       `json:"severity"`
	Message  string         `json:"message"`
	Details  map[string]any `json:"details,omitempty"`
}

// EventType is the kind of a job event (docs/METRICS.md, "Job events",
// says what each means and which details it carries).
type EventType string

// Event types.
const (
	EventStateChanged     EventType = "state_changed"
	EventConditionChanged EventType = "condition_changed"
	EventCheckpointFailed EventType = "checkpoint_failed"
	EventDeadLetter       EventType = "dead_letter"
	EventUpdateRefused    EventType = "update_refused"
	EventUpdateValidated  EventType = "update_validated"
	EventUpdateSucceeded  EventType = "update_succeeded"
	EventUpdateFailed     EventType = "update_failed"
	EventRescaleSucceeded EventType = "rescale_succeeded"
	EventRescaleFailed    EventType = "rescale_failed"
	EventAutoscaled       EventType = "autoscaled"
	EventReplacementPhase EventType = "replacement_phase"
	EventParityGate       EventType = "parity_gate"
	EventSnapshotCreated  EventType = "snapshot_created"
	EventSnapshotFailed   EventType = "snapshot_failed"
	EventRecovered        EventType = "recovered"
	EventCatchUpExpired   EventType = "catch_up_expired"
	EventLog              EventType = "log"
	EventTableMerged      EventType = "table_merged"
	EventSinkBackpressure EventType = "sink_backpressure"
)

// Severity is how much an event matters: info, warning or error.
type Severity string

// Severities of events.
const (
	SeverityInfo    Severity = "info"
	SeverityWarning Severity = "warning"
	SeverityError   Severity = "error"
)

// MetricsHistory is the answer of GET /v1/jobs/{id}/metrics:history: the
// job's metrics as series of points between From and To.
type MetricsHistory struct {
	JobID      string          `json:"job_id"`
	Resolution string          `json:"resolution"`
	From       time.Time       `json:"from"`
	To         time.Time       `json:"to"`
	Series     []MetricsSeries `json:"series"`
}

// MetricsSeries is one series of a job's metrics history.
type MetricsSeries struct {
	// Step is the step's name; "" for the job's own series.
	Step   string `json:"step"`
	Metric string `json:"metric"`
	// Points are [unix_ms, value] pairs, oldest first: the last value
	// sampled in each bucket of the resolution, empty buckets left out.
	Points [][2]float64 `json:"points"`
}

// OptionChange is one job option an update or rescale changed, for the
// report: its JSON name and its values before and after.
type OptionChange struct {
	Option string `json:"option"`
	From   string `json:"from"`
	To     string `json:"to"`
}
