package core

import (
	"context"
	"fmt"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/service/record"
	"github.com/weir-dev/weir/state"
)

// UpdateOptions changes the options of a running (or draining) job in
// flight: same job ID, no state lost, no element lost or counted twice.
// A new worker count rescales the job by moving key groups between
// workers: the execution pauses at a checkpoint (written durably), and a
// new execution with the new worker count takes the keyed state of each
// key group over in memory from whichever worker held it, while sources
// resume from the checkpoint's positions. Options left unset (zero) in
// opts keep the job's values.
//
// The job's name guard is held throughout and its execution's cpMu from
// the job's read on; the registry lock only for the store writes. Reads of the
// service answer meanwhile.
func (s *Core) UpdateOptions(ctx context.Context, ref string, opts record.JobOptions) (*record.Job, error) {
	if err := s.RefuseIfStoreFailed(); err != nil {
		return nil, err
	}
	// What is wrong on its own is refused now; the whole is validated
	// below, once the job's values have filled the unset fields.
	if err := opts.ValidateGiven(); err != nil {
		return nil, err
	}
	target, err := s.Resolve(ref)
	if err != nil {
		return nil, err
	}
	end, err := s.Updating.Begin(target.Name)
	if err != nil {
		return nil, err
	}
	defer end()
	unlock, err := s.LockJob(ctx, ref) // lock order 1
	if err != nil {
		return nil, err
	}
	defer unlock()
	j, err := s.Resolve(ref)
	if err != nil {
		return nil, err
	}
	jr := s.RunningJob(j.ID)
	if j.State != record.StateRunning && j.State != record.StateDraining {
		if j.State.Terminal() {
			return nil, errcode.Errorf(errcode.JobTerminated, "job %s (%s) is %s, a final state: its options can no longer change", j.ID, j.Name, j.State)
		}
		return nil, errcode.Errorf(errcode.IllegalTransition, "job %s (%s) is %s: only a running or draining job can change its options", j.ID, j.Name, j.State)
	}
	waiting := false
	if jr == nil {
		// A job waiting for its connector has no execution to rescale:
		// its record takes the options, and the next retry starts it
		// with them (its state is restored into the new worker count).
		if waiting = s.WaitsForConnector(j.ID); !waiting {
			return nil, s.NoExecutionError(j.Name, j, "its options change once it runs")
		}
	} else {
		// Lock order 2: no checkpoint of the execution runs until the
		// options are changed.
		jr.CpMu.Lock() // lock order 2
		defer jr.CpMu.Unlock()
		// Read again now that no checkpoint can write it: the record
		// written below is this one.
		if j, err = s.ReadJob(j.ID); err != nil {
			return nil, err
		}
		if (j.State != record.StateRunning && j.State != record.StateDraining) || s.RunningJob(j.ID) != jr {
			return nil, errcode.Errorf(errcode.IllegalTransition, "job %s (%s) became %s while its options were changing", j.ID, j.Name, j.State)
		}
	}
	givenWorkers := opts.NumWorkers != 0
	opts = opts.Inherit(j.Options)
	opts.EnsureDefaults()
	if !givenWorkers {
		// A new autoscaling range without a worker count: a count outside
		// it moves to its nearest bound (a rescale), as the autoscaler
		// would at its next tick.
		if opts.MinNumWorkers > 0 && opts.NumWorkers < opts.MinNumWorkers {
			opts.NumWorkers = opts.MinNumWorkers
		}
		if opts.MaxNumWorkers > 0 && opts.NumWorkers > opts.MaxNumWorkers {
			opts.NumWorkers = opts.MaxNumWorkers
		}
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if waiting {
		return s.waitingOptions(j, opts)
	}
	if !jr.Checkpointed || opts.NumWorkers == j.Options.NumWorkers {
		if opts.NumWorkers != j.Options.NumWorkers {
			return nil, errcode.Errorf(errcode.IllegalTransition, "job %s (%s) takes no checkpoints (%s), so it cannot be rescaled in flight", j.ID, j.Name, j.CheckpointNote)
		}
		j.Options = opts
		if err := s.putOptions(j); err != nil {
			return nil, err
		}
		return j, nil
	}
	from, to := j.Options.NumWorkers, opts.NumWorkers
	rj, err := s.rescale(ctx, j, jr, opts)
	d := map[string]any{"from_workers": from, "to_workers": to}
	if err != nil {
		d["error"] = err.Error()
		s.Emit(j.ID, record.EventRescaleFailed, record.SeverityError, fmt.Sprintf("rescaling from %d to %d workers failed: %v", from, to, err), d)
		return nil, err
	}
	s.Emit(j.ID, record.EventRescaleSucceeded, record.SeverityInfo, fmt.Sprintf("rescaled from %d to %d workers", from, to), d)
	return rj, nil
}

// waitingOptions records opts as the options of job j, which waits for its
// connector (no execution): the next retry starts it with them, from its
// last durable checkpoint, its keyed state split over the new worker
// count as at a restart. The caller holds j's name guard.
func (s *Core) waitingOptions(j *record.Job, opts record.JobOptions) (*record.Job, error) {
	from, to := j.Options.NumWorkers, opts.NumWorkers
	j.Options = opts
	if from != to {
		j.History = append(j.History, record.StateChange{State: j.State, Time: s.Now(),
			Reason: fmt.Sprintf("rescaled from %d to %d workers while waiting for its connector: the next retry starts it so", from, to)})
	}
	if err := s.putOptions(j); err != nil {
		return nil, err
	}
	if from != to {
		s.Emit(j.ID, record.EventRescaleSucceeded, record.SeverityInfo,
			fmt.Sprintf("rescaled from %d to %d workers while the job waits for its connector: its next start (a retry) runs %d", from, to, to),
			map[string]any{"from_workers": from, "to_workers": to, "connector_unavailable": true})
	}
	return j, nil
}

// putOptions writes job j's record after its options changed without a
// rescale of a live execution.
func (s *Core) putOptions(j *record.Job) error {
	w := &state.Write{}
	if err := PutJSON(w, record.JobKey(j.ID), j); err != nil {
		return err
	}
	if err := s.Apply(w); err != nil {
		return errcode.Internalf("recording the options of job %s: %w", j.ID, err)
	}
	return nil
}

// rescale moves job j from execution jr to a new execution with opts'
// worker count. The caller holds j's name guard and jr.cpMu, not
// the registry lock: the pause, the encoding, the commit and the end of jr are
// waited for without it, and it is taken for the checkpoint's write only.
func (s *Core) rescale(ctx context.Context, j *record.Job, jr *Run, opts record.JobOptions) (*record.Job, error) {
	p, err := s.Load(j)
	if err != nil {
		return nil, err
	}
	cp, err := jr.X.Pause(ctx)
	if err != nil {
		return nil, errcode.Internalf("pausing job %s to rescale it: %w", j.ID, err)
	}
	if h := s.Hooks.Paused; h != nil {
		h(j.ID)
	}
	// The key groups move to other workers: encode the paused steps' changed
	// keys here, before the new execution splits their state.
	if err := cp.Complete(ctx); err != nil {
		return nil, errcode.Internalf("encoding the rescale checkpoint of job %s: %w", j.ID, err)
	}
	from := j.Options.NumWorkers
	now := s.Now()
	j.Options = opts
	j.LastCheckpoint = &record.CheckpointInfo{Epoch: cp.Epoch, Time: now}
	j.Counters = jr.Totals() // exact: the execution is paused
	j.DeadLetters = jr.DeadLetters.Load()
	j.History = append(j.History, record.StateChange{State: j.State, Time: now, Reason: fmt.Sprintf("rescaled from %d to %d workers", from, opts.NumWorkers)})
	w := &state.Write{}
	if err := PutJSON(w, record.JobKey(j.ID), j); err != nil {
		return nil, err
	}
	err = s.Update(func(tx *Tx) error { return tx.WriteCheckpoint(j.StateKey(), j.ID, cp, w) }) // the write only
	if err != nil {
		return nil, errcode.Internalf("writing the rescale checkpoint of job %s: %w", j.ID, err)
	}
	if err := jr.X.Commit(ctx, cp); err != nil {
		s.Opts.Logger.Error("committing the rescale checkpoint (the new execution commits it again)", "job_id", j.ID, "error", err)
	}
	jr.Superseded.Store(true)
	jr.X.Cancel()
	<-jr.X.Done()
	// Its sinks committed everything up to the pause: what they hold out of
	// sight (a rolling file part) becomes visible.
	if err := jr.X.ReleaseSinks(ctx); err != nil {
		s.Opts.Logger.Error("releasing the sinks of the rescaled execution (the new execution commits the checkpoint again)", "job_id", j.ID, "error", err)
	}
	adopt := &runner.Adoption{From: jr.X, Steps: map[string]string{}}
	for _, st := range p.Graph().Steps {
		if st.Kind.IsKeyed() {
			adopt.Steps[st.Name] = st.Name
		}
	}
	// jr stays the job's entry in the running table until the new
	// execution replaces it, so that metrics never find the job without one.
	err = s.Launch(ctx, j, p.Program(), adopt)
	s.Forget(jr) // when the new execution did not replace it
	if err != nil {
		return nil, err
	}
	s.Opts.Logger.Info("job rescaled", "job_id", j.ID, "job_name", j.Name, "from_workers", from, "to_workers", opts.NumWorkers)
	return j, nil
}
