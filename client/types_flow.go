package client

import "time"

// Replacement is the record of a replacement flow, carried by both the
// old and the new job (Job.Replacement). The new job's copy is the flow's
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
	// Parallel is the state of a parallel replacement.
	Parallel *ParallelFlow `json:"parallel,omitempty"`
	// RewindPoint is where the new job re-reads its topics from (with
	// Rewind), computed from the old job's final checkpoint at the cut
	// and recorded before the subscriptions are positioned.
	RewindPoint *RewindPoint `json:"rewind_point,omitempty"`
	// Handover lists the topic sources of a replacement under a new name,
	// each read through a subscription of the new job's that the cut-over
	// positions.
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

// Replacement strategies as job records name them (Replacement.Strategy).
const (
	StrategyStopAndReplace = "stop_and_replace"
	StrategyParallel       = "parallel"
	StrategyRollback       = "rollback"
)

// ReplacementPhase is where a replacement flow is.
type ReplacementPhase string

// Replacement phases. CUT_OVER, ROLLED_BACK and FAILED are final.
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
	// before it cancels the new job, so that the flow ends
	// ROLLED_BACK, not FAILED, whoever records the end (after a restart
	// too).
	RollbackReason string `json:"rollback_reason,omitempty"`
	// Gate is the parity gate (weir_cutover_gate=parity), its options and
	// its progress; nil with the timer gate.
	Gate *ParityGate `json:"parity_gate,omitempty"`
	// Progress is where the flow stands against its rules, computed when
	// the record is read while the flow has not cut over;
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
	// the new job reads New in its place (Job.Subscriptions), so that it
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

// RewindPoint is where the new job of a stop-and-replace re-reads its
// topics from.
type RewindPoint struct {
	// Watermark is the old job's final watermark W.
	Watermark time.Time `json:"watermark"`
	// FromTime is T, the earliest event time re-read.
	FromTime time.Time `json:"from_time"`
	// SkipBefore: messages with an event time before it, up to the old
	// job's last message of their topic, are skipped.
	SkipBefore time.Time `json:"skip_before"`
	// Sources lists every Pub/Sub source of the old job.
	Sources []RewindSource `json:"sources"`
}

// RewindSource is where one topic is re-read from.
type RewindSource struct {
	// Step is the old job's source step.
	Step         string `json:"step"`
	Topic        string `json:"topic"`
	Subscription string `json:"subscription"`
	// FirstSequence is the first stream sequence the new job reads.
	FirstSequence uint64 `json:"first_sequence"`
	// LastSequence is the last message the old job read (the new job's
	// watermark is held until it has read it).
	LastSequence uint64 `json:"last_sequence"`
	// FromTime is the event time the re-read must cover (T).
	FromTime time.Time `json:"from_time"`
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
	// which the new job reads New in place of (Job.Subscriptions).
	InsteadOf string `json:"instead_of,omitempty"`
	// Positioned is set once New stands where it starts (recorded before
	// Old is deleted, so a resumed cut-over does not position it again).
	Positioned bool `json:"positioned,omitempty"`
	// OldDeleted is set once Old was deleted.
	OldDeleted bool `json:"old_deleted,omitempty"`
}

// CatchUp is the re-read a job carries on from the replacement job it
// updates in place while that job was still catching up.
type CatchUp struct {
	// FromJobID is the replacement job whose re-read this is.
	FromJobID string `json:"from_job_id"`
	// RewindPoint is that job's (its SkipBefore bounds the windows the job
	// owns).
	RewindPoint *RewindPoint `json:"rewind_point"`
	// Starts are the RewindStarts of its Pub/Sub splits, by subscription.
	Starts map[string]RewindStart `json:"starts"`
}

// RewindStart is what a split re-reading a subscription for a replacement
// job needs.
type RewindStart struct {
	// SkipBefore: a message with an event time before it is skipped
	// (counted in rewind_skipped_elements, not emitted, not dead-lettered): every
	// window of the new pipeline it belongs to had expired at the old
	// job's final watermark, whose panes for them are final (the old job
	// would have dropped it as too late).
	SkipBefore int64 `json:"skip_before_ms"`
	// SkipBefore and Watermark are milliseconds since the epoch.
	// Watermark is the old job's final watermark: once the hold ends the
	// split's watermark is at least this, as the old job's was.
	Watermark int64 `json:"watermark_ms"`
	// HoldUntil is the stream sequence of the last message the old job
	// read: until the split has handled it, its watermark stays at −∞, so
	// no window fires (and nothing is late) while the split catches up;
	// then it is the split's own estimate again, and every window fires
	// with everything the old job had read for it.
	HoldUntil uint64 `json:"hold_until_seq"`
	// FromSeq, when not 0, is the stream sequence the re-read starts at: a
	// split opened without a checkpointed position (the new job's first
	// start, or a restart before its first checkpoint) positions the
	// subscription there itself rather than at its acknowledgement floor,
	// so that nothing that moved the floor after the service's seek (a
	// late acknowledgement, a seek that had not yet taken effect) skips
	// the re-read.
	FromSeq uint64 `json:"from_seq,omitempty"`
}

// GenerationHistory is one job of a name in `weir jobs history`: how it
// replaced the job before it, its phases, its stop window, its rescales,
// the rollback snapshots kept of it and, for a rollback, what it went back to.
type GenerationHistory struct {
	Generation int64     `json:"generation"`
	JobID      string    `json:"job_id"`
	State      JobState  `json:"state"`
	CreateTime time.Time `json:"create_time"`
	StateTime  time.Time `json:"state_time"`
	// How is HowCreate, HowCreateFromSnapshot, HowInPlaceUpdate,
	// HowStopAndReplace, HowParallel or HowRollback.
	How             string `json:"how"`
	ReplacesJobID   string `json:"replaces_job_id,omitempty"`
	ReplacedByJobID string `json:"replaced_by_job_id,omitempty"`
	// FromSnapshotID is the snapshot the job started from.
	FromSnapshotID string `json:"from_snapshot_id,omitempty"`
	// RolledBackToGeneration is, for a rollback, the generation whose
	// pipeline and state it runs again.
	RolledBackToGeneration int64 `json:"rolled_back_to_generation,omitempty"`
	// Phases of the replacement flow that created the job, in order.
	Phases           []PhaseTime `json:"phases,omitempty"`
	StopWindowMillis *int64      `json:"stop_window_ms,omitempty"`
	// ParityGate is the parity gate of the parallel replacement that
	// created the job (weir_cutover_gate=parity): its outcome, figures and
	// report, an aborted gate's included.
	ParityGate *ParityGate `json:"parity_gate,omitempty"`
	// Rescales are the job's in-flight rescales.
	Rescales []StateChange `json:"rescales,omitempty"`
	// RollbackPoints are the rollback snapshots kept of this job.
	RollbackPoints []RollbackPoint `json:"rollback_points,omitempty"`
	Notes          []string        `json:"notes,omitempty"`
	Error          string          `json:"error,omitempty"`
	// JobName is set on a generation of another name that this name's
	// lineage continues: a replacement under a new name
	// (parallel_replace_job_name/_id) carries the old name's generations
	// on, and the history of the new name shows them, marked by the name.
	JobName string `json:"job_name,omitempty"`
}

// How a generation took over from the one before (GenerationHistory.How).
const (
	HowCreate             = "create"
	HowCreateFromSnapshot = "create_from_snapshot"
	HowInPlaceUpdate      = "in_place_update"
	HowStopAndReplace     = StrategyStopAndReplace
	HowParallel           = StrategyParallel
	HowRollback           = StrategyRollback
)

// PhaseTime is one phase of a replacement flow and when it began.
type PhaseTime struct {
	Phase ReplacementPhase `json:"phase"`
	Time  time.Time        `json:"time"`
}

// RollbackPoint is a rollback snapshot kept of a generation's job.
type RollbackPoint struct {
	SnapshotID string        `json:"snapshot_id"`
	State      SnapshotState `json:"state"`
	CreateTime time.Time     `json:"creation_time"`
	ExpireTime time.Time     `json:"expire_time"`
	// ReplacedByJobID is the job whose start the snapshot was kept for.
	ReplacedByJobID string `json:"replaced_by_job_id,omitempty"`
}

// RollbackResult is the report of a rollback (and of a validate-only one).
type RollbackResult struct {
	// Job is the rollback job (nil when validate-only).
	Job *Job `json:"job,omitempty"`
	// Current is the job that is stopped (or would be).
	Current *Summary `json:"current"`
	// Snapshot is the rollback snapshot it starts from.
	Snapshot *Snapshot `json:"snapshot"`
	// ToGeneration is the generation whose pipeline runs again;
	// NewGeneration the rollback job's.
	ToGeneration  int64 `json:"to_generation"`
	NewGeneration int64 `json:"new_generation"`
	// Sources and Windows say what is re-read and recomputed.
	Sources      []RollbackSource  `json:"sources"`
	Windows      []RollbackWindows `json:"windows"`
	ValidateOnly bool              `json:"validate_only,omitempty"`
	Notes        []string          `json:"notes,omitempty"`
}

// RollbackSource is one source of the rollback job: where its subscription
// is rewound to and what the topic still holds.
type RollbackSource struct {
	Step         string `json:"step"`
	Subscription string `json:"subscription,omitempty"`
	Topic        string `json:"topic,omitempty"`
	// FromSeq is the first message re-read (the one after the snapshot's
	// position); LastSeq the topic's newest. Messages = LastSeq-FromSeq+1.
	FromSeq  uint64 `json:"from_seq,omitempty"`
	LastSeq  uint64 `json:"last_seq,omitempty"`
	Messages uint64 `json:"messages"`
	// Retained says whether the topic still holds every one of them.
	Retained bool `json:"retained"`
	// FirstRetainedSeq is the topic's oldest stored message.
	FirstRetainedSeq uint64 `json:"first_retained_seq,omitempty"`
}

// RollbackWindows says, for one keyed step, which windows the rollback job
// computes again.
type RollbackWindows struct {
	Step string `json:"step"`
	// Windowing describes the step's windows ("fixed 10s").
	Windowing string `json:"windowing"`
	// KeysWithState counts the keys that held state (open windows, panes
	// or timers) at the snapshot: every such window is emitted again.
	KeysWithState int64 `json:"keys_with_state"`
	// Recomputed says it in a sentence.
	Recomputed string `json:"recomputed"`
}

// Attempt is a recorded update attempt that the check refused (a refused
// attempt creates no job) or that was only validated.
type Attempt struct {
	Time         time.Time    `json:"time"`
	Name         string       `json:"name"`
	RunningJobID string       `json:"running_job_id"`
	ValidateOnly bool         `json:"validate_only"`
	Report       CompatReport `json:"report"`
	Pipeline     string       `json:"pipeline"`
	// Rehearsal is the verdict of the pre-flight rehearsal that refused
	// the update (weir_rehearse=required).
	Rehearsal *RehearsalVerdict `json:"rehearsal,omitempty"`
}

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
