package sqlquery

import (
	"context"
	"fmt"
	"testing"

	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// BenchmarkRowFn measures a per-row query (a filter and a projection):
// the cost of one element through SQLite.
func BenchmarkRowFn(b *testing.B) {
	q, err := Compile(context.Background(), "SELECT user, ms * 2 AS ms2 FROM PCOLLECTION WHERE ms % 2 = 0", []Table{{Name: DefaultTable, Schema: clicks}})
	if err != nil {
		b.Fatal(err)
	}
	fn := (&RowFn{Q: q}).Clone().(*RowFn)
	n := 0
	pc := contract.NewProcessContext(context.Background(), emitter(func(contract.Element) { n++ }), nil, nil, 0)
	rows := make([]*row.Row, 1024)
	for i := range rows {
		rows[i] = &row.Row{Schema: clicks, Values: []any{fmt.Sprintf("u%d", i%100), int64(i), true, nil, nil}}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := fn.Process(&pc, contract.Element{Value: rows[i%len(rows)]}); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "elements/s")
}

// BenchmarkAggregatorOutput measures a per-window query (GROUP BY over
// 10,000 rows of 100 keys, or 100 rows of 10 keys, as a streaming job's
// small windows have): loading the window's rows, running the query and
// reading its rows.
func BenchmarkAggregatorOutput(b *testing.B) {
	for _, size := range []struct{ rows, keys int }{{10_000, 100}, {100, 10}} {
		b.Run(fmt.Sprintf("rows=%d", size.rows), func(b *testing.B) { benchmarkAggregatorOutput(b, size.rows, size.keys) })
	}
}

func benchmarkAggregatorOutput(b *testing.B, rows, keys int) {
	q, err := Compile(context.Background(), "SELECT user, sum(ms) AS total, count(*) AS n FROM PCOLLECTION GROUP BY user", []Table{{Name: DefaultTable, Schema: clicks}})
	if err != nil {
		b.Fatal(err)
	}
	a := NewAggregator(q, nil)
	union := row.MustSchema(row.Field{Name: "tag", Type: row.Of(row.KindInt)}, row.Field{Name: "in0", Type: row.RowOf(clicks)})
	acc := a.NewAccumulator()
	for i := range rows {
		r := &row.Row{Schema: clicks, Values: []any{fmt.Sprintf("u%d", i%keys), int64(i), true, nil, nil}}
		acc = a.AddInput(acc, &contract.Element{Value: &row.Row{Schema: union, Values: []any{int64(0), r}}})
	}
	b.ReportAllocs()
	for b.Loop() {
		out := a.Output(nil, acc, window.Global, window.PaneInfo{}).(*row.Row)
		if rs, _ := out.Values[0].([]any); len(rs) != keys {
			b.Fatalf("%d rows, want %d: %v", len(rs), keys, out.Values[1])
		}
	}
	b.ReportMetric(float64(b.N)*float64(rows)/b.Elapsed().Seconds(), "rows/s")
}
