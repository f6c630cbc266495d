package yamlpipe

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/weir-dev/weir"
)

// runLogged loads src with LogOutput captured, runs it and returns the
// LogForTesting lines, sorted, and the run directory.
func runLogged(t *testing.T, src string, workers int) ([]string, string) {
	t.Helper()
	dir := t.TempDir()
	var buf bytes.Buffer
	p, err := Load("p.yaml", []byte(src), Options{BaseDir: dir, LogOutput: &buf})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if _, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: workers}); err != nil {
		t.Fatalf("run: %v", err)
	}
	out := strings.TrimSuffix(buf.String(), "\n")
	if out == "" {
		return nil, dir
	}
	lines := strings.Split(out, "\n")
	sort.Strings(lines)
	return lines, dir
}

func loadErr(t *testing.T, src, want string) {
	t.Helper()
	_, err := Load("p.yaml", []byte(src), Options{BaseDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "p.yaml:") {
		t.Errorf("err = %v, want a positioned error containing %q", err, want)
	}
}

// Beam's getting-started pipeline runs unchanged.
func TestLogForTestingBeamQuickstart(t *testing.T) {
	src := "pipeline:\n  transforms:\n    - type: Create\n      config:\n        elements: [1, 2, 3]\n    - type: LogForTesting\n      input: Create\n"
	lines, _ := runLogged(t, src, 1)
	wantLines(t, lines, `{"element": 1}`, `{"element": 2}`, `{"element": 3}`)
}

func TestLogForTestingPrintsAsBeam(t *testing.T) {
	src := `pipeline:
  type: chain
  transforms:
    - type: Create
      config:
        elements:
          - {a: 1, b: 1.0, s: x, l: [1.5, 2.0], n: null, ok: true}
          - {a: 2, b: 0.00001, s: "é🥕\"", l: [], n: null, ok: false}
          - {a: 3, b: 1.0e+16, s: "tab\t", l: [3.0], n: null, ok: true}
    - type: LogForTesting
      config: {level: INFO, prefix: 'row: '}
` + sinkJSON
	lines, dir := runLogged(t, src, 1)
	wantLines(t, lines,
		`row: {"a": 1, "b": 1.0, "s": "x", "l": [1.5, 2.0], "n": null, "ok": true}`,
		`row: {"a": 2, "b": 1e-05, "s": "\u00e9\ud83e\udd55\"", "l": [], "n": null, "ok": false}`,
		`row: {"a": 3, "b": 1e+16, "s": "tab\t", "l": [3.0], "n": null, "ok": true}`)
	// The step passes its input on.
	if got := sortedLines(t, filepath.Join(dir, "out.jsonl")); len(got) != 3 {
		t.Errorf("LogForTesting passed on %d rows, want 3", len(got))
	}
	loadErr(t, createT+"    - type: LogForTesting\n      input: In\n      config: {level: VERBOSE}\n", `unknown log level "VERBOSE"`)
}

// Beam's aggregation example (combine_count_minimal.yaml) prints Beam's rows.
func TestBeamCountExample(t *testing.T) {
	src := `pipeline:
  type: chain
  transforms:
    - type: Create
      name: Create produce names
      config:
        elements:
          - season: 'spring'
            produce: 'a'
          - season: 'spring'
            produce: 'b'
          - season: 'summer'
            produce: 'b'
          - season: 'fall'
            produce: 'b'
          - season: 'spring'
            produce: 'c'
          - season: 'winter'
            produce: 'c'
          - season: 'spring'
            produce: 'd'
          - season: 'summer'
            produce: 'd'
          - season: 'fall'
            produce: 'd'
          - season: 'summer'
            produce: 'e'
    - type: Combine
      name: Shortest names per key
      config:
        language: python
        group_by: season
        combine:
          produce: count
    - type: LogForTesting

options:
  yaml_experimental_features: Combine
`
	lines, _ := runLogged(t, src, 2)
	wantLines(t, lines, `{"season": "spring", "produce": 4}`, `{"season": "summer", "produce": 3}`,
		`{"season": "fall", "produce": 2}`, `{"season": "winter", "produce": 1}`)
}

func TestExplode(t *testing.T) {
	in := `pipeline:
  type: chain
  transforms:
    - type: Create
      config:
        elements:
          - {k: x, a: [1, 2], b: [p, q, r]}
`
	tests := []struct {
		name, cfg string
		want      []string
	}{
		{"one field", "{fields: a}", []string{`{"k": "x", "a": 1, "b": ["p", "q", "r"]}`, `{"k": "x", "a": 2, "b": ["p", "q", "r"]}`}},
		{"cross product", "{fields: [a, b], cross_product: true}", []string{
			`{"k": "x", "a": 1, "b": "p"}`, `{"k": "x", "a": 1, "b": "q"}`, `{"k": "x", "a": 1, "b": "r"}`,
			`{"k": "x", "a": 2, "b": "p"}`, `{"k": "x", "a": 2, "b": "q"}`, `{"k": "x", "a": 2, "b": "r"}`}},
		{"zip", "{fields: [a, b], cross_product: false}", []string{
			`{"k": "x", "a": 1, "b": "p"}`, `{"k": "x", "a": 2, "b": "q"}`, `{"k": "x", "a": null, "b": "r"}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lines, _ := runLogged(t, in+"    - type: Explode\n      config: "+tc.cfg+"\n    - type: LogForTesting\n", 1)
			wantLines(t, lines, tc.want...)
		})
	}
	loadErr(t, in+"    - type: Explode\n      config: {fields: [a, b]}\n", "cross_product must be specified")
	loadErr(t, in+"    - type: Explode\n      config: {fields: k}\n", `field "k" is string, not a list`)
	loadErr(t, in+"    - type: Explode\n      config: {fields: z}\n", `"z" is not a field`)
}

// A null list is an element error, routed to the error output.
func TestExplodeErrorHandling(t *testing.T) {
	src := `pipeline:
  transforms:
    - type: Create
      config:
        elements:
          - {k: x, a: [1]}
          - {k: y, a: null}
    - type: Explode
      input: Create
      config:
        fields: a
        error_handling: {output: bad}
    - type: LogForTesting
      input: Explode
    - type: MapToFields
      input: Explode.bad
      config: {fields: {k: element.k, reason: error.reason}}
    - type: LogForTesting
      name: Bad
      input: MapToFields
`
	lines, _ := runLogged(t, src, 1)
	wantLines(t, lines, `{"k": "x", "a": 1}`, `{"k": "y", "reason": "type_mismatch"}`)
}

// Beam's windowing example (combine_sum_windowed.yaml, up to
// ExtractWindowingInfo): integer timestamps are seconds, as in Beam.
func TestAssignTimestampsSessions(t *testing.T) {
	src := `pipeline:
  type: chain
  transforms:
    - type: Create
      name: CreateVisits
      config:
        elements:
          - {user: alice, timestamp: 1}
          - {user: alice, timestamp: 3}
          - {user: bob, timestamp: 7}
          - {user: bob, timestamp: 12}
          - {user: bob, timestamp: 20}
          - {user: alice, timestamp: 101}
          - {user: alice, timestamp: 109}
          - {user: alice, timestamp: 115}
    - type: AssignTimestamps
      config:
        timestamp: timestamp
    - type: Combine
      name: SumVisitsPerUser
      config:
        language: python
        group_by: user
        combine:
          visits:
            value: user
            fn: count
      windowing:
        type: sessions
        gap: 10s
    - type: MapToFields
      config:
        fields: {user: user, visits: visits, start: window_start, end: window_end}
    - type: LogForTesting
`
	lines, _ := runLogged(t, src, 2)
	wantLines(t, lines,
		`{"user": "alice", "visits": 2, "start": "1970-01-01T00:00:01.000Z", "end": "1970-01-01T00:00:13.000Z"}`,
		`{"user": "bob", "visits": 3, "start": "1970-01-01T00:00:07.000Z", "end": "1970-01-01T00:00:30.000Z"}`,
		`{"user": "alice", "visits": 3, "start": "1970-01-01T00:01:41.000Z", "end": "1970-01-01T00:02:05.000Z"}`)
}

func TestAssignTimestampsExpression(t *testing.T) {
	src := `pipeline:
  transforms:
    - type: Create
      config:
        elements:
          - {k: a, at: '2026-03-01T00:00:30Z', m: 1}
          - {k: a, at: '2026-03-01T00:01:30Z', m: 2}
          - {k: b, at: 'noon', m: 3}
    - type: AssignTimestamps
      input: Create
      config:
        timestamp: at
        error_handling: {output: bad}
    - type: AssignTimestamps
      name: Shift
      input: AssignTimestamps
      config:
        language: generic
        timestamp: "timestamp(at) + duration('1h')"
    - type: Combine
      input: Shift
      windowing: {type: fixed, size: 1m}
      config: {group_by: k, combine: {m: sum}}
    - type: MapToFields
      input: Combine
      config: {fields: {k: k, m: m, start: window_start}}
    - type: LogForTesting
      input: MapToFields
    - type: MapToFields
      name: Why
      input: AssignTimestamps.bad
      config: {fields: {k: element.k, reason: error.reason}}
    - type: LogForTesting
      name: Bad
      input: Why
`
	lines, _ := runLogged(t, src, 1)
	wantLines(t, lines,
		`{"k": "a", "m": 1, "start": "2026-03-01T01:00:00.000Z"}`,
		`{"k": "a", "m": 2, "start": "2026-03-01T01:01:00.000Z"}`,
		`{"k": "b", "reason": "bad_timestamp"}`)
	loadErr(t, createT+"    - type: AssignTimestamps\n      input: In\n      config: {timestamp: 'amount > 1'}\n", "timestamp has type bool")
	loadErr(t, createT+"    - type: AssignTimestamps\n      input: In\n      config: {language: javascript, timestamp: 'amount * 2'}\n", "javascript expressions are not supported")
}

func TestPartition(t *testing.T) {
	src := `pipeline:
  transforms:
    - type: Create
      config:
        elements:
          - {name: apple, kind: fruit, n: 1}
          - {name: kale, kind: veg, n: 2}
          - {name: salt, kind: mineral, n: 3}
          - {name: pear, kind: fruit, n: 4}
    - type: Partition
      input: Create
      config:
        by: kind
        outputs: [fruit, veg]
        unknown_output: other
    - type: LogForTesting
      name: Fruit
      input: Partition.fruit
      config: {prefix: 'fruit '}
    - type: LogForTesting
      name: Veg
      input: Partition.veg
      config: {prefix: 'veg '}
    - type: LogForTesting
      name: Other
      input: Partition.other
      config: {prefix: 'other '}
    - type: Partition
      name: BySize
      input: Create
      config:
        language: generic
        by: "n > 2 ? 'big' : 'small'"
        outputs: [big, small]
    - type: LogForTesting
      name: Big
      input: BySize.big
      config: {prefix: 'big '}
`
	lines, _ := runLogged(t, src, 2)
	wantLines(t, lines,
		`fruit {"name": "apple", "kind": "fruit", "n": 1}`, `fruit {"name": "pear", "kind": "fruit", "n": 4}`,
		`veg {"name": "kale", "kind": "veg", "n": 2}`, `other {"name": "salt", "kind": "mineral", "n": 3}`,
		`big {"name": "salt", "kind": "mineral", "n": 3}`, `big {"name": "pear", "kind": "fruit", "n": 4}`)
}

// Without unknown_output, a name outside outputs is an element error.
func TestPartitionUnknownOutput(t *testing.T) {
	src := `pipeline:
  transforms:
    - type: Create
      config:
        elements: [{kind: fruit}, {kind: rock}]
    - type: Partition
      input: Create
      config:
        by: kind
        outputs: [fruit]
        error_handling: {output: bad}
    - type: LogForTesting
      input: Partition.fruit
    - type: MapToFields
      input: Partition.bad
      config: {fields: {kind: element.kind, reason: error.reason}}
    - type: LogForTesting
      name: Bad
      input: MapToFields
`
	lines, _ := runLogged(t, src, 1)
	wantLines(t, lines, `{"kind": "fruit"}`, `{"kind": "rock", "reason": "unknown_output"}`)
	part := "pipeline:\n  transforms:\n    - type: Create\n      config: {elements: [{kind: a}]}\n    - type: Partition\n      input: Create\n      config: {by: kind, outputs: [a, b]}\n"
	loadErr(t, part+"    - type: LogForTesting\n      input: Partition\n", "has no main output; read one of its outputs (a, b) as Partition.NAME")
	loadErr(t, part+"    - type: LogForTesting\n      input: Partition.c\n", `has no output "c" (its outputs: a, b)`)
	loadErr(t, "pipeline:\n  transforms:\n    - type: Create\n      config: {elements: [{kind: a}]}\n    - type: Partition\n      input: Create\n      config: {by: kind}\n", "Partition needs config.outputs")
}

func TestTextChain(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in.txt"), []byte("to be\nor not\r\n\nto be\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := `pipeline:
  type: chain
  source:
    type: ReadFromText
    config: {path: in.txt}
  transforms:
    - type: Filter
      config: {keep: "line != ''"}
    - type: MapToFields
      config: {fields: {upper: "line + '!'"}}
  sink:
    type: WriteToText
    config: {path: out/lines.txt}
`
	if err := runSrc(t, dir, src, 2); err != nil {
		t.Fatal(err)
	}
	wantLines(t, sortedLines(t, filepath.Join(dir, "out/lines.txt")), "or not!", "to be!", "to be!")
	loadErr(t, createT+"    - type: WriteToText\n      input: In\n      config: {path: o.txt}\n", "exactly one field")
}

func TestWriteToTextStr(t *testing.T) {
	src := "pipeline:\n  type: chain\n  transforms:\n    - type: Create\n      config:\n        elements: [{v: 1.0}, {v: 2.5}, {v: null}]\n    - type: WriteToText\n      config: {path: o.txt}\n"
	dir := t.TempDir()
	if err := runSrc(t, dir, src, 1); err != nil {
		t.Fatal(err)
	}
	wantLines(t, sortedLines(t, filepath.Join(dir, "o.txt")), "1.0", "2.5", "None")
}
