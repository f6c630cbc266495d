package weir

import (
	"bytes"
	"testing"

	"github.com/weir-dev/weir/runner/contract"
)

// coderCase is one aggregation's state coder with a key and an accumulator.
type coderCase struct {
	name string
	sc   contract.StateCoder
	key  any
	acc  any
}

func combineCoder[K comparable, V, A, O any](fn CombineFn[V, A, O]) contract.StateCoder {
	return &combineAgg[K, V, A, O]{fn: fn}
}

// TestStateAppenderAgrees: the append-style encodings that checkpoints use
// are byte for byte the encodings of EncodeKey and EncodeState, for the fast
// types and for the JSON fallback.
func TestStateAppenderAgrees(t *testing.T) {
	type point struct{ X, Y int }
	i, s, f := int64(1234567), "north", 2.5
	mean := MeanAcc{Sum: 10, Count: 4}
	mm := MinMaxAcc[int64]{Value: 7, Set: true}
	cases := []coderCase{
		{"int64 key, int64 sum", combineCoder[int64](Sum[int64]()), int64(-42), &i},
		{"string key, string max", combineCoder[string](Max[string]()), "k-1", &MinMaxAcc[string]{Value: s, Set: true}},
		{"string key, float sum", combineCoder[string](Sum[float64]()), "south", &f},
		{"struct key, mean", combineCoder[point](Mean[int64]()), point{1, 2}, &mean},
		{"int64 key, count", combineCoder[int64](Count[string]()), int64(0), &i},
		{"int64 key, min/max acc", combineCoder[int64](Min[int64]()), int64(1 << 40), &mm},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sa, ok := tc.sc.(contract.StateAppender)
			if !ok {
				t.Fatalf("%T does not append", tc.sc)
			}
			prefix := []byte("prefix")
			want, err := tc.sc.EncodeKey(tc.key)
			if err != nil {
				t.Fatal(err)
			}
			got, err := sa.AppendEncodedKey(bytes.Clone(prefix), tc.key)
			if err != nil || !bytes.Equal(got, append(bytes.Clone(prefix), want...)) {
				t.Errorf("key: appended %q (%v), want %q after the prefix", got, err, want)
			}
			want, err = tc.sc.EncodeState(contract.AccumulatorCell, tc.acc)
			if err != nil {
				t.Fatal(err)
			}
			got, err = sa.AppendEncodedState(bytes.Clone(prefix), contract.AccumulatorCell, tc.acc)
			if err != nil || !bytes.Equal(got, append(bytes.Clone(prefix), want...)) {
				t.Errorf("accumulator: appended %q (%v), want %q after the prefix", got, err, want)
			}
		})
	}
}
