package inplace

import (
	"context"
	"errors"
	"fmt"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/state"
)

// updateStored replaces old, the active Go program job of lineage l,
// which has no live execution (its process released the data directory or
// died), with a new job of this build. It is Update without a live old
// execution: the handover happens in the store.
//
//  1. The compatibility check of this build against old's stored graph; a
//     refused or validate-only attempt is recorded and changes nothing.
//  2. The sink data of old's last checkpoint is committed again, by this
//     build's sinks configured as old's (sinks skip committed epochs), in
//     case old's process died between writing and committing it.
//  3. One atomic write (state.WriteHandover): old becomes UPDATED
//     (replaced_by_job_id), the new job (next generation, replaces_job_id)
//     is recorded with old's last checkpoint as its restore point (source
//     positions under the new step names), renamed steps' state namespaces
//     are rebound and dropped steps' state deleted, and the name's lineage
//     points at the new job.
//  4. The new job starts, restoring its state from the store in place.
//
// A crash before step 3 leaves old the active job (its next start resumes
// it from its last checkpoint); after it, the new job is the active one.
// The caller holds the name's guard (old has no execution, so no
// checkpoint writes its record); the registry lock is taken for the writes only.
func (s *InPlace) updateStored(ctx context.Context, l *record.Lineage, old *record.Job, req ProgramRequest, mapping compat.Mapping) (*ProgramStart, error) {
	switch old.State {
	case record.StatePending, record.StateRunning, record.StateDraining:
	default:
		return nil, errcode.Errorf(errcode.NoRunningJob, "no running job named %s: its active job %s is %s", old.Name, old.ID, old.State)
	}
	oldGraph, err := graph.Parse(old.Graph)
	if err != nil {
		return nil, errcode.Internalf("reading the graph of job %s: %w", old.ID, err)
	}
	now := s.Now()
	id, err := record.NewJobID(now)
	if err != nil {
		return nil, errcode.Internalf("%w", err)
	}
	nj := &record.Job{ID: id, Name: old.Name, SDK: record.SDKGo, Program: req.Program, State: record.StatePending, CreateTime: now, StateTime: now,
		Generation: l.Generation + 1, Options: req.Options, ReplacesJobID: old.ID,
		History:    []record.StateChange{{State: record.StatePending, Time: now, Reason: "update of job " + old.ID}},
		InputStart: old.InputStart, InputStartNote: old.InputStartNote}
	p, err := s.LoadProgram(nj)
	if err != nil {
		return nil, err
	}
	newGraph := p.Graph()
	report := compat.Check(oldGraph, newGraph, compat.Options{Mapping: mapping, AllowSourceChange: req.AllowSourceChange})
	sum := old.Summary()
	res := &ProgramStart{Action: ActionValidated, Report: &report, Replaced: &sum}
	if !report.Compatible || req.ValidateOnly {
		if err := s.recordAttempt(old, req.Program, req.ValidateOnly, report); err != nil {
			return nil, err
		}
		if !report.Compatible {
			return res, errcode.Errorf(errcode.IncompatibleUpdate, "the update of job %s (%s) is not compatible (%d problem(s)); the job was not changed", old.Name, old.ID, len(report.Errors))
		}
		return res, nil
	}
	canon, err := newGraph.Canonical()
	if err != nil {
		return nil, errcode.Errorf(errcode.InvalidPipeline, "serialising the pipeline graph: %w", err)
	}
	nj.Graph, nj.Type = canon, record.TypeOf(newGraph)

	rec, err := s.Store.LastCheckpoint(old.ID)
	if errors.Is(err, state.ErrNotFound) {
		rec, err = nil, nil
	}
	if err != nil {
		return nil, errcode.Internalf("reading the last checkpoint of job %s: %w", old.ID, err)
	}
	if rec != nil && len(rec.SinkParts) > 0 {
		if err := s.recommitStored(ctx, old, rec, mapping); err != nil {
			return nil, err
		}
	}

	if old.State == record.StatePending {
		// Created but never started (its process died at once).
		if err := record.Transition(old, record.StateRunning, now, "recovered for an update"); err != nil {
			return nil, err
		}
	}
	if old.State == record.StateDraining {
		// A draining job's successor keeps draining.
		if err := record.Transition(nj, record.StateDraining, now, "replaces a draining job"); err != nil {
			return nil, errcode.Internalf("%w", err)
		}
	}
	if err := record.Transition(old, record.StateUpdated, now, "updated into job "+nj.ID+" by a new build of its program"); err != nil {
		return nil, err
	}
	old.ReplacedByJobID = nj.ID
	old.PendingCommit = false
	l.Generation, l.ActiveJobID, l.LatestJobID = nj.Generation, nj.ID, nj.ID
	w := &state.Write{}
	if err := putUpdateRecords(w, old, nj, l); err != nil {
		return nil, err
	}
	if rec == nil {
		// No checkpoint, so no state: the new job starts from scratch.
		if err := s.Apply(w); err != nil {
			return nil, errcode.Internalf("writing the update of job %s: %w", old.ID, err)
		}
	} else {
		h := handoverOf(old.Name, old.ID, nj.ID, rec.Positions, report)
		cp := &contract.Checkpoint{Epoch: rec.Epoch, Positions: rec.Positions, SinkParts: rec.SinkParts}
		err := s.Update(func(tx *core.Tx) error { return tx.WriteHandover(h, cp, w) }) // the write only
		if err != nil {
			// Nothing was written: the old job is still the active one.
			return nil, errcode.Internalf("writing the handover of job %s: %w", old.ID, err)
		}
	}
	s.Opts.Logger.Info("job updated in the store", "job_name", old.Name, "old_job_id", old.ID, "new_job_id", nj.ID, "generation", nj.Generation)
	if err := s.Launch(ctx, nj, p.Program(), nil); err != nil {
		return nil, err
	}
	res.Action, res.Job = ActionUpdated, nj
	return res, nil
}

// putUpdateRecords adds to w the records an update writes in its
// handover: the old job's, the new job's and the name's lineage.
func putUpdateRecords(w *state.Write, old, nj *record.Job, l *record.Lineage) error {
	for _, r := range []struct {
		key string
		v   any
	}{{record.JobKey(old.ID), old}, {record.JobKey(nj.ID), nj}, {record.LineageKey(old.Name), l}} {
		if err := core.PutJSON(w, r.key, r.v); err != nil {
			return err
		}
	}
	return nil
}

// handoverOf describes the handover of an old job's checkpoint, whose
// source positions are positions, to job newID per the compatibility
// report: sources' positions under their new names, renames of keyed steps,
// and the state dropped on purpose.
func handoverOf(lineage, oldID, newID string, positions map[string][][]byte, report compat.Report) state.Handover {
	h := state.Handover{Lineage: lineage, OldJob: oldID, NewJob: newID, Renames: map[string]string{}, Positions: map[string][][]byte{}}
	for _, m := range report.Matches {
		if m.Kind == graph.KindSource {
			if pos, ok := positions[m.Old]; ok {
				h.Positions[m.New] = pos
			}
			continue
		}
		if m.Old != m.New {
			h.Renames[m.Old] = m.New
		}
	}
	for _, d := range report.DroppedState {
		if d.Kind != graph.KindSource {
			h.Drops = append(h.Drops, d.Step)
		}
	}
	return h
}

// recommitStored commits the sink data of old's last checkpoint rec
// with this build's sinks, built as old's (same job ID and generation), so
// that an epoch old's process wrote but did not commit is not lost. Sinks
// skip epochs they already committed. A sink this build no longer has is
// logged: its part of the epoch cannot be committed. It commits sinks, so
// the registry lock is not held.
func (s *InPlace) recommitStored(ctx context.Context, old *record.Job, rec *state.CheckpointRecord, mapping compat.Mapping) error {
	p, err := s.LoadProgram(old)
	if err != nil {
		return err
	}
	code := p.Program().Code
	cp := &contract.Checkpoint{Epoch: rec.Epoch, SinkParts: map[string][][]byte{}}
	for step, parts := range rec.SinkParts {
		nw := step
		if renamed, _, applied := mapping.Rename(step); applied {
			nw = renamed
		}
		if _, ok := code[nw]; !ok || nw == "" {
			s.Opts.Logger.Warn("the new build has no sink to commit this part of the old job's last checkpoint again",
				"job_id", old.ID, "step", step, "epoch", rec.Epoch)
			continue
		}
		cp.SinkParts[nw] = parts
	}
	if err := runner.CommitRestored(ctx, p.Program(), cp); err != nil {
		return errcode.Internalf("committing the sinks of checkpoint %d of job %s again: %w", rec.Epoch, old.ID, err)
	}
	return nil
}

// describeProgramStart is a one-line account of a ProgramStart, for logs
// and the program's output.
func describeProgramStart(r *ProgramStart) string {
	if r == nil || r.Job == nil {
		return "nothing started"
	}
	j := r.Job
	switch r.Action {
	case ActionUpdated:
		return fmt.Sprintf("job %s (%s, generation %d) replaced job %s", j.ID, j.Name, j.Generation, j.ReplacesJobID)
	case ActionResumed:
		return fmt.Sprintf("job %s (%s, generation %d) resumed", j.ID, j.Name, j.Generation)
	}
	return fmt.Sprintf("job %s (%s, generation %d) started", j.ID, j.Name, j.Generation)
}

// String describes what StartProgram did in one line.
func (r *ProgramStart) String() string { return describeProgramStart(r) }
