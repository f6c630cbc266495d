package celexpr

import (
	"testing"

	"github.com/weir-dev/weir/row"
)

// TestNestedFieldSelection: a selection of a nested row's field has the
// field's declared type (so that a Combine over `price: bid.price` can take
// its max), and the fast path reads it without converting the nested row,
// answering as CEL does, with CEL deciding when the nested row is null.
func TestNestedFieldSelection(t *testing.T) {
	schema := fuzzSchema()
	nested := &row.Row{Schema: schema.Fields[6].Type.Row, Values: []any{int64(3)}}
	full := &row.Row{Schema: schema, Values: make([]any, len(schema.Fields))}
	full.Values[6] = nested
	empty := &row.Row{Schema: schema, Values: make([]any, len(schema.Fields))}
	// An equal nested schema that is another value (as a decoded row has).
	other := &row.Row{Schema: row.MustSchema(row.Field{Name: "x", Type: row.Of(row.KindInt)}), Values: []any{int64(5)}}
	decoded := &row.Row{Schema: schema, Values: make([]any, len(schema.Fields))}
	decoded.Values[6] = other
	sc, err := NewScope(schema, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		expr     string
		typ      string
		native   bool
		full     any
		decoded  any
		emptyErr bool
	}{
		{expr: "nested.x", typ: "int", native: true, full: int64(3), decoded: int64(5), emptyErr: true},
		{expr: "nested.x > 2", typ: "bool", native: true, full: true, decoded: true, emptyErr: true},
		{expr: "nested.x * 89 / 100", typ: "int", native: true, full: int64(2), decoded: int64(4), emptyErr: true},
		{expr: "int(nested.x) + 1", typ: "int", native: false, full: int64(4), decoded: int64(6), emptyErr: true},
		{expr: "extra.y", typ: "any", native: false},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			p, typ, err := sc.Compile(tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			if got := RowType(typ).String(); got != tc.typ {
				t.Errorf("type %s, want %s", got, tc.typ)
			}
			if (p.native != nil) != tc.native {
				t.Errorf("fast path %t, want %t", p.native != nil, tc.native)
			}
			if tc.full == nil {
				return
			}
			act := NewActivation(sc)
			for _, c := range []struct {
				r    *row.Row
				want any
			}{{full, tc.full}, {decoded, tc.decoded}} {
				act.Reset(c.r, nil)
				got, err := act.EvalValue(p, RowType(typ))
				if err != nil || got != c.want {
					t.Errorf("got %#v, %v; want %#v", got, err, c.want)
				}
				if p.native != nil {
					if v, ok := p.native(c.r.Values); !ok || v.native() != c.want {
						t.Errorf("fast path gave %#v (ok %t), want %#v", v.native(), ok, c.want)
					}
				}
			}
			act.Reset(empty, nil)
			if _, err := act.EvalValue(p, RowType(typ)); (err != nil) != tc.emptyErr {
				t.Errorf("over a null nested row: error %v, want an error: %t", err, tc.emptyErr)
			}
		})
	}
}
