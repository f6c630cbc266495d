package graph_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/window"
)

func build(order []string) *graph.Pipeline {
	p := graph.New()
	steps := map[string]func(){
		"Read": func() {
			s := &graph.Step{Name: "Read", Kind: graph.KindSource, Source: &graph.IOIdentity{Kind: "file", Identity: "/data/in.jsonl", Bounded: true}}
			_ = p.AddStep(s)
			p.AddOutput(s, graph.MainTag, graph.Coder{URN: "weir:coder:row", Fields: []graph.Field{{Name: "region", Type: "string"}}}, window.DefaultStrategy(), true)
		},
		"Count": func() {
			ws := window.Strategy{Fn: window.FixedFn(5 * mtime.Minute)}
			ws.EnsureDefaults()
			kc := graph.Coder{URN: "weir:coder:row", Fields: []graph.Field{{Name: "region", Type: "string"}}}
			s := &graph.Step{Name: "Count", Kind: graph.KindCombinePerKey, Inputs: map[string]string{graph.MainTag: "Read.main"}, KeyCoder: &kc,
				Fn: &graph.FnRef{URN: "weir:yaml:Combine", Config: json.RawMessage(`{"z": 1, "a": {"y": 2, "b": 3}}`)}}
			_ = p.AddStep(s)
			p.AddOutput(s, graph.MainTag, graph.Coder{URN: "weir:coder:row"}, ws, true)
		},
	}
	for _, name := range order {
		steps[name]()
	}
	return p
}

func TestCanonicalIsStableAndRoundTrips(t *testing.T) {
	a, err := build([]string{"Read", "Count"}).Canonical()
	if err != nil {
		t.Fatal(err)
	}
	b, err := build([]string{"Count", "Read"}).Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("canonical JSON depends on construction order:\n%s\nvs\n%s", a, b)
	}
	p, err := graph.Parse(a)
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, c) {
		t.Fatalf("round trip changed the graph:\n%s\nvs\n%s", a, c)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, p.Step("Count").Fn.Config); err != nil {
		t.Fatal(err)
	}
	if got := compact.String(); got != `{"a":{"b":3,"y":2},"z":1}` {
		t.Errorf("config not canonical: %s", got)
	}
	for _, want := range []string{`"format_version": 1`, `"key_coder"`, `"identity": "/data/in.jsonl"`, `"size_ms": 300000`} {
		if !strings.Contains(string(a), want) {
			t.Errorf("canonical JSON lacks %s:\n%s", want, a)
		}
	}
}

func TestParseRejectsOtherVersionsAndUnknownFields(t *testing.T) {
	for _, in := range []string{`{"format_version": 2, "steps": [], "collections": []}`, `{"format_version": 1, "steps": [], "collections": [], "extra": 1}`, `{`} {
		if _, err := graph.Parse([]byte(in)); err == nil {
			t.Errorf("Parse(%s) succeeded, want error", in)
		}
	}
}

func TestStepNames(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"CountByUser", true}, {"Parse/Validate", true}, {"read events", true},
		{"", false}, {"Parse//Validate", false}, {"/Lead", false}, {"bad\nname", false},
	}
	for _, tc := range tests {
		if err := graph.ValidateName(tc.name); (err == nil) != tc.ok {
			t.Errorf("ValidateName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
	p := graph.New()
	if err := p.AddStep(&graph.Step{Name: "A", Kind: graph.KindParDo}); err != nil {
		t.Fatal(err)
	}
	if err := p.AddStep(&graph.Step{Name: "A", Kind: graph.KindParDo}); err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Errorf("duplicate name: err = %v", err)
	}
}

func TestValidateFindsUnknownInputsAndCycles(t *testing.T) {
	p := graph.New()
	s := &graph.Step{Name: "A", Kind: graph.KindParDo, Inputs: map[string]string{"main": "B.main"}}
	_ = p.AddStep(s)
	p.AddOutput(s, "main", graph.Coder{}, window.DefaultStrategy(), true)
	if err := p.Validate(); err == nil {
		t.Error("unknown input accepted")
	}
	b := &graph.Step{Name: "B", Kind: graph.KindParDo, Inputs: map[string]string{"main": "A.main"}}
	_ = p.AddStep(b)
	p.AddOutput(b, "main", graph.Coder{}, window.DefaultStrategy(), true)
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("cycle: err = %v", err)
	}
}
