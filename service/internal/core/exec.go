package core

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/state"
)

// finalCheckpointTimeout bounds the checkpoints taken when a job ends or
// the service stops.
const FinalCheckpointTimeout = time.Minute

// jobRun is a live execution of a job, watched by one supervisor goroutine.
type Run struct {
	ID, Name string
	lineage  string // the store key of its state (Job.stateLineage)
	started  time.Time
	// startedAt is when the execution started in the service's clock
	// (Core.Now, which tests may set), what the supervisor's samples are
	// dated in; started is the wall clock's, which tells executions apart.
	startedAt    time.Time
	Prog         *contract.Program
	X            *runner.Execution
	Checkpointed bool

	// idleAt and idleActivity are when the last checkpoint was taken and
	// the execution's activity just before it (supervise: an idle job
	// checkpoints every IdleCheckpointInterval only). Read and written by
	// Checkpoint under cpMu and by the supervisor.
	idleAt       atomic.Int64
	idleActivity atomic.Int64
	// historyBucket is the fine history bucket the supervisor last
	// sampled (supervise only).
	historyBucket int64
	// sinkWait is what the supervisor last saw of the execution's waits
	// for its sinks (sinkwait.go; supervise only).
	sinkWait sinkWaitWatch
	// sinkToldAt is when the supervisor last recorded a sink_backpressure
	// event (Unix ns of the service's clock, 0: never): written by the
	// supervisor, read by it and by the execution that replaces this one
	// at a rescale (inheritSinkWait), so that the job gets one event every
	// SinkWaitEventEvery however often it is rescaled.
	sinkToldAt atomic.Int64

	// cpMu serialises checkpoints of the execution from taking to commit
	// (periodic, final, at shutdown, and an update's or rescale's pause),
	// so that no checkpoint's state changes are taken but not yet written
	// when another is taken. Lock order 2: after the name's guard, before
	// the registry lock; held across waits.
	CpMu sync.Mutex

	// superseded is set when a rescale replaced this execution with a new
	// one of the same job: its end is then not the job's end.
	Superseded atomic.Bool

	// sinkFault is set while a failed sink commit is retried, and
	// committed is the last checkpoint every sink committed (fault_sink.go).
	sinkFault atomic.Pointer[sinkFault]
	committed atomic.Uint64

	DeadLetters    atomic.Int64
	LastDeadLetter atomic.Pointer[string]

	// emu guards recorded and held: the events the execution emits before
	// its job's start is recorded (the job is still PENDING, or for an
	// update not yet in the registry) wait in held, so that a job's events
	// read PENDING, RUNNING, then what its execution did. A leaf.
	emu      sync.Mutex
	recorded bool        // guarded by emu
	held     []heldEvent // guarded by emu

	// base holds the job's counters of its earlier executions (set at the
	// start, then only read): metrics add them, so counters never go back
	// for a job ID across restarts and rescales.
	base map[string]record.StepCounters
	// cpStats is the latest durable checkpoint's duration and size.
	cpStats atomic.Pointer[cpStat]

	// smu guards sampler, written by the supervisor and read by metrics.
	// A leaf: no other lock is taken while it is held.
	smu     sync.Mutex
	sampler *sampler // guarded by smu
}

// Started is when the execution started (it tells executions of one job
// apart: a restart, a rescale).
func (jr *Run) Started() time.Time { return jr.started }

// observe samples the execution's live counters at now, and returns them.
func (jr *Run) observe(now time.Time) *runner.Result {
	res := jr.X.Metrics()
	jr.smu.Lock() // a leaf
	defer jr.smu.Unlock()
	jr.sampler.observe(now, res)
	return res
}

// metrics returns the job's live metrics at now.
func (jr *Run) MetricsAt(now time.Time) *record.JobMetrics {
	return jr.metricsOf(now, jr.X.Metrics())
}

// metricsOf returns the job's metrics at now from counters res.
func (jr *Run) metricsOf(now time.Time, res *runner.Result) *record.JobMetrics {
	jr.smu.Lock() // a leaf
	defer jr.smu.Unlock()
	return jr.withBase(jr.sampler.metrics(now, res, jr.Prog.Code, jr.Prog.Graph, jr.DeadLetters.Load()))
}

// launch starts j's execution: from its last checkpoint when it has one
// (committing that checkpoint's sink data again first, in case the process
// stopped between the write and the commit), otherwise from scratch after
// dropping state its name's earlier jobs left behind. adopt, when set (a
// rescale), hands the new execution the paused old one's keyed state in
// memory. j is then RUNNING (or stays DRAINING, and is drained at once),
// and a supervisor watches it. An execution that cannot start makes j
// FAILED, except when a connector is unavailable or the repeated commit
// failed for a reason that may pass (canWaitForSink): j then waits and is
// started again on the retry interval. Only registry failures, and
// SHUTTING_DOWN when the service closes meanwhile (j then resumes on the
// next Open), are returned.
//
// The caller holds j's name guard, not the registry lock: reading the checkpoint,
// committing sinks and starting the execution happen without it.
func (s *Core) Launch(ctx context.Context, j *record.Job, prog *contract.Program, adopt *runner.Adoption) error {
	restore, cp, err := s.Store.Restore(j.StateKey(), j.ID)
	if err != nil {
		return s.Fail(j, fmt.Sprintf("reading the last checkpoint: %v", err))
	}
	if cp == nil {
		if err := s.dropStaleState(j, prog); err != nil {
			return s.Fail(j, err.Error())
		}
	} else if err := runner.CommitRestored(ctx, prog, cp); err != nil {
		err = fmt.Errorf("committing the sinks of checkpoint %d again: %w", cp.Epoch, err)
		if s.canWaitForSink(j, prog, err) {
			// A commit that may pass later (a database busy or away, a
			// table locked by a writer that was killed): started again on
			// the retry interval, as a job whose connector is away.
			s.noteConnectorFault(j, err, cp.Epoch, errcode.SinkUnavailable)
			return nil
		}
		return s.Fail(j, err.Error())
	}
	jr, err := s.StartExecution(ctx, j, prog, restore, adopt)
	if err != nil {
		if s.canWaitForConnector(j, err) {
			// Its sources could not open: started again on the retry
			// interval (fault_connector.go).
			var epoch uint64
			if cp != nil {
				epoch = cp.Epoch
			}
			s.noteConnectorFault(j, err, epoch, errcode.ConnectorUnavailable)
			return nil
		}
		return s.Fail(j, err.Error())
	}
	if s.Hooks.Started != nil {
		s.Hooks.Started(jr)
	}
	err = s.Update(func(tx *Tx) error { return tx.RecordStarted(j, jr) })
	if err != nil {
		jr.X.Cancel()
		<-jr.X.Done()
		return err
	}
	return nil
}

// dropStaleState drops the keyed state that earlier jobs of j's name left
// for prog's steps, in one Tx.
func (s *Core) dropStaleState(j *record.Job, prog *contract.Program) error {
	return s.Update(func(tx *Tx) error {
		for _, st := range prog.Graph.Steps {
			if err := tx.DropState(j.StateKey(), st.Name); err != nil {
				return fmt.Errorf("dropping the state of step %q left by an earlier job of %q: %w", st.Name, j.Name, err)
			}
		}
		return nil
	})
}

// RecordStarted records j, whose execution jr has started, as RUNNING (a
// PENDING job; a DRAINING one stays so) and makes jr its supervised live
// execution. When the service is closing it records nothing and returns
// SHUTTING_DOWN: the caller stops jr, and j resumes as recorded on the
// next Open.
func (tx *Tx) RecordStarted(j *record.Job, jr *Run) error {
	s := tx.s
	if s == nil {
		return errTxDone
	}
	if tx.Closing() {
		return errcode.Errorf(errcode.ShuttingDown, "the job service is shutting down: job %s (%s) resumes when it starts again", j.ID, j.Name)
	}
	if j.State == record.StatePending {
		if err := tx.Transition(j, record.StateRunning, "execution started"); err != nil {
			return err
		}
		if w := (&state.Write{}); tx.ReleaseEvents(w, jr) {
			if err := tx.Apply(w); err != nil {
				s.Opts.Logger.Warn("recording a job's first events", "job_id", j.ID, "error", err)
			}
		}
	} else {
		w := &state.Write{}
		if err := PutJSON(w, record.JobKey(j.ID), j); err != nil {
			return err
		}
		tx.ReleaseEvents(w, jr)
		if err := tx.Apply(w); err != nil {
			return errcode.Internalf("recording job %s: %w", j.ID, err)
		}
	}
	tx.Supervise(j, jr)
	return nil
}

// startExecution starts j's execution from restore (nil: from scratch),
// with adopt's state in memory when set, falling back to no checkpoints
// when the pipeline cannot take them. It records j's checkpointing and
// delivery fields but writes nothing to the registry.
func (s *Core) StartExecution(ctx context.Context, j *record.Job, prog *contract.Program, restore *contract.Restore, adopt *runner.Adoption) (*Run, error) {
	jr := &Run{ID: j.ID, Name: j.Name, lineage: j.StateKey(), started: time.Now(), Prog: prog, sampler: newSampler(prog.Graph), base: j.Counters}
	jr.startedAt = s.Now()
	jr.DeadLetters.Store(j.DeadLetters) // counted on from the job's record
	if adopt != nil {
		// A rescale: the execution it replaces is still the job's entry
		// in the running table.
		if v, ok := s.Live.Load(j.Name); ok && v.(*Run).ID == j.ID {
			inheritSinkWait(jr, v.(*Run))
		}
	}
	if restore != nil {
		jr.committed.Store(restore.Epoch) // launch committed it again
	}
	opts := runner.Options{NumWorkers: j.Options.NumWorkers, Logger: s.Opts.Logger.With("job_id", j.ID, "job_name", j.Name),
		Checkpoints: true, MaxSinkBuffer: s.Opts.MaxSinkBuffer, Restore: restore, Adopt: adopt, DeadLetter: s.deadLetter(jr)}
	for _, f := range s.flows {
		f.Execution(j, jr, &opts) // before the splits open
	}
	if restore == nil && adopt == nil && j.InputStart == "" {
		// No state: a job reading past input it never sees marks the
		// windows that began before its input as cut short.
		if err := noteInputStart(ctx, j, prog); err != nil {
			return nil, err
		}
	}
	if j.InputStart != "" {
		t, err := mtime.Parse(j.InputStart)
		if err != nil {
			return nil, errcode.Internalf("job %s records input start %q: %w", j.ID, j.InputStart, err)
		}
		opts.PartialBefore = t
	}
	// Executions outlive the request that started them.
	runCtx := context.WithoutCancel(ctx)
	x, err := runner.Start(runCtx, prog, opts)
	if errors.Is(err, contract.ErrNotCheckpointable) {
		j.CheckpointNote = fmt.Sprintf("runs without checkpoints: %v", err)
		opts.Checkpoints, opts.Restore, opts.Adopt = false, nil, nil
		x, err = runner.Start(runCtx, prog, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("starting the execution: %w", err)
	}
	jr.X, jr.Checkpointed = x, opts.Checkpoints
	j.Checkpointing = opts.Checkpoints
	j.Delivery, j.DeliveryNote = delivery(prog, opts.Checkpoints)
	return jr, nil
}

// Supervise makes jr the live execution of j, recorded as RUNNING (or
// DRAINING, then drained at once), and starts its supervisor. The caller
// checked in the same Tx that the service is not closing (so that wg.Add
// never follows Close's wg.Wait).
func (tx *Tx) Supervise(j *record.Job, jr *Run) {
	s := tx.s
	if s == nil {
		return
	}
	if j.State == record.StateDraining {
		jr.X.Drain()
	}
	jr.observe(s.Now())
	s.running.Store(j.ID, jr)
	s.Live.Store(j.Name, jr)
	// The registry write that recorded the job RUNNING notified before
	// the execution was live: a waiter woken by it may have looked too
	// early, so it is woken again now.
	s.Changes.Notify()
	s.wg.Add(1)
	go s.supervise(jr)
}

// fail makes j FAILED with reason in a Tx of its own. The caller holds j's
// name guard.
func (s *Core) Fail(j *record.Job, reason string) error {
	return s.Update(func(tx *Tx) error { return tx.Fail(j, reason) })
}

// Fail makes j FAILED with reason.
func (tx *Tx) Fail(j *record.Job, reason string) error {
	if tx.s == nil {
		return errTxDone
	}
	tx.s.Opts.Logger.Error("job failed", "job_id", j.ID, "job_name", j.Name, "error", reason)
	return tx.Transition(j, record.StateFailed, reason)
}

// supervise watches one execution: it takes a checkpoint every interval,
// finishes the job when its execution ends, and suspends it when the
// service closes.
func (s *Core) supervise(jr *Run) {
	defer s.wg.Done()
	t := time.NewTicker(s.Opts.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-jr.X.Done():
			s.finish(jr)
			return
		case <-s.Ctx.Done():
			j, err := s.ReadJob(jr.ID)
			select {
			case <-jr.X.Done():
				s.finish(jr)
			default:
				if err == nil && j.State == record.StateCancelling {
					// Finish the cancel rather than resume a cancelled job.
					<-jr.X.Done()
					s.finish(jr)
					return
				}
				s.suspend(jr)
			}
			return
		case <-t.C:
			now := s.Now()
			s.noteSinkWait(jr, now, jr.observe(now))
			// One history sample per fine bucket: a bucket keeps one value,
			// and a sample asks the broker for every source's backlog.
			if b := now.UnixMilli() / HistoryFineResolution.Milliseconds(); b != jr.historyBucket {
				jr.historyBucket = b
				s.recordHistory(jr, now)
			}
			s.Changes.Notify()
			if jr.Checkpointed && s.sinkRetryDue(jr) && !s.idle(jr, now) {
				if err := s.Checkpoint(jr, nil); err != nil {
					s.CheckpointFailed(jr, err)
				}
			}
		}
	}
}

// errNotWritten says a checkpoint was taken but deliberately not written
// (the job is being cancelled).
var ErrNotWritten = errors.New("checkpoint not written: the job is cancelling")

// checkpoint takes a checkpoint of jr, writes it together with the job
// record (to which final, when set, applies the terminal transition) in one
// atomic write, then lets sinks commit and sources acknowledge. It takes
// jr.cpMu for the whole checkpoint and the registry lock for the write only; with
// final set, the caller holds the name's guard.
func (s *Core) Checkpoint(jr *Run, final func(*record.Job) error) error {
	jr.CpMu.Lock() // lock order 2
	defer jr.CpMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), FinalCheckpointTimeout)
	defer cancel()
	start := time.Now()
	activity := jr.X.Activity() // before the barrier: anything later checkpoints again
	cp, err := jr.X.Checkpoint(ctx)
	if err != nil {
		return err
	}
	if err := s.WriteCheckpoint(jr, cp, final, nil); err != nil {
		return err
	}
	if err := jr.X.Commit(ctx, cp); err != nil {
		return &commitError{epoch: cp.Epoch, err: err}
	}
	s.sinkCommitted(jr, cp.Epoch)
	s.connectorCommitted(jr, cp.Epoch)
	s.observeCheckpoint(jr, time.Since(start), checkpointSize(cp))
	jr.idleActivity.Store(activity)
	jr.idleAt.Store(s.Now().UnixNano())
	return nil
}

// writeCheckpoint writes checkpoint cp of jr with jr's job record, in a Tx
// (jr.cpMu is held). written, when set, is called in the same Tx once the
// write landed (a snapshot pins the store there: no other store write
// comes between).
func (s *Core) WriteCheckpoint(jr *Run, cp *contract.Checkpoint, final func(*record.Job) error, written func(tx *Tx)) error {
	return s.Update(func(tx *Tx) error { return s.writeCheckpointTx(tx, jr, cp, final, written) })
}

// writeCheckpointTx is writeCheckpoint within tx.
func (s *Core) writeCheckpointTx(tx *Tx, jr *Run, cp *contract.Checkpoint, final func(*record.Job) error, written func(tx *Tx)) error {
	j, err := s.ReadJob(jr.ID)
	if err != nil {
		return err
	}
	if j.State == record.StateCancelling || j.State.Terminal() {
		return ErrNotWritten
	}
	j.LastCheckpoint = &record.CheckpointInfo{Epoch: cp.Epoch, Time: s.Now()}
	j.Counters = jr.Totals()
	j.DeadLetters = jr.DeadLetters.Load()
	if d := jr.LastDeadLetter.Load(); d != nil {
		j.LastDeadLetter = *d
	}
	from := j.State
	if final != nil {
		if err := final(j); err != nil {
			return err
		}
	}
	w := &state.Write{}
	if err := tx.TerminalWrite(w, j); err != nil {
		return err
	}
	tx.StateEvent(w, j, from)
	if err := tx.WriteCheckpoint(jr.lineage, jr.ID, cp, w); err != nil {
		return fmt.Errorf("writing checkpoint %d: %w", cp.Epoch, err)
	}
	if written != nil {
		written(tx)
	}
	return nil
}

// checkpointFailed handles a failed periodic checkpoint: one that was not
// written loses the state changes it carried, so the job cannot go on.
func (s *Core) CheckpointFailed(jr *Run, err error) {
	select {
	case <-jr.X.Done():
		return // the end is handled by finish
	default:
	}
	if errors.Is(err, ErrNotWritten) || s.StoreFailed() != nil {
		return // a failed store stopped every execution (fault.go)
	}
	if s.sinkUnavailable(jr, err) {
		return // retried on the storage retry interval (fault_sink.go)
	}
	// A state change of the job: under its name's guard (lock order 1),
	// which an update or rescale of the job holds until it is done.
	unlock, _ := s.LockName(context.Background(), jr.Name) // no deadline: never fails
	defer unlock()
	_ = s.Update(func(tx *Tx) error {
		if jr.Superseded.Load() || s.RunningJob(jr.ID) != jr {
			return nil // another execution of the job took over meanwhile
		}
		j, rerr := s.ReadJob(jr.ID)
		if rerr != nil || j.State.Terminal() {
			return nil
		}
		reason := s.checkpointFailure(jr, err)
		tx.Emit(j.ID, record.EventCheckpointFailed, record.SeverityError, reason, map[string]any{"error": err.Error()})
		if ferr := tx.Fail(j, reason); ferr != nil {
			s.Opts.Logger.Error("recording a job failure", "job_id", jr.ID, "error", ferr)
		}
		jr.X.Cancel()
		return nil
	})
}

// finish records the end of an execution that ended by itself (or was
// cancelled): DONE or DRAINED after a final checkpoint, CANCELLED, or FAILED.
func (s *Core) finish(jr *Run) {
	res, runErr := jr.X.Wait()
	if jr.Superseded.Load() {
		return // a rescale took over the job with a new execution
	}
	if h := s.Hooks.Finishing; h != nil {
		h(jr.ID)
	}
	// The end of a job is a state change of its name: under the name's
	// guard (lock order 1), after any update or rescale in progress, which
	// may have replaced the job or superseded this execution.
	unlock, _ := s.LockName(context.Background(), jr.Name) // no deadline: never fails
	defer unlock()
	if jr.Superseded.Load() {
		return
	}
	log := s.Opts.Logger.With("job_id", jr.ID, "job_name", jr.Name)
	if f := s.StoreFailed(); f != nil {
		// The store failed and stopped the execution: the job keeps its
		// state and its last durable checkpoint, and nothing records an end
		// the store could not make durable.
		log.Error("job stopped: the state store failed", "code", errcode.StorageUnavailable, "error", f.cause)
		s.Forget(jr)
		return
	}
	j, err := s.ReadJob(jr.ID)
	if err != nil {
		log.Error("reading the record of a finished job", "error", err)
		s.Forget(jr)
		return
	}
	now := s.Now()
	metrics := jr.metricsOf(now, res)
	var target record.JobState
	reason := ""
	switch {
	case j.State.Terminal():
		s.Forget(jr) // failed by a checkpoint error
		return
	case j.State == record.StateCancelling:
		target, reason = record.StateCancelled, "cancelled"
	case runErr != nil && s.waitForConnector(jr, j, runErr):
		return // started again on the retry interval (fault_connector.go)
	case runErr != nil:
		target, reason = record.StateFailed, s.runFailure(jr, runErr)
	case j.State == record.StateDraining:
		target, reason = record.StateDrained, "drain completed"
	default:
		target, reason = record.StateDone, "execution completed"
	}
	if (target == record.StateDone || target == record.StateDrained) && jr.Checkpointed {
		err := s.Checkpoint(jr, func(j *record.Job) error {
			j.Metrics, j.PendingCommit = metrics, true
			return record.Transition(j, target, s.Now(), reason)
		})
		if err == nil {
			err = jr.X.CloseSinks(context.Background())
			if err == nil {
				err = s.clearPendingCommit(jr.ID)
			}
			if err == nil {
				log.Info("job finished", "state", target)
				s.Forget(jr)
				return
			}
		}
		if j2, rerr := s.ReadJob(jr.ID); rerr == nil && j2.State.Terminal() {
			// The terminal state is durable; a restart re-commits (pending_commit).
			log.Error("committing the final checkpoint", "error", err)
			s.Forget(jr)
			return
		}
		target, reason = record.StateFailed, fmt.Sprintf("final checkpoint failed: %v", err)
	}
	if jr.Checkpointed && (target == record.StateCancelled || target == record.StateFailed) {
		// Stopped without a final share: the sinks make visible what their
		// commits covered (a rolling file part) and drop the rest, before
		// the end is recorded (a crash before it: the restart's replay of
		// the last checkpoint does it).
		if rerr := jr.X.ReleaseSinks(context.Background()); rerr != nil {
			log.Error("releasing the sinks of a stopped job", "error", rerr)
		}
	}
	err = s.Update(func(tx *Tx) error {
		j, err := s.ReadJob(jr.ID)
		if err != nil || j.State.Terminal() {
			return err
		}
		j.Metrics = metrics
		j.DeadLetters = jr.DeadLetters.Load()
		if d := jr.LastDeadLetter.Load(); d != nil {
			j.LastDeadLetter = *d
		}
		return tx.Transition(j, target, reason)
	})
	switch {
	case err != nil:
		log.Error("recording the end of a job", "error", err)
	case target == record.StateFailed:
		log.Error("job failed", "error", reason)
	}
	s.Forget(jr)
}

// clearPendingCommit records that job id's sinks confirmed its final
// commit.
func (s *Core) clearPendingCommit(id string) error {
	return s.Update(func(tx *Tx) error {
		j, err := s.ReadJob(id)
		if err != nil {
			return err
		}
		j.PendingCommit = false
		w := &state.Write{}
		if err := PutJSON(w, record.JobKey(id), j); err != nil {
			return err
		}
		return tx.Apply(w)
	})
}

// suspend checkpoints jr (write and commit) and stops its execution
// without changing its state: the service is closing and the job resumes
// from this checkpoint on the next Open.
func (s *Core) suspend(jr *Run) {
	log := s.Opts.Logger.With("job_id", jr.ID, "job_name", jr.Name)
	if jr.Checkpointed {
		if err := s.Checkpoint(jr, nil); err != nil && !errors.Is(err, ErrNotWritten) {
			log.Error("checkpoint at shutdown failed: the job resumes from its previous checkpoint", "error", err)
		}
	}
	jr.X.Cancel()
	<-jr.X.Done()
	log.Info("job suspended: it resumes when the server starts again")
	s.Forget(jr)
}

// forget lets go of jr: it is no longer the live execution of its job.
func (s *Core) Forget(jr *Run) {
	_ = s.Update(func(*Tx) error {
		s.running.CompareAndDelete(jr.ID, jr)
		s.Live.CompareAndDelete(jr.Name, jr)
		return nil
	})
	j, err := s.ReadJob(jr.ID)
	s.flushHistory(jr.ID, err == nil && j.State.Terminal() && s.RunningJob(jr.ID) == nil)
	s.Changes.Notify()
}

// runningIDs returns the IDs of the live executions (for tests).
func (s *Core) RunningIDs() []string {
	var ids []string
	s.running.Range(func(k, _ any) bool {
		ids = append(ids, k.(string))
		return true
	})
	sort.Strings(ids)
	return ids
}

// noteInputStart records in j where its input starts (record.Job.InputStart):
// the latest start any of its sources reports (contract.InputStarter), with
// their notes; nothing when no source skips input.
func noteInputStart(ctx context.Context, j *record.Job, prog *contract.Program) error {
	var start mtime.Time
	var notes []string
	for _, st := range prog.Graph.Steps {
		is, ok := prog.Code[st.Name].(contract.InputStarter)
		if !ok || st.Kind != graph.KindSource {
			continue
		}
		t, note, ok, err := is.InputStart(ctx)
		if err != nil {
			return fmt.Errorf("finding where source %q starts: %w", st.Name, err)
		}
		if !ok {
			continue
		}
		if len(notes) == 0 || t > start {
			start = t
		}
		notes = append(notes, note)
	}
	if len(notes) == 0 {
		return nil
	}
	j.InputStart = start.String()
	j.InputStartNote = strings.Join(notes, "; ") + "; panes of windows that began before " + j.InputStart + " are marked cut short"
	return nil
}
