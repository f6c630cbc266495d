package combine

import (
	"encoding/hex"
	"reflect"
	"testing"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// TestCombineStateBytesFromRows: an accumulator of every combine fn, built
// by adding rows (and merging), encodes to the bytes the layout with one
// 32-byte slot per output wrote (recorded here), and decodes to an
// accumulator whose outputs are the same — whatever the slots' layout in
// memory. Sums that are set but zero, an int and a float sum, a mean,
// all and any with falsy values, concat and top are the cases a narrower
// slot must keep apart.
func TestCombineStateBytesFromRows(t *testing.T) {
	s := row.MustSchema(row.Field{Name: "i", Type: row.Of(row.KindInt)}, row.Field{Name: "f", Type: row.Of(row.KindFloat)},
		row.Field{Name: "l", Type: row.ListOf(row.Of(row.KindInt))})
	intT, floatT := row.Of(row.KindInt), row.Of(row.KindFloat)
	ops := []Op{
		{Out: "count", Fn: FnCount, Src: -1, Typ: intT},
		{Out: "sum_i", Fn: FnSum, Src: 0, Typ: intT},
		{Out: "sum_f", Fn: FnSum, Src: 1, Typ: floatT},
		{Out: "sum_zero", Fn: FnSum, Src: 0, Typ: intT},
		{Out: "mean", Fn: FnMean, Src: 1, Typ: floatT},
		{Out: "all", Fn: FnAll, Src: 0, Typ: row.Of(row.KindBool)},
		{Out: "any", Fn: FnAny, Src: 0, Typ: row.Of(row.KindBool)},
		{Out: "max", Fn: FnMax, Src: 1, Typ: floatT},
		{Out: "latest", Fn: FnLatest, Src: 0, Typ: intT},
		{Out: "concat", Fn: FnConcat, Src: 2, Typ: row.ListOf(intT)},
		{Out: "top", Fn: FnTop, Src: 0, N: 2, Typ: row.ListOf(intT)},
		{Out: "empty_sum", Fn: FnSum, Src: 0, Typ: intT},
		{Out: "empty_min", Fn: FnMin, Src: 0, Typ: intT},
	}
	zeroOp := 3
	a := &Aggregator{Ops: ops}
	add := func(acc any, at mtime.Time, i int64, f float64, l []any) any {
		t.Helper()
		vals := []any{i, f, l}
		r := &row.Row{Schema: s, Values: vals}
		out, err := a.AddInputErr(acc, &contract.Element{Value: r, Time: at})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	acc := a.NewAccumulator()
	acc = add(acc, 5, 3, 1.5, []any{int64(1)})
	acc = add(acc, 9, 0, -0.25, nil)
	other := add(a.NewAccumulator(), 7, -2, 2.0, []any{int64(4), int64(5)})
	acc = a.MergeAccumulators(acc, other)
	// sum_zero is made a set zero (an empty slot merged with the sum of
	// one 0), empty_sum and empty_min are left empty.
	ac, _ := open(acc)
	zero := a.NewAccumulator()
	zac, _ := open(zero)
	ac.slots[zeroOp] = zac.slots[zeroOp]
	a.mergeSlot(&ops[zeroOp], &ac.slots[zeroOp], &mustOpen(t, add(a.NewAccumulator(), 1, 0, 0, nil)).slots[zeroOp])
	ac.slots[len(ops)-2], ac.slots[len(ops)-1] = slot{}, slot{}
	got, back := roundTrip(t, a, acc)
	const want = "000d0000000000000000000600000000000000000000020000000000000000000100000000000000000000400a0000000000000001000000000000000000000000000000000000000100000000000000000000400a000000000000060000000000000000000006000000000000000004000000000000000000000600000000000000000400000000000000000000000000000000000000000100000000000000000240000000000000000000000000000000000001000000000000000901000000000000000000000000000000000000010000000000000000070301000000000000000101000000000000000401000000000000000500000000000000000000010000000000000000070201000000000000000301000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
	if h := hex.EncodeToString(got); h != want {
		t.Fatalf("encoded accumulator:\n got %s\nwant %s", h, want)
	}
	values := func(acc any) []any {
		var out []any
		for k := range ops {
			out = append(out, slotValue(&ops[k], &mustOpen(t, acc).slots[k]))
		}
		return out
	}
	if v1, v2 := values(acc), values(back); !reflect.DeepEqual(v1, v2) {
		t.Errorf("outputs after a round trip:\n got %v\nwant %v", v2, v1)
	}
	// The outputs themselves, as the fns define them.
	wantOut := []any{int64(3), int64(1), 3.25, int64(0), 3.25 / 3, false, true, 2.0, int64(0),
		[]any{int64(1), int64(4), int64(5)}, []any{int64(3), int64(0)}, int64(0), nil}
	if v := values(acc); !reflect.DeepEqual(v, wantOut) {
		t.Errorf("outputs:\n got %v\nwant %v", v, wantOut)
	}
	again, err := a.EncodeState("", back)
	if err != nil || hex.EncodeToString(again) != hex.EncodeToString(got) {
		t.Errorf("re-encoded: %x, %v; want %x", again, err, got)
	}
}
