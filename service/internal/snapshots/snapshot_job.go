package snapshots

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/state"
)

// FromSnapshotRequest is a new job that starts from a snapshot (Dataflow's
// --create_from_snapshot).
type FromSnapshotRequest struct {
	core.SubmitRequest
	// SnapshotID is the READY snapshot to start from.
	SnapshotID string
	// Mapping renames (or, mapped to "", drops) steps of the snapshot's
	// job, as in an update: JSON {"Old": "New"}.
	Mapping string
	// AllowSourceChange accepts a source that reads something else; its
	// positions are then dropped.
	AllowSourceChange bool
	// Program, when set, makes the new job a Go program's (this
	// executable's, built through Options.Program, package weirx's
	// --create-from-snapshot) instead of the YAML pipeline of
	// core.SubmitRequest, whose Pipeline, PipelineFile and BaseDir are then
	// unused. The snapshot must then be of a Go program's job.
	Program string
	// ValidateOnly runs every check (the snapshot, the name, the pipeline,
	// the compatibility check, where each Pub/Sub source would start) and
	// creates nothing.
	ValidateOnly bool
	// SourcePositions says how Pub/Sub positions of another broker (an
	// imported snapshot file's) translate: SourcePositionsPublishTime,
	// SourcePositionsEarliest or SourcePositionsLatest; "" or
	// SourcePositionsFail refuses them (SNAPSHOT_FOREIGN_POSITIONS).
	// Positions of this broker are used as they are.
	SourcePositions string
}

// CreateFromSnapshot checks req's pipeline against the graph of snapshot
// req.SnapshotID with the compatibility check of an update (same rules and
// report; a refused check is INCOMPATIBLE_UPDATE and creates nothing) and,
// when compatible, creates job req.Name (no job of the name may be active;
// it may be the snapshot's job's name or another) that starts from the
// snapshot: every matched keyed step's full state is copied from the
// snapshot into the new job's lineage namespaces under its new step name,
// and sources resume from the snapshot's positions (the cut's sink data was
// committed by the snapshot's job before the snapshot became READY).
// The new job's generation is at least the snapshot's + 1 and at least
// the name's next one, so its sink revisions win over rows the
// snapshot's job wrote. The copy, the new job's checkpoint record, its
// job record and its name's lineage are one atomic write.
//
// It holds the name's guard (lock order 1) throughout and the registry lock for
// the write; the snapshot is only read (it stays READY and unchanged).
func (s *Snapshots) CreateFromSnapshot(ctx context.Context, req FromSnapshotRequest) (*core.UpdateResult, error) {
	mapping, err := s.AdmitChange(req.Name, req.Mapping, &req.Options)
	if err != nil {
		return nil, err
	}
	if err := ValidSourcePositions(req.SourcePositions); err != nil {
		return nil, err
	}
	goProgram := req.Program != ""
	if goProgram {
		req.Pipeline, req.PipelineFile, req.BaseDir = "", "", ""
	} else {
		if req.Pipeline == "" {
			return nil, errcode.Errorf(errcode.InvalidPipeline, "the pipeline is empty: send the YAML text of the pipeline")
		}
		if req.BaseDir == "" || !filepath.IsAbs(req.BaseDir) {
			return nil, errcode.Errorf(errcode.InvalidRequest, "base_dir must be an absolute directory (the client's working directory), got %q", req.BaseDir)
		}
		if req.PipelineFile == "" {
			req.PipelineFile = "pipeline.yaml"
		}
	}
	snap, err := s.GetSnapshot(req.SnapshotID)
	if err != nil {
		return nil, err
	}
	if snap.State != record.SnapshotReady {
		return nil, errcode.Errorf(errcode.SnapshotCorrupt, "snapshot %s is %s: only a READY snapshot can start a job", snap.ID, snap.State)
	}
	if goProgram && snap.SDK != record.SDKGo {
		return nil, errcode.Errorf(errcode.SnapshotSDKMismatch, "snapshot %s is of a YAML pipeline's job (%s): a Go program cannot start from it; start a job from it with weir run P.yaml --create-from-snapshot", snap.ID, snap.JobName)
	}
	if !goProgram && snap.SDK != "" {
		return nil, errcode.Errorf(errcode.SnapshotSDKMismatch, "snapshot %s is of a Go program's job (%s): a YAML pipeline cannot start from it; start the program with its create-from-snapshot flag", snap.ID, snap.JobName)
	}
	oldGraph, err := SnapshotGraph(snap)
	if err != nil {
		return nil, err
	}
	unlock, err := s.LockName(ctx, req.Name) // lock order 1
	if err != nil {
		return nil, err
	}
	defer unlock()
	l, err := s.LineageForNewJob(req.Name)
	if err != nil {
		return nil, err
	}
	rec, err := s.Store.SnapshotRecord(snap.ID)
	if errors.Is(err, state.ErrNotFound) {
		// Deleted (expired, or a delete request) since it was read: the
		// answer a DELETED snapshot gets, not a corruption.
		if now, rerr := s.ReadSnapshot(snap.ID); rerr == nil && now.State == record.SnapshotDeleted {
			return nil, errcode.Errorf(errcode.SnapshotCorrupt, "snapshot %s is DELETED (it was deleted at %s, while this request read it): only a READY snapshot can start a job", snap.ID, now.StateTime.UTC().Format(time.RFC3339))
		}
		return nil, errcode.Errorf(errcode.SnapshotCorrupt, "snapshot %s is READY but its data is missing", snap.ID)
	}
	if err != nil {
		return nil, errcode.Internalf("reading snapshot %s: %w", snap.ID, err)
	}
	now := s.Now()
	id, err := record.NewJobID(now)
	if err != nil {
		return nil, errcode.Internalf("%w", err)
	}
	gen := max(l.Generation, snap.Generation) + 1
	j := &record.Job{ID: id, Name: req.Name, State: record.StatePending, CreateTime: now, StateTime: now,
		Generation: gen, Pipeline: req.Pipeline, PipelineFile: req.PipelineFile,
		BaseDir: req.BaseDir, Options: req.Options, CreatedFromSnapshotID: snap.ID,
		History: []record.StateChange{{State: record.StatePending, Time: now, Reason: "created from snapshot " + snap.ID}}}
	if goProgram {
		j.SDK, j.Program = record.SDKGo, req.Program
	}
	if len(mapping) > 0 {
		j.TransformNameMapping = mapping
	}
	p, err := s.Load(j)
	if err != nil {
		return nil, err
	}
	newGraph := p.Graph()
	report := compat.Check(oldGraph, newGraph, compat.Options{Mapping: mapping, AllowSourceChange: req.AllowSourceChange})
	res := &core.UpdateResult{Report: report}
	if !report.Compatible {
		return res, errcode.Errorf(errcode.IncompatibleUpdate, "the pipeline is not compatible with snapshot %s of job %s (%d problem(s)); no job was created", snap.ID, snap.JobName, len(report.Errors))
	}
	canon, err := newGraph.Canonical()
	if err != nil {
		return nil, errcode.Errorf(errcode.InvalidPipeline, "%s: serialising the pipeline graph: %w", j.Name, err)
	}
	j.Graph, j.Type = canon, record.TypeOf(newGraph)
	// Where each Pub/Sub source starts, checked before anything is
	// written: a source that would fail at its start is refused now.
	placed, placements, err := s.placeSources(ctx, snap, rec.Positions, report, newGraph, j.Name, req.SourcePositions)
	if err != nil {
		return res, err
	}
	res.SourcePositions = placements
	for _, p := range placements {
		res.Notes = append(res.Notes, p.Note)
	}
	if req.ValidateOnly {
		res.Notes = append(res.Notes, fmt.Sprintf("a job %s (generation %d) would start from snapshot %s (validate only: nothing changed)", j.Name, j.Generation, snap.ID))
		return res, nil
	}
	r := restoreOf(j, rec, report, newGraph, placed)
	l.Generation, l.ActiveJobID, l.LatestJobID = j.Generation, j.ID, j.ID
	w := &state.Write{}
	if err := core.PutJSON(w, record.JobKey(j.ID), j); err != nil {
		return nil, err
	}
	if err := core.PutJSON(w, record.LineageKey(j.Name), l); err != nil {
		return nil, err
	}
	err = s.Update(func(tx *core.Tx) error {
		if err := tx.Admit(j.Name); err != nil {
			return err
		}
		if err := tx.RestoreSnapshot(snap.ID, r, w); err != nil {
			return errcode.Internalf("creating job %s from snapshot %s: %w", j.ID, snap.ID, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.Opts.Logger.Info("job created from a snapshot", "job_id", j.ID, "job_name", j.Name, "generation", j.Generation,
		"snapshot_id", snap.ID, "epoch", rec.Epoch)
	if err := s.Launch(ctx, j, p.Program(), nil); err != nil {
		return nil, err
	}
	res.Job = j
	return res, nil
}

// restoreOf says how job j starts from the snapshot's checkpoint record
// rec: matched keyed steps' state under their new names, matched sources'
// positions, and every other step of j's graph emptied of state its name's
// earlier jobs left. The cut's sink parts are not handed over: the
// snapshot's job committed them before the snapshot could become READY
// (snapshotCut fails the snapshot otherwise), so committing them again
// under the new job's sinks would write them twice to an appending sink.
//
// placed holds the positions of Pub/Sub sources as placeSources placed
// them (on the subscription job j reads), in place of the snapshot's.
func restoreOf(j *record.Job, rec *state.CheckpointRecord, report compat.Report, g *graph.Pipeline, placed map[string][][]byte) state.SnapshotRestore {
	r := state.SnapshotRestore{Lineage: j.StateKey(), JobID: j.ID, Steps: map[string]string{},
		Record: state.CheckpointRecord{JobID: j.ID, Epoch: rec.Epoch, Positions: map[string][][]byte{}}}
	filled := map[string]bool{}
	for _, m := range report.Matches {
		if m.Kind == graph.KindSource {
			if pos, ok := placed[m.New]; ok {
				r.Record.Positions[m.New] = pos
			} else if pos, ok := rec.Positions[m.Old]; ok {
				r.Record.Positions[m.New] = pos
			}
			continue
		}
		r.Steps[m.Old] = m.New
		filled[m.New] = true
	}
	for _, st := range g.Steps {
		if !filled[st.Name] {
			r.Clear = append(r.Clear, st.Name)
		}
	}
	return r
}

// ActionCreatedFromSnapshot is the ProgramStart action of a Go program's
// job created from a snapshot (weirx's --create-from-snapshot).
const ActionCreatedFromSnapshot = "created_from_snapshot"
