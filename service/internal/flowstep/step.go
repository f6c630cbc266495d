// Package flowstep holds the decisions of the job service's replacement
// flows — stop-and-replace (and the rollback, which is one) and parallel
// replacement — as deterministic step functions, in the way etcd's raft
// separates its state machine from the node that drives it: Step takes the
// flow's records and what the driver observed now (the time, which jobs
// have a live execution, the old job's watermark, and for a parallel
// replacement gated on parity the driver's comparison of the two jobs'
// outputs, gate.go) and returns what to do next, as actions with their
// arguments. It starts no goroutine, does no
// I/O, reads no clock and keeps no state between steps: everything it
// needs is in its input, so a flow is tested step by step from scripts
// (testdata/), and a driver that crashed between two actions takes the
// flow on from the records alone.
//
// The driver (package replace) applies the actions in order, each with
// the store write, broker call or state change it names, and stops at the
// first that fails or cannot complete yet; it steps again at the next
// change of the service or the next tick.
//
// It may import service/record, duration and serviceopt (for the words of
// its notes) and the standard library.
package flowstep

import (
	"fmt"
	"time"

	"github.com/weir-dev/weir/duration"
	"github.com/weir-dev/weir/service/record"
	"github.com/weir-dev/weir/serviceopt"
)

// Input is what one step decides from: the flow's two job records, read
// just before, and what the driver observed of the service at the same
// time.
type Input struct {
	// Now is the service's clock.
	Now time.Time
	// New is the flow's new job; its record holds the flow
	// (record.Replacement), the flow's durable state.
	New *record.Job
	// Old is the job the flow replaces.
	Old *record.Job
	// NewRunning and OldRunning say whether the jobs have a live
	// execution.
	NewRunning, OldRunning bool
	// HasBroker says the service has a Pub/Sub broker (a parallel
	// replacement needs it).
	HasBroker bool
	// OldWatermark is the old job's data watermark, when finite and known
	// (zero otherwise): a parallel flow drains the old job once it passed
	// the cut-over watermark.
	OldWatermark time.Time
	// Parity is the driver's comparison of the jobs' outputs, for a
	// parallel flow gated on parity that has not passed yet (nil
	// otherwise, or when it could not be made).
	Parity *ParityObservation
	// Retention is the rollback retention: a parallel flow compacts the old
	// generation's rows that long after the old job ended, and once the new
	// job has run that long.
	Retention time.Duration
}

// Kind names an action.
type Kind string

// The actions of a flow. Each names the work of the driver that applies
// it; Reason, Phase and Note are its arguments.
const (
	// FinishCancel records the new job CANCELLED (Reason): it was cancelled
	// while it waited for its cut-over and never ran.
	FinishCancel Kind = "finish-cancel"
	// EndFlow records the flow's final Phase on both jobs, with Note; the
	// new job's state stays as it is.
	EndFlow Kind = "end-flow"
	// FailFlow fails the new job (still PENDING) with Reason and ends the
	// flow FAILED.
	FailFlow Kind = "fail-flow"
	// BeginDrain takes the rollback snapshot's cut of the old job and
	// drains it: PREPARING → DRAINING_OLD (stop-and-replace).
	BeginDrain Kind = "begin-drain"
	// CutOver starts the new job once the old one ended and committed:
	// DRAINING_OLD → CUT_OVER (stop-and-replace; the re-read positioned,
	// subscriptions handed over, a rollback's snapshot restored).
	CutOver Kind = "cut-over"
	// NoteDrainTimeout records on both jobs that the old job's drain
	// outlasted the flow's maximum (Note).
	NoteDrainTimeout Kind = "note-drain-timeout"
	// CancelOld cancels the old job (its drain timed out).
	CancelOld Kind = "cancel-old"
	// PositionSubscriptions creates the new job's subscriptions of a
	// parallel flow where the old job's stand and records the cut-over
	// time; it cannot complete while the old job has read nothing yet.
	PositionSubscriptions Kind = "position-subscriptions"
	// StartOverlap starts the new job of a parallel flow beside the old
	// one: PREPARING → OVERLAP.
	StartOverlap Kind = "start-overlap"
	// GiveUp ends a parallel flow in Phase (FAILED) keeping the old job:
	// the new job stopped, its generation dropped from the views, its
	// subscriptions deleted (Reason).
	GiveUp Kind = "give-up"
	// DrainOld drains the old job of a parallel flow: OVERLAP →
	// DRAINING_OLD.
	DrainOld Kind = "drain-old"
	// CompleteCutOver completes a parallel flow whose old job ended: its
	// façade generations ended, the subscriptions the service made for it
	// deleted, CUT_OVER on both jobs.
	CompleteCutOver Kind = "complete-cut-over"
	// EndOldGenerations records the old generations ended in the flow's
	// façade tables; it cannot complete while a table is not a view yet.
	EndOldGenerations Kind = "end-old-generations"
	// Compact merges the old generations' rows into the new job's tables;
	// it cannot complete while a generation is still being written.
	Compact Kind = "compact"
	// RecordGate records a parity gate's decision (Outcome, with Figures
	// and the report in Note) on both jobs, with its event.
	RecordGate Kind = "record-gate"
	// RevealNew reveals the new generation in every façade view of a
	// parallel flow whose parity gate passed, and records it.
	RevealNew Kind = "reveal-new"
)

// Action is one thing to do, with its arguments.
type Action struct {
	Kind Kind
	// Phase is EndFlow's and GiveUp's final phase.
	Phase record.ReplacementPhase
	// Reason is FinishCancel's, FailFlow's and GiveUp's reason.
	Reason string
	// Note is EndFlow's and NoteDrainTimeout's note, and RecordGate's
	// report.
	Note string
	// Outcome and Figures are RecordGate's decision.
	Outcome record.GateOutcome
	Figures *record.ParityFigures
}

// String is the action as a script prints it.
func (a Action) String() string {
	s := string(a.Kind)
	if a.Phase != "" {
		s += " " + string(a.Phase)
	}
	if a.Outcome != "" {
		s += " " + string(a.Outcome)
	}
	if f := a.Figures; f != nil {
		s += fmt.Sprintf(" windows=%d rows=%d differing=%d agreed=%d", f.WindowsCompared, f.RowsCompared, f.Differing, f.Agreed)
	}
	for _, v := range []string{a.Reason, a.Note} {
		if v != "" {
			s += ": " + v
		}
	}
	return s
}

// Decision is what a step decided: the actions, in order, and whether the
// flow is done once they all completed (the driver then stops).
type Decision struct {
	Actions []Action
	Done    bool
	// Why says, when nothing is to be done yet, what the flow waits for.
	Why string
}

// wait is a decision to do nothing now, for why.
func wait(why string) Decision { return Decision{Why: why} }

// done is a decision that ends the driver after actions.
func done(actions ...Action) Decision { return Decision{Actions: actions, Done: true} }

// then is a decision to apply actions and step again.
func then(actions ...Action) Decision { return Decision{Actions: actions} }

// Step decides the next move of the flow whose new job is in.New.
func Step(in Input) Decision {
	rep := in.New.Replacement
	switch {
	case rep == nil:
		return done()
	case rep.NewJobID != in.New.ID:
		// A later flow, in which the job is the one replaced, took its
		// record over: that flow's driver drives it.
		return done()
	case rep.Strategy == record.StrategyParallel:
		return parallel(in)
	}
	return stopAndReplace(in)
}

// stopAndReplace is the step of a stop-and-replace or a rollback.
func stopAndReplace(in Input) Decision {
	nj, old, rep := in.New, in.Old, in.New.Replacement
	if rep.Phase.Final() {
		return done()
	}
	if nj.State == record.StateCancelling && !in.NewRunning {
		// Cancelled while it waited: it never ran, so it ends at once.
		return done(Action{Kind: FinishCancel, Reason: "cancelled before the cut-over"},
			Action{Kind: EndFlow, Phase: record.PhaseFailed, Note: fmt.Sprintf("job %s was %s before the cut-over", nj.ID, record.StateCancelled)})
	}
	if nj.State != record.StatePending {
		// The new job was cancelled (or failed) while it waited.
		return done(Action{Kind: EndFlow, Phase: record.PhaseFailed, Note: fmt.Sprintf("job %s was %s before the cut-over", nj.ID, nj.State)})
	}
	switch rep.Phase {
	case record.PhasePreparing:
		return then(Action{Kind: BeginDrain})
	case record.PhaseDrainingOld:
	default:
		return done()
	}
	switch {
	case old.State == record.StateFailed:
		return done(Action{Kind: FailFlow, Reason: fmt.Sprintf("job %s (%s), being replaced, failed while draining: %s", old.ID, old.Name, old.Error)})
	case old.State.Terminal() && !old.PendingCommit && !in.OldRunning:
		return done(Action{Kind: CutOver})
	case old.State.Terminal():
		return wait("the old job's final commit is not confirmed yet")
	}
	return drainDeadline(in, rep, func(old, nj string) string {
		return fmt.Sprintf("both jobs are kept, job %s keeps draining and job %s starts when it ends (cancel job %s to cut over now)", old, nj, old)
	}, "its unacknowledged messages stay in its subscription")
}

// drainDeadline is the step of a flow whose old job drains: nothing until
// the flow's maximum stop duration has passed, then a note and, with
// parallel_replace_job_cancel_on_drain_timeout, the old job's cancel.
// kept says, from the two job IDs, what happens when the old job is kept;
// cancelled what the cancel means.
func drainDeadline(in Input, rep *record.Replacement, kept func(old, nj string) string, cancelled string) Decision {
	limit, hasLimit := rep.MaxStop()
	switch {
	case !hasLimit:
		return wait("the old job drains (no maximum stop duration)")
	case rep.DrainTimedOut:
		return wait("the old job drains past its maximum stop duration")
	case rep.DrainStart == nil || in.Now.Sub(*rep.DrainStart) < limit:
		return wait("the old job drains")
	}
	maxStop := duration.Format(limit)
	if rep.CancelOnDrainTimeout {
		return then(Action{Kind: NoteDrainTimeout, Note: fmt.Sprintf("the drain of job %s did not finish within %s: it was cancelled (%s)", in.Old.ID, maxStop, cancelled)},
			Action{Kind: CancelOld})
	}
	return then(Action{Kind: NoteDrainTimeout, Note: fmt.Sprintf("the drain of job %s did not finish within %s and %s=false: %s",
		in.Old.ID, maxStop, serviceopt.KeyCancelOnDrainTimeout, kept(in.Old.ID, in.New.ID))})
}

// parallel is the step of a parallel replacement.
func parallel(in Input) Decision {
	nj, old, rep := in.New, in.Old, in.New.Replacement
	flow := rep.Parallel
	if flow == nil || rep.Phase == record.PhaseFailed || rep.Phase == record.PhaseRolledBack {
		return done()
	}
	switch rep.Phase {
	case record.PhasePreparing:
		if nj.State != record.StatePending && nj.State != record.StateRunning {
			reason := fmt.Sprintf("job %s, the replacement, is %s before the overlap began", nj.ID, nj.State)
			if nj.Error != "" {
				reason += ": " + nj.Error
			}
			return done(Action{Kind: GiveUp, Phase: record.PhaseFailed, Reason: reason})
		}
		if !in.HasBroker {
			return done(Action{Kind: GiveUp, Phase: record.PhaseFailed, Reason: "the server has no Pub/Sub broker"})
		}
		return then(Action{Kind: PositionSubscriptions}, Action{Kind: StartOverlap})
	case record.PhaseOverlap, record.PhaseDrainingOld:
		if nj.State.Terminal() || nj.State == record.StateCancelling {
			// The new job ended during the overlap: the old one is kept.
			return done(Action{Kind: GiveUp, Phase: record.PhaseFailed, Reason: fmt.Sprintf("job %s (%s), the replacement, is %s: job %s is kept", nj.ID, nj.Name, nj.State, old.ID)})
		}
	case record.PhaseCutOver:
		return compaction(in)
	default:
		return done()
	}
	if old.State.Terminal() {
		if old.PendingCommit || in.OldRunning {
			return wait("the old job's final commit is not confirmed yet")
		}
		if g := flow.Gate; g != nil && !g.Revealed {
			// The old job ended by itself before the gate passed (its
			// cancel cuts over now): the new job's rows are all there is.
			return then(Action{Kind: RevealNew}, Action{Kind: CompleteCutOver})
		}
		return then(Action{Kind: CompleteCutOver})
	}
	if rep.Phase == record.PhaseOverlap {
		if g := flow.Gate; g != nil {
			if d, ok := gate(in, g); ok {
				return d
			}
		}
		p := ProgressOf(in)
		if p.Elapsed < p.MinParallel {
			return wait("the overlap is shorter than parallel_replace_job_min_parallel_pipelines_duration")
		}
		if flow.WaitWatermark && (p.CutOver.IsZero() || p.OldWatermark.IsZero() || p.OldWatermark.Before(p.CutOver)) {
			return wait("the old job's watermark has not passed the cut-over watermark")
		}
		return then(Action{Kind: DrainOld})
	}
	// DRAINING_OLD: the drain's deadline, as in stop-and-replace. A
	// maximum of 0s gives the drain no time: the first step after it
	// began times it out.
	return drainDeadline(in, rep, func(old, _ string) string {
		return fmt.Sprintf("both jobs keep running; the cut-over happens when job %s ends (cancel it to cut over now)", old)
	}, fmt.Sprintf("job %s owns its windows from the cut-over on", nj.ID))
}

// compaction is the step of a parallel flow after CUT_OVER: the old
// generations' façade entries ended, then, the rollback retention after
// the old job ended and once the new job has run that long, their rows
// merged into the new job's tables.
func compaction(in Input) Decision {
	nj := in.New
	flow := nj.Replacement.Parallel
	if flow.Compacted || len(flow.Tables) == 0 {
		return done()
	}
	for _, t := range flow.Tables {
		if !t.OldEnded {
			return then(Action{Kind: EndOldGenerations})
		}
	}
	started := nj.CreateTime
	if flow.OverlapStart != nil {
		started = *flow.OverlapStart
	}
	if flow.OldEnded == nil || in.Now.Sub(*flow.OldEnded) < in.Retention || in.Now.Sub(started) < in.Retention {
		return wait("the rollback retention has not passed")
	}
	return done(Action{Kind: Compact})
}

// Progress is where a parallel flow stands against its rules.
type Progress struct {
	// Elapsed is the overlap so far, against MinParallel.
	Elapsed, MinParallel time.Duration
	// OldWatermark is the old job's data watermark; CutOver is the
	// watermark it must pass (T0 plus the cut span); zero while unknown.
	OldWatermark, CutOver time.Time
}

// ProgressOf is the progress of the parallel flow of in.New.
func ProgressOf(in Input) Progress {
	flow := in.New.Replacement.Parallel
	p := Progress{MinParallel: time.Duration(flow.MinParallelMillis) * time.Millisecond, OldWatermark: in.OldWatermark}
	if flow.OverlapStart != nil {
		p.Elapsed = in.Now.Sub(*flow.OverlapStart)
	}
	if flow.CutTime != nil {
		p.CutOver = flow.CutTime.Add(time.Duration(flow.CutSpanMillis) * time.Millisecond)
	}
	return p
}
