package service

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// failingDisk is a file system whose write-ahead-log writes fail while it
// is switched on: what a full disk does to the state store.
type failingDisk struct{ toggle errorfs.Toggle }

func newFailingDisk() (*failingDisk, vfs.FS) {
	d := &failingDisk{}
	d.toggle.Injector = errorfs.ErrInjected
	walWrites := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !strings.HasSuffix(op.Path, ".log") {
			return nil
		}
		switch op.Kind {
		case errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
			return d.toggle.MaybeError(op)
		}
		return nil
	})
	return d, errorfs.Wrap(vfs.Default, walWrites)
}

// TestStoreFailureStopsJobs: when the state store fails in the middle of a
// job (its checkpoint write does not land), the job stops before its sink
// commits anything the store did not make durable; it stays RUNNING with a
// STORAGE_UNAVAILABLE condition, the service keeps answering reads and
// refuses changes with that code, and a service reopened on a healthy disk
// resumes the job from its last durable checkpoint to exactly the totals
// of a run without any fault.
func TestStoreFailureStopsJobs(t *testing.T) {
	dir := t.TempDir()
	want := oracle(t, dir)
	db := filepath.Join(dir, "job.sqlite")
	data := filepath.Join(dir, "data")
	disk, fs := newFailingDisk()
	s, err := Open(context.Background(), Options{DataDir: data, CheckpointInterval: 50 * time.Millisecond,
		Clock: testClock{base: time.Now()}, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), StoreFS: fs})
	if err != nil {
		t.Fatal(err)
	}
	j := submit(t, s, "totals", updatePipeline(db, false, "Sums", ""), dir)
	waitElements(t, s, j.ID, "Events", 1500)
	durable := waitFor(t, s, j.ID, "a checkpoint", checkpointed(1))

	disk.toggle.On()
	stopped := waitFor(t, s, j.ID, "the STORAGE_UNAVAILABLE condition", func(j *Job) bool { return j.Condition != nil })
	if stopped.Condition.Code != CodeStorageUnavailable || !strings.Contains(stopped.Condition.Message, "injected") {
		t.Errorf("condition %+v, want STORAGE_UNAVAILABLE naming the cause", stopped.Condition)
	}
	if stopped.State != StateRunning {
		t.Errorf("state %s after the store failed, want RUNNING (the job resumes once the disk has room)", stopped.State)
	}
	if stopped.LastCheckpoint.Epoch < durable.LastCheckpoint.Epoch {
		t.Errorf("last checkpoint went back from %d to %d", durable.LastCheckpoint.Epoch, stopped.LastCheckpoint.Epoch)
	}
	waitLetGo(t, s, j.ID)
	rowsAtFault := tableRows(t, db)

	// The service answers reads, with the condition, and refuses changes.
	jobs, err := s.List(StatusActive)
	if err != nil || len(jobs) != 1 || jobs[0].Condition == nil {
		t.Fatalf("list after the failure: %v, %+v", err, jobs)
	}
	if _, err := s.Drain(context.Background(), "totals"); !hasCode(err, CodeStorageUnavailable) {
		t.Errorf("drain after the failure: %v, want STORAGE_UNAVAILABLE", err)
	}
	if _, err := s.Submit(context.Background(), SubmitRequest{Name: "other", Pipeline: updatePipeline(db, false, "Sums", ""), BaseDir: dir}); !hasCode(err, CodeStorageUnavailable) {
		t.Errorf("submit after the failure: %v, want STORAGE_UNAVAILABLE", err)
	}
	if got := tableRows(t, db); !slices.Equal(got, rowsAtFault) {
		t.Errorf("the sink committed after the store failed:\nat the fault %v\nlater       %v", rowsAtFault, got)
	}

	// The disk has room again: a restart resumes from the last durable
	// checkpoint and the job ends with exactly the fault-free totals.
	disk.toggle.Off()
	_ = s.Close(context.Background()) // the failed store may report its failure on close
	s2 := openService(t, data)
	if after, err := s2.Get(j.ID); err != nil || after.Condition != nil || after.State != StateRunning {
		t.Fatalf("after the restart: %v, %+v", err, after)
	}
	done := waitDone(t, s2, j.ID)
	if done.State != StateDone {
		t.Fatalf("job ended %s (%s)", done.State, done.Error)
	}
	if got := tableRows(t, db); !slices.Equal(got, want) {
		t.Errorf("totals after the fault and the restart:\n got %v\nwant %v", got, want)
	}
}
