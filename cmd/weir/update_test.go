package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const updateV1 = `pipeline:
  transforms:
    - type: Generate
      name: Events
      config: {rate: 500, keys: 3, spacing: 1s}
    - type: Combine
      name: Sums
      input: Events
      windowing: {type: fixed, size: 1h}
      config:
        group_by: [key]
        combine: {total: {value: amount, fn: sum}}
    - type: WriteToSql
      name: Write
      input: Sums
      config: {dsn: totals.sqlite, table: totals, key: [key]}
`

// TestCLIUpdate drives `weir run --update` against a real server: a
// refused update (rename without a mapping) leaves the job running and
// exits 6 with the report and a fix; --validate-only with the mapping
// reports compatible and changes nothing; the real update replaces the job
// (UPDATED → new RUNNING job, generation 2); history shows the lineage and
// the refused attempt; updating again by the old lineage works on the new job.
func TestCLIUpdate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	dir := t.TempDir()
	p := startServer(t, filepath.Join(dir, "data"))
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	v1 := write("v1.yaml", updateV1)
	renamed := write("v2.yaml", strings.ReplaceAll(updateV1, "Sums", "Totals"))
	r := p.cli(dir, "run", v1, "--job-name", "totals", "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("submit: exit %d: %s", r.code, r.stderr)
	}
	var sub struct{ ID string }
	if err := json.Unmarshal([]byte(r.stdout), &sub); err != nil {
		t.Fatal(err)
	}
	p.waitJob(sub.ID, "a checkpoint", epochAtLeast(2))

	r = p.cli(dir, "run", renamed, "--job-name", "totals", "--update")
	if r.code != ExitIncompatible {
		t.Fatalf("rename without mapping: exit %d, want %d\n%s%s", r.code, ExitIncompatible, r.stdout, r.stderr)
	}
	for _, want := range []string{"STEP_MISSING", "Sums", `--transform-name-mapping '{"Sums":"Totals"}'`} {
		if !strings.Contains(r.stdout+r.stderr, want) {
			t.Errorf("refusal does not mention %q:\n%s%s", want, r.stdout, r.stderr)
		}
	}
	if m := p.describe("totals"); m["id"] != sub.ID || m["state"] != "RUNNING" {
		t.Fatalf("after a refused update the job is %v %v", m["id"], m["state"])
	}

	r = p.cli(dir, "run", renamed, "--job-name", "totals", "--update", "--validate-only", "--transform-name-mapping", `{"Sums":"Totals"}`, "--format", "json")
	if r.code != ExitOK || !strings.Contains(r.stdout, `"compatible": true`) {
		t.Fatalf("validate-only: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if m := p.describe("totals"); m["id"] != sub.ID {
		t.Fatalf("validate-only replaced the job")
	}

	r = p.cli(dir, "run", renamed, "--job-name", "totals", "--update", "--transform-name-mapping", `{"Sums":"Totals"}`, "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("update: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var upd struct {
		ID            string `json:"id"`
		ReplacesJobID string `json:"replaces_job_id"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &upd); err != nil || upd.ID == "" || upd.ReplacesJobID != sub.ID {
		t.Fatalf("update output: %v\n%s", err, r.stdout)
	}
	old := p.describe(sub.ID)
	if old["state"] != "UPDATED" || old["replaced_by_job_id"] != upd.ID {
		t.Fatalf("old job: %v replaced by %v", old["state"], old["replaced_by_job_id"])
	}
	nj := p.waitJob(upd.ID, "RUNNING", stateIs("RUNNING"))
	if nj["replaces_job_id"] != sub.ID || nj["generation"] != float64(2) {
		t.Fatalf("new job: replaces %v generation %v", nj["replaces_job_id"], nj["generation"])
	}
	r = p.cli(dir, "jobs", "update-options", "totals", "--num-workers", "2", "--format", "json")
	if r.code != ExitOK || !strings.Contains(r.stdout, upd.ID) {
		t.Fatalf("rescale: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if m := p.describe("totals"); m["id"] != upd.ID || m["state"] != "RUNNING" {
		t.Fatalf("after rescale: %v %v", m["id"], m["state"])
	}
	r = p.cli(dir, "jobs", "history", "totals")
	if r.code != ExitOK || !strings.Contains(r.stdout, sub.ID) || !strings.Contains(r.stdout, upd.ID) || !strings.Contains(r.stdout, "refused") {
		t.Fatalf("history: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = p.cli(dir, "jobs", "drain", "totals")
	if r.code != ExitOK {
		t.Fatalf("drain: %d %s", r.code, r.stderr)
	}
	p.waitJob(upd.ID, "DRAINED", stateIs("DRAINED"))
	r = p.cli(dir, "run", renamed, "--job-name", "totals", "--update")
	if r.code == ExitOK || !strings.Contains(r.stderr, "has already been updated") && !strings.Contains(r.stderr, "no running job named totals") {
		t.Errorf("update of a drained lineage: exit %d %s", r.code, r.stderr)
	}
}

// TestCLIBenchUpdate runs `weir bench update` at a tiny size: both modes
// run in child processes and report a verified pause.
func TestCLIBenchUpdate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs benchmark children")
	}
	r := runCLI(t, "", "bench", "update", "--keys", "5000", "--rate", "20000", "--steady", "300ms", "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var runs []struct {
		Mode     string  `json:"mode"`
		Keys     int64   `json:"keys"`
		PauseMS  float64 `json:"pause_ms"`
		Verified bool    `json:"verified"`
		PeakRSS  int64   `json:"peak_rss_bytes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &runs); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if len(runs) != 2 || runs[0].Mode != "update" || runs[1].Mode != "restore" {
		t.Fatalf("runs: %+v", runs)
	}
	for _, run := range runs {
		if !run.Verified || run.PauseMS <= 0 || run.Keys != 5000 || run.PeakRSS <= 0 {
			t.Errorf("run: %+v", run)
		}
	}
}
