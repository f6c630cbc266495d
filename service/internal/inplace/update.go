package inplace

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/internal/rewind"
	"github.com/weir-dev/weir/service/internal/snapshots"
	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/state"
)

// UpdateInPlace is the in-place update of Update.
func (s *InPlace) UpdateInPlace(ctx context.Context, req core.UpdateRequest) (*core.UpdateResult, error) {
	// The options are validated whole in prepareUpdate, once the running
	// job's values have filled those the request left unset.
	mapping, err := s.AdmitChange(req.Name, req.Mapping, nil)
	if err != nil {
		return nil, err
	}
	if err := req.Options.ValidateGiven(); err != nil {
		return nil, err
	}
	if req.PipelineFile == "" {
		req.PipelineFile = "pipeline.yaml"
	}
	if req.BaseDir == "" {
		return nil, errcode.Errorf(errcode.InvalidRequest, "base_dir must be an absolute directory (the client's working directory)")
	}
	end, err := s.Updating.Begin(req.Name)
	if err != nil {
		return nil, err
	}
	defer end()
	// Lock order 1: the name's guard, for the whole update. No other
	// operation changes the name's jobs or lineage until it is released,
	// so what prepareUpdate reads stays current.
	unlock, err := s.LockName(ctx, req.Name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	u, res, err := s.prepareUpdate(req, mapping)
	if err != nil || u == nil {
		return res, err
	}
	if u.jr == nil {
		return s.updateWaiting(ctx, u) // no execution: it waits for its connector
	}
	if movesState(u.p.Program()) {
		// A re-key moves every earlier key during the pause and allocates
		// in proportion (the new keys, the deletions of the earlier
		// ones). Collect first, while the job runs on and checkpoints: a
		// collection that starts during the move, on a heap of millions
		// of keys, takes seconds of marking that the move then shares (at
		// 1M keys the pause went from 1.2 s to 1.3–2.6 s when one did).
		// It costs the update's caller the collection's time, not the job
		// a pause.
		runtime.GC()
	}
	if h := s.Hooks.Checked; h != nil {
		h(u.old.ID)
	}
	// Lock order 2: the old execution's checkpoints wait (a periodic one in
	// flight finishes first) until the update is done.
	u.jr.CpMu.Lock()
	defer u.jr.CpMu.Unlock()
	if err := s.checkSinksAgain(ctx, u); err != nil {
		return nil, err
	}
	if err := s.pauseForUpdate(ctx, u); err != nil {
		return nil, err
	}
	err = s.handOver(ctx, u)
	if u.njr != nil {
		defer u.njr.CpMu.Unlock() // taken by handOver
	}
	if err != nil {
		return nil, err
	}
	s.updatePhase(u, "handed-over")
	if err := s.persistHandover(ctx, u); err != nil {
		return nil, err
	}
	s.updatePhase(u, "persisted")
	s.snaps.FinishRollbackCut(u.rb) // rollback.go: the rollback snapshot's copy
	s.updatePhase(u, "cut")
	s.finishHandover(ctx, u)
	s.updatePhase(u, "finished")
	s.Opts.Logger.Info("job updated", "job_name", req.Name, "old_job_id", u.old.ID, "new_job_id", u.nj.ID,
		"generation", u.nj.Generation, "pause_ms", res.PauseMillis)
	res.Job = u.nj
	return res, nil
}

// updatePhase calls the updatePhase test hook, when set, after phase.
func (s *InPlace) updatePhase(u *update, phase string) {
	if h := s.Hooks.UpdatePhase; h != nil {
		h(u.old.ID, phase)
	}
}

// update is an in-place update on its way through the phases of Update.
type update struct {
	// Found by prepareUpdate, the only phase that reads the registry.
	old      *record.Job     // the running job
	l        *record.Lineage // its name's lineage
	jr       *core.Run       // its live execution; nil when it waits for its connector
	nj       *record.Job     // the new job, PENDING (or DRAINING after a draining job)
	p        *weir.Pipeline
	newGraph *graph.Pipeline
	report   compat.Report
	res      *core.UpdateResult

	pausedAt time.Time              // when pauseForUpdate began
	cp       *contract.Checkpoint   // the handover checkpoint (pauseForUpdate)
	h        state.Handover         // what it hands over (handOver)
	njr      *core.Run              // the new execution (handOver)
	rb       *snapshots.RollbackCut // the rollback snapshot (persistHandover)
}

// prepareUpdate is the update's phase 1, prepare and check: it reads the
// name's lineage and running job (once: the records stay current under the
// guard), loads the new pipeline and runs the compatibility check. A
// refused or validate-only attempt is recorded (the registry lock for the write)
// and ends the update: a nil update with a nil error means the result is
// final (validate-only). The caller holds the name's guard; no other lock.
func (s *InPlace) prepareUpdate(req core.UpdateRequest, mapping compat.Mapping) (*update, *core.UpdateResult, error) {
	if s.Closing.Load() {
		return nil, nil, errcode.Errorf(errcode.ShuttingDown, "the weir server is shutting down; update again once it is back")
	}
	l, err := s.ReadLineage(req.Name)
	if err != nil {
		return nil, nil, err
	}
	if l.ActiveJobID == "" {
		if l.LatestJobID != "" {
			if latest, err := s.ReadJob(l.LatestJobID); err == nil && latest.State == record.StateUpdated {
				return nil, nil, errcode.Errorf(errcode.JobAlreadyUpdated, "job %s (%s) has already been updated into job %s", req.Name, latest.ID, latest.ReplacedByJobID)
			}
		}
		return nil, nil, errcode.Errorf(errcode.NoRunningJob, "no running job named %s", req.Name)
	}
	old, err := s.ReadJob(l.ActiveJobID)
	if err != nil {
		return nil, nil, errcode.Internalf("reading the active job of %q: %w", req.Name, err)
	}
	if old.SDK == record.SDKGo {
		return nil, nil, errcode.Errorf(errcode.IllegalTransition, "job %s (%s) is a Go program's: update it by starting the program's new build with --update", req.Name, old.ID)
	}
	switch old.State {
	case record.StateRunning, record.StateDraining:
	case record.StateUpdated:
		return nil, nil, errcode.Errorf(errcode.JobAlreadyUpdated, "job %s (%s) has already been updated into job %s", req.Name, old.ID, old.ReplacedByJobID)
	default:
		return nil, nil, errcode.Errorf(errcode.NoRunningJob, "no running job named %s: its active job %s is %s", req.Name, old.ID, old.State)
	}
	jr := s.RunningJob(old.ID)
	// A job waiting for its connector (CONNECTOR_UNAVAILABLE) has no
	// execution, but its state is in the store: it is updated there
	// (updateWaiting), so that the update itself can be the fix (a
	// corrected address or credentials).
	waiting := jr == nil && s.WaitsForConnector(old.ID)
	if jr == nil && !waiting {
		return nil, nil, s.NoExecutionError(req.Name, old, "an in-place update takes over a live execution's state: update again once the job runs")
	}
	oldGraph, err := graph.Parse(old.Graph)
	if err != nil {
		return nil, nil, errcode.Internalf("reading the graph of job %s: %w", old.ID, err)
	}
	opts := req.Options.Inherit(old.Options)
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, nil, err
	}
	now := s.Now()
	id, err := record.NewJobID(now)
	if err != nil {
		return nil, nil, errcode.Internalf("%w", err)
	}
	nj := &record.Job{ID: id, Name: req.Name, State: record.StatePending, CreateTime: now, StateTime: now,
		Generation: l.Generation + 1, Pipeline: req.Pipeline, PipelineFile: req.PipelineFile,
		BaseDir: req.BaseDir, Options: opts, ReplacesJobID: old.ID,
		History: []record.StateChange{{State: record.StatePending, Time: now, Reason: "update of job " + old.ID}}}
	nj.InheritFrom(old)
	if len(mapping) > 0 {
		nj.TransformNameMapping = mapping
	}
	// The state handed over is as partial as it was: the windows that
	// began before the old job's input stay cut short.
	nj.InputStart, nj.InputStartNote = old.InputStart, old.InputStartNote
	// A re-reading replacement job still catching up keeps its guarantee
	// through the update: the new job re-reads on as it did.
	if waiting {
		nj.CatchUp = rewind.Of(old) // still catching up as far as anyone knows
	} else {
		nj.CatchUp = rewind.CarriedCatchUp(old, jr)
	}
	p, loadErr := s.Load(nj)
	if loadErr != nil {
		// A pipeline that does not load for a run (say its SQL table
		// cannot hold the new rows) may still load for its graph: the
		// check then says what the change breaks (a key change, as weir
		// check does) before the load error does.
		gp, err := s.LoadGraph(nj)
		if err != nil {
			return nil, nil, loadErr
		}
		p = gp
	}
	newGraph := p.Graph()
	report := compat.Check(oldGraph, newGraph, compat.Options{Mapping: mapping, AllowSourceChange: req.AllowSourceChange})
	if loadErr != nil && report.Compatible {
		return nil, nil, loadErr
	}
	canon, err := newGraph.Canonical()
	if err != nil {
		return nil, nil, errcode.Errorf(errcode.InvalidPipeline, "%s: serialising the pipeline graph: %w", req.PipelineFile, err)
	}
	sum := old.Summary()
	res := &core.UpdateResult{Report: report, Replaced: &sum, Options: &opts, OptionsChanged: old.Options.ChangesTo(opts), Graph: canon}
	if !report.Compatible || req.ValidateOnly {
		w := &state.Write{}
		if err := core.PutJSON(w, core.AttemptKey(req.Name, now), core.Attempt{Time: now, Name: req.Name, RunningJobID: old.ID,
			ValidateOnly: req.ValidateOnly, Report: report, Pipeline: req.Pipeline}); err != nil {
			return nil, nil, err
		}
		if err := s.Apply(w); err != nil {
			return nil, nil, errcode.Internalf("recording the update attempt: %w", err)
		}
		if !report.Compatible {
			s.AttemptEvent(old.ID, report)
			s.Opts.Logger.Warn("update refused: the new pipeline is not compatible; the running job was not changed",
				"job_name", req.Name, "job_id", old.ID, "problems", len(report.Errors))
			return nil, res, errcode.Errorf(errcode.IncompatibleUpdate, "the update of job %s (%s) is not compatible (%d problem(s)); the running job was not changed", req.Name, old.ID, len(report.Errors))
		}
		s.AttemptEvent(old.ID, report)
		res.Notes = append(res.Notes, fmt.Sprintf("compatible: job %s would be updated in place into a new job of generation %d (validate only: nothing changed)", old.ID, nj.Generation))
		if waiting {
			res.Notes = append(res.Notes, waitingNote(old.ID))
		}
		return nil, res, nil
	}
	nj.Graph, nj.Type = canon, record.TypeOf(newGraph)
	if old.State == record.StateDraining {
		// A draining job's successor keeps draining.
		if err := record.Transition(nj, record.StateDraining, now, "replaces a draining job"); err != nil {
			return nil, nil, errcode.Internalf("%w", err)
		}
	}
	return &update{old: old, l: l, jr: jr, nj: nj, p: p, newGraph: newGraph, report: report, res: res}, res, nil
}

// checkSinksAgain checks the new pipeline's sinks against their tables
// again (core.CheckSinks), once the old execution can commit nothing more
// (the caller holds its cpMu). A sink sets its table up at its job's first
// commit: one that did so after prepareUpdate's load (a job updated
// moments after it started) may have made a table the new sink cannot
// write, which that load could not see. Refused now, the update changes
// nothing and the job runs on; found later, the new job would fail at its
// first commit after replacing the old one.
func (s *InPlace) checkSinksAgain(ctx context.Context, u *update) error {
	ctx, cancel := context.WithTimeout(ctx, sinkCheckTimeout)
	defer cancel()
	if err := core.CheckSinks(ctx, u.nj.PipelineFile, u.p); err != nil {
		s.Opts.Logger.Warn("update refused: a sink of the new pipeline cannot write what the running job set up meanwhile; the running job was not changed",
			"job_name", u.old.Name, "job_id", u.old.ID, "error", err)
		return err
	}
	return nil
}

// sinkCheckTimeout bounds checkSinksAgain (a database that does not
// answer refuses the update instead of holding the job's checkpoints).
const sinkCheckTimeout = 30 * time.Second

// pauseForUpdate is the update's phase 2, pause: the old execution pauses
// at an aligned checkpoint (its sources read nothing after the barrier,
// its keyed steps freeze). The caller holds the name's guard and the old
// execution's cpMu, not the registry lock: the pause waits for the barrier.
func (s *InPlace) pauseForUpdate(ctx context.Context, u *update) error {
	// The guard keeps the records as read; only the execution can have
	// ended (its end waits for the guard to be recorded) or the service
	// begun closing.
	if s.Closing.Load() {
		return errcode.Errorf(errcode.ShuttingDown, "the weir server is shutting down; update again once it is back")
	}
	if s.RunningJob(u.old.ID) != u.jr {
		return errcode.Errorf(errcode.NoRunningJob, "no running job named %s: the execution of job %s ended during the update", u.old.Name, u.old.ID)
	}
	u.pausedAt = time.Now()
	cp, err := u.jr.X.Pause(ctx)
	if err != nil {
		return errcode.Internalf("taking the handover checkpoint of job %s: %w", u.old.ID, err)
	}
	u.cp = cp
	if h := s.Hooks.Paused; h != nil {
		h(u.old.ID)
	}
	return nil
}

// handOver is the update's phase 3, hand over: the new execution starts at
// once from the checkpoint's positions, adopting the keyed state, open
// windows and timers in memory — the data pause ends here — and takes its
// cpMu (released by Update once the update is done), so that it takes no
// checkpoint before the handover is durable. Then the checkpoint's changed
// keys are encoded (by the new execution's workers, copy on write). The
// caller holds the name's guard and the old execution's cpMu, not
// the registry lock. A failure aborts the update (abortUpdate).
func (s *InPlace) handOver(ctx context.Context, u *update) error {
	u.h = handoverOf(u.old.StateKey(), u.old.ID, u.nj.ID, u.cp.Positions, u.report)
	adopt := &runner.Adoption{From: u.jr.X, Steps: map[string]string{}}
	for _, m := range u.report.Matches {
		if m.Kind.IsKeyed() {
			adopt.Steps[m.New] = m.Old
		}
	}
	restore := &contract.Restore{Epoch: u.cp.Epoch, Positions: u.h.Positions}
	njr, err := s.StartExecution(ctx, u.nj, u.p.Program(), restore, adopt)
	if err != nil {
		// Nothing adopted the paused state: the old job resumes from its
		// last durable checkpoint.
		return s.abortUpdate(ctx, u, fmt.Errorf("starting the new job: %w", err))
	}
	u.res.PauseMillis = time.Since(u.pausedAt).Milliseconds()
	u.njr = njr
	s.Live.Store(u.nj.Name, njr)
	// Lock order 2, a second cpMu: the new execution has no supervisor yet,
	// so nothing else holds or waits for it.
	njr.CpMu.Lock() // lock order 2
	if err := u.cp.Complete(ctx); err != nil {
		return s.abortUpdate(ctx, u, fmt.Errorf("encoding the handover checkpoint: %w", err))
	}
	return nil
}

// persistHandover is the update's phase 4, persist: one atomic write (the
// handover checkpoint, the old job UPDATED, the new job RUNNING or
// DRAINING, the lineage pointing at it, state rebinds). Until it lands the
// old job stays the recovery point and the new execution commits nothing.
// It writes the records prepareUpdate read without reading them again:
// the name's guard and both executions' cpMu exclude every other writer.
// The caller holds those; the registry lock is taken for the write only. A
// failure aborts the update.
func (s *InPlace) persistHandover(ctx context.Context, u *update) error {
	now := s.Now()
	old, nj, l := u.old, u.nj, u.l
	oldFrom, newFrom := old.State, nj.State
	if err := record.Transition(old, record.StateUpdated, now, "updated into job "+nj.ID); err != nil {
		return s.abortUpdate(ctx, u, err)
	}
	old.ReplacedByJobID = nj.ID
	old.LastCheckpoint = &record.CheckpointInfo{Epoch: u.cp.Epoch, Time: now}
	old.DeadLetters = u.jr.DeadLetters.Load()
	if d := u.jr.LastDeadLetter.Load(); d != nil {
		old.LastDeadLetter = *d
	}
	// Until its sinks confirm the handover epoch, a restart re-commits it.
	old.PendingCommit = true
	old.Metrics = u.jr.MetricsAt(now)
	old.Counters = u.jr.Totals()
	if nj.State == record.StatePending {
		if err := record.Transition(nj, record.StateRunning, now, "execution started"); err != nil {
			return s.abortUpdate(ctx, u, err)
		}
	}
	l.Generation, l.ActiveJobID, l.LatestJobID = nj.Generation, nj.ID, nj.ID
	w := &state.Write{}
	// The rollback snapshot of the old job: its record in this write, its
	// state copied from the store as this write leaves it (rollback.go).
	rb, err := s.snaps.UpdateRollbackCut(u.old, u.nj.ID, u.cp, u.h.Renames)
	if err != nil {
		return s.abortUpdate(ctx, u, err)
	}
	if err := rb.Put(w); err != nil {
		return s.abortUpdate(ctx, u, err)
	}
	if err := putUpdateRecords(w, old, nj, l); err != nil {
		return s.abortUpdate(ctx, u, err)
	}
	err = s.Update(func(tx *core.Tx) error { // the write only
		tx.StateEvent(w, old, oldFrom)
		tx.StateEvent(w, nj, newFrom)
		d := map[string]any{"old_job_id": old.ID, "new_job_id": nj.ID, "generation": nj.Generation}
		tx.AddEvent(w, old.ID, record.EventUpdateSucceeded, record.SeverityInfo, "updated in place into job "+nj.ID, d)
		tx.AddEvent(w, nj.ID, record.EventUpdateSucceeded, record.SeverityInfo, "started as the in-place update of job "+old.ID, d)
		tx.ReleaseEvents(w, u.njr)
		if err := tx.WriteHandover(u.h, u.cp, w); err != nil {
			return err
		}
		rb.Landed(tx)
		u.rb = rb
		return nil
	})
	if err != nil {
		return s.abortUpdate(ctx, u, errcode.Internalf("writing the handover of job %s: %w", old.ID, err))
	}
	return nil
}

// finishHandover is the update's phase 5, finish: the handover is durable,
// so the old job's sinks commit the handover epoch, its sources
// acknowledge, then it stops (its supervisor finds it UPDATED and only
// forgets it), and the new execution gets its supervisor. The caller holds
// the name's guard and both executions' cpMu; the registry lock is taken for the
// writes only.
func (s *InPlace) finishHandover(ctx context.Context, u *update) {
	commitErr := u.jr.X.Commit(ctx, u.cp)
	u.jr.X.Cancel()
	<-u.jr.X.Done()
	if commitErr == nil {
		// Everything up to the handover is committed: what the old sinks
		// hold out of sight (a rolling file part) becomes visible. Until
		// then the old job's commit stays pending (a restart commits the
		// handover again with a fresh build, which does it).
		commitErr = u.jr.X.ReleaseSinks(ctx)
	}
	if commitErr != nil {
		s.Opts.Logger.Error("committing the handover checkpoint (a restart commits it again)", "job_id", u.old.ID, "error", commitErr)
	} else {
		u.old.PendingCommit = false
		cw := &state.Write{}
		if err := core.PutJSON(cw, record.JobKey(u.old.ID), u.old); err == nil {
			if err := s.Apply(cw); err != nil {
				s.Opts.Logger.Error("recording the handover commit", "job_id", u.old.ID, "error", err)
			}
		}
	}
	closing := false
	_ = s.Update(func(tx *core.Tx) error {
		if closing = tx.Closing(); !closing {
			tx.Supervise(u.nj, u.njr)
		}
		return nil
	})
	if closing {
		// The handover is durable: the new job resumes from it on the next Open.
		u.njr.X.Cancel()
		<-u.njr.X.Done()
		s.Live.CompareAndDelete(u.nj.Name, u.njr)
	}
}

// abortUpdate undoes an update whose handover could not be written: the
// new execution (when one started) is cancelled, and the old job — still
// the active job in the registry — resumes from its last durable
// checkpoint with a new execution (its paused one gave its state away),
// read back from the registry. It returns cause, worded for the user. The
// caller holds the name's guard and the old execution's cpMu, not
// the registry lock.
func (s *InPlace) abortUpdate(ctx context.Context, u *update, cause error) error {
	if njr := u.njr; njr != nil {
		njr.X.Cancel()
		<-njr.X.Done()
		s.Live.CompareAndDelete(u.old.Name, njr)
	}
	u.jr.Superseded.Store(true)
	u.jr.X.Cancel()
	<-u.jr.X.Done()
	s.Forget(u.jr)
	s.Opts.Logger.Error("update failed; the running job resumes from its last checkpoint", "job_id", u.old.ID, "job_name", u.old.Name, "error", cause)
	s.Emit(u.old.ID, record.EventUpdateFailed, record.SeverityError, "the update failed and changed nothing; the job resumes from its last checkpoint: "+cause.Error(),
		map[string]any{"error": cause.Error()})
	j, err := s.ReadJob(u.old.ID)
	if err != nil {
		return errors.Join(cause, errcode.Internalf("reading job %s to resume it: %w", u.old.ID, err))
	}
	p, err := s.Load(j)
	if err != nil {
		return errors.Join(cause, s.Fail(j, fmt.Sprintf("reloading the pipeline after a failed update: %v", err)))
	}
	if err := s.Launch(ctx, j, p.Program(), nil); err != nil {
		return errors.Join(cause, err)
	}
	return fmt.Errorf("the update of job %s (%s) failed and changed nothing; the job resumed from its last checkpoint: %w", u.old.Name, u.old.ID, cause)
}

// movesState reports whether prog declares a re-key of a keyed step's
// state (contract.Rekeyer), which the handover then moves.
func movesState(prog *contract.Program) bool {
	for _, code := range prog.Code {
		if rk, ok := code.(contract.Rekeyer); ok && rk.RekeysState() {
			return true
		}
	}
	return false
}
