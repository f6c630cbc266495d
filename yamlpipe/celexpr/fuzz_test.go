package celexpr

import (
	"math"
	"testing"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
)

// fuzzSchema is the fixed schema FuzzCEL compiles expressions against.
func fuzzSchema() *row.Schema {
	inner := row.MustSchema(row.Field{Name: "x", Type: row.Of(row.KindInt)})
	return row.MustSchema(
		row.Field{Name: "region", Type: row.Of(row.KindString)},
		row.Field{Name: "amount", Type: row.Of(row.KindInt)},
		row.Field{Name: "price", Type: row.Of(row.KindFloat)},
		row.Field{Name: "ok", Type: row.Of(row.KindBool)},
		row.Field{Name: "ts", Type: row.Of(row.KindTimestamp)},
		row.Field{Name: "tags", Type: row.ListOf(row.Of(row.KindString))},
		row.Field{Name: "nested", Type: row.RowOf(inner)},
		row.Field{Name: "extra", Type: row.Of(row.KindAny)},
	)
}

// FuzzCEL checks that compiling and evaluating arbitrary expressions over a
// fixed schema, and converting the results to row values, never panics.
// Seeds: testdata/fuzz/FuzzCEL.
func FuzzCEL(f *testing.F) {
	for _, s := range []string{"amount > 0", "region == 'NORTH'", "int('abc')", "element.amount + 1",
		"ts + duration('1h')", "tags.exists(t, t == 'a')", "nested.x * 2", "extra.y", "price / 0.0", "amount / 0",
		// fieldCompareInt: every comparison of a field with an int literal.
		"amount == 250", "amount != 250", "amount < 251", "amount <= 250", "amount > -1", "amount >= 251",
		"amount >= -9223372036854775808", "price >= 1", "region == 1"} {
		f.Add(s)
	}
	schema := fuzzSchema()
	nested := &row.Row{Schema: schema.Fields[6].Type.Row, Values: []any{int64(3)}}
	rows := []*row.Row{
		{Schema: schema, Values: []any{"NORTH", int64(250), 1.5, true, mtime.Time(1772323200000), []any{"a", "b"}, nested, map[string]any{"y": int64(1)}}},
		{Schema: schema, Values: make([]any, len(schema.Fields))},
	}
	sc, err := NewScope(schema, []Side{{Name: "known", Schema: schema, KeyField: 0}}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		p, typ, err := sc.Compile(expr)
		if err != nil {
			return
		}
		rt := RowType(typ)
		act := &Activation{sc: sc}
		for _, r := range rows {
			act.Reset(r, nil)
			v, _, err := p.prg.Eval(act)
			var want any
			if err == nil {
				want, err = FromCEL(v, rt)
				_ = row.AppendJSONValue(nil, want)
			}
			// The native fast path, when it answers, must agree with CEL.
			if p.native == nil {
				continue
			}
			nv, ok := p.native(r.Values)
			if !ok {
				continue
			}
			got := nv.native()
			if err != nil {
				t.Fatalf("%q: fast path gave %v, CEL failed: %v", expr, got, err)
			}
			if gf, ok := got.(float64); ok && math.IsNaN(gf) {
				if wf, ok := want.(float64); ok && math.IsNaN(wf) {
					continue
				}
			}
			if got != want {
				t.Fatalf("%q: fast path gave %#v, CEL %#v", expr, got, want)
			}
		}
	})
}
