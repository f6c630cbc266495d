package runner

import "testing"

// TestSameAny checks that sameAny tells the very same interface value from
// an equal copy or another type, without panicking on values Go cannot
// compare (slices, maps): the aggregation skips storing an accumulator only
// when AddInput handed back the same one.
func TestSameAny(t *testing.T) {
	p := new(int64)
	s := []int{1}
	m := map[string]int{"a": 1}
	for _, tc := range []struct {
		name string
		a, b any
		want bool
	}{
		{name: "same pointer", a: p, b: p, want: true},
		{name: "another pointer", a: p, b: new(int64), want: false},
		{name: "a slice boxed twice", a: any(s), b: any(s), want: false},
		{name: "same map", a: m, b: m, want: true},
		{name: "another map", a: m, b: map[string]int{"a": 1}, want: false},
		{name: "nil and nil", a: nil, b: nil, want: true},
		{name: "nil and a pointer", a: nil, b: p, want: false},
		{name: "same bits, another type", a: int64(0), b: uint64(0), want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sameAny(tc.a, tc.b); got != tc.want {
				t.Errorf("sameAny(%#v, %#v) = %v, want %v", tc.a, tc.b, got, tc.want)
			}
		})
	}
}
