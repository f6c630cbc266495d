package combine

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"testing"
	"unsafe"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// An element that would overflow an integer sum is a reject with reason
// overflow, and the sum stays what it was.
func TestSumOverflowIsAReject(t *testing.T) {
	s := row.MustSchema(row.Field{Name: "v", Type: row.Of(row.KindInt)})
	a := &Aggregator{Ops: []Op{{Out: "v", Fn: FnSum, Src: 0, Typ: row.Of(row.KindInt)}},
		Out: row.MustSchema(row.Field{Name: "v", Type: row.Of(row.KindInt)})}
	acc := a.NewAccumulator()
	for _, v := range []int64{math.MaxInt64 - 1, 1} {
		if _, err := a.AddInputErr(acc, &contract.Element{Value: &row.Row{Schema: s, Values: []any{v}}}); err != nil {
			t.Fatalf("add %d: %v", v, err)
		}
	}
	_, err := a.AddInputErr(acc, &contract.Element{Value: &row.Row{Schema: s, Values: []any{int64(1)}}})
	ee, ok := err.(*contract.ElementError)
	if !ok || ee.Reason != reasonOverflow {
		t.Fatalf("overflowing add: err = %v, want an element error with reason %q", err, reasonOverflow)
	}
	if got := mustOpen(t, acc).slots[0].i; got != math.MaxInt64 {
		t.Errorf("sum after the rejected element = %d, want %d", got, int64(math.MaxInt64))
	}
	_, err = a.AddInputErr(acc, &contract.Element{Value: &row.Row{Schema: s, Values: []any{int64(-5)}}})
	if err != nil || mustOpen(t, acc).slots[0].i != math.MaxInt64-5 {
		t.Errorf("after -5: sum %d, err %v", mustOpen(t, acc).slots[0].i, err)
	}
}

// Lists in accumulators (group, top) survive a checkpoint with their types.
func TestCombineListStateRoundTrip(t *testing.T) {
	a := &Aggregator{Group: []int{0}, Ops: []Op{{Fn: FnGroup}, {Fn: FnTop, N: 2}}}
	acc := &accumulator{grp: &[]any{"k"}, slots: []slot{
		{val: &slotVal{v: []any{int64(1), nil, "x", mtime.Time(5)}}},
		{val: &slotVal{v: []any{int64(9), int64(7)}}},
	}}
	_, got := roundTrip(t, a, acc)
	if !reflect.DeepEqual(got, acc) {
		t.Errorf("round trip: %#v, want %#v", got, acc)
	}
}

// With scalar keys (ScalarKeys) the runner keeps each key's encoding, so
// an accumulator keeps no copy of its group values; without, it does.
func TestScalarKeysKeepNoGroupValues(t *testing.T) {
	s := row.MustSchema(row.Field{Name: "k", Type: row.Of(row.KindString)}, row.Field{Name: "v", Type: row.Of(row.KindInt)})
	for _, scalar := range []bool{true, false} {
		a := &Aggregator{Group: []int{0}, ScalarKeys: scalar, Ops: []Op{{Out: "v", Fn: FnSum, Src: 1, Typ: row.Of(row.KindInt)}}}
		acc, err := a.AddInputErr(a.NewAccumulator(), &contract.Element{Value: &row.Row{Schema: s, Values: []any{"a", int64(1)}}})
		if err != nil {
			t.Fatal(err)
		}
		if kept := mustOpen(t, acc).grp != nil; kept == scalar {
			t.Errorf("ScalarKeys %t: the accumulator keeps its group values: %t", scalar, kept)
		}
	}
}

// TestAccumulatorSize: every key of a YAML Combine holds an accumulator
// per window: its slots, 24 bytes each (32 while every slot had an int, a
// float and a count; 40 while a sum and the value outputs kept their set
// flag in a field of its own), and, when it is not compact, a header of
// 32 bytes (48 while its group values were a slice of their own).
func TestAccumulatorSize(t *testing.T) {
	if n := unsafe.Sizeof(accumulator{}); n > 32 {
		t.Errorf("accumulator is %d bytes, want at most 32", n)
	}
	if n := unsafe.Sizeof(slot{}); n > 24 {
		t.Errorf("slot is %d bytes, want at most 24", n)
	}
}

// roundTrip encodes acc as a checkpoint stores it and decodes the bytes.
func roundTrip(t *testing.T, a *Aggregator, acc any) ([]byte, any) {
	t.Helper()
	b, err := a.EncodeState("", acc)
	if err != nil {
		t.Fatal(err)
	}
	back, err := a.DecodeState("", b)
	if err != nil {
		t.Fatal(err)
	}
	return b, back
}

// mustOpen returns the accumulator acc holds, in either form.
func mustOpen(t *testing.T, acc any) accumulator {
	t.Helper()
	ac, ok := open(acc)
	if !ok {
		t.Fatalf("%T is not an accumulator", acc)
	}
	return ac
}

// TestCompactAccumulators: a key of a step whose keys are scalars (or
// without group_by) holds its accumulator as a pointer to its slots, with
// no header, up to maxCompactSlots outputs; a step with more, or whose
// keys are not scalars, holds a *accumulator. Adding, merging, encoding
// and decoding keep the form.
func TestCompactAccumulators(t *testing.T) {
	s := row.MustSchema(row.Field{Name: "k", Type: row.Of(row.KindString)}, row.Field{Name: "v", Type: row.Of(row.KindInt)})
	for _, tt := range []struct {
		ops     int
		scalar  bool
		compact bool
	}{
		{1, true, true}, {2, true, true}, {maxCompactSlots, true, true},
		{maxCompactSlots + 1, true, false}, {2, false, false},
	} {
		ops := make([]Op, tt.ops)
		for i := range ops {
			ops[i] = Op{Out: fmt.Sprintf("o%d", i), Fn: FnSum, Src: 1, Typ: row.Of(row.KindInt)}
		}
		a := &Aggregator{Group: []int{0}, ScalarKeys: tt.scalar, Ops: ops}
		check := func(what string, acc any) {
			t.Helper()
			_, isHeader := acc.(*accumulator)
			if isHeader == tt.compact {
				t.Errorf("%d outputs, scalar keys %t: %s is a %T, want compact %t", tt.ops, tt.scalar, what, acc, tt.compact)
			}
			if ac := mustOpen(t, acc); len(ac.slots) != tt.ops {
				t.Errorf("%d outputs: %s has %d slots", tt.ops, what, len(ac.slots))
			}
		}
		acc := a.NewAccumulator()
		check("a new accumulator", acc)
		for _, v := range []int64{3, 4} {
			var err error
			if acc, err = a.AddInputErr(acc, &contract.Element{Value: &row.Row{Schema: s, Values: []any{"a", v}}}); err != nil {
				t.Fatal(err)
			}
		}
		check("after two adds", acc)
		other, err := a.AddInputErr(a.NewAccumulator(), &contract.Element{Value: &row.Row{Schema: s, Values: []any{"a", int64(5)}}})
		if err != nil {
			t.Fatal(err)
		}
		acc = a.MergeAccumulators(acc, other)
		check("merged", acc)
		_, back := roundTrip(t, a, acc)
		check("decoded", back)
		for k, op := range ops {
			if v := slotValue(&op, &mustOpen(t, back).slots[k]); v != int64(12) {
				t.Errorf("%d outputs: output %d decoded %v, want 12", tt.ops, k, v)
			}
		}
	}
	if _, err := (&Aggregator{}).EncodeState("", "not an accumulator"); err == nil {
		t.Error("a string encoded as an accumulator")
	}
}

// A re-key's declared merge (KeyMigration.Merge) folds the accumulators
// of two earlier keys by the values their outputs show; outputs without
// one merge as their combine fn does.
func TestMergeRekeyed(t *testing.T) {
	s := row.MustSchema(row.Field{Name: "i", Type: row.Of(row.KindInt)}, row.Field{Name: "f", Type: row.Of(row.KindFloat)})
	intT, floatT := row.Of(row.KindInt), row.Of(row.KindFloat)
	ops := []Op{
		{Out: "sum_max", Fn: FnSum, Src: 0, Typ: intT},
		{Out: "sum_min", Fn: FnSum, Src: 1, Typ: floatT},
		{Out: "count_max", Fn: FnCount, Src: -1, Typ: intT},
		{Out: "count_own", Fn: FnCount, Src: -1, Typ: intT},
		{Out: "latest_sum", Fn: FnLatest, Src: 0, Typ: intT},
		{Out: "latest_max", Fn: FnLatest, Src: 1, Typ: floatT},
		{Out: "min_max", Fn: FnMin, Src: 0, Typ: intT},
		{Out: "mean_own", Fn: FnMean, Src: 0, Typ: floatT},
	}
	a := &Aggregator{Ops: ops, KeyMigration: &KeyMigration{Merge: map[string]string{
		"sum_max": MergeMax, "sum_min": MergeMin, "count_max": MergeMax, "latest_sum": MergeSum,
		"latest_max": MergeMax, "min_max": MergeMax}}}
	add := func(vals ...[2]any) any {
		acc := a.NewAccumulator()
		for x, v := range vals {
			var err error
			if acc, err = a.AddInputErr(acc, &contract.Element{Value: &row.Row{Schema: s, Values: []any{v[0], v[1]}}, Time: mtime.Time(x)}); err != nil {
				t.Fatal(err)
			}
		}
		return acc
	}
	x := add([2]any{int64(5), 1.5}, [2]any{int64(2), 0.5}) // i: sum 7, latest 2, min 2; f: sum 2, latest 0.5
	y := add([2]any{int64(9), 4.0})                        // i: sum 9, latest 9, min 9; f: sum 4, latest 4
	got := mustOpen(t, a.MergeRekeyed(x, y))
	want := map[string]any{
		"sum_max": int64(9), "sum_min": 2.0, "count_max": int64(2), "count_own": int64(3),
		"latest_sum": int64(11), "latest_max": 4.0, "min_max": int64(9), "mean_own": 16.0 / 3,
	}
	for k, op := range ops {
		if v := slotValue(&op, &got.slots[k]); !reflect.DeepEqual(v, want[op.Out]) {
			t.Errorf("%s = %v (%T), want %v", op.Out, v, v, want[op.Out])
		}
	}
	// An empty accumulator leaves the other's values as they are.
	got = mustOpen(t, a.MergeRekeyed(a.NewAccumulator(), add([2]any{int64(3), 1.0})))
	if v := slotValue(&ops[0], &got.slots[0]); v != int64(3) {
		t.Errorf("sum_max of an empty and 3 = %v, want 3", v)
	}
	if v := slotValue(&ops[4], &got.slots[4]); v != int64(3) {
		t.Errorf("latest_sum of an empty and 3 = %v, want 3", v)
	}
}

// TestDecodeRefusesCountsPastTheBytes: a stored key or accumulator (from
// the store, or an imported snapshot file) whose count of values is more
// than its bytes could hold is refused as corrupt, before anything of
// that count is allocated.
func TestDecodeRefusesCountsPastTheBytes(t *testing.T) {
	a := &Aggregator{Group: []int{0}, Ops: []Op{{Fn: FnGroup}}}
	huge := binary.AppendUvarint(nil, 1<<40)
	huge = append(huge, 0, 0, 0) // three bytes of values, not 2^40
	if _, err := a.DecodeKey(huge); err == nil {
		t.Error("DecodeKey accepted a key claiming 2^40 values in 3 bytes")
	}
	if _, err := a.DecodeState("", huge); err == nil {
		t.Error("DecodeState accepted an accumulator claiming 2^40 group values in 3 bytes")
	}
}
