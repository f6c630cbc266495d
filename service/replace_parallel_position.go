package service

// Where the new job of a parallel replacement starts reading: its own
// subscriptions, positioned at the old job's (or at the rewind point),
// with the cut-over time T0 of the window ownership rule.

import (
	"context"
	"errors"
	"fmt"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/io/pubsub"
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
func (s *Service) positionSubscriptions(ctx context.Context, pb parallelBroker, newID string) error {
	nj, err := s.readJob(newID)
	if err != nil {
		return err
	}
	flow := nj.Replacement.Parallel
	if len(flow.Subscriptions) > 0 && flow.Subscriptions[0].Positioned {
		return nil
	}
	snaps := make([]string, len(flow.Subscriptions))
	defer func() {
		for _, snap := range snaps {
			if snap == "" {
				continue
			}
			if err := pb.DeleteSubscriptionSnapshot(ctx, snap); err != nil && !errors.Is(err, pubsub.ErrSnapshotNotFound) {
				s.opts.Logger.Warn("parallel replacement: deleting a positioning snapshot", "snapshot", snap, "error", err)
			}
		}
	}()
	for i, ps := range flow.Subscriptions {
		snap := pubsub.SubscriptionName(nj.ID+"--at", ps.Step)
		_ = pb.DeleteSubscriptionSnapshot(ctx, snap) // a leftover of a crash
		if _, err := pb.CreateSubscriptionSnapshot(ctx, snap, ps.Old); err != nil {
			return fmt.Errorf("taking the position of subscription %s: %w", ps.Old, err)
		}
		snaps[i] = snap
	}
	// T0, read after the positions: the old job has read at least to them.
	var cut mtime.Time
	var rp *RewindPoint
	if nj.Replacement.Rewind {
		// The re-read starts at the rewind point of the old job's last
		// checkpoint (service/rewind.go); its first pane of every window it
		// emits is complete. It publishes (Pub/Sub) the windows that start
		// at or after the old job's watermark now (none of them fired in
		// the old job yet), less 1ms for the rule's "after T0".
		old, err := s.readJob(nj.Replacement.OldJobID)
		if err != nil {
			return err
		}
		g, err := graph.Parse(nj.Graph)
		if err != nil {
			return internalf("job %s: its graph does not parse: %w", nj.ID, err)
		}
		p, err := s.rewindPoint(ctx, old, g)
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
		jr := s.runningJob(nj.Replacement.OldJobID)
		if jr == nil {
			return errNotYet
		}
		known := false
		for name, code := range jr.prog.Code {
			if st := jr.prog.Graph.Step(name); st == nil || st.Kind != graph.KindSource {
				continue
			}
			if r, ok := code.(maxEventReporter); ok {
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
		if _, err := pb.EnsureSubscription(ctx, ps.New, ps.Topic, pubsub.SubscriptionConfig{AckWait: info.AckWait}); err != nil {
			return fmt.Errorf("creating subscription %s for job %s: %w", ps.New, nj.ID, err)
		}
		res, err := pb.Seek(ctx, ps.New, pubsub.SeekTarget{Snapshot: snaps[i]})
		if err != nil {
			return fmt.Errorf("positioning subscription %s at %s's position: %w", ps.New, ps.Old, err)
		}
		s.opts.Logger.Info("parallel replacement: subscription positioned", "job_id", nj.ID, "subscription", ps.New, "from", ps.Old, "ack_floor", res.AckFloor, "backlog", res.Backlog)
		if rp == nil {
			continue
		}
		for _, rs := range rp.Sources {
			if rs.Subscription != ps.New {
				continue
			}
			rw, ok := s.rewinder()
			if !ok {
				return errorf(CodeRewindBeyondRetention, "this server has no Pub/Sub broker that can re-read a topic")
			}
			if err := rw.SeekToSequence(ctx, ps.New, rs.FirstSequence); err != nil {
				return fmt.Errorf("positioning subscription %s of topic %s at sequence %d for the re-read: %w", ps.New, rs.Topic, rs.FirstSequence, err)
			}
			s.opts.Logger.Info("parallel replacement: re-reading", "job_id", nj.ID, "subscription", ps.New, "first_seq", rs.FirstSequence, "last_seq_of_old_job", rs.LastSequence, "from_time", rs.FromTime)
		}
	}
	s.mu.Lock() // lock order 3
	defer s.mu.Unlock()
	if nj, err = s.readJob(newID); err != nil {
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
	if err := putJSON(w, jobKey(nj.ID), nj); err != nil {
		return err
	}
	if err := s.applyLocked(w); err != nil {
		return err
	}
	s.opts.Logger.Info("parallel replacement: cut-over time", "job_id", nj.ID, "cut_time", flow.CutTime, "old_job_id", nj.Replacement.OldJobID)
	return nil
}
