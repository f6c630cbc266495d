package yamlpipe

import (
	"strings"
	"testing"

	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
	"github.com/weir-dev/weir/yamlpipe/combine"
)

// BenchmarkCombineMigration measures what a declared migration costs per
// key and window: reading back an accumulator the running version stored
// (two outputs) into the next version (three), without and with a CEL
// init for the appended output. Per-key figures: 1e9 / ns/op keys per
// second on one core.
//
//	go test -run XXX -bench CombineMigration ./yamlpipe
func BenchmarkCombineMigration(b *testing.B) {
	enc := storedTotals(b, totalsAggregator(b, totalsHead))
	appended := totalsHead + "          n_big: {value: amount, fn: count}\n"
	for _, v := range []struct{ name, src string }{
		{"appended", appended},
		{"appended-init", appended + "      migrations:\n        accumulators:\n          n_big: {init: \"total > 1000 ? n : 0\"}\n"},
	} {
		a := totalsAggregator(b, v.src)
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.DecodeState(contract.AccumulatorCell, enc); err != nil {
					b.Fatal(err)
				}
			}
		})
		got, _ := a.DecodeState(contract.AccumulatorCell, enc)
		if out := totalsOut(a, 7, got); out[0] != int64(4200) || strings.HasSuffix(v.name, "init") && out[2] != int64(12) {
			b.Fatalf("%s: total, n, n_big %v", v.name, out)
		}
	}
}

// totalsHead is a pipeline whose Combine Totals keeps total (a sum) and n
// (a count) per k: the running version of the migration tests.
const totalsHead = "pipeline:\n  transforms:\n    - type: Create\n      name: O\n      config:\n        elements: [{k: 1, amount: 1}]\n" +
	"    - type: Combine\n      name: Totals\n      input: O\n      config:\n        group_by: [k]\n        combine:\n" +
	"          total: {value: amount, fn: sum}\n          n: {value: amount, fn: count}\n"

// totalsAggregator loads src and returns its Combine Totals' aggregator.
func totalsAggregator(tb testing.TB, src string) *combine.Aggregator {
	tb.Helper()
	p, err := Load("p.yaml", []byte(src), Options{BaseDir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	for name, code := range p.Program().Code {
		if a, ok := code.(*combine.Aggregator); ok && strings.HasPrefix(name, "Totals") {
			return a
		}
	}
	tb.Fatal("no aggregator for Totals")
	return nil
}

// storedTotals is what the running version (old, of totalsHead) stored
// for k 7: total 4200, n 12.
func storedTotals(tb testing.TB, old *combine.Aggregator) []byte {
	tb.Helper()
	enc, err := old.EncodeState(contract.AccumulatorCell, totalsAcc(tb, old, 7, 12, 350))
	if err != nil {
		tb.Fatal(err)
	}
	return enc
}

// totalsAcc is an accumulator of a (of totalsHead or a later version)
// that added n elements of key k and amount amount.
func totalsAcc(tb testing.TB, a *combine.Aggregator, k int64, n int, amount int64) any {
	tb.Helper()
	in := row.MustSchema(row.Field{Name: "k", Type: row.Of(row.KindInt)}, row.Field{Name: "amount", Type: row.Of(row.KindInt)})
	acc := a.NewAccumulator()
	for range n {
		var err error
		if acc, err = a.AddInputErr(acc, &contract.Element{Value: &row.Row{Schema: in, Values: []any{k, amount}}}); err != nil {
			tb.Fatal(err)
		}
	}
	return acc
}

// totalsOut is the output of next's accumulator acc for key k: its
// total, n and n_big.
func totalsOut(next *combine.Aggregator, k int64, acc any) [3]any {
	r := next.Output(k, acc, window.Global, window.NoFiring).(*row.Row)
	var out [3]any
	for i, f := range []string{"total", "n", "n_big"} {
		if j := next.Out.Index(f); j >= 0 {
			out[i] = r.Values[j]
		}
	}
	return out
}
