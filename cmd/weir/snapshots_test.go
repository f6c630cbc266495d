package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLISnapshots drives a real `weir server` through the CLI: snapshot a
// running job (--wait), list and describe it, start a job from it under a
// renamed step (and be refused without the mapping: exit 6, nothing
// created), delete it, and the refusals' exit codes.
func TestCLISnapshots(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())
	work := t.TempDir()
	stream := testdata(t, "stream_windows.yaml")
	r := srv.cli(work, "run", stream, "--job-name", "sums")
	cliCase{wantCode: ExitOK}.check(t, r)
	jobID := strings.TrimSpace(r.stdout)
	srv.waitJob("sums", "a checkpoint", epochAtLeast(1))

	r = srv.cli(work, "snapshots", "create", "--job-id", "sums", "--snapshot-ttl", "36h", "--description", "before v2", "--wait", "--format", "json")
	cliCase{wantCode: ExitOK}.check(t, r)
	var snap map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &snap); err != nil {
		t.Fatalf("create --format json: %v\n%s", err, r.stdout)
	}
	id, _ := snap["id"].(string)
	if snap["state"] != "READY" || snap["source_job_id"] != jobID || snap["ttl"] != "36h" || snap["description"] != "before v2" {
		t.Fatalf("snapshot: %v", snap)
	}
	r = srv.cli(work, "snapshots", "list", "--job-id", "sums")
	cliCase{wantCode: ExitOK, wantStdout: []string{"SNAPSHOT_ID", id, "READY"}}.check(t, r)
	r = srv.cli(work, "snapshots", "describe", id)
	cliCase{wantCode: ExitOK, wantStdout: []string{"READY", "before v2", "36h", "Disk size", "Aggregation Sums"}}.check(t, r)
	// The snapshot counted the keys and open windows of its aggregation.
	steps, _ := snap["steps"].([]any)
	if len(steps) != 1 {
		t.Fatalf("snapshot steps: %v", snap["steps"])
	}
	if st := steps[0].(map[string]any); st["name"] != "Sums" || st["keys"].(float64) < 1 || st["open_windows"].(float64) < 1 {
		t.Errorf("snapshot step: %v, want Sums with keys and open windows", st)
	}

	// v2 renames the combine: refused without the mapping, created with it.
	src, err := os.ReadFile(stream)
	if err != nil {
		t.Fatal(err)
	}
	v2 := filepath.Join(work, "v2.yaml")
	// Another job name writes its own output path (OUTPUT_EXISTS otherwise).
	v2src := strings.ReplaceAll(strings.Replace(string(src), "name: Sums", "name: Totals", 1), "input: Sums", "input: Totals")
	if !strings.Contains(v2src, "path: out/") {
		t.Fatalf("%s has no sink under out/", stream)
	}
	v2src = strings.ReplaceAll(v2src, "path: out/", "path: out-v2/")
	if err := os.WriteFile(v2, []byte(v2src), 0o644); err != nil {
		t.Fatal(err)
	}
	// The plan against the snapshot counts what it holds.
	r = srv.cli(work, "plan", "sums", v2, "--snapshot", id, "--transform-name-mapping", `{"Sums":"Totals"}`)
	cliCase{wantCode: ExitOK, wantStdout: []string{"open windows]", "key counts from snapshot " + id}}.check(t, r)
	r = srv.cli(work, "run", v2, "--job-name", "sums-v2", "--create-from-snapshot", id)
	cliCase{wantCode: ExitIncompatible, wantStdout: []string{"Sums"}}.check(t, r)
	if r := srv.cli(work, "jobs", "describe", "sums-v2"); r.code != ExitFailure {
		t.Fatalf("a refused create-from-snapshot created a job: exit %d %s", r.code, r.stdout)
	}
	r = srv.cli(work, "run", v2, "--job-name", "sums-v2", "--create-from-snapshot", id, "--transform-name-mapping", `{"Sums":"Totals"}`)
	cliCase{wantCode: ExitOK}.check(t, r)
	m := srv.waitJob("sums-v2", "RUNNING", stateIs("RUNNING"))
	if m["created_from_snapshot_id"] != id || m["generation"].(float64) < 2 {
		t.Fatalf("job from the snapshot: created_from_snapshot_id %v generation %v", m["created_from_snapshot_id"], m["generation"])
	}
	r = srv.cli(work, "jobs", "describe", "sums-v2")
	cliCase{wantCode: ExitOK, wantStdout: []string{"created from snapshot " + id}}.check(t, r)

	r = srv.cli(work, "snapshots", "delete", id)
	cliCase{wantCode: ExitOK, wantStdout: []string{"deleted"}}.check(t, r)
	r = srv.cli(work, "snapshots", "describe", id)
	cliCase{wantCode: ExitOK, wantStdout: []string{"DELETED"}}.check(t, r)
	r = srv.cli(work, "snapshots", "list")
	if strings.Contains(r.stdout, id) {
		t.Errorf("list without --all shows the deleted snapshot:\n%s", r.stdout)
	}
	r = srv.cli(work, "snapshots", "list", "--all")
	cliCase{wantCode: ExitOK, wantStdout: []string{id, "DELETED"}}.check(t, r)

	for _, tc := range []cliCase{
		{name: "sources of a job without Pub/Sub sources", args: []string{"snapshots", "create", "--job-id", "sums", "--snapshot-sources", "--wait"}, wantCode: ExitOK},
		{name: "ttl too short", args: []string{"snapshots", "create", "--job-id", "sums", "--snapshot-ttl", "30m"}, wantCode: ExitUsage, wantStderr: []string{"at least 1h"}},
		{name: "ttl without unit", args: []string{"snapshots", "create", "--job-id", "sums", "--snapshot-ttl", "7"}, wantCode: ExitUsage, wantStderr: []string{"unit"}},
		{name: "no job", args: []string{"snapshots", "create"}, wantCode: ExitUsage, wantStderr: []string{"--job-id"}},
		{name: "unknown job", args: []string{"snapshots", "create", "--job-id", "nope"}, wantCode: ExitFailure, wantStderr: []string{"JOB_NOT_FOUND"}},
		{name: "unknown snapshot", args: []string{"snapshots", "describe", "nope"}, wantCode: ExitFailure, wantStderr: []string{"SNAPSHOT_NOT_FOUND"}},
		{name: "from a deleted snapshot", args: []string{"run", stream, "--job-name", "sums-v3", "--create-from-snapshot", id}, wantCode: ExitUsage, wantStderr: []string{"SNAPSHOT_CORRUPT", "DELETED"}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, srv.cli(work, tc.args...)) })
	}
}
