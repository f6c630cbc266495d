package inplace

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/state"
)

// Actions of StartProgram.
const (
	// ActionSubmitted: no job of the name was active; a new one started.
	ActionSubmitted = "submitted"
	// ActionResumed: the name's active job has this build's graph and
	// resumed from its last checkpoint.
	ActionResumed = "resumed"
	// ActionUpdated: the name's active job was replaced by a new job of
	// this build, which took its state over in the store.
	ActionUpdated = "updated"
	// ActionValidated: the update was only checked (validate-only).
	ActionValidated = "validated"
)

// ProgramRequest starts the job of a Go program in the service embedded
// in it.
type ProgramRequest struct {
	// Name is the job name.
	Name string
	// Program is the program's executable, recorded with a new job.
	Program string
	// Options are the options of a new job (a resumed job keeps its own).
	Options record.JobOptions
	// Update replaces the name's active job with a job of this build after
	// the compatibility check, even when the graphs are equal.
	Update bool
	// Mapping renames (or, mapped to "", deletes on purpose) steps of the
	// active job, as core.UpdateRequest.Mapping.
	Mapping string
	// AllowSourceChange accepts a source that reads something else.
	AllowSourceChange bool
	// ValidateOnly, with Update, runs the check and changes nothing.
	ValidateOnly bool
}

// ProgramStart is what StartProgram did.
type ProgramStart struct {
	// Action is ActionSubmitted, ActionResumed, ActionUpdated or
	// ActionValidated.
	Action string `json:"action"`
	// Job is the job that now runs (nil when validated or refused).
	Job *record.Job `json:"job,omitempty"`
	// Report is the compatibility report of an update.
	Report *compat.Report `json:"report,omitempty"`
	// Replaced is the job an update replaced (or would replace).
	Replaced *record.Summary `json:"replaced,omitempty"`
}

// sameGraph reports whether two canonical graphs are equal, comparing
// their canonical forms (stored JSON may be formatted differently).
func sameGraph(a, b json.RawMessage) (bool, error) {
	ga, err := graph.Parse(a)
	if err != nil {
		return false, err
	}
	gb, err := graph.Parse(b)
	if err != nil {
		return false, err
	}
	ca, err := ga.Canonical()
	if err != nil {
		return false, err
	}
	cb, err := gb.Canonical()
	if err != nil {
		return false, err
	}
	return bytes.Equal(ca, cb), nil
}

// StartProgram starts the job of a Go program whose service embeds it:
//
//   - no active job of the name: a new job (next generation) starts;
//   - an active job whose stored graph equals this build's, without Update:
//     it resumes from its last checkpoint;
//   - an active job with another graph, without Update: PROGRAM_CHANGED;
//   - Update: the compatibility check of this build against the stored
//     graph runs; refused (INCOMPATIBLE_UPDATE, with the report) or
//     validate-only changes nothing but the recorded attempt; otherwise
//     the active job is replaced in the store (see updateStored).
//
// Go program jobs never resume by themselves when the service opens: their
// program decides here.
func (s *InPlace) StartProgram(ctx context.Context, req ProgramRequest) (*ProgramStart, error) {
	mapping, err := s.AdmitChange(req.Name, req.Mapping, &req.Options)
	if err != nil {
		return nil, err
	}
	unlock, err := s.LockName(ctx, req.Name) // lock order 1
	if err != nil {
		return nil, err
	}
	defer unlock()
	if s.Closing.Load() {
		return nil, errcode.Errorf(errcode.ShuttingDown, "the job service is shutting down")
	}
	l, err := s.ReadLineage(req.Name)
	if err != nil {
		return nil, err
	}
	if l.ActiveJobID == "" {
		if req.Update {
			return nil, errcode.Errorf(errcode.NoRunningJob, "no running job named %s to update: start the program without --update to submit a new job", req.Name)
		}
		j, err := s.submitProgram(ctx, l, req)
		if err != nil {
			return nil, err
		}
		return &ProgramStart{Action: ActionSubmitted, Job: j}, nil
	}
	active, err := s.ReadJob(l.ActiveJobID)
	if err != nil {
		return nil, errcode.Internalf("reading the active job of %q: %w", req.Name, err)
	}
	if active.SDK != record.SDKGo {
		return nil, errcode.Errorf(errcode.JobNameActive, "job name %q already has an active job, %s (%s), which is a YAML pipeline: drain or cancel it first, or choose another name", req.Name, active.ID, active.State)
	}
	if s.RunningJob(active.ID) != nil {
		return nil, errcode.Errorf(errcode.JobNameActive, "job %s (%s) already runs in this process", active.ID, req.Name)
	}
	if req.Update {
		return s.updateStored(ctx, l, active, req, mapping)
	}
	p, err := s.LoadProgram(active)
	if err != nil {
		return nil, err
	}
	canon, err := p.Graph().Canonical()
	if err != nil {
		return nil, errcode.Errorf(errcode.InvalidPipeline, "serialising the pipeline graph: %w", err)
	}
	same, err := sameGraph(active.Graph, canon)
	if err != nil {
		return nil, errcode.Internalf("comparing the graph of job %s with this build's: %w", active.ID, err)
	}
	if !same {
		return nil, errcode.Errorf(errcode.ProgramChanged, "job %s (%s, generation %d) runs another pipeline graph than this build: start this build with --update to replace it (the compatibility check runs first; add --validate-only to only see the report), or start the build that matches the job to drain or cancel it", active.ID, req.Name, active.Generation)
	}
	s.Opts.Logger.Info("resuming job", "job_id", active.ID, "job_name", active.Name, "state", active.State)
	if err := s.Launch(ctx, active, p.Program(), nil); err != nil {
		return nil, err
	}
	return &ProgramStart{Action: ActionResumed, Job: active}, nil
}

// submitProgram creates and starts a new Go program job of lineage l.
// The caller holds the name's guard.
func (s *InPlace) submitProgram(ctx context.Context, l *record.Lineage, req ProgramRequest) (*record.Job, error) {
	now := s.Now()
	id, err := record.NewJobID(now)
	if err != nil {
		return nil, errcode.Internalf("%w", err)
	}
	j := &record.Job{ID: id, Name: req.Name, SDK: record.SDKGo, Program: req.Program, State: record.StatePending, CreateTime: now, StateTime: now,
		Generation: l.Generation + 1, Options: req.Options,
		History: []record.StateChange{{State: record.StatePending, Time: now}}}
	if err := s.Create(ctx, l, j); err != nil {
		return nil, err
	}
	return j, nil
}

// ReleaseRequest asks the process running the job of Name to hand its data
// directory over to a new build of its program: Graph is the new build's
// canonical graph, checked against the job's stored graph.
type ReleaseRequest struct {
	Name string
	// Graph is the new build's canonical graph JSON.
	Graph json.RawMessage
	// Program is the new build's executable (recorded with a refused attempt).
	Program           string
	Mapping           string
	AllowSourceChange bool
	ValidateOnly      bool
}

// CheckRelease runs, in the process that runs the job of req.Name, the
// compatibility check of a new build's graph against the job's stored
// graph. A refused (INCOMPATIBLE_UPDATE, with the report) or validate-only
// check is recorded as an update attempt. It changes nothing else: the
// caller releases the data directory (Close) when it passes. With no
// active job of the name, the result has no report and the release may go
// ahead.
func (s *InPlace) CheckRelease(req ReleaseRequest) (*core.UpdateResult, error) {
	mapping, err := s.AdmitChange(req.Name, req.Mapping, nil)
	if err != nil {
		return nil, err
	}
	newGraph, err := graph.Parse(req.Graph)
	if err != nil {
		return nil, errcode.Errorf(errcode.InvalidPipeline, "the new build's graph: %w", err)
	}
	unlock, err := s.LockName(context.Background(), req.Name) // lock order 1
	if err != nil {
		return nil, err
	}
	defer unlock()
	if s.Closing.Load() {
		return nil, errcode.Errorf(errcode.ShuttingDown, "this process is shutting down; start the new build again once it has stopped")
	}
	l, err := s.ReadLineage(req.Name)
	if err != nil {
		return nil, err
	}
	if l.ActiveJobID == "" {
		return &core.UpdateResult{}, nil
	}
	old, err := s.ReadJob(l.ActiveJobID)
	if err != nil {
		return nil, errcode.Internalf("reading the active job of %q: %w", req.Name, err)
	}
	if old.SDK != record.SDKGo {
		return nil, errcode.Errorf(errcode.NotReleasable, "the active job of %s, %s, is a YAML pipeline, not a Go program's: update it with 'weir run --update'", req.Name, old.ID)
	}
	oldGraph, err := graph.Parse(old.Graph)
	if err != nil {
		return nil, errcode.Internalf("reading the graph of job %s: %w", old.ID, err)
	}
	report := compat.Check(oldGraph, newGraph, compat.Options{Mapping: mapping, AllowSourceChange: req.AllowSourceChange})
	sum := old.Summary()
	res := &core.UpdateResult{Report: report, Replaced: &sum}
	if report.Compatible && !req.ValidateOnly {
		return res, nil
	}
	if err := s.recordAttempt(old, req.Program, req.ValidateOnly, report); err != nil {
		return nil, err
	}
	if !report.Compatible {
		return res, errcode.Errorf(errcode.IncompatibleUpdate, "the update of job %s (%s) is not compatible (%d problem(s)); the running job was not changed", req.Name, old.ID, len(report.Errors))
	}
	return res, nil
}

// recordAttempt records a refused or validate-only update of old by a Go
// program build, in a core.Tx of its own.
func (s *InPlace) recordAttempt(old *record.Job, program string, validateOnly bool, report compat.Report) error {
	now := s.Now()
	w := &state.Write{}
	a := core.Attempt{Time: now, Name: old.Name, RunningJobID: old.ID, ValidateOnly: validateOnly, Report: report,
		Pipeline: "Go program " + program}
	if err := core.PutJSON(w, core.AttemptKey(old.Name, now), a); err != nil {
		return err
	}
	if err := s.Apply(w); err != nil {
		return errcode.Internalf("recording the update attempt: %w", err)
	}
	s.AttemptEvent(old.ID, report)
	return nil
}
