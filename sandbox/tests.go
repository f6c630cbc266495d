package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/weir-dev/weir/diff"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/yamlpipe"
)

// This file runs the test cases a pipeline file carries in Beam YAML's
// `tests:` section (`weir test`), through the same sandbox as a
// rehearsal. A test mocks what source steps output (mock_outputs) and
// states what sink steps receive (expected_inputs). weir extends Beam's
// elements so that streaming behaviour is testable: a mocked element may
// carry its event time, a mock may move the watermark, and an expected
// element may name its window and pane:
//
//	mock_outputs:
//	  - name: ReadTransactions
//	    elements:
//	      - {element: {region: NORTH, amount: 250}, event_time: "2026-03-01T00:01:00Z"}
//	      - {watermark: "2026-03-01T00:05:00Z"}
//	expected_inputs:
//	  - name: WriteTotals
//	    elements:
//	      - {region: NORTH, total: 425, window_start: "2026-03-01T00:00:00Z", pane: {index: 0, timing: ON_TIME}}
//
// An expected element is compared on the fields it names (a sink row's
// fields, window_start and window_end, pane.index and pane.timing; for a
// rejected element element, error.reason, error.step, error.message),
// and the expected and received elements must pair one to one.

// Test is one test case of a pipeline file.
type Test struct {
	// Index is the test's position in the tests: list (from 0).
	Index           int           `yaml:"-"`
	Name            string        `yaml:"name"`
	MockOutputs     []testElement `yaml:"mock_outputs"`
	ExpectedInputs  []testElement `yaml:"expected_inputs"`
	MockInputs      []testElement `yaml:"mock_inputs"`
	ExpectedOutputs []testElement `yaml:"expected_outputs"`
}

type testElement struct {
	Name     string `yaml:"name"`
	Elements []any  `yaml:"elements"`
}

// ParseTests reads the `tests:` section of a pipeline file (none: an
// empty list).
func ParseTests(path string, src []byte) ([]Test, error) {
	var f struct {
		Tests []Test `yaml:"tests"`
	}
	if err := yaml.Unmarshal(src, &f); err != nil {
		// FILE:LINE:COLUMN, as the pipeline's own errors are.
		var ye yaml.Error
		if errors.As(err, &ye) && ye.GetToken() != nil {
			pos := ye.GetToken().Position
			return nil, fmt.Errorf("%s:%d:%d: reading its tests: %s", path, pos.Line, pos.Column, ye.GetMessage())
		}
		return nil, fmt.Errorf("%s: reading its tests: %w", path, err)
	}
	for i, t := range f.Tests {
		f.Tests[i].Index = i
		if t.Name == "" {
			f.Tests[i].Name = fmt.Sprintf("test %d", i+1)
		}
		if len(t.ExpectedInputs)+len(t.ExpectedOutputs) == 0 {
			return nil, fmt.Errorf("%s: %s: the test checks nothing: give expected_inputs (what a sink step receives) or expected_outputs (what a transform outputs)", path, f.Tests[i].Name)
		}
	}
	return f.Tests, nil
}

// TestResult is the outcome of one test case.
type TestResult struct {
	Name string
	// Failures says what did not match, one line each; empty when the test
	// passed.
	Failures []string
	// Fixes are, for each expectation that did not match, the elements
	// received instead (`weir test --fix-tests` writes them into the
	// file).
	Fixes []TestFix
}

// TestFix is what one expectation of a test received.
type TestFix struct {
	// Section is "expected_inputs" or "expected_outputs"; Index the
	// expectation's position in it (from 0), Name its step.
	Section string
	Index   int
	Name    string
	// Elements are the received elements, as an expectation states them
	// (numbers as int64 or float64).
	Elements []map[string]any
}

// Passed reports whether the test passed.
func (r *TestResult) Passed() bool { return len(r.Failures) == 0 }

// RunTest runs one test case of the pipeline in src in the sandbox.
func RunTest(ctx context.Context, path string, src []byte, t Test, opts Options) (*TestResult, error) {
	p, err := Load(path, src, opts)
	if err != nil {
		return nil, err
	}
	g := p.Graph()
	trace := &Trace{}
	defer trace.Close()
	var taps *yamlpipe.TestTaps
	if len(t.MockInputs) > 0 || len(t.ExpectedOutputs) > 0 {
		// Beam's mock_inputs and expected_outputs: the pipeline rewired
		// (yamlpipe.TestTaps), built with only what the test checks.
		taps = &yamlpipe.TestTaps{MockInputs: map[string][]map[string]any{}}
		for _, m := range t.MockInputs {
			if _, dup := taps.MockInputs[m.Name]; dup {
				return nil, fmt.Errorf("%s: %s: mock_inputs names %q twice", path, t.Name, m.Name)
			}
			var rows []map[string]any
			for i, el := range m.Elements {
				ev, err := mockEvent(el)
				if err != nil {
					return nil, fmt.Errorf("%s: %s: mock_inputs %s element %d: %w", path, t.Name, m.Name, i+1, err)
				}
				if !ev.IsWatermark {
					rows = append(rows, yamlValues(ev.Value).(map[string]any))
				}
			}
			taps.MockInputs[m.Name] = rows
		}
		for _, e := range t.ExpectedOutputs {
			taps.ExpectOutputs = append(taps.ExpectOutputs, e.Name)
		}
		for _, e := range t.ExpectedInputs {
			taps.Keep = append(taps.Keep, e.Name)
		}
	}
	for _, m := range t.MockOutputs {
		s := g.Step(m.Name)
		if s == nil || s.Kind != graph.KindSource {
			return nil, fmt.Errorf("%s: %s: mock_outputs names %q, which is not a source step of the pipeline", path, t.Name, m.Name)
		}
	}
	for _, e := range t.ExpectedInputs {
		if s := g.Step(e.Name); s == nil || s.Kind != graph.KindSink {
			return nil, fmt.Errorf("%s: %s: expected_inputs names %q, which is not a sink step of the pipeline", path, t.Name, e.Name)
		}
	}
	if taps != nil {
		if p, err = load(path, src, opts, taps); err != nil {
			return nil, fmt.Errorf("%s: %w", t.Name, err)
		}
		g = p.Graph()
	}
	for _, m := range append(append([]testElement(nil), t.MockOutputs...), t.MockInputs...) {
		step := m.Name
		if taps != nil {
			if _, ok := taps.MockInputs[m.Name]; ok {
				step = yamlpipe.TestInputStep(m.Name)
			} else if g.Step(step) == nil {
				continue // a source the test's checks do not read: left out
			}
		}
		for i, el := range m.Elements {
			ev, err := mockEvent(el)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: mock_outputs %s element %d: %w", path, t.Name, m.Name, i+1, err)
			}
			ev.Source, ev.Origin, ev.Offset = step, m.Name, int64(i+1)
			if err := trace.Append(ev); err != nil {
				return nil, err
			}
		}
	}
	res, err := RunPipeline(ctx, p, trace, opts)
	if err != nil {
		return nil, err
	}
	defer res.Close()
	rd, err := res.Rows.Reader()
	if err != nil {
		return nil, err
	}
	got := map[string][]map[string]any{}
	for {
		r, ok, err := rd.Next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		m, err := receivedElement(&r)
		if err != nil {
			return nil, err
		}
		got[r.Output] = append(got[r.Output], m)
	}
	out := &TestResult{Name: t.Name}
	check := func(section string, es []testElement, step func(string) string) error {
		for k, e := range es {
			want := make([]map[string]any, len(e.Elements))
			for i, el := range e.Elements {
				m, ok := plain(el).(map[string]any)
				if !ok {
					return fmt.Errorf("%s: %s: %s %s element %d is not a mapping", path, t.Name, section, e.Name, i+1)
				}
				want[i] = m
			}
			recv := got[step(e.Name)]
			fails := matchElements(e.Name, want, recv)
			if len(fails) > 0 {
				out.Failures = append(out.Failures, fails...)
				out.Fixes = append(out.Fixes, TestFix{Section: section, Index: k, Name: e.Name, Elements: fixElements(recv)})
			}
		}
		return nil
	}
	if err := check("expected_inputs", t.ExpectedInputs, func(s string) string { return s }); err != nil {
		return nil, err
	}
	if err := check("expected_outputs", t.ExpectedOutputs, yamlpipe.TestOutputStep); err != nil {
		return nil, err
	}
	return out, nil
}

// fixElements returns received elements as an expectation states them,
// in a stable order: a row of the global window without its pane (as
// Beam writes one), a windowed row with its window and pane.
func fixElements(recv []map[string]any) []map[string]any {
	out := make([]map[string]any, 0, len(recv))
	for _, r := range recv {
		m := make(map[string]any, len(r))
		for k, v := range r {
			m[k] = yamlValues(v)
		}
		if _, windowed := m["window_start"]; !windowed {
			if p, ok := m["pane"].(map[string]any); ok && fmt.Sprint(p["index"]) == "0" {
				delete(m, "pane")
			}
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return compact(out[i]) < compact(out[j]) })
	return out
}

// mockEvent reads one mocked element: {element, event_time}, {watermark},
// or a plain row (Beam's form) at the minimum event time.
func mockEvent(v any) (Event, error) {
	m, ok := plain(v).(map[string]any)
	if !ok {
		return Event{}, fmt.Errorf("want a mapping, got %v", v)
	}
	if wm, ok := m["watermark"]; ok && len(m) == 1 {
		t, err := anyTime(wm)
		if err != nil {
			return Event{}, fmt.Errorf("watermark: %w", err)
		}
		return Event{Watermark: t, IsWatermark: true}, nil
	}
	if el, ok := m["element"]; ok {
		if len(m) != 2 || m["event_time"] == nil {
			return Event{}, fmt.Errorf("a timestamped element is {element: {...}, event_time: TIME}")
		}
		row, ok := el.(map[string]any)
		if !ok {
			return Event{}, fmt.Errorf("element must be a mapping")
		}
		t, err := anyTime(m["event_time"])
		if err != nil {
			return Event{}, fmt.Errorf("event_time: %w", err)
		}
		return Event{Value: row, Time: t}, nil
	}
	return Event{Value: m, Time: mtime.MinTimestamp}, nil
}

// plain converts a YAML value to what encoding/json decodes with
// UseNumber (maps of strings, json.Number, RFC 3339 strings for times).
func plain(v any) any {
	b, err := json.Marshal(normalizeYAML(v))
	if err != nil {
		return v
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return v
	}
	return out
}

// normalizeYAML turns maps with non-string keys into string-keyed ones.
func normalizeYAML(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalizeYAML(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = normalizeYAML(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeYAML(e)
		}
		return out
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	}
	return v
}

func anyTime(v any) (mtime.Time, error) {
	switch x := v.(type) {
	case string:
		return mtime.Parse(x)
	case json.Number:
		n, err := x.Int64()
		if err != nil {
			return 0, fmt.Errorf("%s is not epoch milliseconds", x)
		}
		return mtime.Time(n), nil
	}
	return 0, fmt.Errorf("%v is neither an RFC 3339 time nor epoch milliseconds", v)
}

// receivedElement renders a captured row as the element a sink received:
// its key and value fields, window_start and window_end, and pane; a
// reject as {element, error: {step, reason, message}, source}.
func receivedElement(r *diff.Row) (map[string]any, error) {
	obj := func(s string) (map[string]any, error) {
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("reading a captured row: %w", err)
		}
		if m, ok := v.(map[string]any); ok {
			return m, nil
		}
		return map[string]any{"": v}, nil
	}
	if r.Reject != "" {
		v, err := obj(r.Value)
		if err != nil {
			return nil, err
		}
		src, err := obj(r.Key)
		if err != nil {
			return nil, err
		}
		return map[string]any{"element": v["element"], "source": src,
			"error": map[string]any{"reason": r.Reject, "step": v["step"], "message": v["message"]}}, nil
	}
	m, err := obj(r.Value)
	if err != nil {
		return nil, err
	}
	k, err := obj(r.Key)
	if err != nil {
		return nil, err
	}
	for f, v := range k {
		m[f] = v
	}
	if start, end, ok := strings.Cut(r.Window, "/"); ok {
		m["window_start"], m["window_end"] = start, end
	}
	m["pane"] = map[string]any{"index": json.Number(fmt.Sprint(r.PaneIndex)), "timing": r.Timing}
	return m, nil
}

// matchElements pairs expected with received elements one to one (an
// expected element matches a received one that agrees on every field it
// names) and describes what is left on either side.
func matchElements(sink string, want, got []map[string]any) []string {
	used := make([]bool, len(got))
	var fails []string
	for _, w := range want {
		found := false
		for i, g := range got {
			if !used[i] && subset(w, g) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			fails = append(fails, fmt.Sprintf("%s: expected %s, not received", sink, compact(w)))
		}
	}
	var extra []string
	for i, g := range got {
		if !used[i] {
			extra = append(extra, fmt.Sprintf("%s: received %s, not expected", sink, compact(g)))
		}
	}
	sort.Strings(extra)
	return append(fails, extra...)
}

// subset reports whether every field of want is in got with an equal
// value (nested mappings compared the same way).
func subset(want, got map[string]any) bool {
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			return false
		}
		if wm, ok := w.(map[string]any); ok {
			gm, ok := g.(map[string]any)
			if !ok || !subset(wm, gm) {
				return false
			}
			continue
		}
		if !sameValue(w, g) {
			return false
		}
	}
	return true
}

// sameValue compares scalars: numbers by value, times by instant, the
// rest by their JSON.
func sameValue(a, b any) bool {
	if x, ok := a.(json.Number); ok {
		if y, ok := b.(json.Number); ok {
			fx, ex := x.Float64()
			fy, ey := y.Float64()
			return ex == nil && ey == nil && math.Abs(fx-fy) <= 1e-9*math.Max(1, math.Abs(fx))
		}
	}
	if x, ok := a.(string); ok {
		if y, ok := b.(string); ok {
			if tx, err := time.Parse(time.RFC3339Nano, x); err == nil {
				if ty, err := time.Parse(time.RFC3339Nano, y); err == nil {
					return tx.Equal(ty)
				}
			}
			return x == y
		}
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

func compact(m map[string]any) string {
	s, err := diff.CanonicalJSON(m)
	if err != nil {
		return fmt.Sprint(m)
	}
	return s
}

// yamlValues turns the json.Numbers of a mocked row into the int64 or
// float64 its YAML wrote, so that the mocked input's schema is typed as a
// Create of the same elements is.
func yamlValues(v any) any {
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		if f, err := x.Float64(); err == nil {
			return f
		}
		return x.String()
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = yamlValues(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = yamlValues(e)
		}
		return out
	}
	return v
}
