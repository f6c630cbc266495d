package record

import "time"

// ReplacementPhase is where a replacement flow is.
type ReplacementPhase string

// Replacement phases (issue 10 item 4). CUT_OVER, ROLLED_BACK and FAILED
// are final.
const (
	// PhasePreparing: the new job is created and built (PENDING); the old
	// one still runs.
	PhasePreparing ReplacementPhase = "PREPARING"
	// PhaseDrainingOld: the old job is draining; the new one waits.
	PhaseDrainingOld ReplacementPhase = "DRAINING_OLD"
	// PhaseOverlap: both run (parallel replacement).
	PhaseOverlap ReplacementPhase = "OVERLAP"
	// PhaseCutOver: the new job processes; the old one has ended.
	PhaseCutOver ReplacementPhase = "CUT_OVER"
	// PhaseRolledBack: the new job was given up and the old one kept.
	PhaseRolledBack ReplacementPhase = "ROLLED_BACK"
	// PhaseFailed: the flow could not complete; the records say why.
	PhaseFailed ReplacementPhase = "FAILED"
)

// Final reports whether the flow has ended in phase p.
func (p ReplacementPhase) Final() bool {
	return p == PhaseCutOver || p == PhaseRolledBack || p == PhaseFailed
}

// Replacement strategies as job records name them.
const (
	StrategyStopAndReplace = "stop_and_replace"
	StrategyParallel       = "parallel"
)

// Replacement is the record of a replacement flow, carried by both the
// old and the new job (job.replacement). The new job's copy is the flow's
// durable state: a restarted service resumes the flow from it.
type Replacement struct {
	Strategy  string           `json:"strategy"`
	Phase     ReplacementPhase `json:"phase"`
	PhaseTime time.Time        `json:"phase_time"`
	// StopWindowMillis is the stop window: from the old job's sources
	// stopping (the drain request) to the new job processing.
	StopWindowMillis *int64 `json:"stop_window_ms,omitempty"`
	OldJobID         string `json:"old_job_id"`
	NewJobID         string `json:"new_job_id"`
	// MaxStopMillis bounds the old job's drain (see MaxStop: a parallel
	// replacement without the option records 0 and HasMaxStop false).
	MaxStopMillis int64 `json:"max_stop_ms"`
	// HasMaxStop is set on a parallel replacement that was given
	// parallel_replace_job_max_stop_duration, so that 0s (the drain gets
	// no time) differs from no maximum. Records written before it have
	// only MaxStopMillis, where 0 meant none.
	HasMaxStop           bool `json:"has_max_stop,omitempty"`
	CancelOnDrainTimeout bool `json:"cancel_on_drain_timeout"`
	Preallocate          bool `json:"preallocate_compute_resources"`
	Rewind               bool `json:"rewind"`
	// DrainStart is when the old job was asked to drain.
	DrainStart *time.Time `json:"drain_start_time,omitempty"`
	// DrainTimedOut is set once the drain took longer than MaxStopMillis.
	DrainTimedOut bool `json:"drain_timed_out,omitempty"`
	// Notes say what happened beyond the phases (a drain timeout).
	Notes []string `json:"notes,omitempty"`
	// Parallel is the state of a parallel replacement (replace_parallel.go).
	Parallel *ParallelFlow `json:"parallel,omitempty"`
	// RewindPoint is where the new job re-reads its topics from (with
	// Rewind), computed from the old job's final checkpoint at the cut
	// and recorded before the subscriptions are positioned.
	RewindPoint *RewindPoint `json:"rewind_point,omitempty"`
	// Handover lists the topic sources of a replacement under a new name,
	// each read through a subscription of the new job's that the cut-over
	// positions (replace_handover.go).
	Handover []SubscriptionHandover `json:"handover_subscriptions,omitempty"`
}

// MaxStop returns the maximum duration of the old job's drain and whether
// there is one. A stop-and-replace and a rollback always have one (0s
// included: the drain gets no time); a parallel replacement only when it
// was given parallel_replace_job_max_stop_duration.
func (r *Replacement) MaxStop() (time.Duration, bool) {
	d := time.Duration(r.MaxStopMillis) * time.Millisecond
	if r.Strategy != StrategyParallel || r.HasMaxStop || r.MaxStopMillis > 0 {
		return d, true
	}
	return 0, false
}

// ParallelFlow is the part of a replacement record that only a parallel
// replacement has.
type ParallelFlow struct {
	// MinParallelMillis is min_parallel_pipelines_duration.
	MinParallelMillis int64 `json:"min_parallel_ms"`
	// OverlapStart is when the new job started beside the old one.
	OverlapStart *time.Time `json:"overlap_start_time,omitempty"`
	// CutTime is T0 (rewind false): the newest event time the old job had
	// read when the new subscriptions were positioned; the new job owns
	// the windows starting after it.
	CutTime *time.Time `json:"cut_time,omitempty"`
	// CutSpanMillis is the longest window plus allowed lateness of the old
	// pipeline: the old job is drained once its watermark has passed
	// CutTime + CutSpan.
	CutSpanMillis int64 `json:"cut_span_ms"`
	// WaitWatermark says the drain waits for that watermark: always with
	// weir_replace_rewind=false (the old job's windows up to T0 must fire
	// complete), and with the re-read when a pipeline publishes to Pub/Sub
	// (the old job's panes up to T0 must; to SQL the new job's complete
	// rows win anyway).
	WaitWatermark bool `json:"wait_watermark"`
	// Subscriptions are the new job's subscriptions and the old job's.
	Subscriptions []ParallelSubscription `json:"subscriptions,omitempty"`
	// Tables are the façade views the jobs write.
	Tables []FacadeTable `json:"tables,omitempty"`
	// OldEnded is when the old job's end was recorded (its façade
	// generations ended).
	OldEnded *time.Time `json:"old_ended_time,omitempty"`
	// Compacted is set once the old generations were merged into the new
	// job's tables.
	Compacted bool `json:"compacted,omitempty"`
	// RollbackReason is set by a rollback during the overlap
	// (abortParallel) before it cancels the new job, so that the flow ends
	// ROLLED_BACK, not FAILED, whoever records the end (after a restart
	// too).
	RollbackReason string `json:"rollback_reason,omitempty"`
	// Gate is the parity gate (weir_cutover_gate=parity), its options and
	// its durable progress; nil with the timer gate.
	Gate *ParityGate `json:"parity_gate,omitempty"`
	// Progress is where the flow stands against its rules, computed when
	// the record is read (Service.Get) while the flow has not cut over;
	// never stored.
	Progress *FlowProgress `json:"progress,omitempty"`
}

// GateOutcome is where a parity gate stands.
type GateOutcome string

// The outcomes of a parity gate.
const (
	// GateHolding: the gate has not passed yet; the new generation's rows
	// are not visible through the façade views.
	GateHolding GateOutcome = "HOLDING"
	// GatePassed: enough consecutive complete windows agreed; the new
	// generation is revealed and the flow goes on as the timer gate's.
	GatePassed GateOutcome = "PASSED"
	// GateAborted: the deadline passed first; the new job was stopped and
	// its generation dropped, the old job kept.
	GateAborted GateOutcome = "ABORTED"
)

// ParityGate is a parallel replacement's parity gate: the old and new
// jobs' SQL outputs compared, window by window, during the overlap.
type ParityGate struct {
	// Budget is how many differing rows the compared windows may hold
	// (weir_parity_budget).
	Budget int64 `json:"budget"`
	// Windows is how many consecutive complete windows must agree
	// (weir_parity_windows).
	Windows int64 `json:"windows"`
	// DeadlineMillis bounds the gate from the overlap's start
	// (weir_parity_deadline).
	DeadlineMillis int64 `json:"deadline_ms"`
	// Outcome is HOLDING until the gate passes or aborts.
	Outcome GateOutcome `json:"outcome"`
	// DecisionTime is when the outcome was decided (PASSED, ABORTED).
	DecisionTime *time.Time `json:"decision_time,omitempty"`
	// Revealed says the new generation was revealed in every façade view
	// after the gate passed.
	Revealed bool `json:"revealed,omitempty"`
	// Last are the figures of the last comparison recorded.
	Last ParityFigures `json:"last"`
	// Report is the decision in a sentence (why it holds, passed or
	// aborted).
	Report string `json:"report,omitempty"`
}

// ParityFigures are the figures of one parity comparison.
type ParityFigures struct {
	// WindowsCompared counts the windows complete in both jobs' outputs.
	WindowsCompared int64 `json:"windows_compared"`
	// RowsCompared and Differing count the rows (key and window) compared
	// and those that differ, over every compared window.
	RowsCompared int64 `json:"rows_compared"`
	Differing    int64 `json:"differing_rows"`
	// Agreed is the number of consecutive complete windows, newest first,
	// whose differences stay within the budget.
	Agreed int64 `json:"consecutive_windows_agreed"`
	// NewestWindowEnd is the end of the newest compared window.
	NewestWindowEnd *time.Time `json:"newest_window_end,omitempty"`
	// OldWatermark and NewWatermark are the jobs' data watermarks.
	OldWatermark *time.Time `json:"old_watermark,omitempty"`
	NewWatermark *time.Time `json:"new_watermark,omitempty"`
	// Examples are a few differing rows, worded for the user.
	Examples []string `json:"examples,omitempty"`
}

// FlowProgress is what `weir run --wait` shows of a parallel flow: the
// overlap against min_parallel_pipelines_duration, and the old job's
// watermark against the one it must pass before it is drained.
type FlowProgress struct {
	ElapsedMillis     int64 `json:"elapsed_ms"`
	MinParallelMillis int64 `json:"min_parallel_ms"`
	// OldWatermark is the old job's data watermark (absent while ±∞ or
	// unknown); CutOverWatermark is T0 plus the cut span (absent until the
	// subscriptions are positioned).
	OldWatermark     *time.Time `json:"old_watermark,omitempty"`
	CutOverWatermark *time.Time `json:"cut_over_watermark,omitempty"`
	// WaitingForOldMessage is set in PREPARING while the flow waits for
	// the old job to read a message (it has read none since its execution
	// started, e.g. after a restart): only then is the cut-over time known
	// and the new subscriptions positioned.
	WaitingForOldMessage bool `json:"waiting_for_old_message,omitempty"`
}

// ParallelSubscription is the subscription pair of one source step.
type ParallelSubscription struct {
	Step  string `json:"step"`
	Topic string `json:"topic"`
	// Old is the subscription the old job reads; unless OldNamed, the
	// service created it (a subscription named after the job), so it is
	// deleted once the old job ended.
	Old string `json:"old"`
	// New is the new job's own subscription, created by the service.
	New string `json:"new"`
	// Positioned is set once New stands where Old stood.
	Positioned bool `json:"positioned,omitempty"`
	// OldDeleted is set once Old was deleted.
	OldDeleted bool `json:"old_deleted,omitempty"`
	// OldNamed says Old is the user's named subscription (the old job's
	// step reads `subscription: S`): the service never deletes it, and
	// after the cut-over no job of the flow reads it.
	OldNamed bool `json:"old_named,omitempty"`
	// InsteadOf is the named subscription the new pipeline's step names:
	// the new job reads New in its place (job.subscriptions), so that it
	// takes no message from the old job; it never reads InsteadOf.
	InsteadOf string `json:"instead_of,omitempty"`
}

// FacadeTable is a SQL table written through a façade view.
type FacadeTable struct {
	Driver string `json:"driver"`
	DSN    string `json:"dsn"`
	Table  string `json:"table"`
	// OldEnded is set once the old job's generation is recorded ended in
	// the view's registry (which happens when the table has become a view:
	// at the new job's first commit, which may come after the cut-over).
	OldEnded bool `json:"old_ended,omitempty"`
}

// SubscriptionHandover is one Pub/Sub source of a stop-and-replace under
// a new name: the new job's step Step reads Topic through New (the
// subscription named after the new job and its step), which the cut-over
// creates and positions where the old job's subscription Old stopped (with
// weir_replace_rewind=false) or at the rewind point (the default); then
// it deletes Old, which the service created (named after the old job and
// its step, or given to it by an earlier replacement), before the new job
// starts. Under the same name the new job reads the old job's
// subscriptions themselves. A step that reads a named subscription S reads
// S itself, unless the old job read a subscription of its own in place of
// S (an earlier parallel replacement): then it is handed over too, S
// being InsteadOf.
type SubscriptionHandover struct {
	Step string `json:"step"`
	// Topic is the topic read; for a handover InsteadOf a named
	// subscription, Old's, known once positioned.
	Topic string `json:"topic,omitempty"`
	Old   string `json:"old"`
	New   string `json:"new"`
	// InsteadOf is the named subscription the new pipeline's step names,
	// which the new job reads New in place of (job.subscriptions).
	InsteadOf string `json:"instead_of,omitempty"`
	// Positioned is set once New stands where it starts (recorded before
	// Old is deleted, so a resumed cut-over does not position it again).
	Positioned bool `json:"positioned,omitempty"`
	// OldDeleted is set once Old was deleted.
	OldDeleted bool `json:"old_deleted,omitempty"`
}

// StrategyRollback is the replacement strategy of a rollback job.
const StrategyRollback = "rollback"

// RehearsalVerdict is the verdict of a pre-flight rehearsal
// (weir_rehearse=required): the running job's pipeline and the new one run
// over the job's retained input, their outputs compared.
type RehearsalVerdict struct {
	// Passed says the differences stayed within Budget.
	Passed bool `json:"passed"`
	// Since is the start of the stretch of retained input rehearsed.
	Since time.Time `json:"since"`
	// Elements counts the input elements both pipelines ran over.
	Elements int64 `json:"elements"`
	// RowsCompared, Differences and Noise are the comparison's figures
	// (noise: where the old pipeline disagreed with itself).
	RowsCompared int64 `json:"rows_compared"`
	Differences  int64 `json:"differences"`
	Noise        int64 `json:"noise"`
	Budget       int64 `json:"budget"`
	// Examples are a few differing rows, worded for the user.
	Examples []string `json:"examples,omitempty"`
	// TraceBytes is the size of the recorded stretch (its messages,
	// encoded); TraceSpilledBytes how much of it went to disk beyond the
	// server's --rehearse-trace-memory.
	TraceBytes        int64 `json:"trace_bytes,omitempty"`
	TraceSpilledBytes int64 `json:"trace_spilled_bytes,omitempty"`
}
