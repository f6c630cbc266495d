package record

import "time"

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
	// since the execution started (a restart, update or rescale starts a
	// new one), summed over its workers: while its buffering sinks hold
	// more than the server's --max-sink-buffer, the job reads nothing
	// until a checkpoint commits what they hold.
	SinkWaitSeconds float64 `json:"sink_wait_seconds"`
	// SinkBufferedBytes is what the job's buffering sinks (Pub/Sub, SQL,
	// JDBC, Iceberg) hold now, to be committed by the next checkpoint; absent for
	// a job without one.
	SinkBufferedBytes *int64        `json:"sink_buffered_bytes,omitempty"`
	Steps             []StepMetrics `json:"steps"`
}

// StepMetrics are the metrics of one step.
type StepMetrics struct {
	Name        string `json:"name"`
	ElementsIn  int64  `json:"elements_in"`
	ElementsOut int64  `json:"elements_out"`
	Rejects     int64  `json:"rejects"`
	// RejectsByReason counts Rejects by reason (bad_json, schema, error,
	// the reasons a step's code gives...); absent when none.
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
	// waiting for this step: see systemLag.
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
	// StateBytes is the size of a keyed step's state as its job's last
	// checkpoint stored it: the bytes of its keys and values, or, for
	// state of several megabytes, the store's estimate of the disk space
	// it takes (StateBytesEstimated). Set by a running job's describe
	// (GET /v1/jobs/{id}), absent elsewhere.
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

// AddReasons returns into with the counts of add added, by reason (into is
// updated in place; nil when both are empty).
func AddReasons(into, add map[string]int64) map[string]int64 {
	if len(add) == 0 {
		return into
	}
	if into == nil {
		into = make(map[string]int64, len(add))
	}
	for k, v := range add {
		into[k] += v
	}
	return into
}
