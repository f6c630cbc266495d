package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/runner/contract"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/state"
)

// UpdateRequest replaces the running job of a name with a new version of
// its pipeline that inherits its state (Dataflow's in-place update).
type UpdateRequest struct {
	SubmitRequest
	// Mapping renames (or, mapped to "", deletes on purpose) steps of the
	// running job: JSON {"Old": "New"} with prefixes matched on '/' boundaries.
	Mapping string
	// AllowSourceChange accepts a source that reads something else; the old
	// source's positions are then dropped.
	AllowSourceChange bool
	// ValidateOnly runs the compatibility check and changes nothing.
	ValidateOnly bool
	// JinjaVariables, when not nil, make the service render Pipeline as a
	// Jinja template first (without includes: see jinja.go).
	JinjaVariables map[string]any
}

// UpdateResult is the outcome of an update: the compatibility report, and
// the new job when the update happened.
type UpdateResult struct {
	Report compat.Report `json:"report"`
	// Job is the replacement job (nil when validate-only or refused).
	Job *Job `json:"job,omitempty"`
	// Replaced is the job that was replaced (or would be).
	Replaced *Summary `json:"replaced,omitempty"`
	// PauseMillis is how long the job read nothing: from the pause of the
	// old execution to the start of the new one (the handover's durable
	// write follows while the new execution runs).
	PauseMillis int64 `json:"pause_ms,omitempty"`
	// Options are the new job's options: those the request gave, the
	// running job's for the rest (JobOptions.Inherit).
	Options *JobOptions `json:"options,omitempty"`
	// OptionsChanged lists the options that differ from the running job's.
	OptionsChanged []OptionChange `json:"options_changed,omitempty"`
	// Notes say what the request's service options made of it, and what
	// they ignored ("the in-place update ignores ...").
	Notes []string `json:"notes,omitempty"`
	// Graph is the new pipeline's canonical graph, as the check read it
	// (set by the in-place check, also when it refuses): what the console's
	// update preview draws.
	Graph json.RawMessage `json:"graph,omitempty"`
	// RenderedPipeline is the pipeline as the Jinja rendering left it,
	// when the request asked for one (UpdateRequest.JinjaVariables).
	RenderedPipeline string `json:"rendered_pipeline,omitempty"`
}

// Attempt is a recorded update attempt that the check refused (a refused
// attempt creates no job) or that was only validated.
type Attempt struct {
	Time         time.Time     `json:"time"`
	Name         string        `json:"name"`
	RunningJobID string        `json:"running_job_id"`
	ValidateOnly bool          `json:"validate_only"`
	Report       compat.Report `json:"report"`
	Pipeline     string        `json:"pipeline"`
}

func attemptKey(name string, t time.Time) string {
	return fmt.Sprintf("attempt/%s/%020d", name, t.UnixNano())
}

// Update checks req's pipeline against the running (or draining) job of
// req.Name and, when compatible, replaces it: the old job takes a final
// checkpoint and ends UPDATED (replaced_by_job_id), the new job (new ID,
// same name, next generation, replaces_job_id) starts from that checkpoint
// with every matched step's state, timers and open windows, and sources
// continue exactly where the checkpoint left them. The handover (the old
// job's state transition, the new job's record and checkpoint, state
// namespace rebinds for renamed steps) is one atomic write. When the check
// fails, nothing changes: the running job keeps running, the attempt is
// recorded, and the error (code INCOMPATIBLE_UPDATE) comes with the report.
//
// The update goes through five phases, each a method with its own lock
// discipline: prepareUpdate (prepare and check), pauseForUpdate (pause),
// handOver (hand over), persistHandover (persist) and finishHandover
// (finish). The name's guard is held throughout, the old execution's cpMu
// from the pause on, the new execution's from its start; Service.mu only
// for the store writes. Reads of the service answer meanwhile.
//
// Its service options may make it a replacement instead (replace.go).
func (s *Service) Update(ctx context.Context, req UpdateRequest) (*UpdateResult, error) {
	if err := renderRequestJinja(ctx, &req, s.opts.Access); err != nil {
		return nil, err
	}
	res, err := s.once(ctx, req.RequestID, "update", req, func() (*UpdateResult, error) {
		return s.route(ctx, req, true)
	})
	return withRendered(res, req), err
}

// updateInPlace is the in-place update of Update.
func (s *Service) updateInPlace(ctx context.Context, req UpdateRequest) (*UpdateResult, error) {
	// The options are validated whole in prepareUpdate, once the running
	// job's values have filled those the request left unset.
	mapping, err := s.admitChange(req.Name, req.Mapping, nil)
	if err != nil {
		return nil, err
	}
	if err := req.Options.validateGiven(); err != nil {
		return nil, err
	}
	if req.PipelineFile == "" {
		req.PipelineFile = "pipeline.yaml"
	}
	if req.BaseDir == "" {
		return nil, errorf(errcode.InvalidRequest, "base_dir must be an absolute directory (the client's working directory)")
	}
	end, err := s.updating.begin(req.Name)
	if err != nil {
		return nil, err
	}
	defer end()
	// Lock order 1: the name's guard, for the whole update. No other
	// operation changes the name's jobs or lineage until it is released,
	// so what prepareUpdate reads stays current.
	unlock, err := s.lockName(ctx, req.Name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	u, res, err := s.prepareUpdate(req, mapping)
	if err != nil || u == nil {
		return res, err
	}
	// Lock order 2: the old execution's checkpoints wait (a periodic one in
	// flight finishes first) until the update is done.
	u.jr.cpMu.Lock()
	defer u.jr.cpMu.Unlock()
	if err := s.pauseForUpdate(ctx, u); err != nil {
		return nil, err
	}
	err = s.handOver(ctx, u)
	if u.njr != nil {
		defer u.njr.cpMu.Unlock() // taken by handOver
	}
	if err != nil {
		return nil, err
	}
	s.updatePhase(u, "handed-over")
	if err := s.persistHandover(ctx, u); err != nil {
		return nil, err
	}
	s.updatePhase(u, "persisted")
	s.finishRollbackCut(u.rb) // rollback.go: the rollback snapshot's copy
	s.updatePhase(u, "cut")
	s.finishHandover(ctx, u)
	s.updatePhase(u, "finished")
	s.opts.Logger.Info("job updated", "job_name", req.Name, "old_job_id", u.old.ID, "new_job_id", u.nj.ID,
		"generation", u.nj.Generation, "pause_ms", res.PauseMillis)
	res.Job = u.nj
	return res, nil
}

// updatePhase calls the updatePhase test hook, when set, after phase.
func (s *Service) updatePhase(u *update, phase string) {
	if h := s.hooks.updatePhase; h != nil {
		h(u.old.ID, phase)
	}
}

// update is an in-place update on its way through the phases of Update.
type update struct {
	// Found by prepareUpdate, the only phase that reads the registry.
	old      *Job     // the running job
	l        *lineage // its name's lineage
	jr       *jobRun  // its live execution
	nj       *Job     // the new job, PENDING (or DRAINING after a draining job)
	p        *weir.Pipeline
	newGraph *graph.Pipeline
	report   compat.Report
	res      *UpdateResult

	pausedAt time.Time            // when pauseForUpdate began
	cp       *contract.Checkpoint // the handover checkpoint (pauseForUpdate)
	h        state.Handover       // what it hands over (handOver)
	njr      *jobRun              // the new execution (handOver)
	rb       *rollbackCut         // the rollback snapshot (persistHandover)
}

// prepareUpdate is the update's phase 1, prepare and check: it reads the
// name's lineage and running job (once: the records stay current under the
// guard), loads the new pipeline and runs the compatibility check. A
// refused or validate-only attempt is recorded (Service.mu for the write)
// and ends the update: a nil update with a nil error means the result is
// final (validate-only). The caller holds the name's guard; no other lock.
func (s *Service) prepareUpdate(req UpdateRequest, mapping compat.Mapping) (*update, *UpdateResult, error) {
	if s.closing.Load() {
		return nil, nil, errorf(errcode.ShuttingDown, "the weir server is shutting down; update again once it is back")
	}
	l, err := s.readLineage(req.Name)
	if err != nil {
		return nil, nil, err
	}
	if l.ActiveJobID == "" {
		if l.LatestJobID != "" {
			if latest, err := s.readJob(l.LatestJobID); err == nil && latest.State == StateUpdated {
				return nil, nil, errorf(errcode.JobAlreadyUpdated, "job %s (%s) has already been updated into job %s", req.Name, latest.ID, latest.ReplacedByJobID)
			}
		}
		return nil, nil, errorf(errcode.NoRunningJob, "no running job named %s", req.Name)
	}
	old, err := s.readJob(l.ActiveJobID)
	if err != nil {
		return nil, nil, internalf("reading the active job of %q: %w", req.Name, err)
	}
	if old.SDK == SDKGo {
		return nil, nil, errorf(errcode.IllegalTransition, "job %s (%s) is a Go program's: update it by starting the program's new build with --update", req.Name, old.ID)
	}
	switch old.State {
	case StateRunning, StateDraining:
	case StateUpdated:
		return nil, nil, errorf(errcode.JobAlreadyUpdated, "job %s (%s) has already been updated into job %s", req.Name, old.ID, old.ReplacedByJobID)
	default:
		return nil, nil, errorf(errcode.NoRunningJob, "no running job named %s: its active job %s is %s", req.Name, old.ID, old.State)
	}
	jr := s.runningJob(old.ID)
	if jr == nil {
		return nil, nil, errorf(errcode.NoRunningJob, "no running job named %s: job %s has no live execution", req.Name, old.ID)
	}
	oldGraph, err := graph.Parse(old.Graph)
	if err != nil {
		return nil, nil, internalf("reading the graph of job %s: %w", old.ID, err)
	}
	opts := req.Options.Inherit(old.Options)
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, nil, err
	}
	now := s.now()
	id, err := newJobID(now)
	if err != nil {
		return nil, nil, internalf("%w", err)
	}
	nj := &Job{ID: id, Name: req.Name, State: StatePending, CreateTime: now, StateTime: now,
		Generation: l.Generation + 1, Pipeline: req.Pipeline, PipelineFile: req.PipelineFile,
		BaseDir: req.BaseDir, Options: opts, ReplacesJobID: old.ID,
		History: []StateChange{{State: StatePending, Time: now, Reason: "update of job " + old.ID}}}
	nj.inheritFrom(old)
	// A re-reading replacement job still catching up keeps its guarantee
	// through the update: the new job re-reads on as it did.
	nj.CatchUp = carriedCatchUp(old, jr)
	p, loadErr := s.load(nj)
	if loadErr != nil {
		// A pipeline that does not load for a run (say its SQL table
		// cannot hold the new rows) may still load for its graph: the
		// check then says what the change breaks (a key change, as weir
		// check does) before the load error does.
		gp, err := s.loadGraph(nj)
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
		return nil, nil, errorf(errcode.InvalidPipeline, "%s: serialising the pipeline graph: %w", req.PipelineFile, err)
	}
	sum := old.Summary()
	res := &UpdateResult{Report: report, Replaced: &sum, Options: &opts, OptionsChanged: old.Options.ChangesTo(opts), Graph: canon}
	if !report.Compatible || req.ValidateOnly {
		w := &state.Write{}
		if err := putJSON(w, attemptKey(req.Name, now), Attempt{Time: now, Name: req.Name, RunningJobID: old.ID,
			ValidateOnly: req.ValidateOnly, Report: report, Pipeline: req.Pipeline}); err != nil {
			return nil, nil, err
		}
		if err := s.apply(w); err != nil {
			return nil, nil, internalf("recording the update attempt: %w", err)
		}
		if !report.Compatible {
			s.attemptEvent(old.ID, report)
			s.opts.Logger.Warn("update refused: the new pipeline is not compatible; the running job was not changed",
				"job_name", req.Name, "job_id", old.ID, "problems", len(report.Errors))
			return nil, res, errorf(errcode.IncompatibleUpdate, "the update of job %s (%s) is not compatible (%d problem(s)); the running job was not changed", req.Name, old.ID, len(report.Errors))
		}
		s.attemptEvent(old.ID, report)
		return nil, res, nil
	}
	nj.Graph, nj.Type = canon, jobType(newGraph)
	if old.State == StateDraining {
		// A draining job's successor keeps draining.
		if err := transition(nj, StateDraining, now, "replaces a draining job"); err != nil {
			return nil, nil, internalf("%w", err)
		}
	}
	return &update{old: old, l: l, jr: jr, nj: nj, p: p, newGraph: newGraph, report: report, res: res}, res, nil
}

// pauseForUpdate is the update's phase 2, pause: the old execution pauses
// at an aligned checkpoint (its sources read nothing after the barrier,
// its keyed steps freeze). The caller holds the name's guard and the old
// execution's cpMu, not Service.mu: the pause waits for the barrier.
func (s *Service) pauseForUpdate(ctx context.Context, u *update) error {
	// The guard keeps the records as read; only the execution can have
	// ended (its end waits for the guard to be recorded) or the service
	// begun closing.
	if s.closing.Load() {
		return errorf(errcode.ShuttingDown, "the weir server is shutting down; update again once it is back")
	}
	if s.runningJob(u.old.ID) != u.jr {
		return errorf(errcode.NoRunningJob, "no running job named %s: the execution of job %s ended during the update", u.old.Name, u.old.ID)
	}
	u.pausedAt = time.Now()
	cp, err := u.jr.x.Pause(ctx)
	if err != nil {
		return internalf("taking the handover checkpoint of job %s: %w", u.old.ID, err)
	}
	u.cp = cp
	if h := s.hooks.paused; h != nil {
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
// Service.mu. A failure aborts the update (abortUpdate).
func (s *Service) handOver(ctx context.Context, u *update) error {
	u.h = handoverOf(u.old.stateLineage(), u.old.ID, u.nj.ID, u.cp.Positions, u.report)
	adopt := &runner.Adoption{From: u.jr.x, Steps: map[string]string{}}
	for _, m := range u.report.Matches {
		if m.Kind.IsKeyed() {
			adopt.Steps[m.New] = m.Old
		}
	}
	restore := &contract.Restore{Epoch: u.cp.Epoch, Positions: u.h.Positions}
	njr, err := s.startExecution(ctx, u.nj, u.p.Program(), restore, adopt)
	if err != nil {
		// Nothing adopted the paused state: the old job resumes from its
		// last durable checkpoint.
		return s.abortUpdate(ctx, u, fmt.Errorf("starting the new job: %w", err))
	}
	u.res.PauseMillis = time.Since(u.pausedAt).Milliseconds()
	u.njr = njr
	s.live.Store(u.nj.Name, njr)
	// Lock order 2, a second cpMu: the new execution has no supervisor yet,
	// so nothing else holds or waits for it.
	njr.cpMu.Lock() // lock order 2
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
// The caller holds those; Service.mu is taken for the write only. A
// failure aborts the update.
func (s *Service) persistHandover(ctx context.Context, u *update) error {
	now := s.now()
	old, nj, l := u.old, u.nj, u.l
	oldFrom, newFrom := old.State, nj.State
	if err := transition(old, StateUpdated, now, "updated into job "+nj.ID); err != nil {
		return s.abortUpdate(ctx, u, err)
	}
	old.ReplacedByJobID = nj.ID
	old.LastCheckpoint = &CheckpointInfo{Epoch: u.cp.Epoch, Time: now}
	old.DeadLetters = u.jr.deadLetters.Load()
	if d := u.jr.lastDeadLetter.Load(); d != nil {
		old.LastDeadLetter = *d
	}
	// Until its sinks confirm the handover epoch, a restart re-commits it.
	old.PendingCommit = true
	old.Metrics = u.jr.metrics(now)
	old.Counters = u.jr.totals()
	if nj.State == StatePending {
		if err := transition(nj, StateRunning, now, "execution started"); err != nil {
			return s.abortUpdate(ctx, u, err)
		}
	}
	l.Generation, l.ActiveJobID, l.LatestJobID = nj.Generation, nj.ID, nj.ID
	w := &state.Write{}
	// The rollback snapshot of the old job: its record in this write, its
	// state copied from the store as this write leaves it (rollback.go).
	rb, err := s.updateRollbackCut(u)
	if err != nil {
		return s.abortUpdate(ctx, u, err)
	}
	if err := rb.put(w); err != nil {
		return s.abortUpdate(ctx, u, err)
	}
	for _, rec := range []struct {
		key string
		v   any
	}{{jobKey(old.ID), old}, {jobKey(nj.ID), nj}, {lineageKey(old.Name), l}} {
		if err := putJSON(w, rec.key, rec.v); err != nil {
			return s.abortUpdate(ctx, u, err)
		}
	}
	s.mu.Lock() // lock order 3: the write only
	s.stateEventLocked(w, old, oldFrom)
	s.stateEventLocked(w, nj, newFrom)
	d := map[string]any{"old_job_id": old.ID, "new_job_id": nj.ID, "generation": nj.Generation}
	s.addEventLocked(w, old.ID, EventUpdateSucceeded, SeverityInfo, "updated in place into job "+nj.ID, d)
	s.addEventLocked(w, nj.ID, EventUpdateSucceeded, SeverityInfo, "started as the in-place update of job "+old.ID, d)
	s.releaseEventsLocked(w, u.njr)
	err = s.writeHandoverLocked(u.h, u.cp, w)
	if err == nil {
		rb.pin, rb.written = s.store.Pin(), true
		u.rb = rb
	}
	s.mu.Unlock()
	if err != nil {
		return s.abortUpdate(ctx, u, internalf("writing the handover of job %s: %w", old.ID, err))
	}
	return nil
}

// finishHandover is the update's phase 5, finish: the handover is durable,
// so the old job's sinks commit the handover epoch, its sources
// acknowledge, then it stops (its supervisor finds it UPDATED and only
// forgets it), and the new execution gets its supervisor. The caller holds
// the name's guard and both executions' cpMu; Service.mu is taken for the
// writes only.
func (s *Service) finishHandover(ctx context.Context, u *update) {
	commitErr := u.jr.x.Commit(ctx, u.cp)
	u.jr.x.Cancel()
	<-u.jr.x.Done()
	if commitErr != nil {
		s.opts.Logger.Error("committing the handover checkpoint (a restart commits it again)", "job_id", u.old.ID, "error", commitErr)
	} else {
		u.old.PendingCommit = false
		cw := &state.Write{}
		if err := putJSON(cw, jobKey(u.old.ID), u.old); err == nil {
			if err := s.apply(cw); err != nil {
				s.opts.Logger.Error("recording the handover commit", "job_id", u.old.ID, "error", err)
			}
		}
	}
	s.mu.Lock() // lock order 3
	closing := s.closing.Load()
	if !closing {
		s.superviseLocked(u.nj, u.njr)
	}
	s.mu.Unlock()
	if closing {
		// The handover is durable: the new job resumes from it on the next Open.
		u.njr.x.Cancel()
		<-u.njr.x.Done()
		s.live.CompareAndDelete(u.nj.Name, u.njr)
	}
}

// abortUpdate undoes an update whose handover could not be written: the
// new execution (when one started) is cancelled, and the old job — still
// the active job in the registry — resumes from its last durable
// checkpoint with a new execution (its paused one gave its state away),
// read back from the registry. It returns cause, worded for the user. The
// caller holds the name's guard and the old execution's cpMu, not
// Service.mu.
func (s *Service) abortUpdate(ctx context.Context, u *update, cause error) error {
	if njr := u.njr; njr != nil {
		njr.x.Cancel()
		<-njr.x.Done()
		s.live.CompareAndDelete(u.old.Name, njr)
	}
	u.jr.superseded.Store(true)
	u.jr.x.Cancel()
	<-u.jr.x.Done()
	s.forget(u.jr)
	s.opts.Logger.Error("update failed; the running job resumes from its last checkpoint", "job_id", u.old.ID, "job_name", u.old.Name, "error", cause)
	s.emit(u.old.ID, EventUpdateFailed, SeverityError, "the update failed and changed nothing; the job resumes from its last checkpoint: "+cause.Error(),
		map[string]any{"error": cause.Error()})
	j, err := s.readJob(u.old.ID)
	if err != nil {
		return errors.Join(cause, internalf("reading job %s to resume it: %w", u.old.ID, err))
	}
	p, err := s.load(j)
	if err != nil {
		return errors.Join(cause, s.fail(j, fmt.Sprintf("reloading the pipeline after a failed update: %v", err)))
	}
	if err := s.launch(ctx, j, p.Program(), nil); err != nil {
		return errors.Join(cause, err)
	}
	return fmt.Errorf("the update of job %s (%s) failed and changed nothing; the job resumed from its last checkpoint: %w", u.old.Name, u.old.ID, cause)
}

// History lists every job of a name, oldest first, and every recorded
// update attempt that the check refused or only validated. It takes no
// lock.
func (s *Service) History(name string) ([]*Job, []Attempt, error) {
	if err := ValidateJobName(name); err != nil {
		return nil, nil, err
	}
	var jobs []*Job
	err := s.store.Scan("job/", func(_ string, v []byte) error {
		j := &Job{}
		if err := unmarshalJob(v, j); err != nil {
			return err
		}
		if j.Name == name {
			jobs = append(jobs, j)
		}
		return nil
	})
	if err != nil {
		return nil, nil, internalf("reading the job registry: %w", err)
	}
	if len(jobs) == 0 {
		return nil, nil, errorf(errcode.JobNotFound, "no job has the name %q", name)
	}
	sortJobsByCreation(jobs)
	var attempts []Attempt
	err = s.store.Scan("attempt/"+name+"/", func(_ string, v []byte) error {
		var a Attempt
		if err := decodeJSON(v, &a); err != nil {
			return err
		}
		attempts = append(attempts, a)
		return nil
	})
	if err != nil {
		return nil, nil, internalf("reading update attempts of %q: %w", name, err)
	}
	return jobs, attempts, nil
}

func sortJobsByCreation(jobs []*Job) {
	sort.SliceStable(jobs, func(i, k int) bool {
		if !jobs[i].CreateTime.Equal(jobs[k].CreateTime) {
			return jobs[i].CreateTime.Before(jobs[k].CreateTime)
		}
		return jobs[i].Generation < jobs[k].Generation
	})
}

func decodeJSON(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decoding a registry record: %w", err)
	}
	return nil
}

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
// the job's read on; Service.mu only for the store writes. Reads of the
// service answer meanwhile.
func (s *Service) UpdateOptions(ctx context.Context, ref string, opts JobOptions) (*Job, error) {
	if err := s.refuseIfStoreFailed(); err != nil {
		return nil, err
	}
	// What is wrong on its own is refused now; the whole is validated
	// below, once the job's values have filled the unset fields.
	if err := opts.validateGiven(); err != nil {
		return nil, err
	}
	target, err := s.resolve(ref)
	if err != nil {
		return nil, err
	}
	end, err := s.updating.begin(target.Name)
	if err != nil {
		return nil, err
	}
	defer end()
	unlock, err := s.lockJob(ctx, ref) // lock order 1
	if err != nil {
		return nil, err
	}
	defer unlock()
	j, err := s.resolve(ref)
	if err != nil {
		return nil, err
	}
	jr := s.runningJob(j.ID)
	if j.State != StateRunning && j.State != StateDraining || jr == nil {
		if j.State.Terminal() {
			return nil, errorf(errcode.JobTerminated, "job %s (%s) is %s, a final state: its options can no longer change", j.ID, j.Name, j.State)
		}
		return nil, errorf(errcode.IllegalTransition, "job %s (%s) is %s: only a running or draining job can change its options", j.ID, j.Name, j.State)
	}
	// Lock order 2: no checkpoint of the execution runs until the options
	// are changed.
	jr.cpMu.Lock() // lock order 2
	defer jr.cpMu.Unlock()
	// Read again now that no checkpoint can write it: the record written
	// below is this one.
	if j, err = s.readJob(j.ID); err != nil {
		return nil, err
	}
	if (j.State != StateRunning && j.State != StateDraining) || s.runningJob(j.ID) != jr {
		return nil, errorf(errcode.IllegalTransition, "job %s (%s) became %s while its options were changing", j.ID, j.Name, j.State)
	}
	opts = opts.Inherit(j.Options)
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if !jr.checkpointed || opts.NumWorkers == j.Options.NumWorkers {
		if opts.NumWorkers != j.Options.NumWorkers {
			return nil, errorf(errcode.IllegalTransition, "job %s (%s) takes no checkpoints (%s), so it cannot be rescaled in flight", j.ID, j.Name, j.CheckpointNote)
		}
		j.Options = opts
		w := &state.Write{}
		if err := putJSON(w, jobKey(j.ID), j); err != nil {
			return nil, err
		}
		if err := s.apply(w); err != nil {
			return nil, internalf("recording the options of job %s: %w", j.ID, err)
		}
		return j, nil
	}
	from, to := j.Options.NumWorkers, opts.NumWorkers
	rj, err := s.rescale(ctx, j, jr, opts)
	d := map[string]any{"from_workers": from, "to_workers": to}
	if err != nil {
		d["error"] = err.Error()
		s.emit(j.ID, EventRescaleFailed, SeverityError, fmt.Sprintf("rescaling from %d to %d workers failed: %v", from, to, err), d)
		return nil, err
	}
	s.emit(j.ID, EventRescaleSucceeded, SeverityInfo, fmt.Sprintf("rescaled from %d to %d workers", from, to), d)
	return rj, nil
}

// rescale moves job j from execution jr to a new execution with opts'
// worker count. The caller holds j's name guard and jr.cpMu, not
// Service.mu: the pause, the encoding, the commit and the end of jr are
// waited for without it, and it is taken for the checkpoint's write only.
func (s *Service) rescale(ctx context.Context, j *Job, jr *jobRun, opts JobOptions) (*Job, error) {
	p, err := s.load(j)
	if err != nil {
		return nil, err
	}
	cp, err := jr.x.Pause(ctx)
	if err != nil {
		return nil, internalf("pausing job %s to rescale it: %w", j.ID, err)
	}
	if h := s.hooks.paused; h != nil {
		h(j.ID)
	}
	// The key groups move to other workers: encode the paused steps' changed
	// keys here, before the new execution splits their state.
	if err := cp.Complete(ctx); err != nil {
		return nil, internalf("encoding the rescale checkpoint of job %s: %w", j.ID, err)
	}
	from := j.Options.NumWorkers
	now := s.now()
	j.Options = opts
	j.LastCheckpoint = &CheckpointInfo{Epoch: cp.Epoch, Time: now}
	j.Counters = jr.totals() // exact: the execution is paused
	j.DeadLetters = jr.deadLetters.Load()
	j.History = append(j.History, StateChange{State: j.State, Time: now, Reason: fmt.Sprintf("rescaled from %d to %d workers", from, opts.NumWorkers)})
	w := &state.Write{}
	if err := putJSON(w, jobKey(j.ID), j); err != nil {
		return nil, err
	}
	s.mu.Lock() // lock order 3: the write only
	err = s.writeCheckpointLocked(j.stateLineage(), j.ID, cp, w)
	s.mu.Unlock()
	if err != nil {
		return nil, internalf("writing the rescale checkpoint of job %s: %w", j.ID, err)
	}
	if err := jr.x.Commit(ctx, cp); err != nil {
		s.opts.Logger.Error("committing the rescale checkpoint (the new execution commits it again)", "job_id", j.ID, "error", err)
	}
	jr.superseded.Store(true)
	jr.x.Cancel()
	<-jr.x.Done()
	adopt := &runner.Adoption{From: jr.x, Steps: map[string]string{}}
	for _, st := range p.Graph().Steps {
		if st.Kind.IsKeyed() {
			adopt.Steps[st.Name] = st.Name
		}
	}
	// jr stays the job's entry in the running table until the new
	// execution replaces it, so that metrics never find the job without one.
	err = s.launch(ctx, j, p.Program(), adopt)
	s.forget(jr) // when the new execution did not replace it
	if err != nil {
		return nil, err
	}
	s.opts.Logger.Info("job rescaled", "job_id", j.ID, "job_name", j.Name, "from_workers", from, "to_workers", opts.NumWorkers)
	return j, nil
}
