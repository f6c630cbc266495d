package snapshots

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/weir-dev/weir/runner"
	"sort"
	"time"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/duration"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/state"
)

// Job snapshots (Dataflow's): a restore point of a running streaming job —
// its full keyed state (open windows, panes and timers are keyed state),
// source positions and sink pre-commit data at an aligned checkpoint cut,
// and its graph — from which later jobs start (CreateFromSnapshot).
//
// A snapshot is taken in two steps. The cut: under the name's guard and
// the execution's cpMu, the job takes an ordinary checkpoint (written
// durably as the job's own, then committed) and, under the same hold of
// the registry lock as that write, the store is pinned (state.Store.Pin); the job
// then goes on. Its pause is a periodic checkpoint's. The copy: without
// any guard or cpMu, a goroutine reads the full state of every step of the
// job's lineage from the pinned view (checkpoints are incremental, so the
// cut's checkpoint alone holds only the keys it changed; the namespaces as
// of the cut hold them all) into the snapshot's own key space, snap/<id>/,
// and commits it under the registry lock in bounded batches, the last one with the
// READY record. So a snapshot is READY and complete, or FAILED with its
// batches removed; one found PENDING or RUNNING at Open was cut short by a
// stop and becomes FAILED, its batches removed.
//
// Nothing of a job's own writes touches snap/<id>/: later checkpoints,
// updates, drains, cancels, the job's end, DropState by a new job of the
// name and restarts leave it intact until it is deleted or expires.

// TTL bounds of job snapshots.
const (
	DefaultSnapshotTTL = 7 * 24 * time.Hour
	MinSnapshotTTL     = time.Hour
	MaxSnapshotTTL     = 30 * 24 * time.Hour
)

// ParseSnapshotTTL parses and checks a snapshot TTL ("7d", "36h"); ""
// is the default, 7 days.
func ParseSnapshotTTL(v string) (time.Duration, error) {
	if v == "" {
		return DefaultSnapshotTTL, nil
	}
	d, err := duration.Parse(v)
	if err != nil {
		return 0, errcode.Errorf(errcode.InvalidTTL, "snapshot TTL: %w", err)
	}
	return d, validateSnapshotTTL(d)
}

func validateSnapshotTTL(d time.Duration) error {
	if d < MinSnapshotTTL || d > MaxSnapshotTTL {
		return errcode.Errorf(errcode.InvalidTTL, "snapshot TTL %s is outside the accepted range: at least 1h, at most 30d", duration.Format(d))
	}
	return nil
}

// newSnapshotID returns a random (version 4) UUID.
func newSnapshotID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generating a snapshot ID: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], nil
}

// SnapshotRequest asks for a snapshot of a running job.
type SnapshotRequest struct {
	// Job is the job's ID or name (a name means its active job).
	Job string
	// TTL is the snapshot's lifetime; 0 means DefaultSnapshotTTL.
	TTL         time.Duration
	Description string
	// SnapshotSources snapshots each Pub/Sub subscription the job reads at
	// exactly the cut's position too (see PubsubSnapshotMetadata).
	SnapshotSources bool
}

// CreateSnapshot takes a snapshot of the RUNNING streaming job req.Job
// (with checkpoints on): it returns once the cut is taken, with the
// snapshot RUNNING while its state is copied (WaitSnapshot waits for READY
// or FAILED), or FAILED when the cut could not be taken. The job keeps
// running throughout; its pause is one checkpoint's.
//
// It holds the job name's guard and the execution's cpMu for the cut only
// (lock order 1, 2), the registry lock for the store writes; the copy holds none.
func (s *Snapshots) CreateSnapshot(ctx context.Context, req SnapshotRequest) (*record.Snapshot, error) {
	if err := s.RefuseIfStoreFailed(); err != nil {
		return nil, err
	}
	ss, hasBroker := s.sourceSnapshotter()
	if req.SnapshotSources && !hasBroker {
		return nil, errcode.Errorf(errcode.InvalidRequest, "snapshot_sources needs the server's Pub/Sub broker, and this service has none")
	}
	if req.TTL == 0 {
		req.TTL = DefaultSnapshotTTL
	}
	if err := validateSnapshotTTL(req.TTL); err != nil {
		return nil, err
	}
	unlock, err := s.LockJob(ctx, req.Job) // lock order 1
	if err != nil {
		return nil, err
	}
	guarded := true
	defer func() {
		if guarded {
			unlock()
		}
	}()
	if s.Closing.Load() {
		return nil, errcode.Errorf(errcode.ShuttingDown, "the weir server is shutting down; snapshot the job once it is back")
	}
	j, err := s.Resolve(req.Job)
	if err != nil {
		return nil, err
	}
	jr := s.RunningJob(j.ID)
	// A job waiting for its connector has no execution, but its last
	// durable checkpoint is in the store: the snapshot is cut from there.
	waiting := jr == nil && s.WaitsForConnector(j.ID) // only a job that took checkpoints waits
	switch {
	case j.Type != record.TypeStreaming:
		return nil, errcode.Errorf(errcode.JobNotSnapshottable, "job %s (%s) is a batch job: only streaming jobs can be snapshotted", j.ID, j.Name)
	case j.State != record.StateRunning:
		return nil, errcode.Errorf(errcode.JobNotSnapshottable, "job %s (%s) is %s: only a RUNNING job can be snapshotted", j.ID, j.Name, j.State)
	case waiting && req.SnapshotSources:
		return nil, s.NoExecutionError(j.Name, j, "its subscriptions cannot be snapshotted while the broker is away: snapshot without snapshot_sources (the job's own state and positions), or once the job runs")
	case waiting:
	case !j.Checkpointing || jr == nil || !jr.Checkpointed:
		note := j.CheckpointNote
		if note == "" {
			note = "it has no live execution taking checkpoints"
		}
		return nil, errcode.Errorf(errcode.JobNotSnapshottable, "job %s (%s) takes no checkpoints (%s): a snapshot is a checkpoint cut", j.ID, j.Name, note)
	}
	now := s.Now()
	id, err := newSnapshotID()
	if err != nil {
		return nil, errcode.Internalf("%w", err)
	}
	snap := &record.Snapshot{ID: id, SourceJobID: j.ID, JobName: j.Name, Generation: j.Generation, CreationTime: now,
		TTL: duration.Format(req.TTL), ExpireTime: now.Add(req.TTL), State: record.SnapshotPending, StateTime: now,
		Description: req.Description, PubsubMetadata: []record.PubsubSnapshotMetadata{}, SDK: j.SDK, Graph: j.Graph}
	if err := s.PutSnapshot(snap); err != nil {
		return nil, err
	}
	var cp *contract.Checkpoint
	var pin *state.Pinned
	if waiting {
		cp, pin, err = s.storedCut(j)
	} else {
		cp, pin, err = s.snapshotCut(jr)
	}
	if err != nil {
		guarded = false
		unlock()
		if !waiting && !errors.Is(err, core.ErrNotWritten) {
			// A checkpoint taken and not written lost its state changes:
			// the job fails as on a failed periodic checkpoint.
			s.CheckpointFailed(jr, err)
		}
		return s.snapshotFailed(id, fmt.Sprintf("taking the cut: %v", err))
	}
	if req.SnapshotSources {
		if err := s.snapshotJobSources(ctx, ss, snap, j, cp.Positions); err != nil {
			_ = pin.Release()
			guarded = false
			unlock()
			failed, ferr := s.snapshotFailed(id, fmt.Sprintf("snapshotting the job's subscriptions at the cut: %v", err))
			if ferr == nil {
				s.dropSourceSnapshots(failed)
			}
			return failed, ferr
		}
	}
	g, gerr := graph.Parse(j.Graph)
	if gerr == nil {
		s.recordBroker(ctx, snap, g, cp.Positions)
	}
	snap.State, snap.StateTime = record.SnapshotRunning, s.Now()
	snap.Epoch, snap.Positions, snap.SinkEpoch = cp.Epoch, cp.Positions, cp.Epoch
	if err := s.PutSnapshot(snap); err != nil {
		_ = pin.Release()
		return nil, err
	}
	guarded = false
	unlock()
	if jr != nil {
		g, gerr = jr.Prog.Graph, nil // the running program's own
	}
	if gerr != nil {
		_ = pin.Release()
		return s.snapshotFailed(id, fmt.Sprintf("reading the job's graph: %v", gerr))
	}
	steps := make([]string, 0, len(g.Steps))
	for _, st := range g.Steps {
		steps = append(steps, st.Name)
	}
	cut := state.SnapshotCut{Lineage: j.StateKey(), Steps: steps,
		Record: state.CheckpointRecord{JobID: j.ID, Epoch: cp.Epoch, Positions: cp.Positions, SinkParts: cp.SinkParts}}
	if !s.Spawn(func() { s.copySnapshot(snap, pin, cut) }) {
		_ = pin.Release()
		return s.snapshotFailed(id, "the server shut down before the snapshot's state was copied")
	}
	s.Opts.Logger.Info("snapshot cut taken", "snapshot_id", id, "job_id", j.ID, "job_name", j.Name, "epoch", cp.Epoch)
	return snap, nil
}

// snapshotCut takes a checkpoint of jr, writes it as the job's checkpoint
// and pins the store right after the write (same hold of the registry lock), then
// commits it. It takes jr.cpMu for the whole checkpoint, as checkpoint
// does. On success the caller releases the pin.
func (s *Snapshots) snapshotCut(jr *core.Run) (*contract.Checkpoint, *state.Pinned, error) {
	jr.CpMu.Lock() // lock order 2
	defer jr.CpMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), core.FinalCheckpointTimeout)
	defer cancel()
	cp, err := jr.X.Checkpoint(ctx)
	if err != nil {
		return nil, nil, err
	}
	var pin *state.Pinned
	if err := s.WriteCheckpoint(jr, cp, nil, func(tx *core.Tx) { pin = tx.Pin() }); err != nil {
		return nil, nil, err
	}
	if err := jr.X.Commit(ctx, cp); err != nil {
		_ = pin.Release()
		return nil, nil, fmt.Errorf("committing checkpoint %d: %w", cp.Epoch, err)
	}
	return cp, pin, nil
}

// storedCut is snapshotCut for job j, which waits for its connector and
// has no execution: its last durable checkpoint, with the store pinned as
// it is (no execution writes the job's state: one would first take the
// name's guard, which the caller holds). On success the caller releases
// the pin.
func (s *Snapshots) storedCut(j *record.Job) (*contract.Checkpoint, *state.Pinned, error) {
	rec, err := s.Store.LastCheckpoint(j.ID)
	if errors.Is(err, state.ErrNotFound) {
		return nil, nil, fmt.Errorf("job %s waits for its connector and has no durable checkpoint yet to cut", j.ID)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading the last checkpoint of job %s: %w", j.ID, err)
	}
	var pin *state.Pinned
	if err := s.Update(func(tx *core.Tx) error { pin = tx.Pin(); return nil }); err != nil {
		return nil, nil, err
	}
	if pin == nil {
		return nil, nil, fmt.Errorf("the state store could not be pinned for the cut")
	}
	return &contract.Checkpoint{Epoch: rec.Epoch, Positions: rec.Positions, SinkParts: rec.SinkParts}, pin, nil
}

// snapshotBatchBytes is the size of each table file a snapshot's copy
// writes (state.StreamSnapshot): the copy checks between files that the
// snapshot still exists, and a rollback snapshot's copy waits there.
const snapshotBatchBytes = 4 << 20

// copySnapshot copies the cut's full state from pin into table files
// beside the store, adds them to the store's snapshot key space, and makes
// the snapshot READY, or FAILED when that fails (snapshotFailed removes
// what was added; a stop in between leaves it RUNNING, which Open turns
// into FAILED the same way, and the files not added are removed when the
// store opens). It holds no guard; a core.Tx only for the READY write. The job
// is never touched. It runs in a goroutine Close waits for (spawn).
func (s *Snapshots) copySnapshot(snap *record.Snapshot, pin *state.Pinned, cut state.SnapshotCut) {
	defer pin.Release()
	cut.OnState, snap.Steps = countAggregations(snap)
	began := time.Now() // the current file's start
	sb, err := s.Store.StreamSnapshot(s.Ctx, snap.ID, pin, cut, snapshotBatchBytes, func(int64) error {
		if s.Ctx.Err() != nil {
			return errors.New("the server shut down while the snapshot's state was copied")
		}
		if cur, err := s.ReadSnapshot(snap.ID); err != nil || cur.State != record.SnapshotRunning {
			return errSnapshotGone
		}
		if snap.Kind == record.SnapshotKindRollback {
			// Paced: see rollbackCopyPace.
			t := time.NewTimer(time.Since(began) * rollbackCopyPace)
			select {
			case <-t.C:
			case <-s.Ctx.Done():
				t.Stop()
			}
		}
		began = time.Now()
		return nil
	})
	if err == nil {
		// The state's files join the store outside the registry lock (their
		// ingest waits for a sync); finishSnapshot takes it to write the
		// READY record, or removes them if the snapshot went meanwhile.
		if s.Hooks.SnapshotWrite != nil {
			err = s.Hooks.SnapshotWrite(snap.ID, sb.Size)
		}
		if err == nil {
			err = sb.Ingest(s.Ctx)
		}
		if err == nil {
			err = s.finishSnapshot(snap, sb, sb.Size)
		} else {
			sb.Close()
		}
	}
	if errors.Is(err, errSnapshotGone) {
		return // deleted meanwhile: its data went with it
	}
	if err != nil {
		s.logSnapshotFailed(snap.ID, err.Error())
		return
	}
	s.Opts.Logger.Info("snapshot ready", "snapshot_id", snap.ID, "job_id", snap.SourceJobID, "disk_size_bytes", sb.Size)
}

// rollbackCopyPace paces the copy of a rollback snapshot: after each file
// of its state the copy waits this many times as long as the file took,
// so that it takes at most a quarter of one core. A rollback snapshot is
// copied in the background after every update and replacement, just when
// the new job catches up with the backlog of the pause. A snapshot a user
// asks for copies at full speed.
const rollbackCopyPace = 3

// errSnapshotGone stops the copy of a snapshot deleted while it was copied.
var errSnapshotGone = errors.New("the snapshot was deleted while it was copied")

// finishSnapshot commits the last batch sb of snapshot snap's data with
// its READY record (size bytes in all), in a core.Tx of its own.
func (s *Snapshots) finishSnapshot(snap *record.Snapshot, sb *state.SnapshotBatch, size int64) error {
	return s.Update(func(tx *core.Tx) error {
		cur, err := s.ReadSnapshot(snap.ID)
		if err == nil && cur.State != record.SnapshotRunning {
			// Deleted (or failed) while the state was copied: what the batch
			// ingested goes too (the delete found nothing to remove).
			sb.Close()
			if err := tx.DeleteSnapshot(snap.ID, &state.Write{}); err != nil {
				s.Opts.Logger.Error("removing the state of a deleted snapshot", "snapshot_id", snap.ID, "error", err)
			}
			return errSnapshotGone
		}
		if err != nil {
			sb.Close()
			return err
		}
		if s.Ctx.Err() != nil {
			// Still RUNNING: the caller makes it FAILED, which removes what
			// was ingested.
			sb.Close()
			return errors.New("the server shut down while the snapshot's state was copied")
		}
		cur.State, cur.StateTime, cur.DiskSizeBytes = record.SnapshotReady, s.Now(), size
		cur.Steps = snap.Steps
		w := &state.Write{}
		if err := core.PutJSON(w, record.SnapshotKey(cur.ID), cur); err != nil {
			sb.Close()
			return err
		}
		// A rollback snapshot is no event of its job's: it comes with the
		// update or replacement that ended the job, whose events say so (weir
		// jobs history lists it).
		if cur.Kind != record.SnapshotKindRollback {
			tx.AddEvent(w, cur.SourceJobID, record.EventSnapshotCreated, record.SeverityInfo, fmt.Sprintf("snapshot %s is READY (%d bytes)", cur.ID, size),
				map[string]any{"snapshot_id": cur.ID, "disk_size_bytes": size})
		}
		if err := tx.WriteSnapshot(sb, w); err != nil {
			return fmt.Errorf("writing the snapshot: %w", err)
		}
		return nil
	})
}

func (s *Snapshots) logSnapshotFailed(id, reason string) {
	snap, err := s.snapshotFailed(id, reason)
	if err != nil {
		s.Opts.Logger.Error("recording a failed snapshot", "snapshot_id", id, "error", err)
		return
	}
	s.dropSourceSnapshots(snap)
}

// snapshotFailed makes snapshot id FAILED with reason (unless it is
// already READY, FAILED or DELETED) and returns its record, in a core.Tx of its
// own.
func (s *Snapshots) snapshotFailed(id, reason string) (*record.Snapshot, error) {
	var snap *record.Snapshot
	err := s.Update(func(tx *core.Tx) error {
		var err error
		if snap, err = s.ReadSnapshot(id); err != nil {
			return err
		}
		if snap.State != record.SnapshotPending && snap.State != record.SnapshotRunning {
			return nil
		}
		snap.State, snap.StateTime, snap.FailureReason = record.SnapshotFailed, s.Now(), reason
		snap.DiskSizeBytes = 0
		w := &state.Write{}
		if err := core.PutJSON(w, record.SnapshotKey(id), snap); err != nil {
			return err
		}
		tx.AddEvent(w, snap.SourceJobID, record.EventSnapshotFailed, record.SeverityError, fmt.Sprintf("snapshot %s failed: %s", id, reason),
			map[string]any{"snapshot_id": id, "reason": reason})
		if err := tx.DeleteSnapshot(id, w); err != nil {
			return errcode.Internalf("recording snapshot %s as failed: %w", id, err)
		}
		s.Opts.Logger.Error("snapshot failed", "snapshot_id", id, "job_id", snap.SourceJobID, "reason", reason)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return snap, nil
}

// putSnapshot writes snap's record, in a core.Tx of its own.
func (s *Snapshots) PutSnapshot(snap *record.Snapshot) error {
	w := &state.Write{}
	if err := core.PutJSON(w, record.SnapshotKey(snap.ID), snap); err != nil {
		return err
	}
	if err := s.Apply(w); err != nil {
		return errcode.Internalf("recording snapshot %s: %w", snap.ID, err)
	}
	return nil
}

// ReadSnapshot reads snapshot id's record; a missing one is
// SNAPSHOT_NOT_FOUND. It takes no lock.
func (s *Snapshots) ReadSnapshot(id string) (*record.Snapshot, error) {
	return core.GetJSON[record.Snapshot](s.Core, record.SnapshotKey(id), "snapshot "+id,
		errcode.Errorf(errcode.SnapshotNotFound, "no snapshot has the ID %q", id))
}

// GetSnapshot returns snapshot id (a deleted one reads DELETED). It takes
// no lock.
func (s *Snapshots) GetSnapshot(id string) (*record.Snapshot, error) {
	if id == "" {
		return nil, errcode.Errorf(errcode.SnapshotNotFound, "no snapshot ID given")
	}
	return s.ReadSnapshot(id)
}

// ListSnapshots returns the snapshots of job ref (an ID: that job's; a
// name: those of every job of the name; "": all), newest first; DELETED
// ones only with all. It takes no lock.
func (s *Snapshots) ListSnapshots(ref string, all bool) ([]*record.Snapshot, error) {
	byID := false
	if ref != "" {
		if _, err := s.ReadJob(ref); err == nil {
			byID = true
		} else if !errors.Is(err, state.ErrNotFound) {
			return nil, errcode.Internalf("reading job %s: %w", ref, err)
		} else if !record.IsJobName(ref) {
			return nil, errcode.Errorf(errcode.JobNotFound, "no job has the ID or name %q", ref)
		}
	}
	out := []*record.Snapshot{}
	err := s.Store.Scan("snapshot/", func(_ string, v []byte) error {
		snap := &record.Snapshot{}
		if err := core.DecodeJSON(v, snap); err != nil {
			return err
		}
		switch {
		case snap.State == record.SnapshotDeleted && !all,
			ref != "" && byID && snap.SourceJobID != ref,
			ref != "" && !byID && snap.JobName != ref:
			return nil
		}
		out = append(out, snap)
		return nil
	})
	if err != nil {
		return nil, errcode.Internalf("listing snapshots: %w", err)
	}
	sort.SliceStable(out, func(a, b int) bool {
		if !out[a].CreationTime.Equal(out[b].CreationTime) {
			return out[a].CreationTime.After(out[b].CreationTime)
		}
		return out[a].ID > out[b].ID
	})
	return out, nil
}

// DeleteSnapshot deletes snapshot id: its data goes at once, its record
// stays as a DELETED tombstone. Deleting a deleted snapshot answers the
// tombstone. It writes in a core.Tx of its own.
func (s *Snapshots) DeleteSnapshot(id string) (*record.Snapshot, error) {
	if err := s.RefuseIfStoreFailed(); err != nil {
		return nil, err
	}
	return s.deleteSnapshot(id, "deleted")
}

func (s *Snapshots) deleteSnapshot(id, reason string) (*record.Snapshot, error) {
	snap, err := s.deleteSnapshotRecord(id, reason)
	if err == nil {
		s.dropSourceSnapshots(snap) // outside a core.Tx: a broker call
	}
	return snap, err
}

// deleteSnapshotRecord makes snapshot id DELETED and removes its data,
// in a core.Tx of its own.
func (s *Snapshots) deleteSnapshotRecord(id, reason string) (*record.Snapshot, error) {
	var snap *record.Snapshot
	err := s.Update(func(tx *core.Tx) error {
		var err error
		if snap, err = s.ReadSnapshot(id); err != nil {
			return err
		}
		if snap.State == record.SnapshotDeleted {
			return nil
		}
		snap.State, snap.StateTime, snap.DiskSizeBytes = record.SnapshotDeleted, s.Now(), 0
		w := &state.Write{}
		if err := core.PutJSON(w, record.SnapshotKey(id), snap); err != nil {
			return err
		}
		if err := tx.DeleteSnapshot(id, w); err != nil {
			return errcode.Internalf("deleting snapshot %s: %w", id, err)
		}
		s.Opts.Logger.Info("snapshot deleted", "snapshot_id", id, "reason", reason)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return snap, nil
}

// WaitSnapshot waits until snapshot id is READY, FAILED or DELETED and
// returns it.
func (s *Snapshots) WaitSnapshot(ctx context.Context, id string) (*record.Snapshot, error) {
	for {
		next := s.Changes.Next()
		snap, err := s.ReadSnapshot(id)
		if err != nil {
			return nil, err
		}
		if snap.State != record.SnapshotPending && snap.State != record.SnapshotRunning {
			return snap, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for snapshot %s: %w", id, ctx.Err())
		case <-next:
		}
	}
}

// recoverSnapshots, at Open: a snapshot left PENDING or RUNNING was cut
// short by the stop (READY lands with its last batch) and becomes FAILED,
// its batches removed; expired snapshots are deleted; uploads of
// snapshot files and imports cut short by the stop are removed (an
// import's snapshot is then absent).
func (s *Snapshots) recoverSnapshots() error {
	if err := s.clearImports(); err != nil {
		return err
	}
	if err := s.recoverImports(); err != nil {
		return err
	}
	var stale []string
	err := s.Store.Scan("snapshot/", func(_ string, v []byte) error {
		snap := &record.Snapshot{}
		if err := core.DecodeJSON(v, snap); err != nil {
			return err
		}
		if snap.State == record.SnapshotPending || snap.State == record.SnapshotRunning {
			stale = append(stale, snap.ID)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading the snapshot registry: %w", err)
	}
	for _, id := range stale {
		snap, err := s.snapshotFailed(id, "the server stopped while the snapshot was being taken")
		if err != nil {
			return err
		}
		s.dropSourceSnapshots(snap)
	}
	return s.ExpireSnapshots()
}

// expireSnapshots deletes every snapshot whose expire time has passed on
// the service's clock.
func (s *Snapshots) ExpireSnapshots() error {
	now := s.Now()
	var expired []string
	err := s.Store.Scan("snapshot/", func(_ string, v []byte) error {
		snap := &record.Snapshot{}
		if err := core.DecodeJSON(v, snap); err != nil {
			return err
		}
		switch snap.State {
		case record.SnapshotReady, record.SnapshotFailed:
			if !now.Before(snap.ExpireTime) && !s.RollbackHeld(snap, now) {
				expired = append(expired, snap.ID)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading the snapshot registry: %w", err)
	}
	var errs []error
	for _, id := range expired {
		if _, err := s.deleteSnapshot(id, "expired"); err != nil {
			errs = append(errs, err)
		}
	}
	s.expireSourceSnapshots()
	return errors.Join(errs...)
}

// expireLoop deletes expired snapshots every checkpoint interval until
// the service closes. It runs in a goroutine Close waits for (spawn).
func (s *Snapshots) expireLoop() {
	t := time.NewTicker(s.Opts.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-s.Ctx.Done():
			return
		case <-t.C:
			if s.StoreFailed() != nil {
				continue
			}
			if err := s.ExpireSnapshots(); err != nil {
				s.Opts.Logger.Error("deleting expired snapshots", "error", err)
			}
		}
	}
}

// SnapshotGraph parses the graph of snap.
func SnapshotGraph(snap *record.Snapshot) (*graph.Pipeline, error) {
	g, err := graph.Parse(snap.Graph)
	if err != nil {
		return nil, errcode.Errorf(errcode.SnapshotCorrupt, "snapshot %s: its graph does not parse: %w", snap.ID, err)
	}
	return g, nil
}

// countAggregations returns the OnState of a cut of snapshot snap that
// counts the keys and open windows of each of its graph's aggregation
// steps, and the slice of their counts, filled in as the state is copied
// (one entry an aggregation key). Nil, nil when the graph does not parse.
func countAggregations(snap *record.Snapshot) (func(step string, value []byte), []record.SnapshotStep) {
	g, err := graph.Parse(snap.Graph)
	if err != nil {
		return nil, nil
	}
	var steps []record.SnapshotStep
	index := map[string]int{}
	for _, st := range g.Steps {
		if st.Kind == graph.KindCombinePerKey || st.Kind == graph.KindGroupByKey {
			index[st.Name] = len(steps)
			steps = append(steps, record.SnapshotStep{Name: st.Name})
		}
	}
	if len(steps) == 0 {
		return nil, nil
	}
	return func(step string, value []byte) {
		i, ok := index[step]
		if !ok {
			return
		}
		steps[i].Keys++
		if n, ok := runner.AggregationWindows(value); ok {
			steps[i].OpenWindows += int64(n)
		}
	}, steps
}
