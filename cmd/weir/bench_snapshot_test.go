package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCLIBenchSnapshot runs `weir bench snapshot` end to end at a small
// key count (the child is a re-execution of the test binary acting as
// weir) and checks the report's shape; no timing is asserted.
func TestCLIBenchSnapshot(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "", "bench", "snapshot", "--keys", "1500,3000", "--rate", "2000", "--steady", "300ms",
		"--checkpoint-interval", "100ms", "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("exit code %d\nstderr:\n%s", r.code, r.stderr)
	}
	var runs []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &runs); err != nil {
		t.Fatalf("decoding %q: %v", r.stdout, err)
	}
	if len(runs) != 2 {
		t.Fatalf("got %d runs, want 2: %s", len(runs), r.stdout)
	}
	for i, run := range runs {
		if want := []float64{1500, 3000}[i]; run["keys"] != want {
			t.Errorf("run %d: keys %v, want %v", i, run["keys"], want)
		}
		if run["verified"] != true {
			t.Errorf("run %d not verified: %v", i, run)
		}
		for _, f := range []string{"checkpoint_pause_ms", "snapshot_pause_ms", "pause_ratio", "ready_ms", "disk_size_bytes", "file_bytes",
			"export_mb_per_s", "import_mb_per_s", "restore_first_element_ms", "from_snapshot_first_element_ms", "elements", "peak_rss_bytes"} {
			if v, ok := run[f].(float64); !ok || v <= 0 {
				t.Errorf("run %d: %s = %v, want a positive figure", i, f, run[f])
			}
		}
		for _, f := range []string{"cut_pause_ms", "copy_pause_ms", "topic_settle_ms"} {
			if v, ok := run[f].(float64); !ok || v < 0 {
				t.Errorf("run %d: %s = %v, want a figure", i, f, run[f])
			}
		}
	}
	text := runCLI(t, "", "bench", "snapshot", "--keys", "1000", "--rate", "2000", "--steady", "200ms", "--checkpoint-interval", "100ms")
	if text.code != ExitOK {
		t.Fatalf("text: exit code %d\nstderr:\n%s", text.code, text.stderr)
	}
	for _, want := range []string{"SNAP PAUSE MS", "FROM SNAP FIRST MS", "1000", "true"} {
		if !strings.Contains(text.stdout, want) {
			t.Errorf("text report lacks %q:\n%s", want, text.stdout)
		}
	}

	runCases(t, "", []cliCase{
		{name: "bad keys", args: []string{"bench", "snapshot", "--keys", "0"}, wantCode: ExitUsage, wantStderr: []string{"keys"}},
		{name: "bad interval", args: []string{"bench", "snapshot", "--checkpoint-interval", "1ms"}, wantCode: ExitUsage, wantStderr: []string{"checkpoint-interval"}},
		{name: "child without dir", args: []string{"bench-child-snapshot"}, wantCode: ExitUsage, wantStderr: []string{"--dir"}},
	})
}
