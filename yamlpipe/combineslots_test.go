package yamlpipe

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
	"github.com/weir-dev/weir/yamlpipe/combine"
)

func TestSlotOrder(t *testing.T) {
	tests := []struct {
		name string
		// prior and declared are "output=fn" (prior "" for a retired
		// slot); noStored drops what the prior slots store (unknown).
		prior, declared []string
		noStored        bool
		renamed         map[string]string
		want            []int
		unrelated       map[string][]string
	}{
		{name: "unchanged", prior: []string{"total=sum", "n=count"}, declared: []string{"total=sum", "n=count"}, want: []int{0, 1}},
		{name: "appended", prior: []string{"total=sum", "n=count"}, declared: []string{"total=sum", "n=count", "biggest=max"}, want: []int{0, 1, 2}},
		{name: "reordered", prior: []string{"total=sum", "n=count"}, declared: []string{"n=count", "total=sum"}, want: []int{1, 0}},
		{name: "inserted first", prior: []string{"total=sum", "n=count"}, declared: []string{"biggest=max", "total=sum", "n=count"}, want: []int{1, 2, 0}},
		{name: "removed from the middle", prior: []string{"total=sum", "n=count", "biggest=max"}, declared: []string{"total=sum", "biggest=max"}, want: []int{0, -1, 1}},
		{name: "removed from the end", prior: []string{"total=sum", "n=count", "biggest=max"}, declared: []string{"total=sum", "n=count"}, want: []int{0, 1}},
		{name: "retired slots at the end are dropped", prior: []string{"total=sum", "", "n=count"}, declared: []string{"total=sum"}, want: []int{0}},
		{name: "a retired slot stays retired", prior: []string{"", "n=count"}, declared: []string{"n=count", "total=sum"}, want: []int{-1, 0, 1}},
		{name: "declared rename moved", prior: []string{"total=sum", "n=count"}, declared: []string{"n=count", "amount_total=sum"},
			renamed: map[string]string{"amount_total": "total"}, want: []int{1, 0}},
		{name: "names swapped by renames", prior: []string{"a=sum", "b=sum"}, declared: []string{"a=sum", "b=sum"},
			renamed: map[string]string{"a": "b", "b": "a"}, want: []int{1, 0}},
		{name: "undeclared rename in place carries on", prior: []string{"total=sum", "n=count"}, declared: []string{"amount_total=sum", "n=count"}, want: []int{0, 1}},
		{name: "another aggregate in a removed one's place starts afresh", prior: []string{"total=sum", "n=count"}, declared: []string{"total=sum", "biggest=max"},
			want: []int{0, -1, 1}, unrelated: map[string][]string{"biggest": {"n"}}},
		{name: "in place without what the slots store", prior: []string{"total=sum", "n=count"}, declared: []string{"total=sum", "biggest=max"}, noStored: true, want: []int{0, 1}},
		{name: "a removed output is not paired with a moved one", prior: []string{"total=sum", "n=count"}, declared: []string{"n=count", "biggest=max"},
			want: []int{-1, 0, 1}, unrelated: map[string][]string{"biggest": {"total"}}},
		{name: "a new output of the removed one's fn may be its rename", prior: []string{"total=sum", "n=count"}, declared: []string{"n=count", "sum2=sum"},
			want: []int{-1, 0, 1}},
	}
	split := func(specs []string) ([]string, []graph.Field) {
		names, stored := make([]string, len(specs)), make([]graph.Field, len(specs))
		for i, sp := range specs {
			if sp == "" {
				stored[i] = graph.RetiredSlot()
				continue
			}
			n, fn, _ := strings.Cut(sp, "=")
			names[i], stored[i] = n, graph.Field{Name: fn, Type: "int"}
		}
		return names, stored
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prior, priorStored := split(tc.prior)
			declared, stored := split(tc.declared)
			if tc.noStored {
				priorStored = nil
			}
			got := slotOrder(prior, priorStored, declared, stored, tc.renamed)
			if !slices.Equal(got, tc.want) {
				t.Errorf("slotOrder = %v, want %v", got, tc.want)
			}
			if u := unrelatedOutputs(prior, priorStored, declared, stored, got); fmt.Sprint(u) != fmt.Sprint(tc.unrelated) {
				t.Errorf("unrelated outputs %v, want %v", u, tc.unrelated)
			}
		})
	}
}

// slotsPipeline is a Combine of region totals whose outputs are combine.
func slotsPipeline(combine string) string {
	return fmt.Sprintf(`pipeline:
  transforms:
    - type: Create
      name: In
      config:
        elements: [{region: "a", amount: 1}]
    - type: Combine
      name: Sums
      input: In
      windowing: {type: fixed, size: 1h}
      config:
        group_by: [region]
        combine: {%s}
    - type: WriteToJson
      name: Out
      input: Sums
      config: {path: out.jsonl}
`, combine)
}

// loadSlots loads slotsPipeline(outputs) as a job reading the state of
// prior (nil: none) and returns its graph and its Combine.
func loadSlots(t *testing.T, outputs string, prior *graph.Pipeline) (*graph.Pipeline, *combine.Aggregator) {
	t.Helper()
	dir := t.TempDir()
	slots, stored := compat.CombineSlotsByStep(prior, nil)
	p, err := Load("p.yaml", []byte(slotsPipeline(outputs)), Options{BaseDir: dir,
		PriorCombineSlots: slots, PriorCombineStored: stored})
	if err != nil {
		t.Fatal(err)
	}
	a, ok := p.Program().Code["Sums"].(*combine.Aggregator)
	if !ok {
		t.Fatalf("step Sums has code %T", p.Program().Code["Sums"])
	}
	return p.Graph(), a
}

// outputsOf returns the outputs of a's pane for acc as "name=value" in
// the order of a's output rows.
func outputsOf(a *combine.Aggregator, acc any) string {
	w := window.Window{Start: 0, End: 3600000}
	r := a.Output([]any{"a"}, acc, w, window.PaneInfo{}).(*row.Row)
	var parts []string
	for i, f := range r.Schema.Fields {
		switch f.Name {
		case "region", combine.FieldWindowStart, combine.FieldWindowEnd, combine.FieldPane:
			continue
		}
		parts = append(parts, fmt.Sprintf("%s=%v", f.Name, r.Values[i]))
	}
	return strings.Join(parts, " ")
}

// add folds rows of the given amounts into acc.
func add(t *testing.T, a *combine.Aggregator, acc any, amounts ...int64) any {
	t.Helper()
	schema, err := row.NewSchema(row.Field{Name: "region", Type: row.Of(row.KindString)}, row.Field{Name: "amount", Type: row.Of(row.KindInt)})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range amounts {
		r := row.New(schema)
		r.Values[0], r.Values[1] = "a", x
		if acc, err = a.AddInputErr(acc, &contract.Element{Value: r}); err != nil {
			t.Fatal(err)
		}
	}
	return acc
}

// A Combine's outputs may be reordered, inserted anywhere and removed
// from the middle by an update: the stored accumulators stay in their
// slots and carry on under their outputs, the rows follow the declared
// order, and the compatibility check passes with the right warnings.
// Without the running version's slots (nothing to keep them where they
// are) the same change is refused, as it was before slots were kept.
func TestCombineSlotsCarryStoredState(t *testing.T) {
	v1g, v1 := loadSlots(t, "total: {value: amount, fn: sum}, n: {value: amount, fn: count}", nil)
	stored, err := v1.EncodeState("", add(t, v1, v1.NewAccumulator(), 5, 7))
	if err != nil {
		t.Fatal(err)
	}

	// v2 inserts max before the others and moves total last.
	v2Outputs := "biggest: {value: amount, fn: max}, n: {value: amount, fn: count}, total: {value: amount, fn: sum}"
	if g, _ := loadSlots(t, v2Outputs, nil); compat.Check(v1g, g, compat.Options{}).Compatible {
		t.Fatal("without the running version's slots the reorder was accepted")
	}
	v2g, v2 := loadSlots(t, v2Outputs, v1g)
	rep := compat.Check(v1g, v2g, compat.Options{})
	if !rep.Compatible || !hasWarning(rep, errcode.CombineOutputsChanged) {
		t.Fatalf("v1 → v2: %+v", rep)
	}
	if got := slotsOf(v2g); !slices.Equal(got, []string{"total", "n", "biggest"}) {
		t.Errorf("v2's slots %q, want total, n, biggest", got)
	}
	acc, err := v2.DecodeState("", stored)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := outputsOf(v2, acc), "biggest=<nil> n=2 total=12"; got != want {
		t.Errorf("v2 after the restore: %s, want %s", got, want)
	}
	acc = add(t, v2, acc, 9)
	if got, want := outputsOf(v2, acc), "biggest=9 n=3 total=21"; got != want {
		t.Errorf("v2 after one more row: %s, want %s", got, want)
	}
	// An accumulator adopted in memory (an in-place update) is v1's.
	if got, want := outputsOf(v2, add(t, v2, add(t, v1, v1.NewAccumulator(), 5, 7), 9)), "biggest=9 n=3 total=21"; got != want {
		t.Errorf("v2 on v1's accumulator: %s, want %s", got, want)
	}
	stored2, err := v2.EncodeState("", acc)
	if err != nil {
		t.Fatal(err)
	}

	// v3 removes total (the first slot) and swaps the others.
	v3g, v3 := loadSlots(t, "n: {value: amount, fn: count}, biggest: {value: amount, fn: max}", v2g)
	rep = compat.Check(v2g, v3g, compat.Options{})
	if !rep.Compatible || !hasWarning(rep, errcode.CombineOutputsChanged) || !strings.Contains(fmt.Sprint(rep.Warnings), "total removed") {
		t.Fatalf("v2 → v3: %+v", rep)
	}
	if got := slotsOf(v3g); !slices.Equal(got, []string{"", "n", "biggest"}) {
		t.Errorf("v3's slots %q, want a retired one, n, biggest", got)
	}
	acc, err = v3.DecodeState("", stored2)
	if err != nil {
		t.Fatal(err)
	}
	acc = add(t, v3, acc, 10)
	if got, want := outputsOf(v3, acc), "n=4 biggest=10"; got != want {
		t.Errorf("v3: %s, want %s", got, want)
	}
	// A restart of v3 reads its own graph's slots: the same layout.
	v3again, v3b := loadSlots(t, "n: {value: amount, fn: count}, biggest: {value: amount, fn: max}", v3g)
	if rep := compat.Check(v3g, v3again, compat.Options{}); !rep.Compatible || len(rep.Warnings) != 0 {
		t.Errorf("v3 → v3: %+v", rep)
	}
	stored3, err := v3.EncodeState("", acc)
	if err != nil {
		t.Fatal(err)
	}
	if acc, err = v3b.DecodeState("", stored3); err != nil {
		t.Fatal(err)
	}
	if got, want := outputsOf(v3b, acc), "n=4 biggest=10"; got != want {
		t.Errorf("v3 restarted: %s, want %s", got, want)
	}
	// Merging accumulators skips the retired slot and merges the others.
	if got, want := outputsOf(v3b, v3b.MergeAccumulators(acc, add(t, v3b, v3b.NewAccumulator(), 11))), "n=5 biggest=11"; got != want {
		t.Errorf("v3 merged: %s, want %s", got, want)
	}
}

// hasWarning reports whether rep warns with code.
func hasWarning(rep compat.Report, code errcode.Code) bool {
	for _, w := range rep.Warnings {
		if w.Code == code {
			return true
		}
	}
	return false
}

// slotsOf returns the outputs of g's Combine Sums in slot order.
func slotsOf(g *graph.Pipeline) []string {
	outputs, _ := compat.CombineSlotsByStep(g, nil)
	return outputs["Sums"]
}

// TestInitOfAnOutputInsertedFirst: an output inserted before the others
// (its slot appended after theirs) takes its init from the stored ones,
// in CEL and in Python alike.
func TestInitOfAnOutputInsertedFirst(t *testing.T) {
	v1g, v1 := loadSlots(t, "total: {value: amount, fn: sum}, n: {value: amount, fn: count}", nil)
	stored, err := v1.EncodeState("", add(t, v1, v1.NewAccumulator(), 5, 7))
	if err != nil {
		t.Fatal(err)
	}
	for _, init := range []string{`{init: "n * 10"}`, `{init: "n * 10", language: python}`} {
		src := slotsPipeline("twice: {value: amount, fn: count}, total: {value: amount, fn: sum}, n: {value: amount, fn: count}")
		src = strings.Replace(src, "      config:\n        group_by: [region]\n",
			"      migrations: {accumulators: {twice: "+init+"}}\n      config:\n        group_by: [region]\n", 1)
		slots, st := compat.CombineSlotsByStep(v1g, nil)
		p, err := Load("p.yaml", []byte(src), Options{BaseDir: t.TempDir(), PriorCombineSlots: slots, PriorCombineStored: st})
		if err != nil {
			t.Fatal(err)
		}
		v2 := p.Program().Code["Sums"].(*combine.Aggregator)
		acc, err := v2.DecodeState("", stored)
		if err != nil {
			t.Fatalf("%s: %v", init, err)
		}
		if got, want := outputsOf(v2, acc), "twice=20 total=12 n=2"; got != want {
			t.Errorf("%s: after the restore %s, want %s", init, got, want)
		}
	}
}
