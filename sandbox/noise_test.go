package sandbox

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/diff"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// unusedSource is the source a pipeline is built with; the sandbox
// replaces it by the trace.
type unusedSource struct{}

func (unusedSource) Split(context.Context, int) ([]contract.SourceSplit, error) {
	panic("the sandbox must replace a recorded source")
}

type unusedSink struct{}

func (unusedSink) Write(context.Context, int, []contract.Element) error {
	panic("the sandbox must replace every sink")
}
func (unusedSink) Close(context.Context) error { return nil }

// TestNoiseOfAStepThatIsNotAFunctionOfItsInput rehearses a pipeline whose
// enrichment asks an external service (here a counter: each call answers
// something else) for NORTH's rate: the old pipeline disagrees with itself
// on NORTH, which is reported as noise and not as a difference, while the
// real change (WEST's rate 7 becomes 8) is the one difference.
func TestNoiseOfAStepThatIsNotAFunctionOfItsInput(t *testing.T) {
	in := row.MustSchema(row.Field{Name: "region", Type: row.Of(row.KindString)}, row.Field{Name: "amount", Type: row.Of(row.KindInt)})
	out := row.MustSchema(row.Field{Name: "region", Type: row.Of(row.KindString)}, row.Field{Name: "amount", Type: row.Of(row.KindInt)},
		row.Field{Name: "rate", Type: row.Of(row.KindInt)})
	var lookups atomic.Int64
	build := func(westRate int64) *weir.Pipeline {
		p := weir.NewPipeline()
		events := weir.Read[*row.Row](p.Root(), "ReadEvents", unusedSource{}, false, weir.WithCoder(in.Coder()),
			weir.WithSourceIdentity("pubsub", "topic/events", false))
		enriched := weir.Map(p.Root(), "Enrich", events, func(r *row.Row) *row.Row {
			region, _ := r.Get("region")
			rate := westRate
			if region == "NORTH" {
				rate = lookups.Add(1)
			}
			return &row.Row{Schema: out, Values: []any{r.Values[0], r.Values[1], rate}}
		}, weir.WithCoder(out.Coder()))
		weir.Write(p.Root(), "WriteRates", enriched, unusedSink{}, weir.WithURN("weir:yaml:WriteToSql"),
			weir.WithConfig(map[string]any{"table": "rates", "key": []any{"region"}}))
		return p
	}
	trace, err := ReadEvents(strings.NewReader(`{"element": {"region": "NORTH", "amount": 1}, "event_time": 0}
{"element": {"region": "WEST", "amount": 2}, "event_time": 0}
`), "events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var sides []diff.Side
	for _, westRate := range []int64{7, 7, 8} { // old, old again, new
		res, err := RunPipeline(context.Background(), build(westRate), trace, Options{TempDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { res.Close() })
		s, err := res.Side()
		if err != nil {
			t.Fatal(err)
		}
		sides = append(sides, s)
	}
	rep, err := diff.Run(sides[0], sides[1], sides[2], diff.Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := rep.Output("WriteRates")
	if o == nil || o.Mode != diff.ModeUpsert {
		t.Fatalf("output WriteRates: %+v", o)
	}
	if rep.TotalNoise != 1 || len(rep.Noise) != 1 || rep.Noise[0].Key != `{"region":"NORTH"}` {
		t.Errorf("noise %d: %+v; want NORTH's rate", rep.TotalNoise, rep.Noise)
	}
	if rep.Total != 1 || len(rep.Differences) != 1 || rep.Differences[0].Key != `{"region":"WEST"}` || rep.Differences[0].Class != diff.ValueChanged {
		t.Errorf("%d differences: %+v; want WEST's value change only", rep.Total, rep.Differences)
	}
	if o.NoiseDifferences != 1 {
		t.Errorf("noise differences %d, want NORTH's old-against-new difference counted as noise", o.NoiseDifferences)
	}
}
