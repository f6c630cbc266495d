package service

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/errcode"

	"github.com/weir-dev/weir/mtime"
)

// shiftClock follows the wall clock from a fixed date, plus a shift tests
// move forward (the 2-minute rule, the 24-hour request IDs).
type shiftClock struct {
	base  time.Time
	shift atomic.Int64
}

func (c *shiftClock) Now() mtime.Time {
	return mtime.FromTime(time.Date(2026, 11, 30, 1, 51, 2, 0, time.UTC).Add(time.Since(c.base) + time.Duration(c.shift.Load())))
}

func (c *shiftClock) advance(d time.Duration) { c.shift.Add(int64(d)) }

func openShifted(t *testing.T, dataDir string) (*Service, *shiftClock) {
	t.Helper()
	clock := &shiftClock{base: time.Now()}
	s, err := Open(context.Background(), Options{DataDir: dataDir, CheckpointInterval: 50 * time.Millisecond,
		Clock: clock, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatalf("opening the service: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s, clock
}

func streamingReq(name, dir string, opts ...string) SubmitRequest {
	return SubmitRequest{Name: name, Pipeline: streamingYAML, PipelineFile: name + ".yaml", BaseDir: dir, ServiceOptions: opts}
}

// TestCreateOrUpdate: create_or_update_job creates a job when the name has
// none, updates the running one in place when it has one — with the same
// refusals as an explicit update — through Submit and through Update.
func TestCreateOrUpdate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, _ := openShifted(t, dir+"/data")
	ctx := context.Background()
	j1, err := s.Submit(ctx, streamingReq("sums", dir, "create_or_update_job"))
	if err != nil {
		t.Fatalf("create_or_update_job without a job: %v", err)
	}
	if j1.ReplacesJobID != "" || j1.Generation != 1 {
		t.Fatalf("created job: replaces %q, generation %d", j1.ReplacesJobID, j1.Generation)
	}
	waitFor(t, s, j1.ID, "a checkpoint", checkpointed(1))
	// Through Submit: the name has a running job, so it is updated in place.
	j2, err := s.Submit(ctx, streamingReq("sums", dir, "create_or_update_job"))
	if err != nil {
		t.Fatalf("create_or_update_job with a running job: %v", err)
	}
	if j2.ReplacesJobID != j1.ID || j2.Generation != 2 {
		t.Fatalf("updated job: replaces %q (want %s), generation %d", j2.ReplacesJobID, j1.ID, j2.Generation)
	}
	if old, _ := s.Get(j1.ID); old.State != record.StateUpdated || old.ReplacedByJobID != j2.ID {
		t.Fatalf("old job: %s replaced by %q", old.State, old.ReplacedByJobID)
	}
	waitFor(t, s, j2.ID, "a checkpoint", checkpointed(1))
	// Through Update, with an incompatible pipeline: refused like an
	// explicit update, the running job untouched.
	bad := strings.Replace(streamingYAML, "group_by: key", "group_by: [key, id]", 1)
	req := UpdateRequest{SubmitRequest: streamingReq("sums", dir, "create_or_update_job")}
	req.Pipeline = bad
	res, err := s.Update(ctx, req)
	if !hasCode(err, errcode.IncompatibleUpdate) || res == nil || res.Report.Compatible {
		t.Fatalf("incompatible create_or_update: %+v %v", res, err)
	}
	if j, _ := s.Get("sums"); j.ID != j2.ID || j.State != record.StateRunning {
		t.Fatalf("refused create_or_update changed the job: %s %s", j.ID, j.State)
	}
	// Through Update on a name without a job: a new job.
	// (Its own output file: once sums has written out/sums.jsonl, the
	// file belongs to sums and a second name is refused it.)
	fresh := streamingReq("fresh", dir, "create_or_update_job")
	fresh.Pipeline = strings.Replace(fresh.Pipeline, "out/sums.jsonl", "out/fresh.jsonl", 1)
	res, err = s.Update(ctx, UpdateRequest{SubmitRequest: fresh})
	if err != nil || res.Job == nil || res.Job.Generation != 1 || res.Replaced != nil {
		t.Fatalf("create_or_update via Update without a job: %+v %v", res, err)
	}
	if len(res.Notes) == 0 || !strings.Contains(res.Notes[0], "new job was created") {
		t.Errorf("notes: %q", res.Notes)
	}
}

// TestRequestID: a retry with the same request ID gets the first answer —
// the job it created, or the same refusal — and never a second job; the
// same ID with another request is REQUEST_ID_REUSED; after 24 hours the ID
// is free again.
func TestRequestID(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, clock := openShifted(t, dir+"/data")
	ctx := context.Background()
	req := streamingReq("sums", dir)
	req.RequestID = "req-1"
	j1, err := s.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		j, err := s.Submit(ctx, req)
		if err != nil || j.ID != j1.ID {
			t.Fatalf("retry %d: job %v, %v; want job %s", i, j, err, j1.ID)
		}
	}
	if jobs, _ := s.List(StatusAll); len(jobs) != 1 {
		t.Fatalf("%d jobs after retries, want 1", len(jobs))
	}
	other := req
	other.Options.NumWorkers = 2
	if _, err := s.Submit(ctx, other); !hasCode(err, errcode.RequestIDReused) {
		t.Fatalf("same ID, other request: %v", err)
	}
	// A refusal is answered again, even once its cause is gone.
	second := streamingReq("sums", dir)
	second.RequestID = "req-2"
	if _, err := s.Submit(ctx, second); !hasCode(err, errcode.JobNameActive) {
		t.Fatalf("second job of an active name: %v", err)
	}
	if _, err := s.Cancel(ctx, j1.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, j1.ID, record.StateCancelled)
	if _, err := s.Submit(ctx, second); !hasCode(err, errcode.JobNameActive) {
		t.Fatalf("retry of a refused request: %v, want the first refusal", err)
	}
	if jobs, _ := s.List(StatusAll); len(jobs) != 1 {
		t.Fatalf("%d jobs after a refused retry, want 1", len(jobs))
	}
	// After 24 hours the ID answers anew.
	clock.advance(RequestIDRetention + time.Minute)
	j3, err := s.Submit(ctx, second)
	if err != nil || j3.ID == j1.ID {
		t.Fatalf("request ID after 24h: %v %v", j3, err)
	}
	bad := streamingReq("sums", dir)
	bad.RequestID = "no spaces"
	if _, err := s.Submit(ctx, bad); !hasCode(err, errcode.InvalidRequest) {
		t.Errorf("bad request ID: %v", err)
	}
}

// TestReplacementRefusals: every invalid option combination, and every
// rule that depends on the server's jobs, is refused with its code before
// anything changes: the running job keeps its ID, its state and its
// checkpoints.
func TestReplacementRefusals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, clock := openShifted(t, dir+"/data")
	ctx := context.Background()
	j := submit(t, s, "sums", streamingYAML, dir)
	waitFor(t, s, j.ID, "a checkpoint", checkpointed(1))
	update := func(opts ...string) error {
		_, err := s.Update(ctx, UpdateRequest{SubmitRequest: streamingReq("sums", dir, opts...)})
		return err
	}
	// A new name writes its own file: the file sink's path of "sums" holds
	// output of that job once its first window fired, and a load refuses
	// it to another name (OUTPUT_EXISTS) before the checks under test.
	create := func(name string, opts ...string) error {
		req := streamingReq(name, dir, opts...)
		req.Pipeline = strings.Replace(req.Pipeline, "out/sums.jsonl", "out/"+name+".jsonl", 1)
		_, err := s.Submit(ctx, req)
		return err
	}
	tests := []struct {
		name string
		do   func() error
		code errcode.Code
		msg  string
	}{
		{"unknown key", func() error { return update("go_faster") }, errcode.UnknownServiceOption, "weir_replace_rewind="},
		{"bad value", func() error { return update("parallel_replace_job_max_stop_duration=soon") }, errcode.InvalidServiceOption, "needs a unit"},
		{"not a boolean", func() error {
			return update("update_strategy_parallel_job_update", "parallel_replace_job_max_stop_duration=1m", "parallel_replace_job_preallocate_compute_resources=1")
		}, errcode.InvalidServiceOption, "is a boolean"},
		{"two strategies", func() error { return update("update_strategy_parallel_job_update,update_strategy_in_place_update") }, errcode.ConflictingServiceOptions, "two update strategies"},
		{"no duration", func() error { return update("update_strategy_parallel_job_update") }, errcode.ConflictingServiceOptions, "needs parallel_replace_job_min_parallel_pipelines_duration"},
		{"replacement option without replacement", func() error { return update("parallel_replace_job_max_stop_duration=1m") }, errcode.ConflictingServiceOptions, "add update_strategy_parallel_job_update"},
		{"new name with update, not running", func() error {
			_, err := s.Update(ctx, UpdateRequest{SubmitRequest: streamingReq("sums-v2", dir, "parallel_replace_job_name=sums", "parallel_replace_job_max_stop_duration=1m")})
			return err
		}, errcode.NoRunningJob, "no running job named sums-v2"},
		{"name and id", func() error {
			return create("sums-v2", "parallel_replace_job_name=sums", "parallel_replace_job_id="+j.ID, "parallel_replace_job_max_stop_duration=1m")
		}, errcode.ConflictingServiceOptions, "give one"},
		{"replace an unknown job", func() error {
			return create("sums-v2", "parallel_replace_job_name=nothing", "parallel_replace_job_max_stop_duration=1m")
		}, errcode.NoRunningJob, "no running job named nothing"},
		{"too soon", func() error {
			return update("update_strategy_parallel_job_update", "parallel_replace_job_max_stop_duration=1m", "weir_replace_rewind=false")
		}, errcode.ReplaceTooSoon, "retry in"},
		{"parallel not offered", func() error {
			return create("sums-v2", "parallel_replace_job_name=sums", "parallel_replace_job_min_parallel_pipelines_duration=0s")
		}, errcode.ReplacementUnavailable, "parallel replacement"},
		{"rewind of a source that cannot be re-read", func() error {
			return create("sums-v2", "parallel_replace_job_id="+j.ID, "parallel_replace_job_max_stop_duration=1m")
		}, errcode.SourceNotRereadable, "cannot be read again from a position (only Pub/Sub topics and subscriptions can); job " + j.ID + " (sums) was not changed: update it in place (weir run --update, or POST /v1/jobs:update) if the new pipeline is compatible, start the new pipeline from a snapshot of the job, or add weir_replace_rewind=false"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			if !hasCode(err, tc.code) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v (%s), want %s containing %q", err, errcode.Of(err), tc.code, tc.msg)
			}
			got, _ := s.Get("sums")
			if got.ID != j.ID || got.State != record.StateRunning || got.ReplacedByJobID != "" {
				t.Fatalf("the refusal changed the running job: %s %s replaced by %q", got.ID, got.State, got.ReplacedByJobID)
			}
			if _, err := s.Get("sums-v2"); !hasCode(err, errcode.JobNotFound) {
				t.Fatalf("the refusal created a job sums-v2: %v", err)
			}
		})
	}
	// The job still checkpoints after every refusal.
	epoch := waitFor(t, s, j.ID, "a checkpoint", checkpointed(1)).LastCheckpoint.Epoch
	waitFor(t, s, j.ID, "a later checkpoint", checkpointed(epoch+1))
	// Two minutes after the job started the same-name rule passes: the
	// request gets as far as the strategy.
	clock.advance(DefaultMinReplaceInterval)
	err := update("update_strategy_parallel_job_update", "parallel_replace_job_max_stop_duration=1m")
	if !hasCode(err, errcode.SourceNotRereadable) {
		t.Fatalf("after the interval: %v", err)
	}
	// The in-place strategy ignores the parallel options and says so.
	res, err := s.Update(ctx, UpdateRequest{SubmitRequest: streamingReq("sums", dir, "update_strategy_in_place_update", "parallel_replace_job_max_stop_duration=1m")})
	if err != nil || res.Job == nil || res.Job.ReplacesJobID != j.ID {
		t.Fatalf("in-place with ignored options: %+v %v", res, err)
	}
	if len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "ignores parallel_replace_job_max_stop_duration") {
		t.Errorf("notes: %q", res.Notes)
	}
}
