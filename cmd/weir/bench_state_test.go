package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCLIBenchState runs `weir bench state` end to end at a small key
// count (each measurement in a child process, a re-execution of the test
// binary acting as weir) and checks that the report describes the state
// held; no timing is asserted.
func TestCLIBenchState(t *testing.T) {
	r := runCLI(t, "", "bench", "state", "--keys", "3000", "--job", "sdk,yaml", "--format", "json")
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
		if want := []string{"sdk", "yaml"}[i]; run["job"] != want {
			t.Errorf("run %d: job %v, want %v", i, run["job"], want)
		}
		if run["keys_held"] != float64(3000) {
			t.Errorf("run %d: keys held %v, want 3000", i, run["keys_held"])
		}
		if run["changed_checkpoint_entries"] != float64(30) {
			t.Errorf("run %d: the 1%%-changed checkpoint wrote %v entries, want 30", i, run["changed_checkpoint_entries"])
		}
		for _, f := range []string{"heap_bytes_per_key", "checkpoint_bytes_per_key", "full_checkpoint_ms", "changed_checkpoint_ms", "changed_again_checkpoint_ms",
			"peak_rss_bytes", "gomaxprocs", "target_heap_bytes_per_key"} {
			if v, ok := run[f].(float64); !ok || v <= 0 {
				t.Errorf("run %d: %s = %v, want a positive figure", i, f, run[f])
			}
		}
		if run["go_version"] == "" {
			t.Errorf("run %d: no Go version", i)
		}
	}
	text := runCLI(t, "", "bench", "state", "--keys", "1000", "--job", "sdk")
	if text.code != ExitOK {
		t.Fatalf("text: exit code %d\nstderr:\n%s", text.code, text.stderr)
	}
	for _, want := range []string{"HEAP B/KEY", "CP DISK B/KEY", "1% CP MS", "1% AGAIN MS", "sdk", "1000", "GOMAXPROCS"} {
		if !strings.Contains(text.stdout, want) {
			t.Errorf("text report lacks %q:\n%s", want, text.stdout)
		}
	}

	runCases(t, "", []cliCase{
		{name: "bad keys", args: []string{"bench", "state", "--keys", "0"}, wantCode: ExitUsage, wantStderr: []string{"keys"}},
		{name: "bad job", args: []string{"bench", "state", "--job", "java"}, wantCode: ExitUsage, wantStderr: []string{"java"}},
		{name: "child without dir", args: []string{"bench", "state", "child"}, wantCode: ExitUsage, wantStderr: []string{"--dir"}},
	})
}

// TestCLIBenchSkew: weir bench skew runs the even partition and the
// skewed one in children (each checked exact against its input) and
// reports per share the medians, the ratio to the even one and memory.
func TestCLIBenchSkew(t *testing.T) {
	r := runCLI(t, "", "bench", "skew", "--rows", "20000", "--keys", "50", "--rounds", "2", "--hot-share", "0.8", "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	var runs []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &runs); err != nil {
		t.Fatalf("decoding %q: %v", r.stdout, err)
	}
	if len(runs) != 2 || runs[0]["hot_share"] != 0.0 || runs[1]["hot_share"] != 0.8 || runs[0]["ratio_to_even"] != 1.0 {
		t.Fatalf("runs %v, want the even partition then 0.8", runs)
	}
	for _, run := range runs {
		if ms, _ := run["elapsed_ms"].([]any); len(ms) != 2 {
			t.Errorf("%v: %d rounds, want 2", run["hot_share"], len(ms))
		}
		for _, k := range []string{"median_ms", "rows_per_sec", "ratio_to_even", "peak_heap_bytes", "peak_rss_bytes"} {
			if v, _ := run[k].(float64); v <= 0 {
				t.Errorf("%v: %s = %v, want > 0", run["hot_share"], k, run[k])
			}
		}
	}
	if hot, _ := runs[1]["hot_rows"].(float64); hot < 15000 || hot > 17000 {
		t.Errorf("the hot key got %v of 20000 rows, want about 16000", runs[1]["hot_rows"])
	}
	runCases(t, "", []cliCase{
		{name: "bad share", args: []string{"bench", "skew", "--hot-share", "1"}, wantCode: ExitUsage, wantStderr: []string{"--hot-share"}},
	})
}
