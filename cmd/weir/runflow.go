package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/serviceopt"
)

// followReplacement follows the replacement flow of new job j, printing
// each phase it passes on stderr with the time elapsed against the
// maximum stop duration, and returns at its final phase: nil at CUT_OVER,
// an error (exit 1) at ROLLED_BACK or FAILED.
func followReplacement(ctx context.Context, e *env, c *client.Client, j *client.Job) error {
	return followFlow(ctx, e, c, j, client.PhaseCutOver)
}

// followFlow is followReplacement ending with nil at the final phase
// success, an error (exit 1) at any other final phase. j may be either
// job of the flow (a rollback during an overlap answers the kept old
// job); the lines name the flow's old and new jobs from its record.
func followFlow(ctx context.Context, e *env, c *client.Client, j *client.Job, success client.ReplacementPhase) error {
	t := time.NewTicker(submitWaitPoll)
	defer t.Stop()
	var last client.ReplacementPhase
	printed := map[client.ReplacementPhase]bool{}
	pr := &progressPrinter{w: e.stderr, tty: isTerminal(e.stderr)}
	defer pr.end()
	notes := 0
	for {
		r := j.Replacement
		if r.Phase == last {
			pr.show(r)
		}
		if r.Phase != last {
			pr.end()
			// Phases the flow passed between two polls (a drain that took
			// a few milliseconds) are told from its record, in order.
			for _, ph := range passedPhases(r, printed) {
				fmt.Fprintf(e.stderr, "replacement of job %s by job %s (%s): %s\n", r.OldJobID, flowNewJob(r, j), r.Strategy, ph)
				printed[ph.phase] = true
			}
			printed[r.Phase] = true
			line := fmt.Sprintf("replacement of job %s by job %s (%s): %s", r.OldJobID, flowNewJob(r, j), r.Strategy, r.Phase)
			if r.DrainStart != nil && !r.Phase.Final() {
				// A maximum of 0s is one (the drain gets no time).
				if limit, ok := r.MaxStop(); ok {
					line += fmt.Sprintf(", draining for %s of at most %s", time.Since(*r.DrainStart).Round(time.Millisecond), limit)
				} else {
					line += fmt.Sprintf(", draining for %s (no maximum stop duration)", time.Since(*r.DrainStart).Round(time.Millisecond))
				}
			}
			if r.StopWindowMillis != nil {
				line += fmt.Sprintf(", stop window %d ms", *r.StopWindowMillis)
			}
			fmt.Fprintln(e.stderr, line)
			last = r.Phase
		}
		for ; notes < len(r.Notes); notes++ {
			pr.end()
			fmt.Fprintf(e.stderr, "note: %s\n", r.Notes[notes])
		}
		if r.Phase.Final() && j.State != client.StatePending {
			if r.Phase == success {
				return nil
			}
			msg := fmt.Sprintf("the replacement of job %s by job %s ended %s", r.OldJobID, flowNewJob(r, j), r.Phase)
			if j.Error != "" {
				msg += ": " + j.Error
			}
			return withCode(ExitFailure, errors.New(msg))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		next, err := c.Get(ctx, j.ID)
		if err != nil {
			return clientError(ctx, c, err)
		}
		j = next
	}
}

// passedPhase is a phase a flow went through, told after the fact.
type passedPhase struct {
	phase client.ReplacementPhase
	at    time.Time
	// took is how long the phase lasted, when the next one's start is known.
	took time.Duration
}

func (p passedPhase) String() string {
	s := fmt.Sprintf("%s at %s", p.phase, p.at.UTC().Format("15:04:05.000"))
	if p.took > 0 {
		s += fmt.Sprintf(", for %s", p.took.Round(time.Millisecond))
	}
	return s
}

// passedPhases returns the phases before r's current one that flow r's
// record says it went through (OVERLAP at the new job's start of a
// parallel replacement, DRAINING_OLD at the drain request) and that are
// not yet printed, in order.
func passedPhases(r *client.Replacement, printed map[client.ReplacementPhase]bool) []passedPhase {
	var ps []passedPhase
	if r.Parallel != nil && r.Parallel.OverlapStart != nil {
		ps = append(ps, passedPhase{phase: client.PhaseOverlap, at: *r.Parallel.OverlapStart})
	}
	if r.DrainStart != nil {
		ps = append(ps, passedPhase{phase: client.PhaseDrainingOld, at: *r.DrainStart})
	}
	var out []passedPhase
	for i, p := range ps {
		if p.phase == r.Phase || printed[p.phase] {
			continue
		}
		next := r.PhaseTime
		if i+1 < len(ps) {
			next = ps[i+1].at
		}
		if d := next.Sub(p.at); d > 0 {
			p.took = d
		}
		out = append(out, p)
	}
	return out
}

// flowNewJob is the ID of the new job of flow r, as recorded, else of j.
func flowNewJob(r *client.Replacement, j *client.Job) string {
	if r.NewJobID != "" {
		return r.NewJobID
	}
	return j.ID
}

// progressPrinter prints the progress line of a flow's phase: on a
// terminal rewritten in place at every poll, elsewhere (a log file, a CI
// job) a new line only when what the line says changes beyond its clocks
// (progressState), so that a ten-minute overlap prints a few lines, not
// one a poll.
type progressPrinter struct {
	w         io.Writer
	tty       bool
	lastState string
	inPlace   bool // a line is on the terminal without its newline
}

// show prints r's progress line, if it has one and it is news.
func (p *progressPrinter) show(r *client.Replacement) {
	line := parallelProgressLine(r)
	if line == "" {
		return
	}
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K"+line)
		p.inPlace = true
		return
	}
	if st := progressState(r); st != p.lastState {
		fmt.Fprintln(p.w, line)
		p.lastState = st
	}
}

// end finishes a line rewritten in place, before other lines are printed.
func (p *progressPrinter) end() {
	if p.inPlace {
		fmt.Fprintln(p.w)
		p.inPlace = false
	}
}

// progressState is what a parallel flow's progress line says, without the
// clocks that move at every poll (the overlap's length, the old job's
// watermark): the phase, whether the flow waits for the old job's next
// message, whether the cut-over window and the old job's watermark are
// known, whether the overlap has lasted its minimum and whether the old
// job's watermark has passed the cut-over, and a parity gate's outcome and
// counts.
func progressState(r *client.Replacement) string {
	if r == nil || r.Parallel == nil || r.Parallel.Progress == nil {
		return ""
	}
	p := r.Parallel.Progress
	var b strings.Builder
	fmt.Fprintf(&b, "%s waiting=%v cut=%v wm=%v", r.Phase, p.WaitingForOldMessage, p.CutOverWatermark != nil, p.OldWatermark != nil)
	fmt.Fprintf(&b, " min=%v", p.ElapsedMillis >= p.MinParallelMillis)
	if p.CutOverWatermark != nil && p.OldWatermark != nil {
		fmt.Fprintf(&b, " passed=%v", !p.OldWatermark.Before(*p.CutOverWatermark))
	}
	if g := r.Parallel.Gate; g != nil {
		fmt.Fprintf(&b, " gate=%s/%d/%d/%d", g.Outcome, g.Last.WindowsCompared, g.Last.Agreed, g.Last.Differing)
	}
	return b.String()
}

// parallelProgressLine is the progress of a parallel replacement's
// overlap as `weir run --wait` prints it: the overlap against
// min_parallel_pipelines_duration and the old job's watermark against the
// one it must pass to be drained, a parity gate's last figures, and in
// PREPARING that the flow waits
// for the old job's next message; "" when there is nothing to show. The
// elapsed time is shown in whole seconds.
func parallelProgressLine(r *client.Replacement) string {
	if r == nil || r.Parallel == nil || r.Parallel.Progress == nil {
		return ""
	}
	p := r.Parallel.Progress
	if r.Phase == client.PhasePreparing && p.WaitingForOldMessage {
		return fmt.Sprintf("parallel: waiting for job %s's next message to fix the cut-over time (it has read none since it started, e.g. after a restart; the new job starts once a message arrives on its topic)", r.OldJobID)
	}
	if r.Phase != client.PhaseOverlap {
		return ""
	}
	line := fmt.Sprintf("parallel: overlap %s of at least %s", (time.Duration(p.ElapsedMillis) * time.Millisecond).Truncate(time.Second), time.Duration(p.MinParallelMillis)*time.Millisecond)
	switch {
	case p.CutOverWatermark == nil:
		line += "; the cut-over window is not known yet"
	case p.OldWatermark == nil:
		line += fmt.Sprintf("; old job's watermark unknown, the cut-over needs %s", p.CutOverWatermark.Format(time.RFC3339Nano))
	default:
		line += fmt.Sprintf("; old job's watermark %s, the cut-over needs %s", p.OldWatermark.Format(time.RFC3339Nano), p.CutOverWatermark.Format(time.RFC3339Nano))
	}
	if g := r.Parallel.Gate; g != nil {
		line += fmt.Sprintf("; parity gate %s: %d of %d consecutive complete windows agreed (%d windows compared, %d differing rows, budget %d)",
			g.Outcome, g.Last.Agreed, g.Windows, g.Last.WindowsCompared, g.Last.Differing, g.Budget)
	}
	return line
}

// inPlaceRequest reports whether service options (already checked) ask for
// no replacement job: neither update_strategy_parallel_job_update nor a
// new name.
func inPlaceRequest(values []string) bool {
	o, err := serviceopt.Parse(values)
	return err == nil && !o.ParallelUpdate && o.ReplaceJobName == "" && o.ReplaceJobID == ""
}
