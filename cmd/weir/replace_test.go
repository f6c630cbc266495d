package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIServiceOptions: against a real server, create_or_update_job
// creates and then updates, --request-id retries answer the first job, a
// reused ID and the 2-minute rule are server refusals (exit 1 with the
// code), and Dataflow's spellings of the flags work.
func TestCLIServiceOptions(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a server")
	}
	dir := t.TempDir()
	p := startServer(t, filepath.Join(dir, "data"))
	pipe, err := filepath.Abs("testdata/stream_windows.yaml")
	if err != nil {
		t.Fatal(err)
	}
	idOf := func(r cliResult) string {
		t.Helper()
		var sub struct{ ID string }
		if err := json.Unmarshal([]byte(r.stdout), &sub); err != nil || sub.ID == "" {
			t.Fatalf("no job ID in %q (%v); stderr %s", r.stdout, err, r.stderr)
		}
		return sub.ID
	}
	r := p.cli(dir, "run", pipe, "--job_name", "sums", "--dataflow_service_options=create_or_update_job", "--request-id", "req-1", "--no-wait", "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("create_or_update_job without a job: exit %d: %s", r.code, r.stderr)
	}
	first := idOf(r)
	p.waitJob(first, "a checkpoint", epochAtLeast(1))
	// A new name with --update: the server has no running job of the new
	// name, so the answer is its "no running job named NEW" (exit 1).
	r = p.cli(dir, "run", pipe, "--job-name", "sums-next", "--update", "--service-options", "parallel_replace_job_name=sums,parallel_replace_job_max_stop_duration=1m")
	if r.code != ExitFailure || !strings.Contains(r.stderr, "no running job named sums-next") {
		t.Fatalf("a new name with --update: exit %d, stderr %s", r.code, r.stderr)
	}
	// The retry answers the same job.
	r = p.cli(dir, "run", pipe, "--job_name", "sums", "--dataflow_service_options=create_or_update_job", "--request-id", "req-1", "--no-wait", "--format", "json")
	if r.code != ExitOK || idOf(r) != first {
		t.Fatalf("retry: exit %d, stdout %s, stderr %s; want job %s", r.code, r.stdout, r.stderr, first)
	}
	// The same ID with another request is refused by the server.
	r = p.cli(dir, "run", pipe, "--job-name", "sums", "--service-options", "create_or_update_job", "--num-workers", "2", "--request-id", "req-1", "--no-wait")
	if r.code != ExitFailure || !strings.Contains(r.stderr, "REQUEST_ID_REUSED") {
		t.Fatalf("reused request ID: exit %d: %s", r.code, r.stderr)
	}
	// A same-name replacement right after the job started: too soon.
	r = p.cli(dir, "run", pipe, "--job-name", "sums", "--update", "--additional-experiments",
		"update_strategy_parallel_job_update,parallel_replace_job_max_stop_duration=1m,weir_replace_rewind=false")
	if r.code != ExitFailure || !strings.Contains(r.stderr, "REPLACE_TOO_SOON") || !strings.Contains(r.stderr, "retry in") {
		t.Fatalf("replacement too soon: exit %d: %s", r.code, r.stderr)
	}
	if m := p.describe("sums"); m["id"] != first || m["state"] != "RUNNING" {
		t.Fatalf("after refusals the job is %v %v", m["id"], m["state"])
	}
	// create_or_update_job with a running job: an in-place update.
	r = p.cli(dir, "run", pipe, "--job-name", "sums", "--service-options", "create_or_update_job", "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("create_or_update_job with a running job: exit %d: %s", r.code, r.stderr)
	}
	var up struct {
		ID            string `json:"id"`
		ReplacesJobID string `json:"replaces_job_id"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &up); err != nil || up.ReplacesJobID != first || up.ID == "" || up.ID == first {
		t.Fatalf("update: %s (%v)", r.stdout, err)
	}
	if m := p.describe("sums"); m["id"] != up.ID || m["replaces_job_id"] != first {
		t.Fatalf("the name's job after create_or_update: %v replaces %v", m["id"], m["replaces_job_id"])
	}
}

// TestCLIStopAndReplaceWait: `weir run --update` with a stop-and-replace
// and --wait follows the flow's phases and returns at CUT_OVER (exit 0);
// the old job ends DRAINED, replaced by the new one.
func TestCLIStopAndReplaceWait(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	dir := t.TempDir()
	p := startServerArgs(t, filepath.Join(dir, "data"), "--min-replace-interval", "0s")
	pipe, err := filepath.Abs("testdata/stream_windows.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := p.cli(dir, "run", pipe, "--job-name", "sums", "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("submit: exit %d: %s", r.code, r.stderr)
	}
	var sub struct{ ID string }
	if err := json.Unmarshal([]byte(r.stdout), &sub); err != nil {
		t.Fatal(err)
	}
	// The default re-reads retained input, which a generated source cannot.
	r = p.cli(dir, "run", pipe, "--job-name", "sums", "--update", "--dataflow_service_options=update_strategy_parallel_job_update,parallel_replace_job_max_stop_duration=1m")
	if r.code != ExitFailure || !strings.Contains(r.stderr, "SOURCE_NOT_REREADABLE") || !strings.Contains(r.stderr, "weir_replace_rewind=false") {
		t.Fatalf("stop-and-replace with rewind: exit %d: %s", r.code, r.stderr)
	}
	r = p.cli(dir, "run", pipe, "--job-name", "sums", "--update", "--wait",
		"--dataflow_service_options=update_strategy_parallel_job_update,parallel_replace_job_max_stop_duration=1m,weir_replace_rewind=false")
	if r.code != ExitOK {
		t.Fatalf("stop-and-replace --wait: exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"DRAINING_OLD", "CUT_OVER", "stop window"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the progress does not mention %q:\n%s", want, r.stderr)
		}
	}
	newID := strings.TrimSpace(r.stdout)
	old := p.describe(sub.ID)
	if old["state"] != "DRAINED" || old["replaced_by_job_id"] != newID {
		t.Fatalf("old job: %v replaced by %v, want DRAINED replaced by %s", old["state"], old["replaced_by_job_id"], newID)
	}
	m := p.describe("sums")
	rep, _ := m["replacement"].(map[string]any)
	if m["id"] != newID || m["state"] != "RUNNING" || m["replaces_job_id"] != sub.ID || rep["phase"] != "CUT_OVER" || rep["stop_window_ms"] == nil {
		t.Fatalf("new job: %v %v replaces %v, replacement %v", m["id"], m["state"], m["replaces_job_id"], rep)
	}
}
