package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/weir-dev/weir/diff"
)

func readTrace(t *testing.T, path string) *Trace {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := ReadEvents(f, filepath.Base(path))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func runFile(t *testing.T, pipeline string, tr *Trace, opts Options) *Result {
	t.Helper()
	src, err := os.ReadFile(pipeline)
	if err != nil {
		t.Fatal(err)
	}
	if opts.BaseDir == "" {
		opts.BaseDir = t.TempDir()
	}
	res, err := Run(context.Background(), pipeline, src, tr, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Close() })
	return res
}

func allRows(t *testing.T, res *Result) []diff.Row {
	t.Helper()
	rd, err := res.Rows.Reader()
	if err != nil {
		t.Fatal(err)
	}
	var out []diff.Row
	for {
		r, ok, err := rd.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		out = append(out, r)
	}
}

// TestRunReferenceFixture runs the reference fixture through the sandbox:
// 425 on time, 475 late for the same key and window, the 00:05 event in
// the next window, the event beyond the allowed lateness a too_late reject;
// and nothing is written where the pipeline's sinks point. The same holds
// when the trace is read back from disk (spilled beyond its memory).
func TestRunReferenceFixture(t *testing.T) {
	for _, spill := range []bool{false, true} {
		t.Run(fmt.Sprintf("spilled=%v", spill), func(t *testing.T) { checkReferenceFixture(t, spill) })
	}
}

func checkReferenceFixture(t *testing.T, spill bool) {
	dir := t.TempDir()
	tr := readTrace(t, "testdata/fixture.jsonl")
	if spill {
		evs, err := tr.Events()
		if err != nil {
			t.Fatal(err)
		}
		tr = &Trace{MaxMemory: 1, SpillDir: t.TempDir()}
		tr.log.chunk = 64
		for _, ev := range evs {
			if err := tr.Append(ev); err != nil {
				t.Fatal(err)
			}
		}
		defer tr.Close()
		if tr.Spilled() == 0 {
			t.Fatal("the trace did not spill")
		}
	}
	res := runFile(t, "testdata/fixture.yaml", tr, Options{BaseDir: dir, Workers: 2})
	const w0 = "2026-03-01T00:00:00.000Z/2026-03-01T00:05:00.000Z"
	const w1 = "2026-03-01T00:05:00.000Z/2026-03-01T00:10:00.000Z"
	rows := allRows(t, res)
	for i := range rows {
		if rows[i].Reject != "" {
			rows[i].Value = "" // the message is checked below
		}
	}
	want := []diff.Row{
		{Output: "WriteLate", Key: `{"offset":10,"source":"fixture.jsonl"}`, Window: "global", Timing: "UNKNOWN", Reject: "too_late"},
		{Output: "WriteTotals", Key: `{"region":"NORTH"}`, Window: w0, PaneIndex: 0, Timing: "ON_TIME", Value: `{"total":425}`},
		{Output: "WriteTotals", Key: `{"region":"NORTH"}`, Window: w0, PaneIndex: 1, Timing: "LATE", Value: `{"total":475}`},
		{Output: "WriteTotals", Key: `{"region":"NORTH"}`, Window: w1, PaneIndex: 0, Timing: "ON_TIME", Value: `{"total":30}`},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("captured rows:\n got %+v\nwant %+v", rows, want)
	}
	if res.Input != 5 || res.Rejected != 1 {
		t.Errorf("input %d rejected %d, want 5 and 1", res.Input, res.Rejected)
	}
	if res.InputSums["amount"] != 605 || res.RejectedSums["amount"] != 100 {
		t.Errorf("input amount %v rejected amount %v, want 605 and 100", res.InputSums["amount"], res.RejectedSums["amount"])
	}
	if got := res.Outputs["WriteTotals"]; got != (diff.OutputInfo{Mode: diff.ModeUpsert, Accumulating: true}) {
		t.Errorf("WriteTotals is consumed as %+v, want upsert of accumulating panes", got)
	}
	if got := res.Outputs["WriteLate"]; got.Mode != diff.ModeAppend {
		t.Errorf("WriteLate is consumed as %+v, want append", got)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("the sandbox wrote into the pipeline's directory: %v", entries)
	}
}

// TestRunSpillsToSortedRuns runs the fixture with room for two rows in
// memory: the captured rows go through sorted runs on disk and read back
// as they do from memory.
func TestRunSpillsToSortedRuns(t *testing.T) {
	tr := readTrace(t, "testdata/fixture.jsonl")
	inMemory := allRows(t, runFile(t, "testdata/fixture.yaml", tr, Options{}))
	spilled := runFile(t, "testdata/fixture.yaml", tr, Options{MemoryRows: 2, TempDir: t.TempDir()})
	if got := allRows(t, spilled); !reflect.DeepEqual(got, inMemory) {
		t.Errorf("spilled rows:\n got %+v\nwant %+v", got, inMemory)
	}
	if spilled.Rows.Runs() < 2 {
		t.Errorf("%d sorted runs for %d rows at 2 in memory", spilled.Rows.Runs(), len(inMemory))
	}
}

func TestRunRefusesUncoveredInput(t *testing.T) {
	tests := []struct {
		name, events, want string
	}{
		{"unknown source", `{"element": {"region": "N", "amount": 1}, "event_time": 0, "source": "Nope"}`, `source "Nope", which the pipeline does not have`},
		{"pubsub source without input", `{"watermark": 5, "source": "Other"}`, `source "Other"`},
	}
	src, err := os.ReadFile("testdata/fixture.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := ReadEvents(strings.NewReader(tt.events), "events.jsonl")
			if err != nil {
				t.Fatal(err)
			}
			_, err = Run(context.Background(), "fixture.yaml", src, tr, Options{BaseDir: t.TempDir()})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestReadEventsRefusesMalformedLines(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"element": {"a": 1}}`, "events.jsonl:1: an element needs its event_time"},
		{`{"element": [1], "event_time": 0}`, "element must be a JSON object"},
		{`{"watermark": "yesterday"}`, "watermark"},
		{`{"watermark": 10}` + "\n" + `{"watermark": 5}`, "events.jsonl:2: the watermark of source \"\" moves back"},
		{`{"element": {"a": 1}, "event_time": 0, "watermark": 1}`, "not both"},
		{`{"elements": {}}`, "events.jsonl:1: not an event"},
		{`{}`, "needs \"element\""},
		{`not json`, "not an event"},
	}
	for _, tt := range tests {
		_, err := ReadEvents(strings.NewReader(tt.in), "events.jsonl")
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ReadEvents(%q) = %v, want an error containing %q", tt.in, err, tt.want)
		}
	}
}

// TestRunTestReferenceFixture runs the reference fixture written as a
// Beam YAML tests: block, and checks that it fails when the late total
// 475 is changed to 900 (an append-only sum of the two panes).
func TestRunTestReferenceFixture(t *testing.T) {
	src, err := os.ReadFile("testdata/fixture_tests.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		src          string
		wantFailures []string
	}{
		{name: "as written", src: string(src)},
		{name: "475 changed to 900", src: strings.Replace(string(src), "total: 475", "total: 900", 1), wantFailures: []string{
			`WriteTotals: expected {"pane":{"index":1,"timing":"LATE"},"region":"NORTH","total":900,"window_end":"2026-03-01T00:05:00Z","window_start":"2026-03-01T00:00:00Z"}, not received`,
			`WriteTotals: received {"pane":{"index":1,"timing":"LATE"},"region":"NORTH","total":475,"window_end":"2026-03-01T00:05:00.000Z","window_start":"2026-03-01T00:00:00.000Z"}, not expected`,
		}},
		{name: "the beyond-cutoff event not a reject", src: strings.Replace(string(src), "reason: too_late", "reason: schema_mismatch", 1), wantFailures: []string{
			`WriteLate: expected {"element":{"amount":100,"region":"NORTH"},"error":{"reason":"schema_mismatch","step":"RegionTotals"}}, not received`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cases, err := ParseTests("fixture_tests.yaml", []byte(tt.src))
			if err != nil {
				t.Fatal(err)
			}
			if len(cases) != 1 || cases[0].Name != "reference fixture" {
				t.Fatalf("parsed %d tests: %+v", len(cases), cases)
			}
			res, err := RunTest(context.Background(), "fixture_tests.yaml", []byte(tt.src), cases[0], Options{BaseDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			got := res.Failures
			if len(tt.wantFailures) == 1 && len(got) > 1 {
				got = got[:1] // the received reject left over is reported too
			}
			if !reflect.DeepEqual(got, tt.wantFailures) {
				t.Errorf("failures:\n got %q\nwant %q", res.Failures, tt.wantFailures)
			}
			if res.Passed() != (len(tt.wantFailures) == 0) {
				t.Errorf("Passed() = %v", res.Passed())
			}
		})
	}
}

func TestParseTestsRefusesWhatItCannotRun(t *testing.T) {
	src := "pipeline: {transforms: []}\ntests:\n  - name: t\n    mock_inputs: [{name: X, elements: [{a: 1}]}]\n"
	if _, err := ParseTests("p.yaml", []byte(src)); err == nil || !strings.Contains(err.Error(), "the test checks nothing") {
		t.Errorf("err = %v", err)
	}
	// A section that does not decode is named at its line and column.
	bad := "pipeline: {transforms: []}\ntests:\n  - name: t\n    mock_inputs:\n      - name: X\n        elements: 7\n"
	if _, err := ParseTests("p.yaml", []byte(bad)); err == nil || !strings.HasPrefix(err.Error(), "p.yaml:6:19: ") {
		t.Errorf("a tests section with elements: 7: %v, want it named at p.yaml:6:19", err)
	}
	fixture, err := os.ReadFile("testdata/fixture_tests.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ from, to, want string }{
		{"- name: ReadTransactions\n        elements", "- name: RegionTotals\n        elements", `mock_outputs names "RegionTotals", which is not a source step`},
		{"- name: WriteLate\n        elements", "- name: Nope\n        elements", `expected_inputs names "Nope", which is not a sink step`},
		{`{watermark: "2026-03-01T00:05:00Z"}`, `{watermark: "soon"}`, "mock_outputs ReadTransactions element 3: watermark"},
	} {
		src := strings.Replace(string(fixture), tt.from, tt.to, 1)
		cases, err := ParseTests("p.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		_, err = RunTest(context.Background(), "p.yaml", []byte(src), cases[0], Options{BaseDir: t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("err = %v, want one containing %q", err, tt.want)
		}
	}
}

// TestRunTestMockInputsExpectedOutputs: Beam's mock_inputs feed one
// transform's input and expected_outputs check any transform's output;
// what the test does not need is not run (the pipeline's Pub/Sub source
// has no recorded input, which fails a run that includes it). A wrong
// expectation fails and its fix is what was received; wrong names are
// refused with what exists.
func TestRunTestMockInputsExpectedOutputs(t *testing.T) {
	src, err := os.ReadFile("testdata/taps_tests.yaml")
	if err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, src string, i int) (*TestResult, error) {
		t.Helper()
		cases, err := ParseTests("taps_tests.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return RunTest(context.Background(), "taps_tests.yaml", []byte(src), cases[i], Options{BaseDir: t.TempDir()})
	}
	for i, name := range []string{"filter and tag", "totals of tagged rows"} {
		res, err := run(t, string(src), i)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.Name != name || !res.Passed() {
			t.Errorf("%s: failures %q", res.Name, res.Failures)
		}
	}

	wrong := strings.Replace(string(src), "{region: NORTH, amount: 700, big: true}", "{region: NORTH, amount: 700, big: false}", 1)
	res, err := run(t, wrong, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`Tag: expected {"amount":700,"big":false,"region":"NORTH"}, not received`,
		`Tag: received {"amount":700,"big":true,"pane":{"index":0,"timing":"UNKNOWN"},"region":"NORTH"}, not expected`,
	}
	if !reflect.DeepEqual(res.Failures, want) {
		t.Errorf("failures:\n got %q\nwant %q", res.Failures, want)
	}
	if len(res.Fixes) != 1 || res.Fixes[0].Section != "expected_outputs" || res.Fixes[0].Index != 0 || res.Fixes[0].Name != "Tag" ||
		fmt.Sprint(res.Fixes[0].Elements) != "[map[amount:250 big:false region:NORTH] map[amount:700 big:true region:NORTH]]" {
		t.Errorf("fixes %+v", res.Fixes)
	}

	wrongTotal := strings.Replace(string(src), "{region: NORTH, total: 425}", "{region: NORTH, total: 400}", 1)
	if res, err = run(t, wrongTotal, 1); err != nil || res.Passed() || len(res.Fixes) != 1 || res.Fixes[0].Section != "expected_inputs" {
		t.Errorf("a wrong total: %+v %v", res, err)
	}

	for _, tt := range []struct{ from, to, want string }{
		{"mock_inputs:\n      - name: BigOnes", "mock_inputs:\n      - name: Nope", `mock_inputs names "Nope", which is not a transform of the pipeline`},
		{"mock_inputs:\n      - name: BigOnes", "mock_inputs:\n      - name: ReadOrders", `mock_inputs names "ReadOrders", a source`},
		{"expected_outputs:\n      - name: Tag", "expected_outputs:\n      - name: Tag.nope", `Tag.nope`},
	} {
		_, err := run(t, strings.Replace(string(src), tt.from, tt.to, 1), 0)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("err = %v, want one containing %q", err, tt.want)
		}
	}
}

// TestRunAll runs three runs of the fixture at once over one trace: each
// gives what a run alone gives; a failing run is named by its index and
// the others' results are released.
func TestRunAll(t *testing.T) {
	tr := readTrace(t, "testdata/fixture.jsonl")
	alone := allRows(t, runFile(t, "testdata/fixture.yaml", tr, Options{}))
	src, err := os.ReadFile("testdata/fixture.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec := RunSpec{Path: "fixture.yaml", Src: src, Opts: Options{BaseDir: t.TempDir(), TempDir: t.TempDir(), MemoryRows: 2}}
	results, err := RunAll(context.Background(), tr, spec, spec, spec)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range results {
		if got := allRows(t, r); !reflect.DeepEqual(got, alone) {
			t.Errorf("run %d: %+v, want %+v", i, got, alone)
		}
		r.Close()
	}
	bad := RunSpec{Path: "bad.yaml", Src: []byte("pipeline: 3\n"), Opts: spec.Opts}
	_, err = RunAll(context.Background(), tr, spec, bad, spec)
	var re *RunError
	if !errors.As(err, &re) || re.Index != 1 || !strings.Contains(err.Error(), "bad.yaml") {
		t.Errorf("RunAll with a bad second pipeline: %v, want a RunError of index 1 naming bad.yaml", err)
	}
}
