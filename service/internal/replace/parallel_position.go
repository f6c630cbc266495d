package replace

// Where the new job of a parallel replacement starts reading: its own
// subscriptions, positioned at the old job's (or at the rewind point),
// with the cut-over time T0 of the window ownership rule.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/state"
)

// positionSubscriptions creates each new subscription of the flow of job
// newID and moves it to where the old job's stands (its acknowledged
// position), and records them positioned with T0, the newest event time
// the old job's sources produced after those positions were taken. It
// runs before the new job starts, so doing it again after a crash is
// harmless. errNotYet: the old job's execution has not produced an
// element yet (it resumes, or no message came since it started).
func (s *Replace) positionSubscriptions(ctx context.Context, pb parallelBroker, newID string) error {
	nj, err := s.ReadJob(newID)
	if err != nil {
		return err
	}
	flow := nj.Replacement.Parallel
	if parallelPositioned(flow) {
		return nil
	}
	// Wait without taking snapshots while the old job has produced
	// nothing yet: each snapshot wakes the flow's driver again, which
	// turned the wait into a loop of snapshots created and deleted.
	if !s.oldJobHasRead(nj) {
		return errNotYet
	}
	snaps := make([]string, len(flow.Subscriptions))
	defer func() {
		for _, snap := range snaps {
			if snap == "" {
				continue
			}
			if err := pb.DeleteSubscriptionSnapshot(ctx, snap); err != nil && !errors.Is(err, contract.ErrSnapshotNotFound) {
				s.Opts.Logger.Warn("parallel replacement: deleting a positioning snapshot", "snapshot", snap, "error", err)
			}
		}
	}()
	for i, ps := range flow.Subscriptions {
		snap := contract.SubscriptionName(nj.ID+"--at", ps.Step)
		_ = pb.DeleteSubscriptionSnapshot(ctx, snap) // a leftover of a crash
		if _, err := pb.CreateSubscriptionSnapshot(ctx, snap, ps.Old); err != nil {
			return fmt.Errorf("taking the position of subscription %s: %w", ps.Old, err)
		}
		snaps[i] = snap
	}
	// T0, read after the positions: the old job has read at least to them.
	var cut mtime.Time
	var rp *record.RewindPoint
	if nj.Replacement.Rewind {
		// The re-read starts at the rewind point of the old job's last
		// checkpoint (service/rewind.go); its first pane of every window it
		// emits is complete. It publishes (Pub/Sub) the windows that start
		// at or after the old job's watermark now (none of them fired in
		// the old job yet), less 1ms for the rule's "after T0".
		old, err := s.ReadJob(nj.Replacement.OldJobID)
		if err != nil {
			return err
		}
		g, err := graph.Parse(nj.Graph)
		if err != nil {
			return errcode.Internalf("job %s: its graph does not parse: %w", nj.ID, err)
		}
		p, err := s.rewind.Point(ctx, old, g)
		if err != nil {
			return err
		}
		wm, ok := s.dataWatermark(old.ID)
		if !ok || wm <= mtime.MinTimestamp {
			return errNotYet
		}
		cut = max(mtime.FromTime(p.SkipBefore), min(wm, mtime.MaxTimestamp-1)) - 1
		for i := range p.Sources {
			for _, ps := range flow.Subscriptions {
				if ps.Old == p.Sources[i].Subscription {
					p.Sources[i].Subscription = ps.New
				}
			}
		}
		rp = &p
	} else {
		jr := s.RunningJob(nj.Replacement.OldJobID)
		if jr == nil {
			return errNotYet
		}
		known := false
		for name, code := range jr.Prog.Code {
			if st := jr.Prog.Graph.Step(name); st == nil || st.Kind != graph.KindSource {
				continue
			}
			if r, ok := code.(contract.MaxEventTimeReporter); ok {
				if t, ok := r.MaxEventTime(); ok {
					cut, known = max(cut, t), true
				}
			}
		}
		if !known {
			return errNotYet
		}
	}
	for i, ps := range flow.Subscriptions {
		info, err := pb.Subscription(ctx, ps.Old)
		if err != nil {
			return fmt.Errorf("reading subscription %s of job %s: %w", ps.Old, nj.Replacement.OldJobID, err)
		}
		if _, err := pb.EnsureSubscription(ctx, ps.New, ps.Topic, contract.SubscriptionConfig{AckWait: info.AckWait}); err != nil {
			return fmt.Errorf("creating subscription %s for job %s: %w", ps.New, nj.ID, err)
		}
		res, err := pb.Seek(ctx, ps.New, contract.SeekTarget{Snapshot: snaps[i]})
		if err != nil {
			return fmt.Errorf("positioning subscription %s at %s's position: %w", ps.New, ps.Old, err)
		}
		s.Opts.Logger.Info("parallel replacement: subscription positioned", "job_id", nj.ID, "subscription", ps.New, "from", ps.Old, "ack_floor", res.AckFloor, "backlog", res.Backlog)
		if rp == nil {
			continue
		}
		for _, rs := range rp.Sources {
			if rs.Subscription != ps.New {
				continue
			}
			rw, ok := s.rewind.Broker()
			if !ok {
				return errcode.Errorf(errcode.RewindBeyondRetention, "this server has no Pub/Sub broker that can re-read a topic")
			}
			if err := rw.SeekToSequence(ctx, ps.New, rs.FirstSequence); err != nil {
				return fmt.Errorf("positioning subscription %s of topic %s at sequence %d for the re-read: %w", ps.New, rs.Topic, rs.FirstSequence, err)
			}
			s.Opts.Logger.Info("parallel replacement: re-reading", "job_id", nj.ID, "subscription", ps.New, "first_seq", rs.FirstSequence, "last_seq_of_old_job", rs.LastSequence, "from_time", rs.FromTime)
		}
	}
	return s.Update(func(tx *core.Tx) error {
		if nj, err = s.ReadJob(newID); err != nil {
			return err
		}
		flow = nj.Replacement.Parallel
		for i := range flow.Subscriptions {
			flow.Subscriptions[i].Positioned = true
		}
		nj.Replacement.RewindPoint = rp
		{
			ct := cut.ToTime()
			flow.CutTime = &ct
			s.cutRuleOf(nj.ID, nj.Replacement.OldJobID, nj.Replacement.Rewind, nil).cut.Store(int64(cut))
		}
		w := &state.Write{}
		if err := core.PutJSON(w, record.JobKey(nj.ID), nj); err != nil {
			return err
		}
		if err := tx.Apply(w); err != nil {
			return err
		}
		s.Opts.Logger.Info("parallel replacement: cut-over time", "job_id", nj.ID, "cut_time", flow.CutTime, "old_job_id", nj.Replacement.OldJobID)
		return nil
	})
}

// parallelOldSource is a Pub/Sub source step of the old job of a parallel
// replacement: what it reads and on which topic.
type parallelOldSource struct {
	identity string // the step's source identity (topic/T or subscription/S)
	topic    string
	// sub is the subscription the old job reads: the one named after the
	// job and step for a topic source, the user's for a step that names
	// one, or the one an earlier replacement gave the step
	// (job.subscriptions).
	sub string
	// named: sub is the user's named subscription, never deleted by the
	// service.
	named bool
}

// parallelOldSources returns the Pub/Sub sources of old (its graph og) by
// step. A named subscription's topic is the broker's; one that cannot be
// read is refused, nothing changed.
func parallelOldSources(ctx context.Context, pb parallelBroker, old *record.Job, og *graph.Pipeline) (map[string]parallelOldSource, error) {
	out := map[string]parallelOldSource{}
	for _, st := range og.Steps {
		if st.Kind != graph.KindSource || st.Source == nil || st.Source.Kind != core.PubSubSourceKind {
			continue
		}
		src := parallelOldSource{identity: st.Source.Identity, sub: old.Subscriptions[st.Name]}
		if t, ok := strings.CutPrefix(st.Source.Identity, "topic/"); ok {
			src.topic = t
			if src.sub == "" {
				src.sub = contract.SubscriptionName(old.Name, st.Name)
			}
			out[st.Name] = src
			continue
		}
		if src.sub == "" {
			src.sub, src.named = strings.TrimPrefix(st.Source.Identity, "subscription/"), true
		}
		info, err := pb.Subscription(ctx, src.sub)
		if err != nil {
			return nil, errcode.Errorf(errcode.ReplacementUnavailable, "step %s of job %s (%s) reads subscription %s, whose topic cannot be read (%v), so the new job cannot be given a subscription of its own on it: check the subscription (weir subscriptions describe %s); job %s was not changed",
				st.Name, old.Name, old.ID, src.sub, err, src.sub, old.ID)
		}
		src.topic = info.Topic
		out[st.Name] = src
	}
	return out, nil
}

// parallelNewTopic returns the topic the new pipeline's Pub/Sub source st
// reads and, for a step that names a subscription S, S (which the new job
// does not read: it reads a subscription of its own on S's topic). S's
// topic is the old job's when one of its steps names S too (S may be gone
// since an earlier replacement, the step reading the service's), else the
// broker's.
func parallelNewTopic(ctx context.Context, pb parallelBroker, old *record.Job, oldSrcs map[string]parallelOldSource, st *graph.Step) (topic, named string, err error) {
	if t, ok := strings.CutPrefix(st.Source.Identity, "topic/"); ok {
		return t, "", nil
	}
	named = strings.TrimPrefix(st.Source.Identity, "subscription/")
	for _, src := range oldSrcs {
		if src.identity == st.Source.Identity {
			return src.topic, named, nil
		}
	}
	info, err := pb.Subscription(ctx, named)
	if err != nil {
		return "", "", errcode.Errorf(errcode.ReplacementUnavailable, "step %s of the new pipeline reads subscription %s, whose topic cannot be read (%v): create the subscription on the topic to read (weir subscriptions create %s --topic T), or read the topic (ReadFromPubSub topic: T); job %s (%s) was not changed",
			st.Name, named, err, named, old.Name, old.ID)
	}
	return info.Topic, named, nil
}

// namedSubscriptionNotes says, for the replacement record, what a
// parallel replacement does with the named subscriptions of its jobs: the
// new job reads its own subscription in place of the one its step names,
// and the old job's named subscription is the user's, kept but no longer
// read once the old job ended.
func namedSubscriptionNotes(old *record.Job, subs []record.ParallelSubscription) []string {
	var notes []string
	for _, ps := range subs {
		if ps.InsteadOf != "" {
			notes = append(notes, fmt.Sprintf("step %s of the new job reads subscription %s, which the service created on topic %s, in place of the named subscription %s, so that it takes no message from job %s; its successors keep reading %s (weir jobs describe shows job.subscriptions)",
				ps.Step, ps.New, ps.Topic, ps.InsteadOf, old.ID, ps.New))
		}
	}
	for _, ps := range subs {
		if ps.OldNamed {
			notes = append(notes, fmt.Sprintf("subscription %s, which job %s reads, is the user's: the service never deletes it, and once job %s ended no job reads it any more, so its backlog grows until the topic's retention discards messages; a rollback to job %s's generation (weir jobs rollback) re-reads it, so delete it (weir subscriptions delete %s) once you no longer need that rollback and no other reader uses it",
				ps.Old, old.ID, old.ID, old.ID, ps.Old))
		}
	}
	return notes
}

// oldJobHasRead reports whether the old job of nj's parallel flow has
// what positionSubscriptions needs to record T0: a data watermark (the
// re-read) or a source's newest event time (weir_replace_rewind=false).
// Neither goes back once known, so the positioning that follows finds it
// too.
func (s *Replace) oldJobHasRead(nj *record.Job) bool {
	if nj.Replacement.Rewind {
		wm, ok := s.dataWatermark(nj.Replacement.OldJobID)
		return ok && wm > mtime.MinTimestamp
	}
	jr := s.RunningJob(nj.Replacement.OldJobID)
	if jr == nil {
		return false
	}
	for name, code := range jr.Prog.Code {
		if st := jr.Prog.Graph.Step(name); st == nil || st.Kind != graph.KindSource {
			continue
		}
		if r, ok := code.(contract.MaxEventTimeReporter); ok {
			if _, ok := r.MaxEventTime(); ok {
				return true
			}
		}
	}
	return false
}
