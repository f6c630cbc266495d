package yamlpipe

import (
	"strings"
	"testing"

	"github.com/weir-dev/weir/runner/contract"
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
		if s := got.(*accumulator).slots; len(s) != 3 || strings.HasSuffix(v.name, "init") && s[2].n != 12 {
			b.Fatalf("%s: slots %+v", v.name, s)
		}
	}
}

// totalsHead is a pipeline whose Combine Totals keeps total (a sum) and n
// (a count) per k: the running version of the migration tests.
const totalsHead = "pipeline:\n  transforms:\n    - type: Create\n      name: O\n      config:\n        elements: [{k: 1, amount: 1}]\n" +
	"    - type: Combine\n      name: Totals\n      input: O\n      config:\n        group_by: [k]\n        combine:\n" +
	"          total: {value: amount, fn: sum}\n          n: {value: amount, fn: count}\n"

// totalsAggregator loads src and returns its Combine Totals' aggregator.
func totalsAggregator(tb testing.TB, src string) *aggregator {
	tb.Helper()
	p, err := Load("p.yaml", []byte(src), Options{BaseDir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	for name, code := range p.Program().Code {
		if a, ok := code.(*aggregator); ok && strings.HasPrefix(name, "Totals") {
			return a
		}
	}
	tb.Fatal("no aggregator for Totals")
	return nil
}

// storedTotals is what the running version (old, of totalsHead) stored
// for k 7: total 4200, n 12.
func storedTotals(tb testing.TB, old *aggregator) []byte {
	tb.Helper()
	stored := old.NewAccumulator().(*accumulator)
	stored.group = []any{int64(7)}
	stored.slots[0].i, stored.slots[0].set = 4200, true
	stored.slots[1].n = 12
	enc, err := old.EncodeState(contract.AccumulatorCell, stored)
	if err != nil {
		tb.Fatal(err)
	}
	return enc
}
