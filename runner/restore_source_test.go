package runner

import (
	"testing"

	"github.com/weir-dev/weir/graph"
)

// TestFeedsKeyedState: a source whose elements reach a keyed step through
// main inputs (directly or through stateless steps) feeds keyed state, so a
// restored execution may not read it again from its beginning; one read
// only as a side input, or only by sinks, does not.
func TestFeedsKeyedState(t *testing.T) {
	main := func(c string) map[string]string { return map[string]string{graph.MainTag: c} }
	g := &graph.Pipeline{Steps: []*graph.Step{
		{Name: "Orders", Kind: graph.KindSource, Outputs: main("orders")},
		{Name: "Parse", Kind: graph.KindParDo, Inputs: main("orders"), Outputs: main("parsed"),
			SideInputs: []graph.SideInput{{Name: "regions", Collection: "regions", View: "map"}}},
		{Name: "Totals", Kind: graph.KindCombinePerKey, Inputs: main("parsed"), Outputs: main("totals")},
		{Name: "Write", Kind: graph.KindSink, Inputs: main("totals")},
		{Name: "Regions", Kind: graph.KindSource, Outputs: main("regions")},
		{Name: "Audit", Kind: graph.KindSource, Outputs: main("audit")},
		{Name: "Clean", Kind: graph.KindParDo, Inputs: main("audit"), Outputs: main("clean")},
		{Name: "WriteAudit", Kind: graph.KindSink, Inputs: main("clean")},
	}}
	for _, tc := range []struct {
		source string
		want   bool
	}{
		{"Orders", true},   // through Parse to Totals
		{"Regions", false}, // a side input of Parse only
		{"Audit", false},   // stateless steps and a sink only
	} {
		var src *graph.Step
		for _, s := range g.Steps {
			if s.Name == tc.source {
				src = s
			}
		}
		if got := feedsKeyedState(g, src); got != tc.want {
			t.Errorf("feedsKeyedState(%s) = %v, want %v", tc.source, got, tc.want)
		}
	}
}
