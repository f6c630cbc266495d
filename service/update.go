package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

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
func (s *Service) Update(ctx context.Context, req UpdateRequest) (*UpdateResult, error) {
	if err := ValidateJobName(req.Name); err != nil {
		return nil, err
	}
	mapping, err := compat.ParseMapping(req.Mapping)
	if err != nil {
		return nil, errorf(CodeInvalidMapping, "--transform-name-mapping: %w", err)
	}
	req.Options.EnsureDefaults()
	if err := req.Options.Validate(); err != nil {
		return nil, err
	}
	if req.PipelineFile == "" {
		req.PipelineFile = "pipeline.yaml"
	}
	if req.BaseDir == "" {
		return nil, errorf(CodeInvalidRequest, "base_dir must be an absolute directory (the client's working directory)")
	}
	prep, res, err := s.prepareUpdate(req, mapping)
	if err != nil || prep == nil {
		return res, err
	}
	// Phase 2: wait for any checkpoint of the old execution in flight, then
	// hand over under the service lock (lock order: cpMu, then mu).
	prep.jr.cpMu.Lock()
	defer prep.jr.cpMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	old, err := s.readJob(prep.old.ID)
	if err != nil {
		return nil, internalf("reading job %s: %w", prep.old.ID, err)
	}
	if old.State != StateRunning && old.State != StateDraining || s.running[old.ID] != prep.jr {
		return nil, errorf(CodeNoRunningJob, "no running job named %s: job %s became %s during the update", req.Name, old.ID, old.State)
	}
	l, err := s.readLineage(req.Name)
	if err != nil {
		return nil, err
	}
	if l.ActiveJobID != old.ID {
		return nil, errorf(CodeNoRunningJob, "job %s is no longer the active job of %s", old.ID, req.Name)
	}
	jr, nj, p, newGraph, report := prep.jr, prep.nj, prep.p, prep.newGraph, prep.report
	now := s.now()
	canon, err := newGraph.Canonical()
	if err != nil {
		return nil, errorf(CodeInvalidPipeline, "%s: serialising the pipeline graph: %w", req.PipelineFile, err)
	}
	nj.Graph, nj.Type = canon, jobType(newGraph)
	if old.State == StateDraining {
		// A draining job's successor keeps draining.
		nj.State = StateDraining
		nj.History = append(nj.History, StateChange{State: StateDraining, Time: now, Reason: "replaces a draining job"})
	}

	// The handover. The old execution pauses at an aligned checkpoint (its
	// sources read nothing after the barrier, its keyed steps freeze), and
	// the new execution starts at once from the checkpoint's positions,
	// adopting the keyed state, open windows and timers in memory: the data
	// pause ends here. Then the checkpoint's changed keys are encoded (by
	// the new execution's workers, copy on write) and written durably with
	// the registry changes in one atomic write; until that write lands the
	// old job stays the recovery point and the new execution commits
	// nothing (its first checkpoint waits for the handover).
	paused := time.Now()
	cp, err := jr.x.Pause(ctx)
	if err != nil {
		return nil, internalf("taking the handover checkpoint of job %s: %w", old.ID, err)
	}
	h := handoverOf(req.Name, old.ID, nj.ID, cp.Positions, report)
	adopt := &runner.Adoption{From: jr.x, Steps: map[string]string{}}
	for _, m := range report.Matches {
		if m.Kind.IsKeyed() {
			adopt.Steps[m.New] = m.Old
		}
	}
	restore := &runner.Restore{Epoch: cp.Epoch, Positions: h.Positions}
	njr, err := s.startExecution(ctx, nj, p.Program(), restore, adopt)
	if err != nil {
		// Nothing adopted the paused state: the old job resumes from its
		// last durable checkpoint.
		return nil, s.abortUpdateLocked(ctx, old, jr, fmt.Errorf("starting the new job: %w", err))
	}
	res.PauseMillis = time.Since(paused).Milliseconds()
	s.live.Store(nj.Name, njr)
	// No checkpoint of the new job before the handover is durable.
	njr.cpMu.Lock()
	defer njr.cpMu.Unlock()
	if err := cp.Complete(ctx); err != nil {
		return nil, s.abortUpdateLocked(ctx, old, jr, fmt.Errorf("encoding the handover checkpoint: %w", err), njr)
	}
	if err := transition(old, StateUpdated, now, "updated into job "+nj.ID); err != nil {
		return nil, s.abortUpdateLocked(ctx, old, jr, err, njr)
	}
	old.ReplacedByJobID = nj.ID
	old.LastCheckpoint = &CheckpointInfo{Epoch: cp.Epoch, Time: now}
	// Until its sinks confirm the handover epoch, a restart re-commits it.
	old.PendingCommit = true
	old.Metrics = jr.metricsLocked(now)
	if nj.State == StatePending {
		if err := transition(nj, StateRunning, now, "execution started"); err != nil {
			return nil, s.abortUpdateLocked(ctx, old, jr, err, njr)
		}
	}
	l.Generation, l.ActiveJobID, l.LatestJobID = nj.Generation, nj.ID, nj.ID
	w := &state.Write{}
	for _, rec := range []struct {
		key string
		v   any
	}{{jobKey(old.ID), old}, {jobKey(nj.ID), nj}, {lineageKey(req.Name), l}} {
		if err := putJSON(w, rec.key, rec.v); err != nil {
			return nil, s.abortUpdateLocked(ctx, old, jr, err, njr)
		}
	}
	if err := s.store.WriteHandover(h, cp, w); err != nil {
		return nil, s.abortUpdateLocked(ctx, old, jr, internalf("writing the handover of job %s: %w", old.ID, err), njr)
	}
	// Durable: the old job's sinks commit the handover epoch, its sources
	// acknowledge, then it stops. Its supervisor finds it UPDATED and only
	// forgets it.
	commitErr := jr.x.Commit(ctx, cp)
	jr.x.Cancel()
	<-jr.x.Done()
	if commitErr != nil {
		s.opts.Logger.Error("committing the handover checkpoint (a restart commits it again)", "job_id", old.ID, "error", commitErr)
	} else {
		old.PendingCommit = false
		cw := &state.Write{}
		if err := putJSON(cw, jobKey(old.ID), old); err == nil {
			if err := s.store.Apply(cw); err != nil {
				s.opts.Logger.Error("recording the handover commit", "job_id", old.ID, "error", err)
			}
		}
	}
	s.superviseLocked(nj, njr)
	s.opts.Logger.Info("job updated", "job_name", req.Name, "old_job_id", old.ID, "new_job_id", nj.ID,
		"generation", nj.Generation, "pause_ms", res.PauseMillis)
	res.Job = nj
	return res, nil
}

// abortUpdateLocked undoes an update whose handover could not be written:
// the new execution (when one started) is cancelled, and the old job —
// still the active job in the registry — resumes from its last durable
// checkpoint with a new execution (its paused one gave its state away).
// It returns cause, worded for the user. Service.mu is held.
func (s *Service) abortUpdateLocked(ctx context.Context, old *Job, jr *jobRun, cause error, started ...*jobRun) error {
	for _, njr := range started {
		njr.x.Cancel()
		<-njr.x.Done()
		s.live.CompareAndDelete(old.Name, njr)
	}
	jr.superseded.Store(true)
	jr.x.Cancel()
	<-jr.x.Done()
	delete(s.running, old.ID)
	s.opts.Logger.Error("update failed; the running job resumes from its last checkpoint", "job_id", old.ID, "job_name", old.Name, "error", cause)
	j, err := s.readJob(old.ID)
	if err != nil {
		return errors.Join(cause, internalf("reading job %s to resume it: %w", old.ID, err))
	}
	p, err := s.load(j)
	if err != nil {
		return errors.Join(cause, s.failLocked(j, fmt.Sprintf("reloading the pipeline after a failed update: %v", err)))
	}
	if err := s.launchLocked(ctx, j, p.Program()); err != nil {
		return errors.Join(cause, err)
	}
	return fmt.Errorf("the update of job %s (%s) failed and changed nothing; the job resumed from its last checkpoint: %w", old.Name, old.ID, cause)
}

// updatePrep is what the check phase of an update found.
type updatePrep struct {
	old      *Job
	jr       *jobRun
	nj       *Job
	p        *weir.Pipeline
	newGraph *graph.Pipeline
	report   compat.Report
}

// prepareUpdate resolves the running job, loads the new pipeline and runs
// the compatibility check, under the service lock. A nil prep with a nil
// error means the result is final (validate-only).
func (s *Service) prepareUpdate(req UpdateRequest, mapping compat.Mapping) (*updatePrep, *UpdateResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, nil, errorf(CodeShuttingDown, "the weir server is shutting down; update again once it is back")
	}
	l, err := s.readLineage(req.Name)
	if err != nil {
		return nil, nil, err
	}
	if l.ActiveJobID == "" {
		if l.LatestJobID != "" {
			if latest, err := s.readJob(l.LatestJobID); err == nil && latest.State == StateUpdated {
				return nil, nil, errorf(CodeAlreadyUpdated, "job %s (%s) has already been updated into job %s", req.Name, latest.ID, latest.ReplacedByJobID)
			}
		}
		return nil, nil, errorf(CodeNoRunningJob, "no running job named %s", req.Name)
	}
	old, err := s.readJob(l.ActiveJobID)
	if err != nil {
		return nil, nil, internalf("reading the active job of %q: %w", req.Name, err)
	}
	if old.SDK == SDKGo {
		return nil, nil, errorf(CodeIllegalTransition, "job %s (%s) is a Go program's: update it by starting the program's new build with --update", req.Name, old.ID)
	}
	switch old.State {
	case StateRunning, StateDraining:
	case StateUpdated:
		return nil, nil, errorf(CodeAlreadyUpdated, "job %s (%s) has already been updated into job %s", req.Name, old.ID, old.ReplacedByJobID)
	default:
		return nil, nil, errorf(CodeNoRunningJob, "no running job named %s: its active job %s is %s", req.Name, old.ID, old.State)
	}
	jr := s.running[old.ID]
	if jr == nil {
		return nil, nil, errorf(CodeNoRunningJob, "no running job named %s: job %s has no live execution", req.Name, old.ID)
	}
	oldGraph, err := graph.Parse(old.Graph)
	if err != nil {
		return nil, nil, internalf("reading the graph of job %s: %w", old.ID, err)
	}
	now := s.now()
	id, err := newJobID(now)
	if err != nil {
		return nil, nil, internalf("%w", err)
	}
	nj := &Job{ID: id, Name: req.Name, State: StatePending, CreateTime: now, StateTime: now,
		Generation: l.Generation + 1, Pipeline: req.Pipeline, PipelineFile: req.PipelineFile,
		BaseDir: req.BaseDir, Options: req.Options, ReplacesJobID: old.ID,
		History: []StateChange{{State: StatePending, Time: now, Reason: "update of job " + old.ID}}}
	p, err := s.load(nj)
	if err != nil {
		return nil, nil, err
	}
	newGraph := p.Graph()
	report := compat.Check(oldGraph, newGraph, compat.Options{Mapping: mapping, AllowSourceChange: req.AllowSourceChange})
	sum := old.Summary()
	res := &UpdateResult{Report: report, Replaced: &sum}
	if !report.Compatible || req.ValidateOnly {
		w := &state.Write{}
		if err := putJSON(w, attemptKey(req.Name, now), Attempt{Time: now, Name: req.Name, RunningJobID: old.ID,
			ValidateOnly: req.ValidateOnly, Report: report, Pipeline: req.Pipeline}); err != nil {
			return nil, nil, err
		}
		if err := s.store.Apply(w); err != nil {
			return nil, nil, internalf("recording the update attempt: %w", err)
		}
		if !report.Compatible {
			return nil, res, errorf(CodeIncompatible, "the update of job %s (%s) is not compatible (%d problem(s)); the running job was not changed", req.Name, old.ID, len(report.Errors))
		}
		return nil, res, nil
	}
	return &updatePrep{old: old, jr: jr, nj: nj, p: p, newGraph: newGraph, report: report}, res, nil
}

// History lists every job of a name, oldest first, and every recorded
// update attempt that the check refused or only validated.
func (s *Service) History(name string) ([]*Job, []Attempt, error) {
	if err := ValidateJobName(name); err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
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
		return nil, nil, errorf(CodeJobNotFound, "no job has the name %q", name)
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
// resume from the checkpoint's positions.
func (s *Service) UpdateOptions(ctx context.Context, ref string, opts JobOptions) (*Job, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	j, err := s.resolveLocked(ref)
	var jr *jobRun
	if err == nil {
		jr = s.running[j.ID]
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if j.State != StateRunning && j.State != StateDraining || jr == nil {
		if j.State.Terminal() {
			return nil, errorf(CodeJobTerminated, "job %s (%s) is %s, a final state: its options can no longer change", j.ID, j.Name, j.State)
		}
		return nil, errorf(CodeIllegalTransition, "job %s (%s) is %s: only a running or draining job can change its options", j.ID, j.Name, j.State)
	}
	jr.cpMu.Lock()
	defer jr.cpMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if j, err = s.readJob(j.ID); err != nil {
		return nil, err
	}
	if (j.State != StateRunning && j.State != StateDraining) || s.running[j.ID] != jr {
		return nil, errorf(CodeIllegalTransition, "job %s (%s) became %s while its options were changing", j.ID, j.Name, j.State)
	}
	if !jr.checkpointed || opts.NumWorkers == j.Options.NumWorkers {
		if opts.NumWorkers != j.Options.NumWorkers {
			return nil, errorf(CodeIllegalTransition, "job %s (%s) takes no checkpoints (%s), so it cannot be rescaled in flight", j.ID, j.Name, j.CheckpointNote)
		}
		j.Options = opts
		w := &state.Write{}
		if err := putJSON(w, jobKey(j.ID), j); err != nil {
			return nil, err
		}
		if err := s.store.Apply(w); err != nil {
			return nil, internalf("recording the options of job %s: %w", j.ID, err)
		}
		return j, nil
	}
	p, err := s.load(j)
	if err != nil {
		return nil, err
	}
	cp, err := jr.x.Pause(ctx)
	if err != nil {
		return nil, internalf("pausing job %s to rescale it: %w", j.ID, err)
	}
	// The key groups move to other workers: encode the paused steps' changed
	// keys here, before the new execution splits their state.
	if err := cp.Complete(ctx); err != nil {
		return nil, internalf("encoding the rescale checkpoint of job %s: %w", j.ID, err)
	}
	from := j.Options.NumWorkers
	j.Options = opts
	j.LastCheckpoint = &CheckpointInfo{Epoch: cp.Epoch, Time: s.now()}
	j.History = append(j.History, StateChange{State: j.State, Time: s.now(), Reason: fmt.Sprintf("rescaled from %d to %d workers", from, opts.NumWorkers)})
	w := &state.Write{}
	if err := putJSON(w, jobKey(j.ID), j); err != nil {
		return nil, err
	}
	if err := s.store.WriteCheckpoint(j.Name, j.ID, cp, w); err != nil {
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
	delete(s.running, j.ID)
	if err := s.launchAdoptingLocked(ctx, j, p.Program(), adopt); err != nil {
		return nil, err
	}
	s.opts.Logger.Info("job rescaled", "job_id", j.ID, "job_name", j.Name, "from_workers", from, "to_workers", opts.NumWorkers)
	return j, nil
}
