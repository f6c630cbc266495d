package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// beamFixture is the absolute path of one of Beam's published examples
// kept in yamlpipe/testdata/beam.
func beamFixture(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "yamlpipe", "testdata", "beam", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// `weir run` of Beam's published examples, as Beam publishes them: one
// aggregation, one elementwise and one windowing example print exactly
// Beam's rows on stdout, one JSON object per line, as LogForTesting does.
func TestCLIRunBeamPublishedExamples(t *testing.T) {
	tests := []struct {
		file string
		want []string // sorted
	}{
		{"combine_sum.yaml", []string{
			`{"fruit": "banana", "total_quantity": 3, "mean_price": 1.0}`,
			`{"fruit": "blackberry", "total_quantity": 1, "mean_price": 4.0}`,
			`{"fruit": "blueberry", "total_quantity": 3, "mean_price": 2.5}`,
			`{"fruit": "raspberry", "total_quantity": 1, "mean_price": 3.5}`,
		}},
		{"explode.yaml", []string{
			`{"produce": "\ud83c\udf45Tomato", "season": "summer"}`,
			`{"produce": "\ud83c\udf46Eggplant", "season": "summer"}`,
			`{"produce": "\ud83c\udf53Strawberry", "season": "spring"}`,
			`{"produce": "\ud83e\udd54Potato", "season": "spring"}`,
			`{"produce": "\ud83e\udd55Carrot", "season": "summer"}`,
		}},
		{"combine_sum_windowed.yaml", []string{
			`{"user": "alice", "window_string": "[101.0, 125.0)"}`,
			`{"user": "bob", "window_string": "[7.0, 30.0)"}`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			r := runCLI(t, t.TempDir(), "run", beamFixture(t, tc.file))
			if r.code != ExitOK {
				t.Fatalf("exit code %d\nstderr:\n%s", r.code, r.stderr)
			}
			got := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("stdout:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// A Beam-style test pipeline run with `weir run`: AssertEqual passes
// quietly (exit 0) or fails the run (exit 1) naming what differs.
func TestCLIRunAssertEqual(t *testing.T) {
	const pipeline = `pipeline:
  type: chain
  transforms:
    - type: Create
      config:
        elements: [{k: x, t: 1}, {k: x, t: 8}, {k: y, t: 101}]
    - type: AssignTimestamps
      config:
        timestamp: t
    - type: Combine
      config:
        language: python
        group_by: k
        combine:
          t: sum
      windowing:
        type: fixed
        size: 10s
    - type: AssertEqual
      config:
        elements: [{k: x, t: 9}, {k: y, t: %s}]
`
	dir := t.TempDir()
	write := func(name, total string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Replace(pipeline, "%s", total, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	r := runCLI(t, dir, "run", write("pass.yaml", "101"))
	if r.code != ExitOK {
		t.Fatalf("exit code %d\nstderr:\n%s", r.code, r.stderr)
	}
	r = runCLI(t, dir, "run", write("fail.yaml", "100"))
	if r.code != ExitFailure {
		t.Fatalf("exit code %d, want %d\nstderr:\n%s", r.code, ExitFailure, r.stderr)
	}
	for _, w := range []string{"assert_equal", "fail.yaml:19:13", `1 missing (expected, not in the input): {"k":"y","t":100}`,
		`1 unexpected (in the input, not expected): {"k":"y","t":101}`} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
		}
	}
}
