package celexpr

import (
	"reflect"
	"testing"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
)

// TestSelectionCopiesTheValue: an expression that only selects a scalar
// field, top-level or nested (ts, bid.dateTime, bid.extra), gives the
// field's value as it is, without converting the row to CEL, and the same
// value CEL gives; over a null nested row it fails as CEL does.
func TestSelectionCopiesTheValue(t *testing.T) {
	inner := row.MustSchema(
		row.Field{Name: "when", Type: row.Of(row.KindTimestamp)},
		row.Field{Name: "name", Type: row.Of(row.KindString)},
		row.Field{Name: "n", Type: row.Of(row.KindInt)},
		row.Field{Name: "ok", Type: row.Of(row.KindBool)},
		row.Field{Name: "f", Type: row.Of(row.KindFloat)},
	)
	schema := row.MustSchema(
		row.Field{Name: "ts", Type: row.Of(row.KindTimestamp)},
		row.Field{Name: "bid", Type: row.RowOf(inner)},
		row.Field{Name: "tags", Type: row.ListOf(row.Of(row.KindString))},
	)
	when := mtime.Time(1436918395123)
	full := &row.Row{Schema: schema, Values: []any{when + 7, &row.Row{Schema: inner, Values: []any{when, "padding", int64(3), true, 2.5}}, []any{"a"}}}
	// An equal nested schema that is another value (as a decoded row has).
	otherInner := row.MustSchema(inner.Fields...)
	decoded := &row.Row{Schema: schema, Values: []any{when, &row.Row{Schema: otherInner, Values: []any{when + 1, "x", int64(4), false, 0.5}}, nil}}
	null := &row.Row{Schema: schema, Values: []any{when, nil, nil}}
	sc, err := NewScope(schema, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		expr string
		sel  bool
	}{
		{"ts", true}, {"bid.when", true}, {"bid.name", true}, {"bid.n", true}, {"bid.ok", true}, {"bid.f", true},
		{"tags", false}, {"bid", false}, {"bid.when + duration('1s')", false},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			p, typ, err := sc.Compile(tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			if (p.sel != nil) != tc.sel {
				t.Fatalf("copied selection %t, want %t", p.sel != nil, tc.sel)
			}
			rt := RowType(typ)
			act, slow := NewActivation(sc), NewActivation(sc)
			for _, r := range []*row.Row{full, decoded, null} {
				act.Reset(r, nil)
				slow.Reset(r, nil)
				got, err := act.EvalValue(p, rt)
				want, werr := slow.EvalValue(p.WithoutFastPath(), rt)
				if (err != nil) != (werr != nil) {
					t.Fatalf("error %v, CEL's %v", err, werr)
				}
				if err == nil && !reflect.DeepEqual(got, want) {
					t.Errorf("got %#v, CEL %#v", got, want)
				}
			}
		})
	}
}
