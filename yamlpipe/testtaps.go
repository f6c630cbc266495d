package yamlpipe

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// TestTaps rewires a pipeline for one test case of its tests: section
// (`weir test`, package sandbox), as Beam's yaml_testing does for
// mock_inputs and expected_outputs: an input of a transform is fed from
// mocked rows instead of its producer, and an output of any transform
// (not only what a sink receives) is captured. The transforms the
// test's checks do not need are then not built at all, so a mocked
// input cuts its producers (and their real sources) off.
type TestTaps struct {
	// MockInputs replaces inputs of transforms, keyed by TRANSFORM (its
	// one input, or every input of a multi-input transform) or
	// TRANSFORM.INPUT (one named input, as in input: {INPUT: ...}): the
	// input reads a Create step named TestInputStep(key) whose elements
	// are the rows (their fields make its schema), and which the test
	// feeds.
	MockInputs map[string][]map[string]any
	// ExpectOutputs adds, per TRANSFORM or TRANSFORM.OUTPUT (an error
	// output, a tagged output), a sink step named TestOutputStep(entry)
	// that reads it.
	ExpectOutputs []string
	// Keep names the sink steps the test checks (its expected_inputs).
	// With MockInputs or ExpectOutputs set, only the transforms that Keep
	// and the ExpectOutputs' sinks read from, directly or not, are built.
	Keep []string
}

// TestInputStep is the name of the step that feeds mocked input key (a
// TestTaps.MockInputs key).
func TestInputStep(key string) string { return "weir-test-input-" + strings.ReplaceAll(key, ".", "-") }

// TestOutputStep is the name of the sink step that captures output ref
// (a TestTaps.ExpectOutputs entry).
func TestOutputStep(ref string) string {
	return "weir-test-output-" + strings.ReplaceAll(ref, ".", "-")
}

// applyTestTaps applies Options.TestTaps to the resolved transforms.
func (l *loader) applyTestTaps() error {
	tt := l.opts.TestTaps
	if tt == nil || (len(tt.MockInputs) == 0 && len(tt.ExpectOutputs) == 0) {
		return nil
	}
	keys := make([]string, 0, len(tt.MockInputs))
	for k := range tt.MockInputs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		if err := l.mockInput(key, tt.MockInputs[key]); err != nil {
			return err
		}
	}
	keep := map[string]bool{}
	for _, k := range tt.Keep {
		t := l.byName[l.unalias(k)]
		if t == nil || !t.def.sink {
			return fmt.Errorf("%s: expected_inputs names %q, which is not a sink step of the pipeline (its sinks: %s)", l.file, k, strings.Join(l.sinkNames(), ", "))
		}
		keep[t.name] = true
	}
	for _, ref := range tt.ExpectOutputs {
		name := TestOutputStep(ref)
		t, err := l.syntheticTransform(name, map[string]any{"type": "WriteToJson", "name": name, "input": ref,
			"config": map[string]any{"path": name + ".jsonl"}})
		if err != nil {
			return err
		}
		if err := l.resolveRef(&t.inputs[0]); err != nil {
			return fmt.Errorf("%s: expected_outputs %q: %w", l.file, ref, err)
		}
		keep[name] = true
	}
	// Only what the checks need: walk up from the kept sinks.
	need := map[*transformSpec]bool{}
	var visit func(t *transformSpec)
	visit = func(t *transformSpec) {
		if need[t] {
			return
		}
		need[t] = true
		for _, in := range t.inputs {
			visit(in.from)
		}
		for _, sd := range t.sides {
			visit(sd.from)
		}
	}
	for _, t := range l.specs {
		if keep[t.name] {
			visit(t)
		}
	}
	l.specs = slices.DeleteFunc(l.specs, func(t *transformSpec) bool { return !need[t] })
	// A kept transform's error output that only pruned steps read goes
	// nowhere in the test: it is captured as the dead letters are.
	return nil
}

// mockInput points the input(s) key names at a new Create of rows.
func (l *loader) mockInput(key string, rows []map[string]any) error {
	tname, input, named := key, "", false
	t := l.byName[l.unalias(tname)]
	if t == nil {
		if i := strings.LastIndexByte(key, '.'); i > 0 {
			tname, input, named = key[:i], key[i+1:], true
			t = l.byName[l.unalias(tname)]
		}
	}
	if t == nil {
		return fmt.Errorf("%s: mock_inputs names %q, which is not a transform of the pipeline (its transforms: %s)", l.file, key, strings.Join(l.names(), ", "))
	}
	if len(t.inputs) == 0 {
		return fmt.Errorf("%s: mock_inputs names %q, a source: it has no input to mock (mock its output with mock_outputs)", l.file, key)
	}
	if len(rows) == 0 {
		return fmt.Errorf("%s: mock_inputs %q has no elements: give at least one (their fields make the input's schema)", l.file, key)
	}
	at := []int{}
	if named {
		if t.inputNode == nil || t.inputNode.Kind != yamlnode.Map {
			return fmt.Errorf("%s: mock_inputs names input %q of %q, whose input is not a mapping of named inputs: mock %q", l.file, input, t.name, t.name)
		}
		for i, k := range t.inputNode.Keys {
			if k.Text == input {
				at = append(at, i)
			}
		}
		if len(at) == 0 {
			var names []string
			for _, k := range t.inputNode.Keys {
				names = append(names, k.Text)
			}
			return fmt.Errorf("%s: mock_inputs names input %q of %q, which has inputs %s", l.file, input, t.name, strings.Join(names, ", "))
		}
	} else {
		for i := range t.inputs {
			at = append(at, i)
		}
	}
	name := TestInputStep(key)
	elems := make([]any, len(rows))
	for i, r := range rows {
		elems[i] = r
	}
	src, err := l.syntheticTransform(name, map[string]any{"type": "Create", "name": name, "config": map[string]any{"elements": elems}})
	if err != nil {
		return err
	}
	for _, i := range at {
		t.inputs[i].text, t.inputs[i].from, t.inputs[i].tag = name, src, ""
	}
	return nil
}

// syntheticTransform parses spec as a transform of the pipeline named
// name and adds it.
func (l *loader) syntheticTransform(name string, spec map[string]any) (*transformSpec, error) {
	if _, dup := l.byName[name]; dup {
		return nil, fmt.Errorf("%s: the pipeline already has a transform %q", l.file, name)
	}
	src, err := yaml.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("%s: test step %s: %w", l.file, name, err)
	}
	n, err := parseYAML(l.file+" (test step "+name+")", src)
	if err != nil {
		return nil, err
	}
	t, err := l.parseTransform(n, false)
	if err != nil {
		return nil, err
	}
	t.name = name
	l.specs = append(l.specs, t)
	l.byName[name] = t
	return t, nil
}

// sinkNames returns the names of the sink transforms, sorted.
func (l *loader) sinkNames() []string {
	var out []string
	for _, t := range l.specs {
		if t.def.sink {
			out = append(out, t.name)
		}
	}
	sort.Strings(out)
	return out
}
