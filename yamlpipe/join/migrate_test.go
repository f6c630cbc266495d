package join

import (
	"fmt"
	"testing"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
)

// TestJoinConformsOldRows: a Join's rows stored with window and pane fields
// (before they became element metadata) are read into the input's schema
// by field name, from the store (DecodeState of what the old rows encoded
// to) and in memory (conformAcc of adopted rows); rows of the input's
// schema are kept as they are.
func TestJoinConformsOldRows(t *testing.T) {
	oldS := row.MustSchema(
		row.Field{Name: "user", Type: row.Of(row.KindString)},
		row.Field{Name: "total", Type: row.Of(row.KindInt)},
		row.Field{Name: "window_start", Type: row.Of(row.KindTimestamp)},
		row.Field{Name: "window_end", Type: row.Of(row.KindTimestamp)},
		row.Field{Name: "pane", Type: row.RowOf(row.PaneSchema())},
		row.Field{Name: "big", Type: row.Of(row.KindBool)},
	)
	newS := row.MustSchema(
		row.Field{Name: "user", Type: row.Of(row.KindString)},
		row.Field{Name: "total", Type: row.Of(row.KindInt)},
		row.Field{Name: "big", Type: row.Of(row.KindBool)},
	)
	pane := &row.Row{Schema: row.PaneSchema(), Values: []any{int64(0), "ON_TIME", true, true}}
	old := &row.Row{Schema: oldS, Values: []any{"alice", int64(12), mtime.Time(0), mtime.Time(60000), pane, true}}
	want := "alice 12 true"
	show := func(r *row.Row) string { return fmt.Sprintf("%v %v %v", r.Values[0], r.Values[1], r.Values[2]) }

	oldJ := &Aggregator{Ins: []*row.Schema{oldS}}
	b, err := oldJ.EncodeState("acc", &Acc{Rows: [][]*row.Row{{old}}})
	if err != nil {
		t.Fatal(err)
	}
	j := &Aggregator{Ins: []*row.Schema{newS}}
	v, err := j.DecodeState("acc", b)
	if err != nil {
		t.Fatal(err)
	}
	if r := v.(*Acc).Rows[0][0]; r.Schema != newS || show(r) != want {
		t.Errorf("from the store: %s (%s), want %s (%s)", show(r), r.Schema, want, newS)
	}

	acc := &Acc{Rows: [][]*row.Row{{old}}}
	j.conformAcc(acc)
	if r := acc.Rows[0][0]; r.Schema != newS || show(r) != want {
		t.Errorf("in memory: %s (%s), want %s (%s)", show(r), r.Schema, want, newS)
	}
	cur := &row.Row{Schema: newS, Values: []any{"bob", int64(3), false}}
	if got := conformRow(cur, newS); got != cur {
		t.Errorf("a row of the input's schema was copied")
	}
}
