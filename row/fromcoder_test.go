package row

import "testing"

func TestSchemaFromCoderRoundTrips(t *testing.T) {
	schemas := []*Schema{
		MustSchema(Field{Name: "region", Type: Of(KindString)}, Field{Name: "amount", Type: Of(KindInt)}, Field{Name: "ts", Type: Of(KindTimestamp)}),
		RejectSchema(),
		MustSchema(Field{Name: "tags", Type: ListOf(Of(KindString))}, Field{Name: "pane", Type: RowOf(PaneSchema())},
			Field{Name: "nested", Type: ListOf(RowOf(MustSchema(Field{Name: "a", Type: Of(KindFloat)}, Field{Name: "b", Type: Of(KindAny)})))}),
	}
	for _, s := range schemas {
		got, err := SchemaFromCoder(s.Coder())
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if !got.Equal(s) {
			t.Errorf("round trip of %s gave %s", s, got)
		}
	}
	bad := MustSchema(Field{Name: "a", Type: Of(KindInt)}).Coder()
	bad.Fields[0].Type = "row{x}"
	if _, err := SchemaFromCoder(bad); err == nil {
		t.Error("a row type with a field without a type was accepted")
	}
	bad.URN = "weir:coder:kv"
	if _, err := SchemaFromCoder(bad); err == nil {
		t.Error("a coder that is not a row coder was accepted")
	}
}
