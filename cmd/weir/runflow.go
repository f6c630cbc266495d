package main

import (
	"context"
	"errors"
	"fmt"
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
	var lastProgress string
	notes := 0
	for {
		r := j.Replacement
		if p := parallelProgressLine(r); p != "" && p != lastProgress && r.Phase == last {
			fmt.Fprintln(e.stderr, p)
			lastProgress = p
		}
		if r.Phase != last {
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

// flowNewJob is the ID of the new job of flow r, as recorded, else of j.
func flowNewJob(r *client.Replacement, j *client.Job) string {
	if r.NewJobID != "" {
		return r.NewJobID
	}
	return j.ID
}

// parallelProgressLine is the progress of a parallel replacement's
// overlap as `weir run --wait` prints it: the overlap against
// min_parallel_pipelines_duration and the old job's watermark against the
// one it must pass to be drained, and in PREPARING that the flow waits
// for the old job's next message; "" when there is nothing to show. The
// elapsed time is shown in whole seconds, so a line is printed about once
// a second while it changes.
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
	return line
}

// inPlaceRequest reports whether service options (already checked) ask for
// no replacement job: neither update_strategy_parallel_job_update nor a
// new name.
func inPlaceRequest(values []string) bool {
	o, err := serviceopt.Parse(values)
	return err == nil && !o.ParallelUpdate && o.ReplaceJobName == "" && o.ReplaceJobID == ""
}
