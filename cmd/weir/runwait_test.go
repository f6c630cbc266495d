package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// missingInputYAML reads a file that does not exist: the job is created and
// fails as soon as its source opens.
const missingInputYAML = `pipeline:
  transforms:
    - type: ReadFromJson
      name: Read
      config: {path: no-such-input.jsonl, schema: {a: int}}
    - type: WriteToJson
      name: Write
      input: Read
      config: {path: out/copy.jsonl}
`

// TestCLIRunWaits: `weir run --job-name` waits for the job's first
// durable checkpoint or its end, and exits 1 with the job's error when it
// failed (it used to exit 0 for a job that failed at once); --no-wait
// returns as soon as the job exists; --wait follows a bounded job to its
// end and exits 0 on DONE.
func TestCLIRunWaits(t *testing.T) {
	t.Parallel()
	p := startServer(t, t.TempDir())
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "missing.yaml"), []byte(missingInputYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	totals, err := os.ReadFile(filepath.Join("testdata", "totals.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "totals.yaml"), totals, 0o644); err != nil {
		t.Fatal(err)
	}

	r := p.cli(dir, "run", "missing.yaml", "--job-name", "missing")
	if r.code != ExitFailure || !strings.Contains(r.stderr, "failed") || !strings.Contains(r.stderr, "no-such-input") {
		t.Errorf("a job failing at once: exit %d, stderr %q; want 1 naming the job's error", r.code, r.stderr)
	}
	// Another job name needs another output path (OUTPUT_EXISTS): its own directory.
	dir2 := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir2, "missing.yaml"), []byte(missingInputYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	r = p.cli(dir2, "run", "missing.yaml", "--job-name", "missing-nowait", "--no-wait")
	if r.code != ExitOK || strings.TrimSpace(r.stdout) == "" {
		t.Errorf("--no-wait: exit %d, stdout %q, stderr %q; want 0 and the job ID", r.code, r.stdout, r.stderr)
	}
	r = p.cli(dir, "run", "totals.yaml", "--job-name", "totals", "--wait")
	if r.code != ExitOK || !strings.Contains(r.stderr, "ended DONE") {
		t.Errorf("--wait on a bounded job: exit %d, stderr %q; want 0 after DONE", r.code, r.stderr)
	}
	if m := p.describe("totals"); m["state"] != "DONE" {
		t.Errorf("after --wait returned, the job is %v", m["state"])
	}
	r = p.cli(dir, "run", "totals.yaml", "--job-name", "both", "--wait", "--no-wait")
	if r.code != ExitUsage {
		t.Errorf("--wait --no-wait: exit %d, want %d", r.code, ExitUsage)
	}
}

// TestCLIDrainAndCancelWait: `weir jobs drain --wait` returns once the
// streaming job is DRAINED (exit 0), `weir jobs cancel --wait` once it is
// CANCELLED.
func TestCLIDrainAndCancelWait(t *testing.T) {
	t.Parallel()
	p := startServer(t, t.TempDir())
	stream, err := os.ReadFile(filepath.Join("testdata", "stream_windows.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ action, name, want string }{
		{"drain", "drained", "DRAINED"},
		{"cancel", "cancelled", "CANCELLED"},
	} {
		// Each job name its own output directory (OUTPUT_EXISTS otherwise).
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "stream.yaml"), stream, 0o644); err != nil {
			t.Fatal(err)
		}
		if r := p.cli(dir, "run", "stream.yaml", "--job-name", tc.name); r.code != ExitOK {
			t.Fatalf("submitting %s: exit %d, stderr %q", tc.name, r.code, r.stderr)
		}
		r := p.cli(dir, "jobs", tc.action, tc.name, "--wait")
		if r.code != ExitOK || !strings.Contains(r.stderr, "ended "+tc.want) {
			t.Errorf("jobs %s --wait: exit %d, stderr %q; want 0 after %s", tc.action, r.code, r.stderr, tc.want)
		}
		if m := p.describe(tc.name); m["state"] != tc.want {
			t.Errorf("after jobs %s --wait returned, the job is %v", tc.action, m["state"])
		}
	}
}
