package replace

import (
	"errors"
	"fmt"
	"time"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/internal/flowstep"
	"github.com/weir-dev/weir/service/record"

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

// driveStep moves the flow of replacement job newID on: it reads the
// flow's records and what it needs to know of the service now, asks the
// flow's deterministic step (package flowstep) what to do, and applies the
// actions in order, stopping at the first that fails or cannot complete
// yet. It reports whether the flow has ended.
func (s *Replace) driveStep(newID string) (done bool, err error) {
	nj, err := s.ReadJob(newID)
	if err != nil {
		return true, err
	}
	in := flowstep.Input{Now: s.Now(), New: nj, NewRunning: s.RunningJob(nj.ID) != nil, Retention: s.Opts.RollbackRetention}
	if rep := nj.Replacement; rep != nil && rep.NewJobID != newID {
		// A later flow, in which the job is the one replaced, took its
		// record over (a parallel flow's driver runs on after CUT_OVER,
		// until the compaction): that flow's driver drives it, and acting
		// on it here, as its new job, would end it.
		s.Opts.Logger.Info("replacement flow: the job's record now holds a later flow; this driver is done", "job_id", newID, "flow_new_job_id", rep.NewJobID)
		return true, nil
	} else if rep != nil {
		if in.Old, err = s.ReadJob(rep.OldJobID); err != nil {
			return true, err
		}
		in.OldRunning = s.RunningJob(in.Old.ID) != nil
		in.OldWatermark = s.oldWatermark(in.Old.ID)
		_, in.HasBroker = s.Opts.Broker.(parallelBroker)
		if gateHolding(nj) && s.parityDue(nj.ID, in.Now) {
			in.Parity = s.observeParity(s.Ctx, nj, in.Old)
		}
	}
	d := flowstep.Step(in)
	for _, a := range d.Actions {
		complete, err := s.apply(a, in)
		if err != nil || !complete {
			return false, err // stepped again at the next change or tick
		}
	}
	if d.Done || !gateHolding(nj) {
		s.parityAt.Delete(newID)
	}
	return d.Done, nil
}

// apply performs action a of the flow of in.New, as flowstep names it
// (see its Kind constants), and reports whether it completed: an action
// that cannot complete yet (the old job has read nothing, a table is not
// a view yet, a generation is still written) is tried again at the next
// step. The locks each takes are the ones its function documents.
func (s *Replace) apply(a flowstep.Action, in flowstep.Input) (complete bool, err error) {
	ctx, nj, old := s.Ctx, in.New, in.Old
	switch a.Kind {
	case flowstep.FinishCancel:
		unlock, err := s.LockName(ctx, nj.Name) // lock order 1
		if err != nil {
			return false, err
		}
		defer unlock()
		return true, s.Update(func(tx *core.Tx) error {
			cur, err := s.ReadJob(nj.ID)
			if err == nil && cur.State == record.StateCancelling {
				err = tx.Transition(cur, record.StateCancelled, a.Reason)
			}
			return err
		})
	case flowstep.EndFlow:
		return true, s.endFlow(nj.ID, old.ID, a.Phase, a.Note)
	case flowstep.FailFlow:
		return true, s.failFlow(nj.ID, old.ID, a.Reason)
	case flowstep.BeginDrain:
		unlock, err := s.LockName(ctx, old.Name) // lock order 1
		if err != nil {
			return false, err
		}
		defer unlock()
		return true, s.BeginDrain(nj.ID)
	case flowstep.CutOver:
		return true, s.cutOver(nj.ID)
	case flowstep.NoteDrainTimeout:
		return true, s.noteFlow(nj.ID, old.ID, a.Note)
	case flowstep.CancelOld:
		if _, err := s.Cancel(ctx, old.ID); err != nil && !old.State.Terminal() {
			return false, err
		}
		return true, nil
	case flowstep.GiveUp:
		return true, s.parallelGiveUp(ctx, nj.ID, a.Phase, a.Reason)
	case flowstep.PositionSubscriptions:
		pb, _ := s.Opts.Broker.(parallelBroker)
		err := s.positionSubscriptions(ctx, pb, nj.ID)
		if errors.Is(err, errNotYet) {
			return false, nil
		}
		return err == nil, err
	case flowstep.StartOverlap:
		unlock, err := s.LockName(ctx, nj.Name) // lock order 1
		if err != nil {
			return false, err
		}
		defer unlock()
		return true, s.startParallel(ctx, nj.ID)
	case flowstep.DrainOld:
		s.Opts.Logger.Info("parallel replacement: the overlap's rules hold", "job_id", nj.ID, "old_job_id", old.ID)
		unlock, err := s.LockName(ctx, old.Name) // lock order 1
		if err != nil {
			return false, err
		}
		defer unlock()
		return true, s.drainOld(nj.ID)
	case flowstep.CompleteCutOver:
		return true, s.parallelCutOver(ctx, nj.ID)
	case flowstep.EndOldGenerations:
		return s.endGenerationsStep(ctx, nj)
	case flowstep.Compact:
		return s.compactTables(ctx, nj)
	case flowstep.RecordGate:
		return true, s.recordGate(nj.ID, old.ID, a)
	case flowstep.RevealNew:
		return true, s.revealNew(ctx, nj)
	}
	return false, fmt.Errorf("replacement flow: unknown action %q", a.Kind)
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
