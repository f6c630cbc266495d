package runner

import (
	"sync"
	"testing"
	"unsafe"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// TestSfKeyWindows: a stateful step's key lists its windows in the order
// they were added, through removals of its first, a middle and its last
// window, and finds each by its window.
func TestSfKeyWindows(t *testing.T) {
	w := func(i int) window.Window {
		return window.Window{Start: mtime.Time(i * 10), End: mtime.Time(i*10 + 10)}
	}
	tests := []struct {
		name   string
		add    []int
		remove []int
		want   []int
	}{
		{"none", nil, nil, nil},
		{"one", []int{1}, nil, []int{1}},
		{"one removed", []int{1}, []int{1}, nil},
		{"three", []int{1, 2, 3}, nil, []int{1, 2, 3}},
		{"the first removed", []int{1, 2, 3}, []int{1}, []int{2, 3}},
		{"a middle one removed", []int{1, 2, 3}, []int{2}, []int{1, 3}},
		{"the last removed", []int{1, 2, 3}, []int{3}, []int{1, 2}},
		{"all removed", []int{1, 2}, []int{1, 2}, nil},
		{"the first of two removed", []int{1, 2}, []int{1}, []int{2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := &sfKey{}
			wins := map[int]*sfWin{}
			for _, i := range tc.add {
				wins[i] = &sfWin{w: w(i)}
				k.addWin(wins[i])
			}
			for _, i := range tc.remove {
				k.removeWin(wins[i])
			}
			var got []int
			for i := range k.nwins() {
				got = append(got, int(k.winAt(i).w.Start/10))
			}
			if len(got) != len(tc.want) {
				t.Fatalf("windows %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("windows %v, want %v", got, tc.want)
				}
			}
			for _, i := range tc.want {
				if k.findWin(w(i)) != wins[i] {
					t.Errorf("window %d not found", i)
				}
			}
			for _, i := range tc.remove {
				if k.findWin(w(i)) != nil {
					t.Errorf("removed window %d found", i)
				}
			}
			if (k.win == nil) != (len(tc.want) == 0) || (k.more != nil) != (len(tc.want) > 1) {
				t.Errorf("first %v, others %v for %d windows", k.win, k.more, len(tc.want))
			}
			// A window added after the removals goes after the others.
			k.addWin(&sfWin{w: w(9)})
			if n := k.nwins(); k.winAt(n-1).w != w(9) || n != len(tc.want)+1 {
				t.Errorf("an added window is not last of %d", n)
			}
		})
	}
}

// TestSfKeySize: a stateful step's record of a key is 64 bytes, a size
// class (80 with its windows' slice, and that slice's array of 8 bytes
// besides).
func TestSfKeySize(t *testing.T) {
	if n := unsafe.Sizeof(sfKey{}); n > 64 {
		t.Errorf("sfKey is %d bytes, want at most 64", n)
	}
}

// TestOwnKey: a string key whose encoding is its bytes is held as the
// record's own copy of them; any other key as it is.
func TestOwnKey(t *testing.T) {
	str := string([]byte("key-1"))
	tests := []struct {
		name  string
		key   any
		want  any
		owned bool // the result shares str's bytes
	}{
		{"a string key", string([]byte("key-1")), "key-1", true},
		{"a string of other bytes", "key-2", "key-2", false},
		{"an integer key", int64(7), int64(7), false},
		{"no key", nil, nil, false},
	}
	for _, tc := range tests {
		got := ownKey(tc.key, str)
		if got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		s, ok := got.(string)
		if owned := ok && unsafe.StringData(s) == unsafe.StringData(str); owned != tc.owned {
			t.Errorf("%s: shares the record's bytes %v, want %v", tc.name, owned, tc.owned)
		}
	}
}

// TestRestoredCellsShareTheirIDs: keys restored at once (a step's
// restore, over several goroutines) hold one string per cell id, a
// timer's id too, not a copy each.
func TestRestoredCellsShareTheirIDs(t *testing.T) {
	encode := func(key string) []byte {
		ws := &sfWin{w: window.Global, values: cells[any]{{"count", int64(1)}, {"total", int64(2)}}}
		ws.extra().timers.set("flush", contract.Timer{ID: "flush", Domain: graph.EventTime, Time: 5})
		b, err := encodeSfKey(refusingCoder{}, &sfKey{key: key, win: ws})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ids := func(k *sfKey) []string {
		return []string{k.win.values[0].id, k.win.values[1].id, k.win.timers()[0].id}
	}
	var got [2][]string
	var wg sync.WaitGroup
	for i, enc := range [][]byte{encode("a"), encode("b")} {
		wg.Go(func() {
			k, _, err := decodeSfKey(refusingCoder{}, enc)
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = ids(k)
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for j, id := range got[0] {
		if id != got[1][j] || id != []string{"count", "total", "flush"}[j] {
			t.Fatalf("ids %v and %v", got[0], got[1])
		}
		if unsafe.StringData(id) != unsafe.StringData(got[1][j]) {
			t.Errorf("cell %q of two keys is held in two strings", id)
		}
	}
}
