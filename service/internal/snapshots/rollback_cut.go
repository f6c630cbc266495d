package snapshots

import (
	"errors"
	"fmt"
	"time"

	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/duration"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"
	"github.com/weir-dev/weir/state"
)

// RollbackCut is a rollback snapshot on its way: its record (written in
// the handover's or the drain's write), the pinned store its state is
// copied from, and what to copy.
type RollbackCut struct {
	snap    *record.Snapshot
	pin     *state.Pinned
	cut     state.SnapshotCut
	written bool
}

// newRollbackCut returns the rollback snapshot of job old, replaced by job
// newID at the checkpoint (epoch, positions); names maps old step names to
// the lineage names their state has after the handover (renames).
func (s *Snapshots) newRollbackCut(old *record.Job, newID string, epoch uint64, positions map[string][][]byte, names map[string]string) (*RollbackCut, error) {
	g, err := graph.Parse(old.Graph)
	if err != nil {
		return nil, errcode.Internalf("reading the graph of job %s: %w", old.ID, err)
	}
	id, err := newSnapshotID()
	if err != nil {
		return nil, errcode.Internalf("%w", err)
	}
	now := s.Now()
	ret := s.Opts.RollbackRetention
	snap := &record.Snapshot{ID: id, SourceJobID: old.ID, JobName: old.Name, Generation: old.Generation, CreationTime: now,
		TTL: duration.Format(ret), ExpireTime: now.Add(ret), State: record.SnapshotRunning, StateTime: now,
		Description:    fmt.Sprintf("rollback point of generation %d (job %s), kept when job %s replaced it", old.Generation, old.ID, newID),
		PubsubMetadata: []record.PubsubSnapshotMetadata{}, SDK: old.SDK, Graph: old.Graph,
		Epoch: epoch, Positions: positions, SinkEpoch: epoch, Kind: record.SnapshotKindRollback, ReplacedByJobID: newID}
	steps := make([]string, 0, len(g.Steps))
	for _, st := range g.Steps {
		steps = append(steps, st.Name)
	}
	cut := state.SnapshotCut{Lineage: old.Name, Steps: steps, Names: names,
		Record: state.CheckpointRecord{JobID: old.ID, Epoch: epoch, Positions: positions}}
	return &RollbackCut{snap: snap, cut: cut}, nil
}

// Put adds the snapshot's record (RUNNING) to w, the write of the update's
// handover or the drain's start. A nil cut adds nothing.
func (rc *RollbackCut) Put(w *state.Write) error {
	if rc == nil {
		return nil
	}
	return core.PutJSON(w, record.SnapshotKey(rc.snap.ID), rc.snap)
}

// Landed records, in the core.Tx whose write carried Put's record once it
// landed, that the cut is written; a cut whose state was not pinned yet
// (an update's: its state is the handover's) pins the store as that write
// left it. A nil cut does nothing.
func (rc *RollbackCut) Landed(tx *core.Tx) {
	if rc == nil {
		return
	}
	if rc.pin == nil {
		rc.pin = tx.Pin()
	}
	rc.written = true
}

// FinishRollbackCut starts the copy of a written rollback cut (it becomes
// READY, or FAILED), or releases the pin of one that was not written. The
// caller holds no core.Tx.
func (s *Snapshots) FinishRollbackCut(rc *RollbackCut) {
	if rc == nil || rc.pin == nil {
		return
	}
	if !rc.written {
		_ = rc.pin.Release()
		return
	}
	if !s.Spawn(func() { s.copySnapshot(rc.snap, rc.pin, rc.cut) }) {
		_ = rc.pin.Release()
		if _, err := s.snapshotFailed(rc.snap.ID, "the server shut down before the rollback snapshot's state was copied"); err != nil {
			s.Opts.Logger.Error("recording a failed rollback snapshot", "snapshot_id", rc.snap.ID, "error", err)
		}
		return
	}
	s.Opts.Logger.Info("rollback snapshot cut taken", "snapshot_id", rc.snap.ID, "job_id", rc.snap.SourceJobID,
		"replaced_by_job_id", rc.snap.ReplacedByJobID, "epoch", rc.snap.Epoch)
}

// UpdateRollbackCut is the rollback snapshot of job old, which an in-place
// update replaces with job newID at handover checkpoint cp: its steps are
// read under the names renames gives them (the handover's renames).
func (s *Snapshots) UpdateRollbackCut(old *record.Job, newID string, cp *contract.Checkpoint, renames map[string]string) (*RollbackCut, error) {
	names := map[string]string{}
	for o, n := range renames {
		names[o] = n
	}
	return s.newRollbackCut(old, newID, cp.Epoch, cp.Positions, names)
}

// DrainRollbackCut takes the rollback snapshot's cut of the old job of
// replacement job newID when the flow is about to drain it (in phase
// before: PREPARING for a stop-and-replace, OVERLAP for a parallel one):
// one checkpoint of the old execution, written as its own and pinned. It
// returns nil when there is nothing to cut (the flow is past PREPARING,
// the old job does not run or takes no checkpoints) and when the cut
// failed (logged: the replacement goes on without a rollback point). The
// caller holds the old job's name guard, not the registry lock.
func (s *Snapshots) DrainRollbackCut(newID string, before record.ReplacementPhase) *RollbackCut {
	nj, err := s.ReadJob(newID)
	if err != nil || nj.Replacement == nil || nj.Replacement.Phase != before {
		return nil
	}
	old, err := s.ReadJob(nj.Replacement.OldJobID)
	if err != nil || old.State != record.StateRunning || !old.Checkpointing {
		return nil
	}
	jr := s.RunningJob(old.ID)
	if jr == nil || !jr.Checkpointed {
		return nil
	}
	rc, err := s.newRollbackCut(old, nj.ID, 0, nil, nil)
	if err != nil {
		s.Opts.Logger.Error("replacement: no rollback snapshot", "job_id", old.ID, "error", err)
		return nil
	}
	cp, pin, err := s.snapshotCut(jr)
	if err != nil {
		if !errors.Is(err, core.ErrNotWritten) {
			s.CheckpointFailed(jr, err)
		}
		s.Opts.Logger.Error("replacement: taking the rollback snapshot's cut failed; the replacement goes on without one", "job_id", old.ID, "error", err)
		return nil
	}
	rc.pin = pin
	rc.snap.Epoch, rc.snap.Positions, rc.snap.SinkEpoch = cp.Epoch, cp.Positions, cp.Epoch
	rc.cut.Record.Epoch, rc.cut.Record.Positions = cp.Epoch, cp.Positions
	return rc
}

// rollbackHeld reports whether snapshot snap, whose expire time has
// passed, must still be kept: a rollback snapshot lives at least its TTL
// (the rollback retention) after the job that replaced its job started
// running, on the service's clock; one whose replacing job has not run
// yet (a flow under way) is kept too.
func (s *Snapshots) RollbackHeld(snap *record.Snapshot, now time.Time) bool {
	if snap.Kind != record.SnapshotKindRollback || snap.ReplacedByJobID == "" {
		return false
	}
	ttl, err := duration.Parse(snap.TTL)
	if err != nil {
		return false
	}
	j, err := s.ReadJob(snap.ReplacedByJobID)
	if err != nil {
		return false
	}
	for _, c := range j.History {
		if c.State == record.StateRunning {
			return now.Before(c.Time.Add(ttl))
		}
	}
	return j.Active()
}

// RestoreRollback writes, at the cut-over of rollback job nj (whose old
// job has ended), the state of its rollback snapshot into the name's
// state and nj's checkpoint record, so that launch resumes it from there:
// its sources from the snapshot's positions (the subscriptions are
// rewound), its keyed steps from the snapshot's state. A job that is not a
// rollback's is left alone. The caller holds nj's name guard.
func (s *Snapshots) RestoreRollback(nj *record.Job, g *graph.Pipeline) error {
	if nj.Replacement == nil || nj.Replacement.Strategy != record.StrategyRollback || nj.CreatedFromSnapshotID == "" {
		return nil
	}
	snap, err := s.ReadSnapshot(nj.CreatedFromSnapshotID)
	if err != nil {
		return err
	}
	if snap.State != record.SnapshotReady {
		return errcode.Errorf(errcode.NoRollbackSnapshot, "rollback snapshot %s is %s: the rollback job cannot start from it", snap.ID, snap.State)
	}
	oldGraph, err := SnapshotGraph(snap)
	if err != nil {
		return err
	}
	rec, err := s.Store.SnapshotRecord(snap.ID)
	if err != nil {
		return errcode.Internalf("reading rollback snapshot %s: %w", snap.ID, err)
	}
	report := compat.Check(oldGraph, g, compat.Options{})
	if !report.Compatible {
		return errcode.Errorf(errcode.IncompatibleUpdate, "the rollback job's pipeline no longer matches its snapshot %s", snap.ID)
	}
	r := restoreOf(nj, rec, report, g, nil)
	return s.Update(func(tx *core.Tx) error {
		if err := tx.RestoreSnapshot(snap.ID, r, &state.Write{}); err != nil {
			return errcode.Internalf("restoring rollback snapshot %s for job %s: %w", snap.ID, nj.ID, err)
		}
		return nil
	})
}
