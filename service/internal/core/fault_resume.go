package core

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/errcode"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weir-dev/weir/state"
)

// Resuming after a store failure, without a restart (issue 12 item 1).
//
// After the store failed (fault.go) the service keeps answering and, every
// Options.StorageRetryInterval, tries to bring the store back:
//
//  1. It waits until every execution the fault stopped has let go (none
//     may use the store across the swap).
//  2. It probes the disk: a file of storageProbeSize bytes written and
//     synced in the store's directory, then removed. While that fails (the
//     disk is still full), nothing else happens and the next attempt is
//     one interval later.
//  3. It reopens the store (state.Store.Reopen: the failed Pebble database
//     is closed and the directory opened again, while reads wait briefly
//     for the swap; see state/handle.go), which replays what was durable:
//     writes Pebble reported as failed are not there.
//  4. It writes a probe record through the reopened store. When that
//     fails, the store is failed again and step 1 follows an interval
//     later.
//  5. It clears the fault and resumes every active job from its last
//     durable checkpoint (committing that checkpoint's sink data again
//     first, which sinks skip when they have it already: nothing is
//     counted twice), recording a condition_changed event for each and an
//     info log line.
//
// Nothing acknowledged is lost: no source acknowledged beyond the last
// durable checkpoint (a checkpoint whose write failed never reaches its
// commit), and resuming from it re-reads everything after it.

// DefaultStorageRetryInterval is how often a service whose state store
// failed tries to bring it back (Options.StorageRetryInterval).
const DefaultStorageRetryInterval = 10 * time.Second

// storageProbeSize is the size of the file written to test for room before
// the store is reopened: Pebble's default memtable size, so that the
// reopened store has room to flush what it replays.
const storageProbeSize = 4 << 20

// storageProbeName is the probe file, in the store's directory.
const StorageProbeName = "weir-space-probe"

// storageProbeKey is the registry record written through a reopened store
// to check that it writes.
const storageProbeKey = "storage-probe"

// storageRetryLoop runs until the service closes: every retry interval,
// while the store has failed, it tries to bring it back (see above).
func (s *Core) storageRetryLoop() {
	t := time.NewTicker(s.Opts.StorageRetryInterval)
	defer t.Stop()
	for {
		select {
		case <-s.Ctx.Done():
			return
		case <-t.C:
			f := s.StoreFailed()
			if f == nil {
				s.retryPendingCommits(s.Ctx)
				s.retryConnectors(s.Ctx)
				continue
			}
			if err := s.retryStorage(s.Ctx, f); err != nil && s.Ctx.Err() == nil {
				s.Opts.Logger.Warn(fmt.Sprintf("the state store is still unavailable: retrying in %s", s.Opts.StorageRetryInterval),
					"code", errcode.StorageUnavailable, "error", err.Error(), "since", f.since)
			}
			s.Changes.Notify() // an attempt is a change waiters may wait for
		}
	}
}

// retryStorage makes one attempt to bring back the failed store f and
// resume the jobs it stopped. It returns why the store is still failed.
func (s *Core) retryStorage(ctx context.Context, f *storeFault) error {
	if n := s.liveExecutions(); n > 0 {
		return fmt.Errorf("%d execution(s) stopped by the failure have not let go of the store yet", n)
	}
	if err := s.probeDisk(); err != nil {
		return err
	}
	if err := s.Store.Reopen(ctx); err != nil {
		s.noteStoreError(err)
		return err
	}
	w := &state.Write{}
	w.Put(storageProbeKey, []byte(s.Now().UTC().Format(time.RFC3339Nano)))
	if err := s.Store.Apply(w); err != nil {
		return fmt.Errorf("the reopened state store does not write: %w", err)
	}
	ids, err := s.activeJobIDs()
	if err != nil {
		return fmt.Errorf("the reopened state store does not read the job registry: %w", err)
	}
	// Until each has resumed, the jobs read with condition RESUMING.
	now := s.Now()
	for _, id := range ids {
		s.resuming.Store(id, now)
	}
	if !s.fault.CompareAndSwap(f, nil) {
		for _, id := range ids {
			s.resuming.Delete(id)
		}
		return errors.New("the store failed again while it was reopened")
	}
	down := now.Sub(f.since).Round(time.Millisecond)
	s.Opts.Logger.Info(fmt.Sprintf("the state store writes again after %s: %d job(s) resume from their last durable checkpoint", down, len(ids)),
		"cause", f.cause.Error(), "since", f.since)
	for _, id := range ids {
		err := s.resumeAfterFault(ctx, id, f)
		s.resuming.Delete(id)
		if err != nil && ctx.Err() == nil {
			s.Opts.Logger.Error("resuming a job after the state store came back", "job_id", id, "error", err)
		}
	}
	s.Changes.Notify()
	return nil
}

// liveExecutions counts the executions the service still runs.
func (s *Core) liveExecutions() int {
	n := 0
	s.running.Range(func(_, _ any) bool {
		n++
		return true
	})
	return n
}

// probeDisk writes storageProbeSize bytes to a file in the store's
// directory, syncs and removes it: an error says the disk has no room (or
// does not write) yet.
func (s *Core) probeDisk() (err error) {
	fs := s.Opts.StoreFS
	if fs == nil {
		fs = vfs.Default
	}
	name := filepath.Join(s.Opts.DataDir, "state", StorageProbeName)
	defer func() {
		if rerr := fs.Remove(name); rerr != nil && err == nil {
			if _, serr := fs.Stat(name); serr == nil { // still there
				err = fmt.Errorf("removing the disk probe %s: %w", name, rerr)
			}
		}
	}()
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("probing the disk: %w", err)
	}
	buf := make([]byte, 64<<10)
	for written := 0; written < storageProbeSize; written += len(buf) {
		if _, err := f.Write(buf); err != nil {
			_ = f.Close()
			return fmt.Errorf("probing the disk (%d of %d bytes written): %w", written, storageProbeSize, err)
		}
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("probing the disk (sync): %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("probing the disk (close): %w", err)
	}
	return nil
}

// activeJobIDs returns the jobs the registry holds as active, and the
// terminal ones whose final commit is not confirmed.
func (s *Core) activeJobIDs() ([]string, error) {
	var ids []string
	err := s.Store.Scan("job/", func(_ string, v []byte) error {
		j := &record.Job{}
		if err := UnmarshalJob(v, j); err != nil {
			return err
		}
		if j.Active() || j.PendingCommit {
			ids = append(ids, j.ID)
		}
		return nil
	})
	return ids, err
}

// resumeAfterFault resumes job id after the store came back from fault f
// (relaunch), with an event saying so.
func (s *Core) resumeAfterFault(ctx context.Context, id string, f *storeFault) error {
	j, started, err := s.relaunch(ctx, id)
	if err != nil {
		return err
	}
	d := map[string]any{"code": string(errcode.StorageUnavailable), "set": false, "since": f.since}
	msg := fmt.Sprintf("the state store writes again (it failed at %s: %v): the job resumed", f.since.UTC().Format(time.RFC3339), f.cause)
	if !started {
		if _, waits := s.connFaults.Load(id); !waits {
			return nil // it runs already, ended, or failed to start: its record says why
		}
		// Its broker is not back yet (it shares the disk, and reloads):
		// the connector retry starts it.
		msg = fmt.Sprintf("the state store writes again (it failed at %s: %v): the job waits for its connector (CONNECTOR_UNAVAILABLE) and starts again from its last durable checkpoint once it answers", f.since.UTC().Format(time.RFC3339), f.cause)
		s.Emit(j.ID, record.EventConditionChanged, record.SeverityInfo, msg, d)
		s.Opts.Logger.Info("the state store came back; the job waits for its connector", "job_id", j.ID, "job_name", j.Name)
		return nil
	}
	msg += resumedFrom(j, d)
	s.Emit(j.ID, record.EventConditionChanged, record.SeverityInfo, msg, d)
	s.Opts.Logger.Info("job resumed after the state store came back", "job_id", j.ID, "job_name", j.Name, "state", j.State)
	return nil
}

// relaunch starts an execution of active job id, whose execution stopped
// (a store fault, an unavailable connector), under its name's guard, from
// the job's last durable checkpoint, unless it runs already (an earlier
// attempt, or a request meanwhile) or it is a Go program's job this
// service cannot build (its program resumes it). A job cancelled or
// replaced meanwhile is finished as a restart would (recoverJob). started
// says whether an execution was started here.
func (s *Core) relaunch(ctx context.Context, id string) (j *record.Job, started bool, err error) {
	if j, err = s.ReadJob(id); err != nil {
		return nil, false, err
	}
	unlock, err := s.LockName(ctx, j.Name) // lock order 1
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	if j, err = s.ReadJob(id); err != nil { // current, under the guard
		return nil, false, err
	}
	// A superseded execution is one a rescale replaces: it is leaving.
	if s.liveRun(id) != nil || (j.SDK == record.SDKGo && s.Opts.Program == nil) {
		return j, false, nil
	}
	if !j.Active() || j.State == record.StateCancelling ||
		(j.State == record.StatePending && j.Replacement != nil && !j.Replacement.Phase.Final()) {
		unlock()                              // recoverJob takes the guard itself
		return j, false, s.recoverJob(ctx, j) // finishes a cancel, re-commits, or resumes a replacement flow
	}
	p, err := s.Load(j)
	if err != nil {
		return j, false, s.Fail(j, fmt.Sprintf("the pipeline no longer loads: %v", err))
	}
	if err := s.Launch(ctx, j, p.Program(), nil); err != nil {
		return j, false, err
	}
	// Not running: it failed to start, and its record says why.
	return j, s.RunningJob(id) != nil, nil
}

// retryPendingCommits commits again the final checkpoint of every ended
// job whose final commit failed (pending_commit: a sink did not accept
// the job's last rows when it drained or finished), as a restart would:
// the retry of a sink that was unavailable when its job ended.
func (s *Core) retryPendingCommits(ctx context.Context) {
	var jobs []*record.Job
	err := s.Store.Scan("job/", func(_ string, v []byte) error {
		j := &record.Job{}
		if err := UnmarshalJob(v, j); err != nil {
			return err
		}
		if j.PendingCommit && !j.Active() && s.RunningJob(j.ID) == nil && (j.SDK != record.SDKGo || s.Opts.Program != nil) {
			jobs = append(jobs, j)
		}
		return nil
	})
	if err != nil {
		s.Opts.Logger.Error("reading the job registry for final commits to retry", "error", err)
		return
	}
	for _, j := range jobs {
		unlock, err := s.LockName(ctx, j.Name) // lock order 1: after a finish in progress
		if err != nil {
			return
		}
		cur, err := s.ReadJob(j.ID)
		unlock()
		if err != nil || !cur.PendingCommit || s.RunningJob(j.ID) != nil {
			continue
		}
		if err := s.recoverJob(ctx, cur); err != nil && ctx.Err() == nil {
			s.Opts.Logger.Error("committing a finished job's final checkpoint again", "job_id", j.ID, "job_name", j.Name, "error", err)
			continue
		}
		if after, err := s.ReadJob(j.ID); err == nil && !after.PendingCommit {
			s.Opts.Logger.Info("the final checkpoint of a finished job is committed", "job_id", j.ID, "job_name", j.Name, "state", after.State)
		}
	}
}
