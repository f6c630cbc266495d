package yamlpipe

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
	a := &aggregator{group: []int{0}, ops: []combineOp{
		{fn: fnCount, src: -1}, {fn: fnSum, src: 1}, {fn: fnMin, src: 1},
		{fn: fnLatest, src: 1}, {fn: fnGroup, src: 1}, {fn: fnMean, src: 1},
	}}
	full := a.NewAccumulator().(*accumulator)
	full.group = []any{"k1"}
	full.slots[0].n = 3
	full.slots[1].i, full.slots[1].set = -42, true
	full.slots[2].setV(int64(7))
	full.slots[2].set = true
	full.slots[3].setVT("late", mtime.Time(1234567))
	full.slots[3].set = true
	full.slots[4].setV([]any{int64(1), nil, "x", 2.5})
	full.slots[4].set = true
	full.slots[5].f, full.slots[5].n = 7.25, 2
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
			if !reflect.DeepEqual(back, tt.acc) {
				t.Errorf("decoded %#v, want %#v", back, tt.acc)
			}
		})
	}
}
