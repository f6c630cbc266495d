package service

import (
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/io/pubsub"
)

// A re-reading replacement job keeps its guarantee while it catches up
// (issue 10 item 2), whatever happens to it before it has read the old
// job's last message (RewindStart.HoldUntil):
//
//   - a restart (clean or after a crash) and a rescale keep the job ID and
//     its Replacement record, so every execution loads its Pub/Sub sources
//     with the same RewindStart (loadYAML): a split resumed from a
//     checkpointed position below HoldUntil holds its watermark at −∞ as
//     the first execution did, skips by SkipBefore, and the sinks keep the
//     window ownership (rewindOwns); the keyed steps hold their panes
//     (runner.Options.HoldPanesAtMinWatermark);
//   - an in-place update creates a job with a new ID and no Replacement:
//     when a source of the running job still catches up at the update's
//     check, the new job carries the re-read on (Job.CatchUp, copied from
//     the running job's rewind) and loads exactly as the replacement job
//     did; a split that has caught up in the meantime does not hold again
//     (its position is at or past HoldUntil), SkipBefore and the ownership
//     keep applying for the new job's life as they did for the replacement
//     job's. An update after the catch-up carries nothing;
//   - a drain reads every split that still catches up on up to HoldUntil
//     before the watermark goes to +∞ (runner.CatchingUpSplit): the old
//     job had read every one of those messages, so the drain's panes are
//     complete for them instead of replacing the old job's totals with
//     partial ones (Dataflow's drain emits partial windows for data not
//     yet processed; this data was);
//   - the progress shows in the source step's metrics (catch_up: the last
//     sequence read and HoldUntil), so a user knows when the re-read is
//     done.

// CatchUp is the re-read a job carries on from the replacement job it
// updates in place while that job was still catching up.
type CatchUp struct {
	// FromJobID is the replacement job whose re-read this is.
	FromJobID string `json:"from_job_id"`
	// RewindPoint is that job's (its SkipBefore bounds the windows the job
	// owns, rewindOwns).
	RewindPoint *RewindPoint `json:"rewind_point"`
	// Starts are the RewindStarts of its Pub/Sub splits, by subscription.
	Starts map[string]pubsub.RewindStart `json:"starts"`
}

// rewindOf returns the re-read j's Pub/Sub splits do: a replacement job's
// own (its Replacement), or the one an in-place update carried on
// (j.CatchUp); nil when j re-reads nothing.
func rewindOf(j *Job) *CatchUp {
	if r := j.Replacement; r != nil && r.Rewind && r.NewJobID == j.ID && r.RewindPoint != nil {
		return &CatchUp{FromJobID: j.ID, RewindPoint: r.RewindPoint, Starts: rewindStarts(r.RewindPoint, r.Handover)}
	}
	return j.CatchUp
}

// CatchUpReporter is implemented by source code that re-reads for a
// replacement job (*pubsub.Source): how far its catch-up is.
type CatchUpReporter interface {
	// CatchUp returns the progress, or false when the source does not
	// re-read.
	CatchUp() (pubsub.CatchUp, bool)
}

var _ CatchUpReporter = (*pubsub.Source)(nil)

// SourceCatchUp is a re-reading source's progress (StepMetrics.CatchUp).
type SourceCatchUp struct {
	// ReadSequence is the last stream sequence the source read.
	ReadSequence uint64 `json:"read_seq"`
	// HoldUntil is the last sequence the old job read: until the source
	// has read it, its watermark is held and no pane fires.
	HoldUntil uint64 `json:"hold_until_seq"`
	// CaughtUp says the re-read is done.
	CaughtUp bool `json:"caught_up"`
}

// catchUpOf returns the progress of a source's code, or nil.
func catchUpOf(code any) *SourceCatchUp {
	cr, ok := code.(CatchUpReporter)
	if !ok {
		return nil
	}
	c, ok := cr.CatchUp()
	if !ok {
		return nil
	}
	return &SourceCatchUp{ReadSequence: c.ReadSeq, HoldUntil: c.HoldUntil, CaughtUp: !c.Holding}
}

// carriedCatchUp returns what the in-place update of old, running as jr,
// carries on (Job.CatchUp): old's re-read when one of its sources still
// catches up, else nil.
func carriedCatchUp(old *Job, jr *jobRun) *CatchUp {
	cu := rewindOf(old)
	if cu == nil {
		return nil
	}
	for _, st := range jr.prog.Graph.Steps {
		if st.Kind != graph.KindSource {
			continue
		}
		if c := catchUpOf(jr.prog.Code[st.Name]); c != nil && !c.CaughtUp {
			return cu
		}
	}
	return nil
}
