package inplace

import (
	"context"
	"errors"
	"fmt"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"
	"github.com/weir-dev/weir/state"
)

// updateWaiting is the in-place update of a job that has no execution
// because a connector is unavailable (CONNECTOR_UNAVAILABLE: the service
// starts it again from its last durable checkpoint on every retry). There
// is nothing to pause or hand over in memory, so the handover happens in
// the store, as a restart would find it:
//
//  1. One atomic write, as persistHandover's: the old job becomes UPDATED,
//     the new one RUNNING (or DRAINING), the lineage points at it, its
//     checkpoint is the old job's last durable one (positions under the
//     new step names, renamed steps' state rebound, dropped steps' state
//     deleted), and the rollback snapshot of the old job is cut from the
//     store as that write leaves it. The old job's commit of that
//     checkpoint stays pending when it has sink data: the service commits
//     it with the old job's sinks once they answer (retryPendingCommits);
//     sinks skip epochs they already committed.
//  2. The wait moves to the new job (Core.MoveConnectorWait): the next
//     retry starts it, restoring its state from the store and migrating
//     what the new version declares, as after a restart.
//
// So a corrected address or credentials of the connector the job waits
// for takes effect with the update. The caller holds the name's guard;
// the registry lock is taken for the write only.
func (s *InPlace) updateWaiting(ctx context.Context, u *update) (*core.UpdateResult, error) {
	old, nj, l := u.old, u.nj, u.l
	rec, err := s.Store.LastCheckpoint(old.ID)
	if errors.Is(err, state.ErrNotFound) {
		rec, err = nil, nil // no checkpoint: the new job starts from scratch, as a restart would
	}
	if err != nil {
		return nil, errcode.Internalf("reading the last checkpoint of job %s: %w", old.ID, err)
	}
	now := s.Now()
	oldFrom, newFrom := old.State, nj.State
	if err := record.Transition(old, record.StateUpdated, now, "updated into job "+nj.ID+" while it waited for its connector"); err != nil {
		return nil, err
	}
	old.ReplacedByJobID = nj.ID
	if nj.State == record.StatePending {
		if err := record.Transition(nj, record.StateRunning, now, "updated while its connector is unavailable: starts at the next retry"); err != nil {
			return nil, errcode.Internalf("%w", err)
		}
	}
	l.Generation, l.ActiveJobID, l.LatestJobID = nj.Generation, nj.ID, nj.ID
	var cp *contract.Checkpoint
	w := &state.Write{}
	if rec != nil {
		u.h = handoverOf(old.StateKey(), old.ID, nj.ID, rec.Positions, u.report)
		cp = &contract.Checkpoint{Epoch: rec.Epoch, Positions: rec.Positions, SinkParts: rec.SinkParts}
		if len(rec.SinkParts) > 0 {
			old.PendingCommit = true
		}
		cut, err := s.snaps.UpdateRollbackCut(old, nj.ID, cp, u.h.Renames)
		if err != nil {
			return nil, err
		}
		if err := cut.Put(w); err != nil {
			return nil, err
		}
		u.rb = cut
	}
	if err := putUpdateRecords(w, old, nj, l); err != nil {
		return nil, err
	}
	err = s.Update(func(tx *core.Tx) error { // the write only
		tx.StateEvent(w, old, oldFrom)
		tx.StateEvent(w, nj, newFrom)
		d := map[string]any{"old_job_id": old.ID, "new_job_id": nj.ID, "generation": nj.Generation, "connector_unavailable": true}
		tx.AddEvent(w, old.ID, record.EventUpdateSucceeded, record.SeverityInfo,
			"updated in place into job "+nj.ID+" while it waited for its connector: the update was made in the store", d)
		tx.AddEvent(w, nj.ID, record.EventUpdateSucceeded, record.SeverityInfo,
			"the in-place update of job "+old.ID+", which waited for its connector: starts from its last durable checkpoint at the next retry", d)
		if cp == nil {
			return tx.Apply(w)
		}
		if err := tx.WriteHandover(u.h, cp, w); err != nil {
			return err
		}
		u.rb.Landed(tx)
		return nil
	})
	// Releases the cut's pin, whether it was written or not.
	s.snaps.FinishRollbackCut(u.rb)
	if err != nil {
		// Nothing was written: the old job still waits for its connector.
		return nil, errcode.Internalf("writing the update of job %s: %w", old.ID, err)
	}
	s.MoveConnectorWait(old.ID, nj.ID)
	s.Opts.Logger.Info("job updated in the store while it waited for its connector", "job_name", old.Name, "old_job_id", old.ID,
		"new_job_id", nj.ID, "generation", nj.Generation)
	res := u.res
	res.Job, res.InStore = nj, true
	res.Notes = append(res.Notes, waitingNote(old.ID))
	return res, nil
}

// waitingNote is the result's note of an update of job id, which has no
// execution because a connector is unavailable.
func waitingNote(id string) string {
	return fmt.Sprintf("job %s has no execution: a connector is unavailable (CONNECTOR_UNAVAILABLE); the update is made in the store, and the new job starts from the last durable checkpoint at the next retry (no pause to report)", id)
}
