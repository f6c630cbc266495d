package service

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weir-dev/weir/service/record"
)

// TestParallelWaitsForOldMessage: a parallel flow whose old job has read
// no message since its execution started (as after a restart) waits in
// PREPARING, and the record read through Get says why
// (progress.waiting_for_old_message, what weir run --wait prints); once a
// message arrives the flow goes on to the overlap and the flag is gone.
func TestParallelWaitsForOldMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, b, clock := openParallel(t, dir)
	sinkCfg, view := parDrivers()[0].setup(t, dir)
	defer view.close()
	pipeline := fmt.Sprintf(parYAML, sinkCfg)
	old := submit(t, s, "sums", pipeline, dir)
	waitFor(t, s, old.ID, "RUNNING", func(j *record.Job) bool { return j.State == record.StateRunning })
	clock.advance(DefaultMinReplaceInterval)
	res, err := s.Update(ctx, UpdateRequest{SubmitRequest: SubmitRequest{Name: "sums", Pipeline: pipeline, BaseDir: dir,
		ServiceOptions: []string{"update_strategy_parallel_job_update", "parallel_replace_job_min_parallel_pipelines_duration=1h", "weir_replace_rewind=false"}}})
	if err != nil {
		t.Fatal(err)
	}
	nj, err := s.Get(res.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if nj.Replacement.Phase != record.PhasePreparing || nj.Replacement.Parallel.Progress == nil || !nj.Replacement.Parallel.Progress.WaitingForOldMessage {
		t.Fatalf("new job before the old job read a message: %s %+v", nj.Replacement.Phase, nj.Replacement.Parallel.Progress)
	}
	base := time.Now().Add(30 * time.Minute).Truncate(time.Minute)
	publishPar(t, b, parEvents(base, 0, 5, 1))
	nj = waitFor(t, s, res.Job.ID, "the overlap", func(j *record.Job) bool { return j.Replacement.Phase == record.PhaseOverlap })
	if p := nj.Replacement.Parallel.Progress; p == nil || p.WaitingForOldMessage {
		t.Fatalf("progress in the overlap: %+v", p)
	}
}
