package weir_test

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/runner/contract"
)

type stats struct {
	Count        int64
	Min, Max     int64
	Mean         float64
	Sum          int64
	Distinct     int
	Flattened    int
	Odd, Even    int
	Composite    []string
	SingletonSum int64
}

// distinctFn is a user CombineFn with a map accumulator and a merge.
type distinctFn struct{}

func (distinctFn) CreateAccumulator() map[int64]bool { return map[int64]bool{} }
func (distinctFn) AddInput(a map[int64]bool, v int64) map[int64]bool {
	a[v] = true
	return a
}
func (distinctFn) MergeAccumulators(a, b map[int64]bool) map[int64]bool {
	for k := range b {
		a[k] = true
	}
	return a
}
func (distinctFn) ExtractOutput(a map[int64]bool) int { return len(a) }

func TestSDKTransforms(t *testing.T) {
	p := weir.NewPipeline()
	s := p.Root()
	nums := weir.Create(s, "Nums", []int64{5, 1, 4, 4, 9, 2})
	more := weir.Create(s, "More", []int64{100, 200})
	all := weir.Flatten(s, "All", []weir.PCollection[int64]{nums, more})
	keyed := weir.Map(s, "Key", nums, func(v int64) weir.KV[string, int64] { return weir.KV[string, int64]{Key: "k", Value: v} })
	count := weir.Collect(s, "CountOut", weir.CombinePerKey(s, "Count", keyed, weir.Count[int64]()))
	minv := weir.Collect(s, "MinOut", weir.CombinePerKey(s, "Min", keyed, weir.Min[int64]()))
	maxv := weir.Collect(s, "MaxOut", weir.CombinePerKey(s, "Max", keyed, weir.Max[int64]()))
	mean := weir.Collect(s, "MeanOut", weir.CombinePerKey(s, "Mean", keyed, weir.Mean[int64]()))
	distinct := weir.Collect(s, "DistinctOut", weir.CombinePerKey(s, "Distinct", keyed, weir.CombineFn[int64, map[int64]bool, int](distinctFn{})))
	flat := weir.Collect(s, "FlatOut", all)

	split := weir.ParDoN(s, "Split", all, func(c *weir.Context, v int64, out *weir.Emitters) error {
		if v%2 == 1 {
			return out.Emit("odd", v)
		}
		return out.Emit("even", v)
	}, []weir.OutputDecl{weir.Output[int64]("odd"), weir.Output[int64]("even")})
	odd := weir.Collect(s, "OddOut", weir.TaggedOutput[int64](split, "odd"))
	even := weir.Collect(s, "EvenOut", weir.TaggedOutput[int64](split, "even"))

	inner := s.Sub("Parse")
	parsed := weir.FlatMap(inner, "Explode", nums, func(v int64) []string { return []string{"x", "y"}[:v%2+1] })
	filtered := weir.Filter(inner, "Validate", parsed, func(v string) bool { return v == "x" })
	comp := weir.Collect(s, "CompOut", filtered)

	total := weir.CombinePerKey(s, "Total", weir.Map(s, "One", nums, func(v int64) weir.KV[int, int64] { return weir.KV[int, int64]{Key: 0, Value: v} }), weir.Sum[int64]())
	totalView := weir.AsSingleton("total", weir.Map(s, "TotalValue", total, func(kv weir.KV[int, int64]) int64 { return kv.Value }))
	withTotal := weir.Collect(s, "WithTotalOut", weir.ParDo(s, "WithTotal", more, func(c *weir.Context, v int64, emit func(int64)) error {
		tot, ok, err := totalView.Get(c)
		if err != nil || !ok {
			return weir.Fail("no_total", "singleton missing: %v", err)
		}
		emit(v + tot)
		return nil
	}, weir.WithSideInputs(totalView)))

	if _, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: 2}); err != nil {
		t.Fatal(err)
	}
	if got := count.Values()[0].Value; got != 6 {
		t.Errorf("count = %d", got)
	}
	if got := minv.Values()[0].Value; got != 1 {
		t.Errorf("min = %d", got)
	}
	if got := maxv.Values()[0].Value; got != 9 {
		t.Errorf("max = %d", got)
	}
	if got := mean.Values()[0].Value; got != 25.0/6 {
		t.Errorf("mean = %v", got)
	}
	if got := distinct.Values()[0].Value; got != 5 {
		t.Errorf("distinct = %d", got)
	}
	if got := len(flat.Values()); got != 8 {
		t.Errorf("flatten gave %d elements, want 8", got)
	}
	if o, e := len(odd.Values()), len(even.Values()); o != 3 || e != 5 {
		t.Errorf("odd/even = %d/%d, want 3/5", o, e)
	}
	if got := len(comp.Values()); got != 6 {
		t.Errorf("composite output %d, want 6", got)
	}
	wt := withTotal.Values()
	sort.Slice(wt, func(i, j int) bool { return wt[i] < wt[j] })
	if len(wt) != 2 || wt[0] != 125 || wt[1] != 225 {
		t.Errorf("singleton side input: %v", wt)
	}
	for _, name := range []string{"Parse/Explode", "Parse/Validate"} {
		if p.Graph().Step(name) == nil {
			t.Errorf("composite step %s missing from graph", name)
		}
	}
}

func TestSDKConstructionErrors(t *testing.T) {
	tests := []struct {
		name  string
		build func(s weir.Scope)
		want  string
	}{
		{"duplicate name", func(s weir.Scope) {
			a := weir.Create(s, "Same", []int{1})
			weir.Map(s, "Same", a, func(v int) int { return v })
		}, "duplicate step name"},
		{"empty name", func(s weir.Scope) { weir.Create(s, "", []int{1}) }, "empty"},
		{"bad window", func(s weir.Scope) {
			weir.WindowInto(s, "W", weir.Create(s, "A", []int{1}), weir.FixedWindows(0))
		}, "positive size"},
		{"key without canonical encoding", func(s weir.Scope) {
			kv := weir.Create(s, "A", []weir.KV[*int, int]{})
			weir.GroupByKey(s, "G", kv)
		}, "canonical encoding"},
		{"undeclared error output", func(s weir.Scope) {
			weir.ErrorOutput(weir.Create(s, "A", []int{1}))
		}, "declares no error output"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := weir.NewPipeline()
			tc.build(p.Root())
			err := p.Err()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
			if _, err := weir.Run(context.Background(), p, weir.RunOptions{}); err == nil {
				t.Fatal("Run accepted a pipeline with construction errors")
			}
		})
	}
}

func TestStoredCodersAreStepIdentity(t *testing.T) {
	p := weir.NewPipeline()
	s := p.Root()
	kvs := weir.Create(s, "In", []weir.KV[string, int64]{})
	weir.CombinePerKey(s, "Sum", kvs, weir.Sum[int64]())
	st := p.Graph().Step("Sum")
	if st.Kind != graph.KindCombinePerKey || st.KeyCoder == nil || st.StoredCoder == nil {
		t.Fatalf("step = %+v", st)
	}
	if st.KeyCoder.String() != "weir:coder:go:string" || st.StoredCoder.String() != "weir:coder:go:int64" {
		t.Errorf("coders = %s / %s", st.KeyCoder, st.StoredCoder)
	}
}

// TestCreateResumesFromPositions: a Create source re-split from the
// positions its splits reported continues each split where it stopped.
func TestCreateResumesFromPositions(t *testing.T) {
	p := weir.NewPipeline()
	vals := make([]int64, 100)
	for i := range vals {
		vals[i] = int64(i)
	}
	weir.Create(p.Root(), "Nums", vals)
	src := p.Program().Code["Nums"].(contract.ResumableSource)
	ctx := context.Background()
	splits, err := src.Split(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]contract.Element, 7)
	seen := map[int64]bool{}
	var positions [][]byte
	for _, sp := range splits {
		res, err := sp.Read(ctx, buf)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range buf[:res.N] {
			seen[e.Value.(int64)] = true
		}
		pos, err := sp.(contract.PositionedSplit).Position()
		if err != nil {
			t.Fatal(err)
		}
		positions = append(positions, pos)
	}
	resumed, err := src.Resume(ctx, positions)
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range resumed {
		for {
			res, err := sp.Read(ctx, buf)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range buf[:res.N] {
				v := e.Value.(int64)
				if seen[v] {
					t.Fatalf("element %d read twice", v)
				}
				seen[v] = true
			}
			if res.Done {
				break
			}
		}
	}
	if len(seen) != 100 {
		t.Errorf("read %d distinct elements, want 100", len(seen))
	}
}
