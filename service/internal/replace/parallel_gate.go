package replace

// The parity gate of a parallel replacement (weir_cutover_gate=parity):
// the driver's comparison of the two jobs' SQL outputs before each step
// (observeParity), and the actions that record the gate's decisions and
// reveal the new generation once it passed. The decisions themselves are
// flowstep's (gate.go there).

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/weir-dev/weir/diff"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/internal/flowstep"
	"github.com/weir-dev/weir/service/record"
	"github.com/weir-dev/weir/state"
)

// gateHolding reports whether nj's flow has a parity gate that has not
// decided yet, in its overlap (the driver then compares the outputs).
func gateHolding(nj *record.Job) bool {
	rep := nj.Replacement
	return rep != nil && rep.Parallel != nil && rep.Parallel.Gate != nil && rep.Parallel.Gate.Outcome == record.GateHolding &&
		rep.Phase == record.PhaseOverlap
}

// parityDue reports whether the driver of newID's flow compares the jobs'
// outputs at this step: at most once per checkpoint interval (a step runs
// at every change of the service, and a comparison reads both tables), and
// records now as the comparison's time when it does.
func (s *Replace) parityDue(newID string, now time.Time) bool {
	if v, ok := s.parityAt.Load(newID); ok && now.Sub(v.(time.Time)) < s.Opts.CheckpointInterval && !now.Before(v.(time.Time)) {
		return false
	}
	s.parityAt.Store(newID, now)
	return true
}

// windowRows are one window's rows of one side, as diff rows.
type windowRows map[string][]diff.Row

// windowKey formats a window so that it sorts by time.
func windowKey(start, end time.Time) string {
	const f = "2006-01-02T15:04:05.000Z"
	return start.UTC().Format(f) + "/" + end.UTC().Format(f)
}

// observeParity compares the SQL outputs of the old and new jobs of nj's
// flow for every window both have completed: a window counts once its end
// plus the cut span (the longest window plus allowed lateness) is at or
// below both jobs' data watermarks, and it is one the new job writes
// (starting after the cut-over time; with the re-read, from the new job's
// first window on). Rows are keyed by the table, the sink's key and the
// window, and compared by the values a reader of the view sees (the newest
// revision of an upsert row), through package diff.
func (s *Replace) observeParity(ctx context.Context, nj, old *record.Job) *flowstep.ParityObservation {
	flow := nj.Replacement.Parallel
	span := time.Duration(flow.CutSpanMillis) * time.Millisecond
	o := &flowstep.ParityObservation{OldWatermark: s.oldWatermark(old.ID), NewWatermark: s.oldWatermark(nj.ID), WindowSize: span}
	if o.OldWatermark.IsZero() || o.NewWatermark.IsZero() {
		o.Err = "a job's watermark is not known yet"
		return o
	}
	if !nj.Replacement.Rewind && flow.CutTime == nil {
		o.Err = "the cut-over time is not known yet"
		return o
	}
	complete := o.OldWatermark
	if o.NewWatermark.Before(complete) {
		complete = o.NewWatermark
	}
	type win struct{ start, end time.Time }
	oldSide, newSide := map[string]windowRows{}, map[string]windowRows{}
	ends := map[string]win{}
	for _, t := range flow.Tables {
		target := s.FacadeTarget(t)
		gens, err := s.sql.FacadeGenerations(ctx, target)
		if err != nil {
			o.Err = fmt.Sprintf("table %s: %v", t.Table, err)
			return o
		}
		oldGen := int64(-1)
		for _, g := range gens {
			if g.Generation < nj.Generation && g.Generation > oldGen {
				oldGen = g.Generation
			}
		}
		newRows, ok, err := s.sql.FacadeGenerationRows(ctx, target, nj.Generation)
		if err == nil && !ok {
			err = fmt.Errorf("job %s has not written to it yet", nj.ID)
		}
		if err == nil && oldGen < 0 {
			err = fmt.Errorf("job %s's generation is not behind its view yet", old.ID)
		}
		var oldRows []contract.GenerationRow
		if err == nil {
			oldRows, _, err = s.sql.FacadeGenerationRows(ctx, target, oldGen)
		}
		if err != nil {
			o.Err = fmt.Sprintf("table %s: %v", t.Table, err)
			return o
		}
		first := time.Time{} // the new job's first window (the re-read)
		for _, r := range newRows {
			if !r.WindowEnd.IsZero() && (first.IsZero() || r.WindowStart.Before(first)) {
				first = r.WindowStart
			}
		}
		for side, rows := range map[string][]contract.GenerationRow{"old": oldRows, "new": newRows} {
			into := oldSide
			if side == "new" {
				into = newSide
			}
			for _, r := range rows {
				switch {
				case r.WindowEnd.IsZero(), r.WindowEnd.Add(span).After(complete):
					continue // the global window, or not complete in both
				case !nj.Replacement.Rewind && !r.WindowStart.After(*flow.CutTime):
					continue // the old job's window under the cut-over rule
				case nj.Replacement.Rewind && (first.IsZero() || r.WindowStart.Before(first)):
					continue // before the new job's re-read
				}
				key, err := diff.CanonicalJSON(r.Key)
				if err == nil {
					var val string
					if val, err = diff.CanonicalJSON(r.Values); err == nil {
						w := windowKey(r.WindowStart, r.WindowEnd)
						ends[w] = win{r.WindowStart, r.WindowEnd}
						if into[w] == nil {
							into[w] = windowRows{}
						}
						into[w][t.Table] = append(into[w][t.Table], diff.Row{Output: t.Table, Key: key, Window: w, Timing: diff.TimingUnknown, Value: val})
					}
				}
				if err != nil {
					o.Err = fmt.Sprintf("table %s: %v", t.Table, err)
					return o
				}
			}
		}
	}
	order := make([]string, 0, len(ends))
	for w := range ends {
		order = append(order, w)
	}
	slices.SortFunc(order, func(a, b string) int { return ends[a].end.Compare(ends[b].end) })
	for _, w := range order {
		wp, err := compareWindow(oldSide[w], newSide[w])
		if err != nil {
			o.Err = err.Error()
			return o
		}
		wp.End = ends[w].end
		o.Windows = append(o.Windows, wp)
	}
	return o
}

// compareWindow compares one window's rows of the old and new jobs.
func compareWindow(old, new windowRows) (flowstep.WindowParity, error) {
	var wp flowstep.WindowParity
	side := func(w windowRows) diff.Side {
		var rows []diff.Row
		outs := map[string]diff.OutputInfo{}
		for table, rs := range w {
			outs[table] = diff.OutputInfo{Mode: diff.ModeUpsert}
			rows = append(rows, rs...)
		}
		diff.SortRows(rows)
		// Rows of one key and window (an append table's) are told apart
		// by their order.
		for i := range rows {
			if i > 0 && rows[i].Output == rows[i-1].Output && rows[i].Key == rows[i-1].Key {
				rows[i].PaneIndex = rows[i-1].PaneIndex + 1
			}
		}
		return diff.Side{Rows: diff.NewSliceReader(rows), Outputs: outs}
	}
	o, n := side(old), side(new)
	for table := range old {
		n.Outputs[table] = diff.OutputInfo{Mode: diff.ModeUpsert}
	}
	for table := range new {
		o.Outputs[table] = diff.OutputInfo{Mode: diff.ModeUpsert}
	}
	rep, err := diff.Run(o, diff.Side{}, n, diff.Options{MaxDetails: 3})
	if err != nil {
		return wp, fmt.Errorf("comparing the jobs' rows: %w", err)
	}
	for _, out := range rep.Outputs {
		wp.Rows += out.RowsCompared
	}
	wp.Differing = rep.Total
	for _, d := range rep.Differences {
		wp.Examples = append(wp.Examples, describeDifference(d))
	}
	return wp, nil
}

// describeDifference words one differing row for a report.
func describeDifference(d diff.Difference) string {
	val := func(p *diff.Pane) string {
		if p == nil {
			return "no row"
		}
		return p.Value
	}
	return fmt.Sprintf("table %s, key %s, window %s: old %s, new %s (%s)", d.Output, d.Key, strings.Replace(d.Window, "/", " to ", 1), val(d.Old), val(d.New), d.Class)
}

// recordGate records a parity gate's decision (flowstep.RecordGate) on
// both jobs of the flow, with a parity_gate event on each.
func (s *Replace) recordGate(newID, oldID string, a flowstep.Action) error {
	return s.Update(func(tx *core.Tx) error {
		now := s.Now()
		w := &state.Write{}
		for _, id := range []string{newID, oldID} {
			j, err := s.ReadJob(id)
			if err != nil {
				return err
			}
			rep := j.Replacement
			if rep == nil || rep.NewJobID != newID || rep.Parallel == nil {
				continue // the old job's record before the overlap, or a later flow's
			}
			if rep.Parallel.Gate == nil {
				nrep, err := s.ReadJob(newID)
				if err != nil || nrep.Replacement == nil || nrep.Replacement.Parallel == nil || nrep.Replacement.Parallel.Gate == nil {
					continue
				}
				g := *nrep.Replacement.Parallel.Gate
				rep.Parallel.Gate = &g
			}
			g := rep.Parallel.Gate
			g.Outcome, g.Report = a.Outcome, a.Note
			if a.Figures != nil {
				g.Last = *a.Figures
			}
			if a.Outcome != record.GateHolding {
				g.DecisionTime = &now
			}
			sev := record.SeverityInfo
			if a.Outcome == record.GateAborted {
				sev = record.SeverityWarning
			}
			tx.AddEvent(w, id, record.EventParityGate, sev, a.Note, gateDetails(g, newID, oldID))
			if err := core.PutJSON(w, record.JobKey(id), j); err != nil {
				return err
			}
		}
		s.Opts.Logger.Info("parallel replacement: parity gate", "job_id", newID, "old_job_id", oldID, "outcome", a.Outcome, "report", a.Note)
		return tx.Apply(w)
	})
}

// gateDetails are a parity_gate event's details.
func gateDetails(g *record.ParityGate, newID, oldID string) map[string]any {
	f := g.Last
	d := map[string]any{"outcome": g.Outcome, "windows_compared": f.WindowsCompared, "rows_compared": f.RowsCompared,
		"differing_rows": f.Differing, "consecutive_windows_agreed": f.Agreed, "budget": g.Budget, "windows": g.Windows,
		"old_job_id": oldID, "new_job_id": newID}
	if f.OldWatermark != nil {
		d["old_watermark"] = f.OldWatermark.UTC().Format(time.RFC3339Nano)
	}
	if f.NewWatermark != nil {
		d["new_watermark"] = f.NewWatermark.UTC().Format(time.RFC3339Nano)
	}
	if len(f.Examples) > 0 {
		d["examples"] = f.Examples
	}
	return d
}

// revealNew reveals the new generation of nj's flow in every façade view
// (flowstep.RevealNew), then records it on both jobs. Revealing is
// idempotent, so a crash between the two repeats it.
func (s *Replace) revealNew(ctx context.Context, nj *record.Job) error {
	flow := nj.Replacement.Parallel
	for _, t := range flow.Tables {
		if err := s.sql.RevealFacadeGeneration(ctx, s.FacadeTarget(t), nj.Generation); err != nil {
			return fmt.Errorf("revealing generation %d in the view %s: %w", nj.Generation, t.Table, err)
		}
	}
	return s.Update(func(tx *core.Tx) error {
		w := &state.Write{}
		for _, id := range []string{nj.ID, nj.Replacement.OldJobID} {
			j, err := s.ReadJob(id)
			if err != nil {
				return err
			}
			if j.Replacement == nil || j.Replacement.NewJobID != nj.ID || j.Replacement.Parallel == nil || j.Replacement.Parallel.Gate == nil {
				continue
			}
			j.Replacement.Parallel.Gate.Revealed = true
			if err := core.PutJSON(w, record.JobKey(id), j); err != nil {
				return err
			}
		}
		s.Opts.Logger.Info("parallel replacement: the new generation is visible in the views", "job_id", nj.ID, "generation", nj.Generation)
		return tx.Apply(w)
	})
}
