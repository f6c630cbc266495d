package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir/runner/contract"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/io/sqlsink"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/state"
	"github.com/weir-dev/weir/yamlpipe"
)

// finalCheckpointTimeout bounds the checkpoints taken when a job ends or
// the service stops.
const finalCheckpointTimeout = time.Minute

// jobRun is a live execution of a job, watched by one supervisor goroutine.
type jobRun struct {
	id, name     string
	lineage      string // the store key of its state (Job.stateLineage)
	started      time.Time
	prog         *contract.Program
	x            *runner.Execution
	checkpointed bool

	// cpMu serialises checkpoints of the execution from taking to commit
	// (periodic, final, at shutdown, and an update's or rescale's pause),
	// so that no checkpoint's state changes are taken but not yet written
	// when another is taken. Lock order 2: after the name's guard, before
	// Service.mu; held across waits.
	cpMu sync.Mutex

	// superseded is set when a rescale replaced this execution with a new
	// one of the same job: its end is then not the job's end.
	superseded atomic.Bool

	// sinkFault is set while a failed sink commit is retried, and
	// committed is the last checkpoint every sink committed (fault_sink.go).
	sinkFault atomic.Pointer[sinkFault]
	committed atomic.Uint64

	deadLetters    atomic.Int64
	lastDeadLetter atomic.Pointer[string]

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
	base map[string]StepCounters
	// cpStats is the latest durable checkpoint's duration and size.
	cpStats atomic.Pointer[cpStat]

	// smu guards sampler, written by the supervisor and read by metrics.
	// A leaf: no other lock is taken while it is held.
	smu     sync.Mutex
	sampler *sampler // guarded by smu
}

// observe samples the execution's live counters at now.
func (jr *jobRun) observe(now time.Time) {
	res := jr.x.Metrics()
	jr.smu.Lock() // a leaf
	defer jr.smu.Unlock()
	jr.sampler.observe(now, res)
}

// metrics returns the job's live metrics at now.
func (jr *jobRun) metrics(now time.Time) *JobMetrics {
	return jr.metricsOf(now, jr.x.Metrics())
}

// metricsOf returns the job's metrics at now from counters res.
func (jr *jobRun) metricsOf(now time.Time, res *runner.Result) *JobMetrics {
	jr.smu.Lock() // a leaf
	defer jr.smu.Unlock()
	return jr.withBase(jr.sampler.metrics(now, res, jr.prog.Code, jr.prog.Graph, jr.deadLetters.Load()))
}

func unmarshalJob(b []byte, j *Job) error {
	if err := json.Unmarshal(b, j); err != nil {
		return fmt.Errorf("decoding a job record: %w", err)
	}
	return nil
}

// accessCode is the code of a pipeline that does not load: what the
// server's access rules or the loader's budgets refused, else
// INVALID_PIPELINE.
func accessCode(err error) errcode.Code {
	switch {
	case errors.Is(err, yamlpipe.ErrPathNotAllowed):
		return errcode.PathNotAllowed
	case errors.Is(err, yamlpipe.ErrSQLHostNotAllowed):
		return errcode.SQLHostNotAllowed
	case errors.Is(err, yamlpipe.ErrOutputExists):
		return errcode.OutputExists
	case errors.Is(err, yamlpipe.ErrBudgetExceeded):
		return errcode.PipelineBudgetExceeded
	}
	return errcode.InvalidPipeline
}

// load compiles j's pipeline for j's run.
func (s *Service) load(j *Job) (*weir.Pipeline, error) {
	return s.loadYAML(j, false)
}

// loadGraph compiles j's pipeline for its graph only (yamlpipe's
// GraphOnly: no sink checks its table), for the compatibility check of a
// pipeline that does not load for a run. The result must not be run.
func (s *Service) loadGraph(j *Job) (*weir.Pipeline, error) {
	return s.loadYAML(j, true)
}

func (s *Service) loadYAML(j *Job, graphOnly bool) (*weir.Pipeline, error) {
	if j.SDK == SDKGo {
		return s.loadProgram(j)
	}
	env := s.jobEnv(j)
	if cu := rewindOf(j); cu != nil {
		// On every load: the first start, restarts, rescales, and an
		// in-place update that carries a catch-up on (rewind_catchup.go).
		env.PubSubRewind = cu.Starts
		env.Owns = rewindOwns(cu.RewindPoint, env.Owns)
	}
	p, err := yamlpipe.Load(j.PipelineFile, []byte(j.Pipeline), yamlpipe.Options{BaseDir: j.BaseDir, Job: env, GraphOnly: graphOnly,
		Access: s.opts.Access, CheckOutputs: !graphOnly,
		LogOutput: logWriter{s: s, id: j.ID}}) // LogForTesting lines become the job's events
	if err != nil {
		code := accessCode(err)
		if errors.Is(err, sqlsink.ErrIdentifierTooLong) {
			code = errcode.SQLIdentifierTooLong
		}
		return nil, errorf(code, "%w", err)
	}
	if err := p.Err(); err != nil {
		return nil, errorf(errcode.InvalidPipeline, "%s: %w", j.PipelineFile, err)
	}
	return p, nil
}

// delivery says which guarantee prog can give when checkpointed: exactly
// once only if every source resumes from positions and every sink commits
// per epoch.
func delivery(prog *contract.Program, checkpointed bool) (string, string) {
	if !checkpointed {
		return DeliveryAtLeastOnce, "the job takes no checkpoints: after a restart it runs again from the beginning of its sources"
	}
	var sources, sinks []string
	for _, st := range prog.Graph.Steps {
		code := prog.Code[st.Name]
		switch st.Kind {
		case graph.KindSource:
			if _, ok := code.(contract.ResumableSource); !ok {
				sources = append(sources, st.Name)
			}
		case graph.KindSink:
			if _, ok := code.(contract.TransactionalSink); !ok {
				sinks = append(sinks, st.Name)
			}
		}
	}
	sort.Strings(sources)
	sort.Strings(sinks)
	var notes []string
	if len(sources) > 0 {
		notes = append(notes, fmt.Sprintf("source(s) %s cannot resume from a checkpoint and restart from their beginning after a restart", strings.Join(sources, ", ")))
	}
	if len(sinks) > 0 {
		notes = append(notes, fmt.Sprintf("sink(s) %s write outside checkpoints (file sinks are for batch runs)", strings.Join(sinks, ", ")))
	}
	if len(notes) == 0 {
		return DeliveryExactlyOnce, ""
	}
	return DeliveryAtLeastOnce, strings.Join(notes, "; ")
}

// launch starts j's execution: from its last checkpoint when it has one
// (committing that checkpoint's sink data again first, in case the process
// stopped between the write and the commit), otherwise from scratch after
// dropping state its name's earlier jobs left behind. adopt, when set (a
// rescale), hands the new execution the paused old one's keyed state in
// memory. j is then RUNNING (or stays DRAINING, and is drained at once),
// and a supervisor watches it. An execution that cannot start makes j
// FAILED; only registry failures, and SHUTTING_DOWN when the service
// closes meanwhile (j then resumes on the next Open), are returned.
//
// The caller holds j's name guard, not Service.mu: reading the checkpoint,
// committing sinks and starting the execution happen without it.
func (s *Service) launch(ctx context.Context, j *Job, prog *contract.Program, adopt *runner.Adoption) error {
	restore, cp, err := s.store.Restore(j.stateLineage(), j.ID)
	if err != nil {
		return s.fail(j, fmt.Sprintf("reading the last checkpoint: %v", err))
	}
	if cp == nil {
		if err := s.dropStaleState(j, prog); err != nil {
			return s.fail(j, err.Error())
		}
	} else if err := runner.CommitRestored(ctx, prog, cp); err != nil {
		return s.fail(j, fmt.Sprintf("committing the sinks of checkpoint %d again: %v", cp.Epoch, err))
	}
	jr, err := s.startExecution(ctx, j, prog, restore, adopt)
	if err != nil {
		return s.fail(j, err.Error())
	}
	if s.hooks.started != nil {
		s.hooks.started(jr)
	}
	s.mu.Lock() // lock order 3
	err = s.recordStartedLocked(j, jr)
	s.mu.Unlock()
	if err != nil {
		jr.x.Cancel()
		<-jr.x.Done()
		return err
	}
	return nil
}

// dropStaleState drops the keyed state that earlier jobs of j's name left
// for prog's steps, under Service.mu.
func (s *Service) dropStaleState(j *Job, prog *contract.Program) error {
	s.mu.Lock() // lock order 3
	defer s.mu.Unlock()
	for _, st := range prog.Graph.Steps {
		if err := s.dropStateLocked(j.stateLineage(), st.Name); err != nil {
			return fmt.Errorf("dropping the state of step %q left by an earlier job of %q: %w", st.Name, j.Name, err)
		}
	}
	return nil
}

// recordStartedLocked records j, whose execution jr has started, as
// RUNNING (a PENDING job; a DRAINING one stays so) and makes jr its
// supervised live execution. When the service is closing it records
// nothing and returns SHUTTING_DOWN: the caller stops jr, and j resumes as
// recorded on the next Open. Service.mu is held.
func (s *Service) recordStartedLocked(j *Job, jr *jobRun) error {
	if s.closing.Load() {
		return errorf(errcode.ShuttingDown, "the job service is shutting down: job %s (%s) resumes when it starts again", j.ID, j.Name)
	}
	if j.State == StatePending {
		if err := s.transitionLocked(j, StateRunning, "execution started"); err != nil {
			return err
		}
		if w := (&state.Write{}); s.releaseEventsLocked(w, jr) {
			if err := s.applyLocked(w); err != nil {
				s.opts.Logger.Warn("recording a job's first events", "job_id", j.ID, "error", err)
			}
		}
	} else {
		w := &state.Write{}
		if err := putJSON(w, jobKey(j.ID), j); err != nil {
			return err
		}
		s.releaseEventsLocked(w, jr)
		if err := s.applyLocked(w); err != nil {
			return internalf("recording job %s: %w", j.ID, err)
		}
	}
	s.superviseLocked(j, jr)
	return nil
}

// startExecution starts j's execution from restore (nil: from scratch),
// with adopt's state in memory when set, falling back to no checkpoints
// when the pipeline cannot take them. It records j's checkpointing and
// delivery fields but writes nothing to the registry.
func (s *Service) startExecution(ctx context.Context, j *Job, prog *contract.Program, restore *contract.Restore, adopt *runner.Adoption) (*jobRun, error) {
	jr := &jobRun{id: j.ID, name: j.Name, lineage: j.stateLineage(), started: time.Now(), prog: prog, sampler: newSampler(prog.Graph), base: j.Counters}
	jr.deadLetters.Store(j.DeadLetters) // counted on from the job's record
	if restore != nil {
		jr.committed.Store(restore.Epoch) // launch committed it again
	}
	opts := runner.Options{NumWorkers: j.Options.NumWorkers, Logger: s.opts.Logger.With("job_id", j.ID, "job_name", j.Name),
		Checkpoints: true, Restore: restore, Adopt: adopt, DeadLetter: s.deadLetter(jr),
		HoldPanesAtMinWatermark: rewindsInput(j)}
	s.reportCatchUpExpired(j, prog, jr) // before the splits open
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
	jr.x, jr.checkpointed = x, opts.Checkpoints
	j.Checkpointing = opts.Checkpoints
	j.Delivery, j.DeliveryNote = delivery(prog, opts.Checkpoints)
	return jr, nil
}

// superviseLocked makes jr the live execution of j, recorded as RUNNING
// (or DRAINING, then drained at once), and starts its supervisor. The
// caller checked under the same hold of Service.mu that the service is not
// closing (so that wg.Add never follows Close's wg.Wait). Service.mu is held.
func (s *Service) superviseLocked(j *Job, jr *jobRun) {
	if j.State == StateDraining {
		jr.x.Drain()
	}
	jr.observe(s.now())
	s.running.Store(j.ID, jr)
	s.live.Store(j.Name, jr)
	// The registry write that recorded the job RUNNING notified before
	// the execution was live: a waiter woken by it may have looked too
	// early, so it is woken again now.
	s.changes.notify()
	s.wg.Add(1)
	go s.supervise(jr)
}

// fail makes j FAILED with reason, taking Service.mu. The caller holds j's
// name guard.
func (s *Service) fail(j *Job, reason string) error {
	s.mu.Lock() // lock order 3
	defer s.mu.Unlock()
	return s.failLocked(j, reason)
}

// failLocked makes j FAILED with reason. Service.mu is held.
func (s *Service) failLocked(j *Job, reason string) error {
	s.opts.Logger.Error("job failed", "job_id", j.ID, "job_name", j.Name, "error", reason)
	return s.transitionLocked(j, StateFailed, reason)
}

// supervise watches one execution: it takes a checkpoint every interval,
// finishes the job when its execution ends, and suspends it when the
// service closes.
func (s *Service) supervise(jr *jobRun) {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-jr.x.Done():
			s.finish(jr)
			return
		case <-s.ctx.Done():
			j, err := s.readJob(jr.id)
			select {
			case <-jr.x.Done():
				s.finish(jr)
			default:
				if err == nil && j.State == StateCancelling {
					// Finish the cancel rather than resume a cancelled job.
					<-jr.x.Done()
					s.finish(jr)
					return
				}
				s.suspend(jr)
			}
			return
		case <-t.C:
			now := s.now()
			jr.observe(now)
			s.recordHistory(jr, now)
			s.changes.notify()
			if jr.checkpointed && s.sinkRetryDue(jr) {
				if err := s.checkpoint(jr, nil); err != nil {
					s.checkpointFailed(jr, err)
				}
			}
		}
	}
}

// errNotWritten says a checkpoint was taken but deliberately not written
// (the job is being cancelled).
var errNotWritten = errors.New("checkpoint not written: the job is cancelling")

// checkpoint takes a checkpoint of jr, writes it together with the job
// record (to which final, when set, applies the terminal transition) in one
// atomic write, then lets sinks commit and sources acknowledge. It takes
// jr.cpMu for the whole checkpoint and Service.mu for the write only; with
// final set, the caller holds the name's guard.
func (s *Service) checkpoint(jr *jobRun, final func(*Job) error) error {
	jr.cpMu.Lock() // lock order 2
	defer jr.cpMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), finalCheckpointTimeout)
	defer cancel()
	start := time.Now()
	cp, err := jr.x.Checkpoint(ctx)
	if err != nil {
		return err
	}
	if err := s.writeCheckpoint(jr, cp, final, nil); err != nil {
		return err
	}
	if err := jr.x.Commit(ctx, cp); err != nil {
		return &commitError{epoch: cp.Epoch, err: err}
	}
	s.sinkCommitted(jr, cp.Epoch)
	s.observeCheckpoint(jr, time.Since(start), checkpointSize(cp))
	return nil
}

// writeCheckpoint writes checkpoint cp of jr with jr's job record, under
// Service.mu (jr.cpMu is held). written, when set, is called under the
// same hold of Service.mu once the write landed (a snapshot pins the
// store there: no other store write comes between).
func (s *Service) writeCheckpoint(jr *jobRun, cp *contract.Checkpoint, final func(*Job) error, written func()) error {
	s.mu.Lock() // lock order 3, after jr.cpMu
	defer s.mu.Unlock()
	j, err := s.readJob(jr.id)
	if err != nil {
		return err
	}
	if j.State == StateCancelling || j.State.Terminal() {
		return errNotWritten
	}
	j.LastCheckpoint = &CheckpointInfo{Epoch: cp.Epoch, Time: s.now()}
	j.Counters = jr.totals()
	j.DeadLetters = jr.deadLetters.Load()
	if d := jr.lastDeadLetter.Load(); d != nil {
		j.LastDeadLetter = *d
	}
	from := j.State
	if final != nil {
		if err := final(j); err != nil {
			return err
		}
	}
	w := &state.Write{}
	if err := s.terminalWriteLocked(w, j); err != nil {
		return err
	}
	s.stateEventLocked(w, j, from)
	if err := s.writeCheckpointLocked(jr.lineage, jr.id, cp, w); err != nil {
		return fmt.Errorf("writing checkpoint %d: %w", cp.Epoch, err)
	}
	if written != nil {
		written()
	}
	return nil
}

// checkpointFailed handles a failed periodic checkpoint: one that was not
// written loses the state changes it carried, so the job cannot go on.
func (s *Service) checkpointFailed(jr *jobRun, err error) {
	select {
	case <-jr.x.Done():
		return // the end is handled by finish
	default:
	}
	if errors.Is(err, errNotWritten) || s.storeFailed() != nil {
		return // a failed store stopped every execution (fault.go)
	}
	if s.sinkUnavailable(jr, err) {
		return // retried on the storage retry interval (fault_sink.go)
	}
	// A state change of the job: under its name's guard (lock order 1),
	// which an update or rescale of the job holds until it is done.
	unlock, _ := s.lockName(context.Background(), jr.name) // no deadline: never fails
	defer unlock()
	s.mu.Lock() // lock order 3
	defer s.mu.Unlock()
	if jr.superseded.Load() || s.runningJob(jr.id) != jr {
		return // another execution of the job took over meanwhile
	}
	j, rerr := s.readJob(jr.id)
	if rerr != nil || j.State.Terminal() {
		return
	}
	reason := s.checkpointFailure(jr, err)
	s.emitLocked(j.ID, EventCheckpointFailed, SeverityError, reason, map[string]any{"error": err.Error()})
	if ferr := s.failLocked(j, reason); ferr != nil {
		s.opts.Logger.Error("recording a job failure", "job_id", jr.id, "error", ferr)
	}
	jr.x.Cancel()
}

// finish records the end of an execution that ended by itself (or was
// cancelled): DONE or DRAINED after a final checkpoint, CANCELLED, or FAILED.
func (s *Service) finish(jr *jobRun) {
	res, runErr := jr.x.Wait()
	if jr.superseded.Load() {
		return // a rescale took over the job with a new execution
	}
	if h := s.hooks.finishing; h != nil {
		h(jr.id)
	}
	// The end of a job is a state change of its name: under the name's
	// guard (lock order 1), after any update or rescale in progress, which
	// may have replaced the job or superseded this execution.
	unlock, _ := s.lockName(context.Background(), jr.name) // no deadline: never fails
	defer unlock()
	if jr.superseded.Load() {
		return
	}
	log := s.opts.Logger.With("job_id", jr.id, "job_name", jr.name)
	if f := s.storeFailed(); f != nil {
		// The store failed and stopped the execution: the job keeps its
		// state and its last durable checkpoint, and nothing records an end
		// the store could not make durable.
		log.Error("job stopped: the state store failed", "code", errcode.StorageUnavailable, "error", f.cause)
		s.forget(jr)
		return
	}
	j, err := s.readJob(jr.id)
	if err != nil {
		log.Error("reading the record of a finished job", "error", err)
		s.forget(jr)
		return
	}
	now := s.now()
	metrics := jr.metricsOf(now, res)
	var target JobState
	reason := ""
	switch {
	case j.State.Terminal():
		s.forget(jr) // failed by a checkpoint error
		return
	case j.State == StateCancelling:
		target, reason = StateCancelled, "cancelled"
	case runErr != nil:
		target, reason = StateFailed, s.runFailure(jr, runErr)
	case j.State == StateDraining:
		target, reason = StateDrained, "drain completed"
	default:
		target, reason = StateDone, "execution completed"
	}
	if (target == StateDone || target == StateDrained) && jr.checkpointed {
		err := s.checkpoint(jr, func(j *Job) error {
			j.Metrics, j.PendingCommit = metrics, true
			return transition(j, target, s.now(), reason)
		})
		if err == nil {
			err = jr.x.CloseSinks(context.Background())
			if err == nil {
				err = s.clearPendingCommit(jr.id)
			}
			if err == nil {
				log.Info("job finished", "state", target)
				s.forget(jr)
				return
			}
		}
		if j2, rerr := s.readJob(jr.id); rerr == nil && j2.State.Terminal() {
			// The terminal state is durable; a restart re-commits (pending_commit).
			log.Error("committing the final checkpoint", "error", err)
			s.forget(jr)
			return
		}
		target, reason = StateFailed, fmt.Sprintf("final checkpoint failed: %v", err)
	}
	s.mu.Lock() // lock order 3
	j, err = s.readJob(jr.id)
	if err == nil && !j.State.Terminal() {
		j.Metrics = metrics
		j.DeadLetters = jr.deadLetters.Load()
		if d := jr.lastDeadLetter.Load(); d != nil {
			j.LastDeadLetter = *d
		}
		err = s.transitionLocked(j, target, reason)
	}
	s.mu.Unlock()
	switch {
	case err != nil:
		log.Error("recording the end of a job", "error", err)
	case target == StateFailed:
		log.Error("job failed", "error", reason)
	}
	s.forget(jr)
}

func (s *Service) clearPendingCommit(id string) error {
	s.mu.Lock() // lock order 3
	defer s.mu.Unlock()
	j, err := s.readJob(id)
	if err != nil {
		return err
	}
	j.PendingCommit = false
	w := &state.Write{}
	if err := putJSON(w, jobKey(id), j); err != nil {
		return err
	}
	return s.applyLocked(w)
}

// suspend checkpoints jr (write and commit) and stops its execution
// without changing its state: the service is closing and the job resumes
// from this checkpoint on the next Open.
func (s *Service) suspend(jr *jobRun) {
	log := s.opts.Logger.With("job_id", jr.id, "job_name", jr.name)
	if jr.checkpointed {
		if err := s.checkpoint(jr, nil); err != nil && !errors.Is(err, errNotWritten) {
			log.Error("checkpoint at shutdown failed: the job resumes from its previous checkpoint", "error", err)
		}
	}
	jr.x.Cancel()
	<-jr.x.Done()
	log.Info("job suspended: it resumes when the server starts again")
	s.forget(jr)
}

// forget lets go of jr: it is no longer the live execution of its job.
func (s *Service) forget(jr *jobRun) {
	s.mu.Lock() // lock order 3
	s.running.CompareAndDelete(jr.id, jr)
	s.live.CompareAndDelete(jr.name, jr)
	s.mu.Unlock()
	j, err := s.readJob(jr.id)
	s.flushHistory(jr.id, err == nil && j.State.Terminal() && s.runningJob(jr.id) == nil)
	s.changes.notify()
}

// recover resumes, on Open, every job the previous process left active,
// and re-commits terminal jobs whose final commit was not confirmed.
func (s *Service) recover() error {
	var jobs []*Job
	err := s.store.Scan("job/", func(_ string, v []byte) error {
		j := &Job{}
		if err := unmarshalJob(v, j); err != nil {
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
	since := s.now()
	for _, j := range jobs {
		if j.Active() && j.SDK != SDKGo {
			s.resuming.Store(j.ID, since)
			s.emit(j.ID, EventConditionChanged, SeverityWarning, "the service restarted: the job resumes from its last checkpoint",
				map[string]any{"code": string(errcode.Resuming), "set": true})
		}
	}
	s.mu.Lock() // lock order 3: wg.Add under mu (see Close)
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer close(s.recovered)
		sem := make(chan struct{}, recoveryConcurrency)
		var wg sync.WaitGroup
		for _, j := range jobs {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				defer s.changes.notify()
				defer s.resuming.Delete(j.ID)
				if h := s.hooks.resuming; h != nil {
					h(j.ID)
				}
				if err := s.recoverJob(s.ctx, j); err != nil && s.ctx.Err() == nil {
					s.opts.Logger.Error("resuming a job after a restart", "job_id", j.ID, "job_name", j.Name, "error", err)
				}
			}()
		}
		wg.Wait()
	}()
	return nil
}

// recoveryConcurrency is how many jobs resume at once after a restart.
const recoveryConcurrency = 4

// recoverJob resumes or re-commits j on Open, under its name's guard
// (supervisors of jobs recovered before it already run).
func (s *Service) recoverJob(ctx context.Context, j *Job) error {
	unlock, err := s.lockName(ctx, j.Name) // lock order 1
	if err != nil {
		return err
	}
	defer unlock()
	log := s.opts.Logger.With("job_id", j.ID, "job_name", j.Name)
	if j.State == StateCancelling {
		s.mu.Lock() // lock order 3
		defer s.mu.Unlock()
		return s.transitionLocked(j, StateCancelled, "cancelled (completed after a restart)")
	}
	if j.SDK == SDKGo && j.Active() {
		// Its program resumes or updates it (StartProgram).
		log.Info("job is a Go program's: it resumes when its program starts")
		return nil
	}
	p, err := s.load(j)
	if err != nil {
		if j.Active() {
			return s.fail(j, fmt.Sprintf("the pipeline no longer loads after a restart: %v", err))
		}
		log.Error("re-committing the final checkpoint: the pipeline no longer loads", "error", err)
		return nil
	}
	if !j.Active() {
		_, cp, err := s.store.Restore(j.stateLineage(), j.ID)
		if err == nil && cp != nil {
			err = runner.CommitRestored(ctx, p.Program(), cp)
		}
		if err != nil {
			log.Error("re-committing the final checkpoint", "error", err)
			return nil
		}
		j.PendingCommit = false
		w := &state.Write{}
		if err := putJSON(w, jobKey(j.ID), j); err != nil {
			return err
		}
		s.mu.Lock() // lock order 3
		defer s.mu.Unlock()
		return s.applyLocked(w)
	}
	if j.State == StatePending && j.Replacement != nil && !j.Replacement.Phase.Final() {
		// A replacement job waiting for its flow: the flow resumes where
		// it was (the old job resumes as its own record says).
		log.Info("resuming a replacement flow", "phase", j.Replacement.Phase, "old_job_id", j.Replacement.OldJobID)
		s.startDriver(j.ID)
		return nil
	}
	log.Info("resuming job", "state", j.State)
	if err := s.launch(ctx, j, p.Program(), nil); err != nil {
		return err
	}
	if parallelDriven(j) {
		log.Info("resuming a parallel replacement flow", "phase", j.Replacement.Phase, "old_job_id", j.Replacement.OldJobID)
		s.startDriver(j.ID)
	}
	if s.runningJob(j.ID) != nil {
		d := map[string]any{"code": string(errcode.Resuming), "set": false}
		msg := "the job resumed after a restart"
		if j.LastCheckpoint != nil {
			d["epoch"] = j.LastCheckpoint.Epoch
			msg += fmt.Sprintf(" from checkpoint %d", j.LastCheckpoint.Epoch)
		} else {
			msg += " from the beginning (it had no checkpoint)"
		}
		s.emit(j.ID, EventRecovered, SeverityInfo, msg, d)
	}
	return nil
}

// runningIDs returns the IDs of the live executions (for tests).
func (s *Service) runningIDs() []string {
	var ids []string
	s.running.Range(func(k, _ any) bool {
		ids = append(ids, k.(string))
		return true
	})
	sort.Strings(ids)
	return ids
}
