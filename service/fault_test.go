package service

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/errcode"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// failingDisk is a file system whose write-ahead-log writes (and the
// service's disk probe) fail while it is switched on: what a full disk
// does to the state store.
type failingDisk struct{ toggle errorfs.Toggle }

func newFailingDisk() (*failingDisk, vfs.FS) {
	d := &failingDisk{}
	d.toggle.Injector = errorfs.ErrInjected
	walWrites := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !strings.HasSuffix(op.Path, ".log") && !strings.HasSuffix(op.Path, core.StorageProbeName) {
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
	t.Parallel()
	dir := t.TempDir()
	want := oracle(t, dir)
	db := filepath.Join(dir, "job.sqlite")
	data := filepath.Join(dir, "data")
	disk, fs := newFailingDisk()
	s, err := Open(context.Background(), Options{DataDir: data, CheckpointInterval: 50 * time.Millisecond,
		Clock: testClock{base: time.Now()}, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), StoreFS: fs,
		StorageRetryInterval: time.Hour}) // this test resumes by a restart
	if err != nil {
		t.Fatal(err)
	}
	j := submit(t, s, "totals", updatePipeline(db, false, "Sums", ""), dir)
	waitElements(t, s, j.ID, "Events", 1500)
	durable := waitFor(t, s, j.ID, "a checkpoint", checkpointed(1))

	disk.toggle.On()
	stopped := waitFor(t, s, j.ID, "the STORAGE_UNAVAILABLE condition", func(j *record.Job) bool { return j.Condition != nil })
	if stopped.Condition.Code != errcode.StorageUnavailable || !strings.Contains(stopped.Condition.Message, "injected") {
		t.Errorf("condition %+v, want STORAGE_UNAVAILABLE naming the cause", stopped.Condition)
	}
	if stopped.State != record.StateRunning {
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
	if _, err := s.Drain(context.Background(), "totals"); !hasCode(err, errcode.StorageUnavailable) {
		t.Errorf("drain after the failure: %v, want STORAGE_UNAVAILABLE", err)
	}
	if _, err := s.Submit(context.Background(), SubmitRequest{Name: "other", Pipeline: updatePipeline(db, false, "Sums", ""), BaseDir: dir}); !hasCode(err, errcode.StorageUnavailable) {
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
	if after, err := s2.Get(j.ID); err != nil || after.Condition != nil || after.State != record.StateRunning {
		t.Fatalf("after the restart: %v, %+v", err, after)
	}
	done := waitDone(t, s2, j.ID)
	if done.State != record.StateDone {
		t.Fatalf("job ended %s (%s)", done.State, done.Error)
	}
	if got := tableRows(t, db); !slices.Equal(got, want) {
		t.Errorf("totals after the fault and the restart:\n got %v\nwant %v", got, want)
	}
}

// TestStoreFailureResumesWithoutRestart: after the state store failed in
// the middle of a job, the service retries on its interval; while the disk
// still fails the job stays stopped (RUNNING, STORAGE_UNAVAILABLE, its sink
// unchanged, reads answering); once the disk works again the service
// reopens the store by itself, the condition clears with an event, and the
// job resumes from its last durable checkpoint and ends with exactly the
// totals of a run without any fault — in the same process.
func TestStoreFailureResumesWithoutRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	want := oracle(t, dir)
	db := filepath.Join(dir, "job.sqlite")
	disk, fs := newFailingDisk()
	s, err := Open(context.Background(), Options{DataDir: filepath.Join(dir, "data"), CheckpointInterval: 50 * time.Millisecond,
		Clock: testClock{base: time.Now()}, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), StoreFS: fs,
		StorageRetryInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	j := submit(t, s, "totals", updatePipeline(db, false, "Sums", ""), dir)
	waitElements(t, s, j.ID, "Events", 1500)
	durable := waitFor(t, s, j.ID, "a checkpoint", checkpointed(1))

	disk.toggle.On()
	stopped := waitFor(t, s, j.ID, "the STORAGE_UNAVAILABLE condition", func(j *record.Job) bool { return j.Condition != nil })
	if stopped.Condition.Code != errcode.StorageUnavailable || stopped.State != record.StateRunning {
		t.Fatalf("after the failure: state %s, condition %+v; want RUNNING with STORAGE_UNAVAILABLE", stopped.State, stopped.Condition)
	}
	waitLetGo(t, s, j.ID)
	rowsAtFault := tableRows(t, db)

	// Several retries find the disk still failing: nothing moves.
	for range 5 {
		<-s.core.Changes.Next()
	}
	if got, err := s.Get(j.ID); err != nil || got.Condition == nil || got.Condition.Code != errcode.StorageUnavailable {
		t.Fatalf("while the disk still fails: %v, %+v", err, got)
	}
	if s.core.RunningJob(j.ID) != nil {
		t.Fatal("the job runs again although the disk still fails")
	}
	if got := tableRows(t, db); !slices.Equal(got, rowsAtFault) {
		t.Errorf("the sink committed while the store was failed:\nat the fault %v\nlater       %v", rowsAtFault, got)
	}

	// The disk has room again: no restart.
	disk.toggle.Off()
	resumed := waitFor(t, s, j.ID, "the job to resume by itself", func(j *record.Job) bool { return j.Condition == nil })
	if resumed.LastCheckpoint.Epoch < durable.LastCheckpoint.Epoch {
		t.Errorf("resumed at checkpoint %d, before the durable %d", resumed.LastCheckpoint.Epoch, durable.LastCheckpoint.Epoch)
	}
	done := waitDone(t, s, j.ID)
	if done.State != record.StateDone {
		t.Fatalf("job ended %s (%s)", done.State, done.Error)
	}
	if got := tableRows(t, db); !slices.Equal(got, want) {
		t.Errorf("totals after the fault and the in-process resume:\n got %v\nwant %v", got, want)
	}
	_, evs, err := s.Events(j.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	cleared := false
	for _, e := range evs {
		if e.Type == record.EventConditionChanged && e.Details["code"] == string(errcode.StorageUnavailable) && e.Details["set"] == false {
			cleared = true
		}
	}
	if !cleared {
		t.Errorf("no condition_changed event clearing STORAGE_UNAVAILABLE among %d events", len(evs))
	}
	// The service takes changes again.
	if _, err := s.Submit(context.Background(), SubmitRequest{Name: "other", Pipeline: updatePipeline(filepath.Join(dir, "other.sqlite"), false, "Sums", ""), BaseDir: dir}); err != nil {
		t.Errorf("submit after the store came back: %v", err)
	}
}
