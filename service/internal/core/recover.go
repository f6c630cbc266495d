package core

// This file resumes, when the service opens, the jobs the previous process
// left active, and completes what it left unconfirmed.

import (
	"context"
	"fmt"
	"sync"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/service/record"
	"github.com/weir-dev/weir/state"
)

// recover resumes, on Open, every job the previous process left active,
// and re-commits terminal jobs whose final commit was not confirmed.
func (s *Core) recover() error {
	var jobs []*record.Job
	err := s.Store.Scan("job/", func(_ string, v []byte) error {
		j := &record.Job{}
		if err := UnmarshalJob(v, j); err != nil {
			return err
		}
		if j.Active() || j.PendingCommit {
			jobs = append(jobs, j)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading the job registry: %w", err)
	}
	since := s.Now()
	for _, j := range jobs {
		if j.Active() && j.SDK != record.SDKGo {
			s.resuming.Store(j.ID, since)
			s.Emit(j.ID, record.EventConditionChanged, record.SeverityWarning, "the service restarted: the job resumes from its last checkpoint",
				map[string]any{"code": string(errcode.Resuming), "set": true})
		}
	}
	started := s.Spawn(func() {
		defer close(s.recovered)
		sem := make(chan struct{}, recoveryConcurrency)
		var wg sync.WaitGroup
		for _, j := range jobs {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				defer s.Changes.Notify()
				defer s.resuming.Delete(j.ID)
				if h := s.Hooks.Resuming; h != nil {
					h(j.ID)
				}
				if err := s.recoverJob(s.Ctx, j); err != nil && s.Ctx.Err() == nil {
					s.Opts.Logger.Error("resuming a job after a restart", "job_id", j.ID, "job_name", j.Name, "error", err)
				}
			}()
		}
		wg.Wait()
	})
	if !started {
		close(s.recovered) // closed before recovery began: the jobs resume at the next Open
	}
	return nil
}

// recommitLast commits job j's last durable checkpoint again with a
// fresh build of its pipeline (a cancel that a restart completes): sinks
// holding committed rows out of sight (a rolling file part) make them
// visible. Failures are logged: the cancel completes regardless.
func (s *Core) recommitLast(ctx context.Context, j *record.Job) {
	if j.SDK == record.SDKGo {
		return
	}
	_, cp, err := s.Store.Restore(j.StateKey(), j.ID)
	if err != nil || cp == nil {
		return
	}
	p, err := s.Load(j)
	if err == nil {
		err = runner.CommitRestored(ctx, p.Program(), cp)
		if err == nil {
			err = releaseSinks(ctx, p.Program())
		}
	}
	if err != nil {
		s.Opts.Logger.Error("committing the last checkpoint of a cancelled job again", "job_id", j.ID, "job_name", j.Name, "error", err)
	}
}

// recoveryConcurrency is how many jobs resume at once after a restart.
const recoveryConcurrency = 4

// recoverJob resumes or re-commits j on Open, under its name's guard
// (supervisors of jobs recovered before it already run).
func (s *Core) recoverJob(ctx context.Context, j *record.Job) error {
	unlock, err := s.LockName(ctx, j.Name) // lock order 1
	if err != nil {
		return err
	}
	defer unlock()
	log := s.Opts.Logger.With("job_id", j.ID, "job_name", j.Name)
	if j.State == record.StateCancelling {
		s.recommitLast(ctx, j)
		return s.Update(func(tx *Tx) error {
			return tx.Transition(j, record.StateCancelled, "cancelled (completed after a restart)")
		})
	}
	if j.SDK == record.SDKGo && j.Active() {
		// Its program resumes or updates it (StartProgram).
		log.Info("job is a Go program's: it resumes when its program starts")
		return nil
	}
	p, err := s.Load(j)
	if err != nil {
		if j.Active() {
			return s.Fail(j, fmt.Sprintf("the pipeline no longer loads after a restart: %v", err))
		}
		log.Error("re-committing the final checkpoint: the pipeline no longer loads", "error", err)
		return nil
	}
	if !j.Active() {
		_, cp, err := s.Store.Restore(j.StateKey(), j.ID)
		if err == nil && cp != nil {
			// Every sink commits the final epoch, also one with no rows
			// in it, as the execution's last commit did.
			err = runner.CommitFinal(ctx, p.Program(), cp)
		}
		if err == nil {
			// Close the committed sinks: a partition run's staged sink
			// publishes here when a crash came between its final commit
			// and its publication (io/sqlsink, publish.go).
			err = closeSinks(ctx, p.Program())
		}
		if err != nil {
			log.Error("re-committing the final checkpoint", "error", err)
			return nil
		}
		j.PendingCommit = false
		w := &state.Write{}
		if err := PutJSON(w, record.JobKey(j.ID), j); err != nil {
			return err
		}
		return s.Apply(w)
	}
	for _, f := range s.flows {
		if f.Claim(j) {
			return nil // the flow resumes it (a replacement job waiting for its flow)
		}
	}
	log.Info("resuming job", "state", j.State)
	if err := s.Launch(ctx, j, p.Program(), nil); err != nil {
		return err
	}
	for _, f := range s.flows {
		f.Resumed(j)
	}
	if s.RunningJob(j.ID) != nil {
		d := map[string]any{"code": string(errcode.Resuming), "set": false}
		msg := "the job resumed after a restart" + resumedFrom(j, d)
		s.Emit(j.ID, record.EventRecovered, record.SeverityInfo, msg, d)
	}
	return nil
}

// resumedFrom is the end of an event's message saying where job j resumed:
// from its last checkpoint, whose epoch it records in the event's details
// d, or from the beginning.
func resumedFrom(j *record.Job, d map[string]any) string {
	if j.LastCheckpoint == nil {
		return " from the beginning (it had no checkpoint)"
	}
	d["epoch"] = j.LastCheckpoint.Epoch
	return fmt.Sprintf(" from checkpoint %d", j.LastCheckpoint.Epoch)
}
