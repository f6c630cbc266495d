package replace

// The end of a parallel replacement (replace_parallel.go has its start
// and overlap): the cut-over, the compaction of the old generation's rows
// into the new job's tables after the rollback retention, and giving the
// flow up (the new job failed, or a rollback during the overlap).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/state"
)

// FacadeTarget is the façade table t as the SQL table administration
// addresses it.
func (s *Replace) FacadeTarget(t record.FacadeTable) contract.FacadeTable {
	return contract.FacadeTable{Driver: t.Driver, DSN: t.DSN, Table: t.Table}
}

// parallelCutOver completes the flow of job newID once the old job ended:
// its façade generations ended, the subscriptions the service created for
// it deleted, CUT_OVER on both jobs. Each step is idempotent (a crash
// repeats it).
func (s *Replace) parallelCutOver(ctx context.Context, newID string) error {
	nj, err := s.ReadJob(newID)
	if err != nil {
		return err
	}
	rep := nj.Replacement
	flow := rep.Parallel
	old, err := s.ReadJob(rep.OldJobID)
	if err != nil {
		return err
	}
	if _, err := s.endOldGenerations(ctx, flow, nj.Generation); err != nil {
		return err
	}
	if pb, ok := s.Opts.Broker.(parallelBroker); ok {
		for i := range flow.Subscriptions {
			ps := &flow.Subscriptions[i]
			if ps.OldDeleted || ps.OldNamed {
				continue // the user's named subscription is never deleted
			}
			if err := pb.DeleteSubscription(ctx, ps.Old); err != nil && !errors.Is(err, contract.ErrSubscriptionNotFound) {
				return fmt.Errorf("deleting subscription %s of job %s: %w", ps.Old, old.ID, err)
			}
			ps.OldDeleted = true
		}
	}
	return s.Update(func(tx *core.Tx) error {
		cur, err := s.ReadJob(newID)
		if err != nil {
			return err
		}
		if cur.Replacement.Phase.Final() {
			return nil
		}
		now := s.Now()
		cur.Replacement.Parallel.Subscriptions, cur.Replacement.Parallel.Tables = flow.Subscriptions, flow.Tables
		cur.Replacement.Phase, cur.Replacement.PhaseTime, cur.Replacement.Parallel.OldEnded = record.PhaseCutOver, now, &now
		if cur.Replacement.DrainStart != nil {
			ms := now.Sub(*cur.Replacement.DrainStart).Milliseconds()
			cur.Replacement.StopWindowMillis = &ms
		}
		if old.State != record.StateDrained {
			cur.Replacement.Notes = append(cur.Replacement.Notes, fmt.Sprintf("job %s ended %s", old.ID, old.State))
		}
		if old, err = s.ReadJob(old.ID); err != nil {
			return err
		}
		oldRep := *cur.Replacement
		old.Replacement = &oldRep
		w := &state.Write{}
		addPhaseEvents(tx, w, cur, old)
		if err := core.PutJSON(w, record.JobKey(cur.ID), cur); err != nil {
			return err
		}
		if err := core.PutJSON(w, record.JobKey(old.ID), old); err != nil {
			return err
		}
		// The compaction waits for the rollback retention; should a later flow
		// take this record over meanwhile, the façade sweep does it
		// (facade_sweep.go).
		if err := s.PutFacadeSweeps(w, flow.Tables, old.Name, cur.Name); err != nil {
			return err
		}
		if err := tx.Apply(w); err != nil {
			return errcode.Internalf("recording the cut-over of job %s: %w", cur.ID, err)
		}
		s.Opts.Logger.Info("parallel replacement: cut over", "job_id", cur.ID, "old_job_id", old.ID)
		return nil
	})
}

// endOldGenerations records every generation older than the new job's
// (newGen) ended in each table of flow not done yet, and reports whether
// all are. Not just the old job's: a plain append table migrated behind
// the view becomes generation newGen-1 (its rows carry none), which is the
// old job's only when the generations are consecutive (a replacement under
// a name that had jobs before is not), and the old job's own generation is
// behind the view only if it wrote after the migration. A table not yet a
// view (the new job has not committed to it) waits.
func (s *Replace) endOldGenerations(ctx context.Context, flow *record.ParallelFlow, newGen int64) (bool, error) {
	oldGen := newGen - 1
	all := true
	for i := range flow.Tables {
		t := &flow.Tables[i]
		if t.OldEnded {
			continue
		}
		err := s.sql.EndFacadeGeneration(ctx, s.FacadeTarget(*t), oldGen, time.Time{})
		switch {
		case err == nil:
			t.OldEnded = true
		case errors.Is(err, contract.ErrFacade):
			all = false // not a view yet: once the new job committed
		default:
			return false, fmt.Errorf("recording the end of generation %d in %s: %w", oldGen, t.Table, err)
		}
	}
	return all, nil
}

// endGenerationsStep records, after CUT_OVER, the old generations ended in
// the tables of nj's flow (flowstep.EndOldGenerations); complete once
// every table has.
func (s *Replace) endGenerationsStep(ctx context.Context, nj *record.Job) (bool, error) {
	flow := nj.Replacement.Parallel
	all, err := s.endOldGenerations(ctx, flow, nj.Generation)
	if err != nil {
		return false, err
	}
	if err := s.updateFlow(nj.ID, func(f *record.ParallelFlow) { f.Tables = flow.Tables }); err != nil {
		return s.flowGone(nj, s.sweepGoneFlow(nj, err))
	}
	return all, nil
}

// compactTables merges the old generations' rows into the new job's
// tables of nj's flow (flowstep.Compact, once the rollback retention has
// passed); complete once every table is compacted and the flow records it.
func (s *Replace) compactTables(ctx context.Context, nj *record.Job) (bool, error) {
	flow := nj.Replacement.Parallel
	for _, t := range flow.Tables {
		rep, err := s.sql.CompactFacade(ctx, s.FacadeTarget(t), nj.Generation, s.Opts.RollbackRetention)
		if err != nil {
			return false, fmt.Errorf("compacting %s into generation %d: %w", t.Table, nj.Generation, err)
		}
		s.Opts.Logger.Info("parallel replacement: old generation compacted", "job_id", nj.ID, "table", t.Table, "merged", rep.Merged, "rows", rep.Rows, "waiting", rep.Waiting)
		if len(rep.Waiting) > 0 {
			return false, nil
		}
	}
	return s.flowGone(nj, s.sweepGoneFlow(nj, s.updateFlow(nj.ID, func(f *record.ParallelFlow) { f.Compacted = true })))
}

// flowGone is the end of a compaction step whose result err is: a later
// flow took nj's record over (a rollback of the job) and decides what
// happens to the tables, so nothing more is compacted and the driver is
// done; any other error is tried again.
func (s *Replace) flowGone(nj *record.Job, err error) (bool, error) {
	if errors.Is(err, errFlowGone) {
		s.Opts.Logger.Info("parallel replacement: the flow's record was replaced by a later flow; not compacting", "job_id", nj.ID)
		return true, nil
	}
	return err == nil, err
}

// sweepGoneFlow hands the tables of nj's flow to the façade sweep when err
// says a later flow took nj's record over (a record cut over before the
// cut-over wrote sweep entries has none), and returns err.
func (s *Replace) sweepGoneFlow(nj *record.Job, err error) error {
	if !errors.Is(err, errFlowGone) {
		return err
	}
	names := []string{nj.Name}
	if old, rerr := s.ReadJob(nj.Replacement.OldJobID); rerr == nil {
		names = append(names, old.Name)
	}
	return s.Update(func(tx *core.Tx) error {
		w := &state.Write{}
		for _, t := range nj.Replacement.Parallel.Tables {
			if _, gerr := s.Store.Get(facadeSweepKey(t)); gerr == nil {
				continue // the cut-over's entry
			}
			if perr := s.PutFacadeSweeps(w, []record.FacadeTable{t}, names...); perr != nil {
				return errors.Join(err, perr)
			}
		}
		if aerr := tx.Apply(w); aerr != nil {
			return errors.Join(err, aerr)
		}
		return err
	})
}

// errFlowGone: the job's record no longer holds the parallel flow a
// driver step read a moment before (a later flow, such as a rollback of
// the job, replaced it); the driver is done with it.
var errFlowGone = errors.New("the parallel replacement's record was replaced by a later flow")

// updateFlow applies fn to the parallel flow on job newID's record, or
// answers errFlowGone when the record holds none any more.
func (s *Replace) updateFlow(newID string, fn func(*record.ParallelFlow)) error {
	return s.Update(func(tx *core.Tx) error {
		cur, err := s.ReadJob(newID)
		if err != nil {
			return err
		}
		if cur.Replacement == nil || cur.Replacement.Parallel == nil {
			return errFlowGone
		}
		fn(cur.Replacement.Parallel)
		w := &state.Write{}
		if err := core.PutJSON(w, record.JobKey(cur.ID), cur); err != nil {
			return err
		}
		return tx.Apply(w)
	})
}

// AbortParallel gives the parallel replacement whose new job is newID up
// during its overlap (a rollback): the new job is cancelled, its façade
// generation dropped (the view serves the old job's rows again) and its
// subscriptions deleted, the flow ROLLED_BACK on both jobs; the old job
// keeps running and is the name's active job again. It returns once the
// new job has stopped.
func (s *Replace) AbortParallel(ctx context.Context, newID, reason string) error {
	nj, err := s.ReadJob(newID)
	if err != nil {
		return err
	}
	rep := nj.Replacement
	if rep == nil || rep.Strategy != record.StrategyParallel || rep.Parallel == nil {
		return errcode.Errorf(errcode.IllegalTransition, "job %s is not the new job of a parallel replacement", newID)
	}
	if rep.Phase != record.PhasePreparing && rep.Phase != record.PhaseOverlap {
		return errcode.Errorf(errcode.IllegalTransition, "the parallel replacement of job %s by job %s is %s: only one in its overlap can be rolled back by cancelling the new job", rep.OldJobID, newID, rep.Phase)
	}
	if err := s.updateFlow(newID, func(f *record.ParallelFlow) { f.RollbackReason = reason }); err != nil {
		return err
	}
	return s.parallelGiveUp(ctx, newID, record.PhaseRolledBack, reason)
}

// parallelGiveUp ends the flow of job newID in phase (FAILED or
// ROLLED_BACK) keeping the old job: the new job stopped, its generation
// dropped from the views, its subscriptions deleted, the name's lineage
// pointing at the old job again.
func (s *Replace) parallelGiveUp(ctx context.Context, newID string, phase record.ReplacementPhase, reason string) error {
	nj, err := s.ReadJob(newID)
	if err != nil {
		return err
	}
	if !nj.State.Terminal() {
		if _, err := s.Cancel(ctx, nj.ID); err != nil {
			if cur, rerr := s.ReadJob(newID); rerr != nil || !cur.State.Terminal() {
				return err // not ended in between
			}
		}
	}
	for {
		changed := s.Changes.Next()
		cur, err := s.ReadJob(newID)
		if err != nil {
			return err
		}
		if cur.State == record.StateCancelling && s.RunningJob(cur.ID) == nil {
			unlock, err := s.LockName(ctx, cur.Name) // lock order 1
			if err != nil {
				return err
			}
			err = s.Update(func(tx *core.Tx) error {
				var err error
				if cur, err = s.ReadJob(newID); err == nil && !cur.State.Terminal() {
					err = tx.Transition(cur, record.StateCancelled, reason)
				}
				return err
			})
			unlock()
			if err != nil {
				return err
			}
			continue
		}
		if cur.State.Terminal() && s.RunningJob(cur.ID) == nil {
			nj = cur
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	flow := nj.Replacement.Parallel
	for _, t := range flow.Tables {
		if err := s.sql.DropFacadeGeneration(ctx, s.FacadeTarget(t), nj.Generation); err != nil && !errors.Is(err, contract.ErrFacade) {
			return fmt.Errorf("dropping generation %d of %s: %w", nj.Generation, t.Table, err)
		}
	}
	if pb, ok := s.Opts.Broker.(parallelBroker); ok {
		for _, ps := range flow.Subscriptions {
			if err := pb.DeleteSubscription(ctx, ps.New); err != nil && !errors.Is(err, contract.ErrSubscriptionNotFound) {
				return fmt.Errorf("deleting subscription %s of job %s: %w", ps.New, nj.ID, err)
			}
		}
	}
	old, err := s.ReadJob(nj.Replacement.OldJobID)
	if err != nil {
		return err
	}
	unlock, err := s.LockName(ctx, old.Name) // lock order 1
	if err != nil {
		return err
	}
	defer unlock()
	return s.Update(func(tx *core.Tx) error {
		if nj, err = s.ReadJob(newID); err != nil {
			return err
		}
		if old, err = s.ReadJob(old.ID); err != nil {
			return err
		}
		if nj.Replacement.Phase.Final() {
			return nil // ended by another caller (the driver, or a rollback)
		}
		if r := nj.Replacement.Parallel.RollbackReason; r != "" {
			phase, reason = record.PhaseRolledBack, r
		}
		now := s.Now()
		nj.Replacement.Phase, nj.Replacement.PhaseTime = phase, now
		nj.Replacement.Notes = append(nj.Replacement.Notes, reason)
		oldRep := *nj.Replacement
		old.Replacement, old.ReplacedByJobID = &oldRep, ""
		w := &state.Write{}
		addPhaseEvents(tx, w, nj, old)
		if err := core.PutJSON(w, record.JobKey(nj.ID), nj); err != nil {
			return err
		}
		if err := core.PutJSON(w, record.JobKey(old.ID), old); err != nil {
			return err
		}
		if old.Name == nj.Name && old.Active() {
			l, err := s.ReadLineage(old.Name)
			if err != nil {
				return err
			}
			// The name's active job, and the latest that runs, is the old
			// one again: once it ends, the name resolves to it, not to the
			// job given up (which never took over).
			l.ActiveJobID, l.LatestJobID = old.ID, old.ID
			if err := core.PutJSON(w, record.LineageKey(old.Name), l); err != nil {
				return err
			}
		}
		if err := tx.Apply(w); err != nil {
			return errcode.Internalf("recording the end of the parallel replacement of job %s: %w", old.ID, err)
		}
		s.cuts.Delete(old.ID) // the old job owns every window again
		s.Opts.Logger.Warn("parallel replacement given up", "job_id", nj.ID, "old_job_id", old.ID, "phase", phase, "reason", reason)
		return nil
	})
}
