package replace

import (
	"errors"
	"fmt"
	"time"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/duration"
	"github.com/weir-dev/weir/serviceopt"
	"github.com/weir-dev/weir/state"
)

// This file drives a replacement flow once its new job exists: the driver
// goroutine (drive, driveStep) moves the flow through its phases, and
// noteFlow, endFlow, failFlow and cutOver record them.

// StartDriver starts the goroutine that takes the flow of replacement job
// newID to its end (unless the service is closing: the flow then resumes
// on the next Open).
func (s *Replace) StartDriver(newID string) {
	s.Spawn(func() { s.drive(newID) })
}

// drive takes the flow of replacement job newID on at every change of the
// service (and at every checkpoint interval, for the drain's deadline)
// until it reaches a final phase or the service closes.
func (s *Replace) drive(newID string) {
	// After a restart, the old job's execution resumes in the recovery
	// that started this driver: a step before it is back would find the
	// old job without an execution and fail the flow.
	select {
	case <-s.Recovered():
	case <-s.Ctx.Done():
		return
	}
	t := time.NewTicker(s.Opts.CheckpointInterval)
	defer t.Stop()
	log := s.Opts.Logger.With("job_id", newID)
	for {
		changed := s.Changes.Next()
		done, err := s.driveStep(newID)
		if err != nil && s.Ctx.Err() == nil {
			log.Error("replacement flow", "error", err)
		}
		if done {
			return
		}
		select {
		case <-changed:
		case <-t.C:
		case <-s.Ctx.Done():
			return
		}
	}
}

// driveStep moves the flow of replacement job newID on by what its jobs'
// records say now, and reports whether the flow has ended.
func (s *Replace) driveStep(newID string) (done bool, err error) {
	nj, err := s.ReadJob(newID)
	if err != nil {
		return true, err
	}
	rep := nj.Replacement
	if rep != nil && rep.NewJobID != newID {
		// A later flow, in which the job is the one replaced, took its
		// record over (a parallel flow's driver runs on after CUT_OVER,
		// until the compaction): that flow's driver drives it, and acting
		// on it here, as its new job, would end it.
		s.Opts.Logger.Info("replacement flow: the job's record now holds a later flow; this driver is done", "job_id", newID, "flow_new_job_id", rep.NewJobID)
		return true, nil
	}
	if rep != nil && rep.Strategy == record.StrategyParallel {
		return s.parallelStep(newID)
	}
	if rep == nil || rep.Phase.Final() {
		return true, nil
	}
	old, err := s.ReadJob(rep.OldJobID)
	if err != nil {
		return true, err
	}
	if nj.State == record.StateCancelling && s.RunningJob(nj.ID) == nil {
		// Cancelled while it waited: it never ran, so it ends at once.
		unlock, err := s.LockName(s.Ctx, nj.Name) // lock order 1
		if err != nil {
			return true, err
		}
		err = s.Update(func(tx *core.Tx) error {
			var err error
			if nj, err = s.ReadJob(newID); err == nil && nj.State == record.StateCancelling {
				err = tx.Transition(nj, record.StateCancelled, "cancelled before the cut-over")
			}
			return err
		})
		unlock()
		if err != nil {
			return true, err
		}
	}
	if nj.State != record.StatePending {
		// The new job was cancelled (or failed) while it waited.
		return true, s.endFlow(nj.ID, old.ID, record.PhaseFailed, fmt.Sprintf("job %s was %s before the cut-over", nj.ID, nj.State))
	}
	switch rep.Phase {
	case record.PhasePreparing:
		unlock, err := s.LockName(s.Ctx, old.Name) // lock order 1
		if err != nil {
			return true, err
		}
		err = s.BeginDrain(nj.ID)
		unlock()
		return false, err
	case record.PhaseDrainingOld:
	default:
		return true, nil
	}
	switch {
	case old.State == record.StateFailed:
		return true, s.failFlow(nj.ID, old.ID, fmt.Sprintf("job %s (%s), being replaced, failed while draining: %s", old.ID, old.Name, old.Error))
	case old.State.Terminal() && !old.PendingCommit && s.RunningJob(old.ID) == nil:
		return true, s.cutOver(nj.ID)
	case old.State.Terminal():
		return false, nil // its final commit is not confirmed yet
	}
	if rep.DrainTimedOut || rep.DrainStart == nil || s.Now().Sub(*rep.DrainStart) < time.Duration(rep.MaxStopMillis)*time.Millisecond {
		return false, nil
	}
	maxStop := duration.Format(time.Duration(rep.MaxStopMillis) * time.Millisecond)
	if rep.CancelOnDrainTimeout {
		note := fmt.Sprintf("the drain of job %s did not finish within %s: it was cancelled (its unacknowledged messages stay in its subscription)", old.ID, maxStop)
		if err := s.noteFlow(nj.ID, old.ID, note); err != nil {
			return false, err
		}
		if _, err := s.Cancel(s.Ctx, old.ID); err != nil && !old.State.Terminal() {
			return false, err
		}
		return false, nil
	}
	return false, s.noteFlow(nj.ID, old.ID, fmt.Sprintf("the drain of job %s did not finish within %s and %s=false: both jobs are kept, job %s keeps draining and job %s starts when it ends (cancel job %s to cut over now)",
		old.ID, maxStop, serviceopt.KeyCancelOnDrainTimeout, old.ID, nj.ID, old.ID))
}

// noteFlow records that the drain timed out, with note, on both jobs.
func (s *Replace) noteFlow(newID, oldID, note string) error {
	return s.Update(func(tx *core.Tx) error {
		w := &state.Write{}
		for _, id := range []string{newID, oldID} {
			j, err := s.ReadJob(id)
			if err != nil {
				return err
			}
			if j.Replacement != nil {
				j.Replacement.DrainTimedOut = true
				j.Replacement.Notes = append(j.Replacement.Notes, note)
			}
			if err := core.PutJSON(w, record.JobKey(id), j); err != nil {
				return err
			}
		}
		s.Opts.Logger.Warn("replacement: drain timeout", "job_id", newID, "old_job_id", oldID, "note", note)
		return tx.Apply(w)
	})
}

// endFlow records the flow's final phase on both jobs (the new job's
// state is left as it is).
func (s *Replace) endFlow(newID, oldID string, phase record.ReplacementPhase, note string) error {
	return s.Update(func(tx *core.Tx) error {
		now := s.Now()
		w := &state.Write{}
		for _, id := range []string{newID, oldID} {
			j, err := s.ReadJob(id)
			if err != nil {
				return err
			}
			if j.Replacement == nil {
				continue
			}
			j.Replacement.Phase, j.Replacement.PhaseTime = phase, now
			if note != "" {
				j.Replacement.Notes = append(j.Replacement.Notes, note)
			}
			addPhaseEvents(tx, w, j)
			if err := core.PutJSON(w, record.JobKey(id), j); err != nil {
				return err
			}
		}
		return tx.Apply(w)
	})
}

// lockJobName takes the guard of job id's name (lock order 1) and returns
// the job as read under it, with the guard's release.
func (s *Replace) lockJobName(id string) (*record.Job, func(), error) {
	j, err := s.ReadJob(id)
	if err != nil {
		return nil, nil, err
	}
	unlock, err := s.LockName(s.Ctx, j.Name) // lock order 1
	if err != nil {
		return nil, nil, err
	}
	if j, err = s.ReadJob(id); err != nil {
		unlock()
		return nil, nil, err
	}
	return j, unlock, nil
}

// failFlow ends the flow FAILED: the new job (still PENDING) fails with
// reason. It takes the new job's name guard.
func (s *Replace) failFlow(newID, oldID, reason string) error {
	nj, unlock, err := s.lockJobName(newID)
	if err != nil {
		return err
	}
	defer unlock()
	if nj.State == record.StatePending {
		if err := s.Fail(nj, reason); err != nil {
			return err
		}
	}
	return s.endFlow(newID, oldID, record.PhaseFailed, reason)
}

// cutOver starts the new job of a flow whose old job ended: CUT_OVER and
// RUNNING in the write that records its start, the stop window measured
// from the drain request. It takes the new job's name guard.
func (s *Replace) cutOver(newID string) error {
	nj, unlock, err := s.lockJobName(newID)
	if err != nil {
		return err
	}
	defer unlock()
	if nj.State != record.StatePending || nj.Replacement == nil || nj.Replacement.Phase != record.PhaseDrainingOld {
		return nil
	}
	if nj.Replacement.Rewind {
		if err := s.positionRewind(nj); err != nil {
			var e *errcode.Error
			if !errors.As(err, &e) || e.Code == errcode.Internal {
				return err // the broker or the store: tried again
			}
			reason := fmt.Sprintf("re-reading retained input at the cut-over: %v", err)
			if ferr := s.Fail(nj, reason); ferr != nil {
				return ferr
			}
			return s.endFlow(nj.ID, nj.Replacement.OldJobID, record.PhaseFailed, reason)
		}
	}
	if !nj.Replacement.Rewind && len(nj.Replacement.Handover) > 0 {
		if err := s.positionHandover(s.Ctx, nj, nil); err != nil {
			return err // the broker or the store: tried again
		}
	}
	p, err := s.Load(nj)
	if err != nil {
		reason := fmt.Sprintf("building the replacement job at the cut-over: %v", err)
		if ferr := s.Fail(nj, reason); ferr != nil {
			return ferr
		}
		return s.endFlow(nj.ID, nj.Replacement.OldJobID, record.PhaseFailed, reason)
	}
	// The old job's subscriptions handed over are not read any more.
	if err := s.deleteHandedOver(s.Ctx, nj); err != nil {
		return err // the broker: tried again
	}
	rep := nj.Replacement
	now := s.Now()
	rep.Phase, rep.PhaseTime = record.PhaseCutOver, now
	var stopMS int64
	if rep.DrainStart != nil {
		stopMS = now.Sub(*rep.DrainStart).Milliseconds()
		rep.StopWindowMillis = &stopMS
	}
	// The old job's record first (the new job's follows with its start):
	// a failed start records FAILED on both.
	if err := s.copyFlow(rep); err != nil {
		return err
	}
	if err := s.snaps.RestoreRollback(nj, p.Graph()); err != nil { // rollback.go
		if ferr := s.Fail(nj, "starting the rollback job: "+err.Error()); ferr != nil {
			return ferr
		}
		return s.endFlow(nj.ID, rep.OldJobID, record.PhaseFailed, "the rollback job could not start from its snapshot: "+err.Error())
	}
	if err := s.Launch(s.Ctx, nj, p.Program(), nil); err != nil {
		return err
	}
	if nj.State == record.StateFailed {
		return s.endFlow(nj.ID, rep.OldJobID, record.PhaseFailed, "the replacement job failed to start: "+nj.Error)
	}
	s.Opts.Logger.Info("replacement: cut over", "job_id", nj.ID, "job_name", nj.Name, "old_job_id", rep.OldJobID, "stop_window_ms", stopMS)
	return nil
}

// copyFlow records rep (the new job's flow) on the old job, keeping its notes.
func (s *Replace) copyFlow(rep *record.Replacement) error {
	return s.Update(func(tx *core.Tx) error {
		old, err := s.ReadJob(rep.OldJobID)
		if err != nil {
			return err
		}
		if old.Replacement != nil {
			notes := old.Replacement.Notes
			*old.Replacement = *rep
			old.Replacement.Notes = notes
		}
		w := &state.Write{}
		// The new job's record follows with its start; its event is written
		// here, with the old job's, as the phase begins.
		addPhaseEvents(tx, w, old, &record.Job{ID: rep.NewJobID, Replacement: rep})
		if err := core.PutJSON(w, record.JobKey(old.ID), old); err != nil {
			return err
		}
		return tx.Apply(w)
	})
}

// addPhaseEvents adds to w a replacement_phase event on each of jobs for the
// phase its replacement record now holds (strategy, phase, the two jobs,
// the stop window once known). The caller lands w in the same core.Tx.
func addPhaseEvents(tx *core.Tx, w *state.Write, jobs ...*record.Job) {
	for _, j := range jobs {
		rep := j.Replacement
		if rep == nil {
			continue
		}
		d := map[string]any{"strategy": rep.Strategy, "phase": rep.Phase, "old_job_id": rep.OldJobID, "new_job_id": rep.NewJobID}
		msg := fmt.Sprintf("%s of job %s by job %s: phase %s", rep.Strategy, rep.OldJobID, rep.NewJobID, rep.Phase)
		if rep.StopWindowMillis != nil {
			d["stop_window_ms"] = *rep.StopWindowMillis
			msg += fmt.Sprintf(" (stop window %d ms)", *rep.StopWindowMillis)
		}
		sev := record.SeverityInfo
		if rep.Phase == record.PhaseFailed || rep.Phase == record.PhaseRolledBack {
			sev = record.SeverityWarning
		}
		tx.AddEvent(w, j.ID, record.EventReplacementPhase, sev, msg, d)
	}
}
