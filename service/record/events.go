package record

import "time"

// EventType is the kind of a job event; EventTypes lists them all.
type EventType string

// Event types (see docs/METRICS.md, "Job events").
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

// Severity is how much an event matters.
type Severity string

// Severities, lowest first.
const (
	SeverityInfo    Severity = "info"
	SeverityWarning Severity = "warning"
	SeverityError   Severity = "error"
)

// EventTypeInfo documents one event type.
type EventTypeInfo struct {
	Type EventType
	// Severity is the type's usual severity ("info", "warning", "error",
	// or "info|error" when it depends on the event).
	Severity string
	Meaning  string
}

// EventTypes lists every event type with its meaning; docs/METRICS.md
// documents the same set (a test checks it).
func EventTypes() []EventTypeInfo {
	return []EventTypeInfo{
		{EventStateChanged, "info|error", "the job moved to another state (details: from, to, reason); FAILED is an error"},
		{EventConditionChanged, "warning|info", "a condition that keeps an active job from processing was set or cleared (details: code, set)"},
		{EventCheckpointFailed, "error", "a periodic checkpoint failed; the job fails (details: error)"},
		{EventDeadLetter, "warning", "a step without error_handling rejected an element: the first 10 per execution, then every 1000th (details: step, reason, source, dead_letters)"},
		{EventUpdateRefused, "warning", "an update was refused by the compatibility check; the job was not changed (details: problems, errors)"},
		{EventUpdateValidated, "info", "a validate-only update was checked (details: compatible)"},
		{EventUpdateSucceeded, "info", "the job was updated in place into a new job, or is the new job of an update (details: old_job_id, new_job_id)"},
		{EventUpdateFailed, "error", "an update or its handover failed; the job resumed from its last checkpoint (details: error)"},
		{EventRescaleSucceeded, "info", "the job was rescaled in flight (details: from_workers, to_workers)"},
		{EventRescaleFailed, "error", "a rescale failed (details: from_workers, to_workers, error)"},
		{EventAutoscaled, "info|warning", "the autoscaler changed the worker count within the job's range, or failed to (details: from_workers, to_workers, reason, backlog, backlog_growth_per_s, input_rate, processing_rate, utilization, capacity_per_worker, sink_wait, predicted_processing_rate, last_predicted_rate, observed_rate, error)"},
		{EventReplacementPhase, "info", "a phase of a replacement (stop-and-replace, parallel replacement) began or ended (details: strategy, phase)"},
		{EventParityGate, "info|warning", "a parity gate's decision in a parallel replacement: compared (the figures changed while it holds), passed, or aborted at its deadline, a warning; or a pre-flight rehearsal's verdict (weir_rehearse=required: PASSED, or REFUSED, a warning) (details: outcome, windows_compared, rows_compared, differing_rows, consecutive_windows_agreed, budget, windows, old_watermark, new_watermark, examples)"},
		{EventSnapshotCreated, "info", "a snapshot of the job is READY (details: snapshot_id, disk_size_bytes)"},
		{EventSnapshotFailed, "error", "a snapshot of the job failed (details: snapshot_id, reason)"},
		{EventRecovered, "info", "the job resumed after a restart of the service (details: epoch, the checkpoint it resumed from)"},
		{EventCatchUpExpired, "warning", "a source re-reading a topic for a replacement found messages the old job had read gone from the topic's retention; its catch-up went on, or ended, without them (details: step, topic, subscription, expired_messages, first_seq, last_seq, hold_until_seq, next_seq)"},
		{EventLog, "info", "a line a LogForTesting step printed (the element as JSON)"},
		{EventTableMerged, "info|warning", "a staged SQL table's staging tables were merged into its principal table, periodically or on demand, or the merge failed and changed nothing (details: table, step, rows, duration_ms, members, error)"},
		{EventSinkBackpressure, "warning", "the job's sources waited for its sinks: the sinks held more than the server's --max-sink-buffer between two checkpoints, so the job read no faster than they committed; at most once every 10 minutes while it lasts (details: waited_seconds, over_seconds, waited_fraction, held_bytes, max_bytes)"},
	}
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

// MaxEventsPerJob bounds the events a job keeps: the oldest go first.
const MaxEventsPerJob = 10000

// MaxEventMessageBytes bounds an event's message (a longer one is cut,
// ending in "…").
const MaxEventMessageBytes = 4096
