package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestCLIRunLogForTesting runs Beam's top_largest_per_key example as Beam
// publishes it: the elements are one JSON object per line on stdout, as
// Beam's LogForTesting prints them, and the run's summary goes to stderr.
func TestCLIRunLogForTesting(t *testing.T) {
	r := runCLI(t, t.TempDir(), "run", testdata(t, "beam_top_largest.yaml"))
	if r.code != ExitOK {
		t.Fatalf("exit code %d\nstderr:\n%s", r.code, r.stderr)
	}
	got := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	slices.Sort(got)
	want := []string{
		`{"produce": "\ud83c\udf45", "biggest": [5, 4]}`,
		`{"produce": "\ud83c\udf46", "biggest": [1]}`,
		`{"produce": "\ud83e\udd55", "biggest": [3, 2]}`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("stdout:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, w := range []string{"STEP", "Largest N values per key", "LogForTesting"} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr does not have the summary (%q):\n%s", w, r.stderr)
		}
	}

	// --format json: the summary, on stderr, is still one JSON document.
	r = runCLI(t, t.TempDir(), "run", "--format", "json", testdata(t, "beam_top_largest.yaml"))
	if r.code != ExitOK {
		t.Fatalf("exit code %d\nstderr:\n%s", r.code, r.stderr)
	}
	if n := strings.Count(r.stdout, "\n"); n != 3 {
		t.Errorf("stdout has %d lines, want the 3 elements:\n%s", n, r.stdout)
	}
	var sum runResult
	if err := json.Unmarshal([]byte(r.stderr), &sum); err != nil || len(sum.Steps) != 3 {
		t.Errorf("stderr is not the JSON summary (%v):\n%s", err, r.stderr)
	}
}

// A windowed Beam aggregation prints Beam's rows: the group_by field and
// the aggregate, no window columns (window and pane are element metadata).
func TestCLIRunBeamWindowedRows(t *testing.T) {
	r := runCLI(t, t.TempDir(), "run", testdata(t, "beam_sum_windowed.yaml"))
	if r.code != ExitOK {
		t.Fatalf("exit code %d\nstderr:\n%s", r.code, r.stderr)
	}
	got := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	slices.Sort(got)
	want := []string{
		`{"produce": "\ud83c\udf45", "amount": 1.5}`,
		`{"produce": "\ud83c\udf45", "amount": 4.0}`,
		`{"produce": "\ud83e\udd55", "amount": 5.0}`,
		`{"produce": "\ud83e\udd55", "amount": 7.0}`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("stdout:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
