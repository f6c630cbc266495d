package rewind

import (
	"fmt"

	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/runner/contract"

	"github.com/weir-dev/weir/graph"
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
//     done;
//   - when the topic no longer holds part of what the re-read must read
//     (retention, a size limit or a purge dropped it after the
//     replacement began: rewindPoint refuses a topic that had already
//     dropped its first message), the split goes on past the gap, and when
//     nothing up to HoldUntil is left it stops holding (otherwise its
//     watermark stayed at −∞ and a drain waited for the catch-up
//     forever). The windows holding those messages then fire without
//     them: the job records a catch_up_expired warning event with the
//     count, the service logs it at warn, and the count shows in the
//     metrics (catch_up.expired_messages).

// Of returns the re-read j's Pub/Sub splits do: a replacement job's
// own (its Replacement), or the one an in-place update carried on
// (j.CatchUp); nil when j re-reads nothing.
func Of(j *record.Job) *record.CatchUp {
	if r := j.Replacement; r != nil && r.Rewind && r.NewJobID == j.ID && r.RewindPoint != nil {
		return &record.CatchUp{FromJobID: j.ID, RewindPoint: r.RewindPoint, Starts: rewindStarts(r.RewindPoint, r.Handover)}
	}
	return j.CatchUp
}

// reportCatchUpExpired makes the re-reading sources of prog, j's program
// run as jr, record what their re-read found gone (catchUpExpired). Called
// for every execution before it starts.
func (s *Rewind) reportCatchUpExpired(j *record.Job, prog *contract.Program, jr *core.Run) {
	if !rewindsInput(j) {
		return
	}
	for _, st := range prog.Graph.Steps {
		if st.Kind != graph.KindSource {
			continue
		}
		if r, ok := prog.Code[st.Name].(contract.ReReadingSource); ok {
			r.OnCatchUpExpired(s.catchUpExpired(jr))
		}
	}
}

// catchUpExpired returns what records, for the job jr runs, that a source's re-read
// went on without messages the topic no longer held: a warning event and
// a log line. Nothing is lost silently: the old job had read those
// messages, so the windows holding them fire without them. The event
// follows the job's start (emitRun).
func (s *Rewind) catchUpExpired(jr *core.Run) func(contract.CatchUpExpired) {
	id, name := jr.ID, jr.Name
	return func(e contract.CatchUpExpired) {
		gone := fmt.Sprintf("%d messages the old job had read (sequences %d to %d)", e.Messages, e.FirstSeq, e.LastSeq)
		if e.Messages == 1 {
			gone = fmt.Sprintf("1 message the old job had read (sequence %d)", e.FirstSeq)
		}
		then := fmt.Sprintf("the re-read goes on at sequence %d", e.NextSeq)
		if e.LastSeq >= e.HoldUntil {
			then = fmt.Sprintf("the catch-up ended there, short of the old job's last message (sequence %d): its watermark is no longer held", e.HoldUntil)
		}
		msg := fmt.Sprintf("source %s re-reads topic %s for the replacement, but %s are no longer in the topic (its retention, a size limit or a purge dropped them): %s, and the windows holding those messages fire without them. Keep a topic's messages longer than a replacement's re-read takes",
			e.Step, e.Topic, gone, then)
		s.Opts.Logger.Warn("re-read: messages the old job had read are no longer in the topic's retention", "job_id", id, "job_name", name,
			"step", e.Step, "topic", e.Topic, "subscription", e.Subscription, "expired_messages", e.Messages,
			"first_seq", e.FirstSeq, "last_seq", e.LastSeq, "hold_until_seq", e.HoldUntil, "next_seq", e.NextSeq)
		s.EmitRun(jr, record.EventCatchUpExpired, record.SeverityWarning, msg, map[string]any{"step": e.Step, "topic": e.Topic, "subscription": e.Subscription,
			"expired_messages": e.Messages, "first_seq": e.FirstSeq, "last_seq": e.LastSeq, "hold_until_seq": e.HoldUntil, "next_seq": e.NextSeq})
	}
}

// CarriedCatchUp returns what the in-place update of old, running as jr,
// carries on (Job.CatchUp): old's re-read when one of its sources still
// catches up, else nil.
func CarriedCatchUp(old *record.Job, jr *core.Run) *record.CatchUp {
	cu := Of(old)
	if cu == nil {
		return nil
	}
	for _, st := range jr.Prog.Graph.Steps {
		if st.Kind != graph.KindSource {
			continue
		}
		if c := core.CatchUpOf(jr.Prog.Code[st.Name]); c != nil && !c.CaughtUp {
			return cu
		}
	}
	return nil
}
