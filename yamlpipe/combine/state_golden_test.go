package combine

import (
	"encoding/hex"
	"reflect"
	"testing"

	"github.com/weir-dev/weir/mtime"
)

// Combine's checkpointed accumulators keep their bytes whatever the
// accumulator's layout in memory: checkpoints written before a change of
// layout restore after it, and an update reads them back. The bytes below
// were written by the layout with a value and time inline in every slot
// (before the slots' values moved out of line).
func TestCombineStateBytesAreStable(t *testing.T) {
	a := &Aggregator{Group: []int{0}, Ops: []Op{
		{Fn: FnCount, Src: -1}, {Fn: FnSum, Src: 1}, {Fn: FnMin, Src: 1},
		{Fn: FnLatest, Src: 1}, {Fn: FnGroup, Src: 1}, {Fn: FnMean, Src: 1},
	}}
	full := a.NewAccumulator().(*accumulator)
	full.setGroup([]any{"k1"})
	full.slots[0].i = 3 // a count
	full.slots[1].i = -42
	full.slots[1].markSet()
	full.slots[2].setV(int64(7))
	full.slots[2].markSet()
	full.slots[3].setVT("late", mtime.Time(1234567))
	full.slots[3].markSet()
	full.slots[4].setV([]any{int64(1), nil, "x", 2.5})
	full.slots[4].markSet()
	full.slots[5].setF(7.25) // a mean
	full.slots[5].i = 2
	tests := []struct {
		name string
		acc  *accumulator
		want string
	}{
		{"every kind of slot", full, "0104026b310600000000000000000006000000000000000000005300000000000000000001000000000000000000000000000000000000000100000000000000000100000000000000070000000000000000000001000000000012d68704046c6174650000000000000000000001000000000000000007040100000000000000010004017802400400000000000000401d0000000000000400000000000000000000"},
		{"empty", a.NewAccumulator().(*accumulator), "0006000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := a.EncodeState("", tt.acc)
			if err != nil {
				t.Fatal(err)
			}
			if got := hex.EncodeToString(b); got != tt.want {
				t.Fatalf("encoded accumulator:\n got %s\nwant %s", got, tt.want)
			}
			want, _ := hex.DecodeString(tt.want)
			back, err := a.DecodeState("", want)
			if err != nil {
				t.Fatal(err)
			}
			if got := mustOpen(t, back); !reflect.DeepEqual(got, *tt.acc) {
				t.Errorf("decoded %#v, want %#v", got, *tt.acc)
			}
		})
	}
}

// TestCombineStateAcrossOutputChanges: an accumulator stored by a combine
// reads back into one with outputs appended (the new slots empty, the
// kept ones as stored) or its last outputs removed (dropped), from the
// store (DecodeState) and from memory (conform, as an in-place update
// adopts the old execution's accumulators); adding to it then works.
func TestCombineStateAcrossOutputChanges(t *testing.T) {
	two := &Aggregator{Group: []int{0}, Ops: []Op{{Fn: FnCount, Src: -1}, {Fn: FnSum, Src: 1}}}
	three := &Aggregator{Group: []int{0}, Ops: []Op{{Fn: FnCount, Src: -1}, {Fn: FnSum, Src: 1}, {Fn: FnMax, Src: 1}}}
	one := &Aggregator{Group: []int{0}, Ops: []Op{{Fn: FnCount, Src: -1}}}
	stored := two.NewAccumulator().(*accumulator)
	stored.setGroup([]any{"k1"})
	stored.slots[0].i = 3
	stored.slots[1].i = 42
	b, err := two.EncodeState("", stored)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, got accumulator, n int) {
		t.Helper()
		if len(got.slots) != n || got.slots[0].i != 3 || (n > 1 && (got.slots[1].i != 42 || !got.slots[1].isSet())) || (n > 2 && got.slots[2].isSet()) {
			t.Errorf("%s: slots %+v, want %d slots: count 3, sum 42, an empty max", name, got.slots, n)
		}
	}
	back, err := three.DecodeState("", b)
	if err != nil {
		t.Fatal(err)
	}
	check("stored, an output appended", mustOpen(t, back), 3)
	back, err = one.DecodeState("", b)
	if err != nil {
		t.Fatal(err)
	}
	check("stored, the last output removed", mustOpen(t, back), 1)

	adopted := two.NewAccumulator().(*accumulator)
	adopted.slots[0].i, adopted.slots[1].i = 3, 42
	conformed, _ := three.conform(adopted)
	check("adopted, an output appended", conformed, 3)
	// Merging an adopted (short) accumulator with a new one works too.
	merged := mustOpen(t, three.MergeAccumulators(three.NewAccumulator(), two.NewAccumulator()))
	if len(merged.slots) != 3 {
		t.Errorf("merged %d slots, want 3", len(merged.slots))
	}
	if _, err := three.DecodeState("", append([]byte{0}, 0xff, 0x7f)); err == nil {
		t.Error("a corrupt slot count decoded")
	}
}
