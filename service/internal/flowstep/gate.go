package flowstep

import (
	"fmt"
	"slices"
	"time"

	"github.com/weir-dev/weir/duration"
	"github.com/weir-dev/weir/service/record"
	"github.com/weir-dev/weir/serviceopt"
)

// The parity gate of a parallel replacement (weir_cutover_gate=parity):
// during the overlap the driver compares the two jobs' SQL outputs for
// every window both have completed (ParityObservation); the gate passes
// once the newest Windows complete windows agree within the budget and the
// new job's watermark keeps up, reveals the new generation in the façade
// views, and the flow goes on as with the timer gate; a gate that has not
// passed by its deadline aborts the flow, keeping the old job.

// ParityObservation is the driver's comparison of the old and new jobs'
// SQL outputs, made just before a step.
type ParityObservation struct {
	// Windows are the windows complete in both jobs' outputs (their end,
	// plus allowed lateness, at or below both watermarks), oldest first,
	// each with the rows compared and those that differ.
	Windows []WindowParity
	// OldWatermark and NewWatermark are the jobs' data watermarks (zero
	// while unknown).
	OldWatermark, NewWatermark time.Time
	// WindowSize is the longest window plus allowed lateness of the
	// pipelines: the new watermark may be that far behind the old one.
	WindowSize time.Duration
	// Err says why the outputs could not be compared (the gate holds).
	Err string
}

// WindowParity is the comparison of one window complete in both outputs.
type WindowParity struct {
	// End is the window's end.
	End time.Time
	// Rows counts the rows (key and window, over every table) compared;
	// Differing those that differ.
	Rows, Differing int64
	// Examples are a few differing rows, worded for the user.
	Examples []string
}

// maxExamples bounds the differing rows a decision quotes.
const maxExamples = 3

// Figures returns the figures of o against budget: totals over the
// compared windows, and how many consecutive windows, newest first, keep
// their differences within budget together.
func (o *ParityObservation) Figures(budget int64) record.ParityFigures {
	var f record.ParityFigures
	if o == nil {
		return f
	}
	for _, w := range o.Windows {
		f.WindowsCompared++
		f.RowsCompared += w.Rows
		f.Differing += w.Differing
	}
	var sum int64
	for _, w := range slices.Backward(o.Windows) {
		if sum+w.Differing > budget {
			break
		}
		sum += w.Differing
		f.Agreed++
	}
	for _, w := range slices.Backward(o.Windows) {
		for _, e := range w.Examples {
			if len(f.Examples) < maxExamples {
				f.Examples = append(f.Examples, e)
			}
		}
	}
	if n := len(o.Windows); n > 0 {
		end := o.Windows[n-1].End
		f.NewestWindowEnd = &end
	}
	if !o.OldWatermark.IsZero() {
		t := o.OldWatermark
		f.OldWatermark = &t
	}
	if !o.NewWatermark.IsZero() {
		t := o.NewWatermark
		f.NewWatermark = &t
	}
	return f
}

// keepsUp reports whether the new job's watermark is known and at most
// one window (plus lateness) behind the old job's.
func (o *ParityObservation) keepsUp() bool {
	if o.NewWatermark.IsZero() || o.OldWatermark.IsZero() {
		return false
	}
	return !o.NewWatermark.Before(o.OldWatermark.Add(-o.WindowSize))
}

// sameFigures reports whether two comparisons agree on what they counted
// (the watermarks move at every step: a decision is recorded when the
// counts change).
func sameFigures(a, b record.ParityFigures) bool {
	return a.WindowsCompared == b.WindowsCompared && a.RowsCompared == b.RowsCompared && a.Differing == b.Differing && a.Agreed == b.Agreed
}

// gate is the parity gate's step for a flow in OVERLAP: a decision, or ok
// false when the gate has passed and revealed the new generation (the
// timer gate's rules apply next).
func gate(in Input, g *record.ParityGate) (Decision, bool) {
	flow := in.New.Replacement.Parallel
	switch g.Outcome {
	case record.GatePassed:
		if !g.Revealed {
			return then(Action{Kind: RevealNew}), true
		}
		return Decision{}, false
	case record.GateAborted:
		return done(Action{Kind: GiveUp, Phase: record.PhaseFailed, Reason: g.Report}), true
	}
	deadline := time.Duration(g.DeadlineMillis) * time.Millisecond
	// The figures: this step's comparison, unless it could not compare
	// anything (a watermark unknown after a restart) while an earlier one
	// did, whose figures stand.
	f := g.Last
	if in.Parity != nil && in.Parity.Err == "" && (len(in.Parity.Windows) > 0 || g.Last.WindowsCompared == 0) {
		f = in.Parity.Figures(g.Budget)
	}
	if flow.OverlapStart != nil && in.Now.Sub(*flow.OverlapStart) >= deadline {
		report := fmt.Sprintf("parity gate aborted: %s after the overlap began, %d of the %d consecutive complete windows needed agreed within a budget of %d differing rows (%d windows compared, %d of %d rows differing); job %s was stopped and its rows dropped from the views, job %s keeps running",
			duration.Format(deadline), f.Agreed, g.Windows, g.Budget, f.WindowsCompared, f.Differing, f.RowsCompared, in.New.ID, in.Old.ID)
		return done(Action{Kind: RecordGate, Outcome: record.GateAborted, Figures: &f, Note: report},
			Action{Kind: GiveUp, Phase: record.PhaseFailed, Reason: report}), true
	}
	if in.Parity == nil {
		return wait("the parity gate waits for a comparison of the jobs' outputs"), true
	}
	if in.Parity.Err != "" {
		return wait("the parity gate cannot compare the jobs' outputs yet: " + in.Parity.Err), true
	}
	if len(in.Parity.Windows) == 0 && g.Last.WindowsCompared > 0 {
		return wait("the parity gate waits for both jobs' watermarks to pass the windows compared before"), true
	}
	keepsUp := in.Parity.keepsUp()
	if f.Agreed >= g.Windows && keepsUp {
		report := fmt.Sprintf("parity gate passed: %d consecutive complete windows agreed within a budget of %d differing rows (%d windows compared, %d of %d rows differing)",
			f.Agreed, g.Budget, f.WindowsCompared, f.Differing, f.RowsCompared)
		return then(Action{Kind: RecordGate, Outcome: record.GatePassed, Figures: &f, Note: report}, Action{Kind: RevealNew}), true
	}
	why := fmt.Sprintf("%d of %d consecutive complete windows agreed within a budget of %d differing rows (%d windows compared, %d of %d rows differing)",
		f.Agreed, g.Windows, g.Budget, f.WindowsCompared, f.Differing, f.RowsCompared)
	if f.Agreed >= g.Windows {
		why = fmt.Sprintf("the new job's watermark is more than one window (%s) behind the old job's", duration.Format(in.Parity.WindowSize))
	}
	report := fmt.Sprintf("parity gate holding: %s; it aborts %s after the overlap began (%s)", why, duration.Format(deadline), serviceopt.KeyParityDeadline)
	if !sameFigures(f, g.Last) || g.Report == "" {
		return then(Action{Kind: RecordGate, Outcome: record.GateHolding, Figures: &f, Note: report}), true
	}
	return wait(report), true
}
