package runner

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// refusingCoder stores ints as decimal text and refuses (drops) the
// negative ones, as a declared migration refuses a stored value.
type refusingCoder struct{}

func (refusingCoder) EncodeKey(k any) ([]byte, error) { return []byte(k.(string)), nil }
func (refusingCoder) DecodeKey(b []byte) (any, error) { return string(b), nil }
func (refusingCoder) EncodeState(_ string, v any) ([]byte, error) {
	return strconv.AppendInt(nil, v.(int64), 10), nil
}
func (refusingCoder) DecodeState(_ string, b []byte) (any, error) {
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err == nil && n < 0 {
		return nil, errors.Join(contract.ErrStateDropped, errors.New("negative"))
	}
	return n, err
}

// TestStateDecodeLeavesDroppedOut: a stored value its step's code drops
// (contract.ErrStateDropped) is left out of the restored key — the value
// cell unset, the bag and the map without it — and the rest is restored;
// any other decoding error still fails.
func TestStateDecodeLeavesDroppedOut(t *testing.T) {
	k := &sfKey{key: "k", win: &sfWin{w: window.Global,
		values: cells[any]{{"kept", int64(1)}, {"refused", int64(-1)}},
		more: &sfWinMore{
			bags: cells[[]any]{{"bag", []any{int64(2), int64(-2), int64(3)}}},
			maps: cells[map[any]any]{{"m", map[any]any{int64(4): int64(5), int64(6): int64(-7)}}},
		},
	}}
	b, err := encodeSfKey(refusingCoder{}, k)
	if err != nil {
		t.Fatal(err)
	}
	got, dropped, err := decodeSfKey(refusingCoder{}, b)
	if err != nil {
		t.Fatal(err)
	}
	// Each refused value is reported with its cell (and a map entry's key).
	var names []string
	for _, d := range dropped {
		names = append(names, fmt.Sprintf("%s=%s(%v)", d.cell, d.stored, d.mapKey))
	}
	sort.Strings(names)
	if want := "bag=-2(<nil>) m#value=-7(6) refused=-1(<nil>)"; strings.Join(names, " ") != want {
		t.Errorf("dropped %s, want %s", strings.Join(names, " "), want)
	}
	w := got.win
	if _, ok := w.values.get("refused"); ok || len(w.values) != 1 || w.values[0] != (cell[any]{"kept", int64(1)}) {
		t.Errorf("values %v: want kept only", w.values)
	}
	if bag, _ := w.bags().get("bag"); len(bag) != 2 || bag[0] != int64(2) || bag[1] != int64(3) {
		t.Errorf("bag %v: want [2 3]", bag)
	}
	if m, _ := w.maps().get("m"); len(m) != 1 || m[int64(4)] != int64(5) {
		t.Errorf("map %v: want {4: 5}", m)
	}
	if _, _, err := decodeSfKey(refusingCoder{}, append(b[:len(b)-1:len(b)-1], 0xff)); err == nil {
		t.Error("a corrupt entry decoded")
	}
}
