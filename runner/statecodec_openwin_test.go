package runner

import (
	"testing"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/window"
)

// intCoder is a StateCoder of int64 keys and accumulators, as decimal text.
type intCoder struct{}

func (intCoder) EncodeKey(k any) ([]byte, error)             { return []byte{byte(k.(int))}, nil }
func (intCoder) DecodeKey(b []byte) (any, error)             { return int(b[0]), nil }
func (intCoder) EncodeState(_ string, v any) ([]byte, error) { return []byte{byte(v.(int))}, nil }
func (intCoder) DecodeState(_ string, b []byte) (any, error) { return int(b[0]), nil }

// TestAggregationWindows: the open windows of a stored aggregation key are
// read from its encoding without decoding it, and what is not one is
// told apart.
func TestAggregationWindows(t *testing.T) {
	for _, n := range []int{0, 1, 3} {
		k := &aggKey{}
		k.setVal(7)
		for i := range n {
			ws := k.newWindow(window.Window{Start: 0, End: mtime.Time(1000 * (i + 1))}, window.State{})
			ws.acc = i
		}
		b, err := appendAggKey(nil, intCoder{}, nil, k)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := AggregationWindows(b); !ok || got != n {
			t.Errorf("%d windows: read %d (ok %t)", n, got, ok)
		}
	}
	for _, bad := range [][]byte{nil, {5, 1}, {1, 7}} {
		if n, ok := AggregationWindows(bad); ok {
			t.Errorf("%v read as %d windows", bad, n)
		}
	}
}
