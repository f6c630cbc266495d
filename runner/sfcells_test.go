package runner

import (
	"bytes"
	"maps"
	"slices"
	"testing"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// TestValueCells: a window's value cells, written, overwritten and cleared
// in any order, read back as written, and encode to the same bytes
// whatever the order they were written in (a checkpoint's encoding of a
// key is deterministic), round-tripping through the decoder.
func TestValueCells(t *testing.T) {
	type op struct {
		id  string
		v   int64
		del bool
	}
	for _, tc := range []struct {
		name string
		ops  []op
		want map[string]int64
	}{
		{"one cell", []op{{id: "count", v: 1}}, map[string]int64{"count": 1}},
		{"in order", []op{{id: "a", v: 1}, {id: "b", v: 2}, {id: "c", v: 3}}, map[string]int64{"a": 1, "b": 2, "c": 3}},
		{"reversed", []op{{id: "c", v: 3}, {id: "b", v: 2}, {id: "a", v: 1}}, map[string]int64{"a": 1, "b": 2, "c": 3}},
		{"overwritten", []op{{id: "b", v: 9}, {id: "a", v: 1}, {id: "b", v: 2}}, map[string]int64{"a": 1, "b": 2}},
		{"cleared", []op{{id: "b", v: 2}, {id: "a", v: 1}, {id: "c", v: 3}, {id: "b", del: true}}, map[string]int64{"a": 1, "c": 3}},
		{"cleared unset", []op{{id: "a", v: 1}, {id: "z", del: true}}, map[string]int64{"a": 1}},
		{"all cleared", []op{{id: "a", v: 1}, {id: "a", del: true}}, map[string]int64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var vs cells[any]
			for _, o := range tc.ops {
				if o.del {
					vs.del(o.id)
				} else {
					vs.set(o.id, o.v)
				}
			}
			if len(vs) != len(tc.want) {
				t.Fatalf("%d cells %v, want %d", len(vs), vs, len(tc.want))
			}
			for id, want := range tc.want {
				if v, ok := vs.get(id); !ok || v != want {
					t.Errorf("cell %s = %v (set %t), want %d", id, v, ok, want)
				}
			}
			if _, ok := vs.get("missing"); ok {
				t.Error("a cell never written reads as set")
			}
			// The same cells written in id order encode alike.
			var sorted cells[any]
			ids := slices.Sorted(maps.Keys(tc.want))
			for _, id := range ids {
				sorted.set(id, tc.want[id])
			}
			enc := func(vs cells[any]) []byte {
				b, err := encodeSfKey(refusingCoder{}, &sfKey{key: "k", win: &sfWin{w: window.Global, values: vs}})
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			b := enc(vs)
			if !bytes.Equal(b, enc(sorted)) {
				t.Error("the encoding depends on the order the cells were written in")
			}
			k, dropped, err := decodeSfKey(refusingCoder{}, b)
			if err != nil || len(dropped) > 0 {
				t.Fatalf("decoding: %v (dropped %v)", err, dropped)
			}
			if !bytes.Equal(enc(k.win.values), b) {
				t.Error("decoded cells encode otherwise")
			}
		})
	}
}

// TestWindowCellsEncodeInIDOrder: bags, maps and timers written in any
// order encode alike and decode to what was written, as value cells do.
func TestWindowCellsEncodeInIDOrder(t *testing.T) {
	build := func(order []string) *sfWin {
		ws := &sfWin{w: window.Global}
		for _, id := range order {
			b := ws.extra().bags.ref(id)
			*b = append(*b, int64(len(id)), int64(len(id)+1))
			ws.extra().maps.set(id, map[any]any{int64(len(id)): int64(1)})
			ws.extra().timers.set(id, contract.Timer{ID: id, Domain: graph.EventTime, Time: mtime.Time(len(id))})
		}
		return ws
	}
	enc := func(ws *sfWin) []byte {
		b, err := encodeSfKey(refusingCoder{}, &sfKey{key: "k", win: ws})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	want := enc(build([]string{"a", "bb", "ccc"}))
	for _, order := range [][]string{{"ccc", "bb", "a"}, {"bb", "a", "ccc"}} {
		if got := enc(build(order)); !bytes.Equal(got, want) {
			t.Errorf("written in order %v: the encoding differs", order)
		}
	}
	k, dropped, err := decodeSfKey(refusingCoder{}, want)
	if err != nil || len(dropped) > 0 {
		t.Fatalf("decoding: %v (dropped %v)", err, dropped)
	}
	ws := k.win
	if bag, _ := ws.bags().get("bb"); len(bag) != 2 || bag[0] != int64(2) || bag[1] != int64(3) {
		t.Errorf("bag bb = %v, want [2 3]", bag)
	}
	if tm, ok := ws.timers().get("ccc"); !ok || tm.Time != 3 || tm.ID != "ccc" {
		t.Errorf("timer ccc = %+v (%t)", tm, ok)
	}
	if !bytes.Equal(enc(ws), want) {
		t.Error("the decoded cells encode otherwise")
	}
}

// TestMapStateEncodesInKeyOrder: a map cell's entries encode in the order
// of their encoded keys, so a key's checkpoint encoding is the same every
// time (a Go map's iteration order changes from one range to the next).
func TestMapStateEncodesInKeyOrder(t *testing.T) {
	entries := map[any]any{}
	for i := range 50 {
		entries[int64(i*7%50)] = int64(i)
	}
	ws := &sfWin{w: window.Global}
	ws.extra().maps.set("m", entries)
	k := &sfKey{key: "k", win: ws}
	first, err := encodeSfKey(refusingCoder{}, k)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		b, err := encodeSfKey(refusingCoder{}, k)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, first) {
			t.Fatal("the same map state encoded to different bytes")
		}
	}
	got, _, err := decodeSfKey(refusingCoder{}, first)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := got.win.maps().get("m"); len(m) != 50 || m[int64(7)] != int64(1) {
		t.Errorf("decoded %d entries (7 -> %v), want 50 (7 -> 1)", len(m), m[int64(7)])
	}
}
