package service

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/service/record"
)

// TestAdmissionIsOneRule: --max-jobs (Options.MaxJobs) bounds the active
// jobs whichever way a job is created — a submission, a job from a
// snapshot, concurrent submissions racing for the last place — while an
// update of a running job replaces it and is not counted. Before the
// service admitted jobs itself, only POST /v1/jobs counted (the API held a
// mutex around the whole submission) and a job from a snapshot was never
// refused.
func TestAdmissionIsOneRule(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(context.Background(), Options{DataDir: filepath.Join(dir, "data"), CheckpointInterval: 50 * time.Millisecond,
		Clock: testClock{base: time.Now()}, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), MaxJobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	<-s.Recovered()

	a := submit(t, s, "a", snapshotPipeline(filepath.Join(dir, "a.sqlite"), "Sums"), dir)
	waitElements(t, s, a.ID, "Events", 50)
	snap := snapshotOf(t, s, "a")

	// Two submissions race for the one place left: exactly one gets it.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("race-%d", i)
			_, errs[i] = s.Submit(context.Background(), SubmitRequest{Name: name, Pipeline: streamingYAML, PipelineFile: name + ".yaml", BaseDir: dir})
		}()
	}
	wg.Wait()
	refused := 0
	for _, err := range errs {
		switch {
		case err == nil:
		case errcode.Of(err) == errcode.LimitExceeded:
			refused++
		default:
			t.Fatalf("a racing submission failed otherwise: %v", err)
		}
	}
	if refused != 1 {
		t.Fatalf("racing for the last place: %d refused (%v), want exactly 1", refused, errs)
	}
	active, err := s.List(StatusActive)
	if err != nil || len(active) != 2 {
		t.Fatalf("active jobs %d (%v), want 2", len(active), err)
	}

	// At the limit a job from a snapshot is refused too, and creates nothing.
	_, err = s.CreateFromSnapshot(context.Background(), FromSnapshotRequest{
		SubmitRequest: SubmitRequest{Name: "restored", Pipeline: snapshotPipeline(filepath.Join(dir, "r.sqlite"), "Sums"), PipelineFile: "r.yaml", BaseDir: dir},
		SnapshotID:    snap.ID})
	if errcode.Of(err) != errcode.LimitExceeded {
		t.Fatalf("a job from a snapshot at the limit: %v, want LIMIT_EXCEEDED", err)
	}
	if _, err := s.Get("restored"); errcode.Of(err) != errcode.JobNotFound {
		t.Errorf("the refused job from a snapshot exists: %v", err)
	}

	// An in-place update replaces a job: admitted at the limit.
	res, err := s.Update(context.Background(), UpdateRequest{SubmitRequest: SubmitRequest{Name: "a",
		Pipeline: snapshotPipeline(filepath.Join(dir, "a.sqlite"), "Sums"), PipelineFile: "a.yaml", BaseDir: dir}})
	if err != nil || res.Job == nil {
		t.Fatalf("an update at the limit: %+v, %v", res, err)
	}
	if res.Job.State != record.StateRunning {
		t.Errorf("the updated job is %s", res.Job.State)
	}
}
