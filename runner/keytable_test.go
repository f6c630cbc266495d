package runner

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/window"
)

// TestKeyGroupTableAgreesWithAMap adds and removes keys at random and
// checks after every step that the group finds exactly the keys a map
// holds, counts them and yields each once. Hashes are drawn from a few
// values so that homes collide and removals shift runs back, wrapping
// around the table's end.
func TestKeyGroupTableAgreesWithAMap(t *testing.T) {
	for _, tc := range []struct {
		name   string
		hashes int // distinct upper halves; few means long runs
		keys   int
		steps  int
	}{
		{"one home", 1, 40, 2000},
		{"few homes", 3, 200, 5000},
		{"spread", 1 << 20, 3000, 20000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(tc.hashes)))
			g := &keyGroupState{}
			held := map[string]*aggKey{}
			hashOf := func(i int) uint64 { return uint64(i%tc.hashes)<<32 | uint64(i)&0xfff }
			for step := 0; step < tc.steps; step++ {
				i := rng.IntN(tc.keys)
				// A third of the names are longer than an aggKey holds
				// inline.
				name := fmt.Sprintf("k%d", i)
				if i%3 == 0 {
					name = fmt.Sprintf("a key name longer than keyInline %d", i)
				}
				if k := held[name]; k != nil {
					if got := g.find(k.tableHash(), name); got != k {
						t.Fatalf("step %d: find(%s) = %p, want %p", step, name, got, k)
					}
					g.remove(k)
					delete(held, name)
				} else {
					k := newAggKey(0, hashOf(i), []byte(name))
					if got := g.findBytes(hashOf(i), []byte(name)); got != nil {
						t.Fatalf("step %d: found %s before it was added", step, name)
					}
					g.add(k)
					held[name] = k
				}
				if g.n != len(held) {
					t.Fatalf("step %d: n = %d, want %d", step, g.n, len(held))
				}
				if step%97 != 0 {
					continue
				}
				seen := map[*aggKey]bool{}
				for k := range g.all() {
					if seen[k] || held[k.enc()] != k {
						t.Fatalf("step %d: all yielded %s twice or a key not held", step, k.enc())
					}
					seen[k] = true
				}
				if len(seen) != len(held) {
					t.Fatalf("step %d: all yielded %d keys, want %d", step, len(seen), len(held))
				}
				for name, k := range held {
					if g.find(k.tableHash(), name) != k {
						t.Fatalf("step %d: lost %s", step, name)
					}
				}
			}
			// Removing a key the group does not hold changes nothing.
			g.remove(newAggKey(0, hashOf(1), []byte("absent")))
			if g.n != len(held) {
				t.Fatalf("removing an absent key changed the count to %d, want %d", g.n, len(held))
			}
		})
	}
}

func TestSlotsForKeepsAQuarterFree(t *testing.T) {
	for _, n := range []int{0, 1, 3, 4, 7, 100, 1 << 20} {
		l := slotsFor(n)
		if l&(l-1) != 0 || l*3 < n*4 || l < minKeySlots {
			t.Errorf("slotsFor(%d) = %d: want a power of two of at least %d with %d keys at most 3/4 of it", n, l, minKeySlots, n)
		}
	}
}

// TestReserveHoldsTheKeysWithoutGrowing: a restore reserves a key group's
// room once; adding that many keys then leaves the table as it is.
func TestReserveHoldsTheKeysWithoutGrowing(t *testing.T) {
	g := &keyGroupState{}
	g.add(newAggKey(0, 1<<32, []byte("first")))
	g.reserve(1000)
	l := len(g.slots)
	for i := range 999 {
		g.add(newAggKey(0, uint64(i)<<32, []byte(fmt.Sprint(i))))
	}
	if len(g.slots) != l || g.n != 1000 {
		t.Errorf("after reserving 1000 and adding them: %d slots (reserved %d), %d keys", len(g.slots), l, g.n)
	}
	if g.find(1<<32, "first") == nil || g.find(998<<32, "998") == nil {
		t.Error("a key added before or after the reserve is lost")
	}
}

// TestSameEncoding: the word-wise comparison of short encodings agrees with
// string equality at every length around its bounds, for a difference at
// every position.
func TestSameEncoding(t *testing.T) {
	for n := 0; n <= 20; n++ {
		a := make([]byte, n)
		for i := range a {
			a[i] = byte('a' + i)
		}
		if !sameEncoding(string(a), append([]byte(nil), a...)) {
			t.Errorf("length %d: equal encodings compare unequal", n)
		}
		if n > 0 && sameEncoding(string(a), a[:n-1]) {
			t.Errorf("length %d: a prefix compares equal", n)
		}
		for i := range n {
			b := append([]byte(nil), a...)
			b[i] ^= 0x40
			if sameEncoding(string(a), b) {
				t.Errorf("length %d: a difference at byte %d compares equal", n, i)
			}
		}
	}
}

// TestAggKeyWindows: a key's windows read back as they were set through
// every count from none to several and back, with and without a key
// value, including when the slice given back aliases the key (windows
// returns its single window in place).
func TestAggKeyWindows(t *testing.T) {
	ws := make([]*winState, 4)
	for i := range ws {
		ws[i] = &winState{}
	}
	for _, withVal := range []bool{false, true} {
		k := newAggKey(0, KeyHash([]byte("k")), []byte("k"))
		if withVal {
			k.setVal("k")
		}
		for _, n := range []int{0, 1, 2, 3, 1, 0, 2, 1, 1, 0} {
			// Build the new list on the slice windows returned, as the
			// node does (mergeInto, the removal of a finished window).
			next := append(k.windows()[:0], ws[:n]...)
			k.setWindows(next)
			got := k.windows()
			if len(got) != n {
				t.Fatalf("val %v: set %d windows, read %d", withVal, n, len(got))
			}
			for i := range got {
				if got[i] != ws[i] {
					t.Fatalf("val %v: window %d of %d is not the one set", withVal, i, n)
				}
			}
			if withVal && k.val() != "k" {
				t.Fatalf("the key's value is lost after setting %d windows", n)
			}
		}
		if !withVal && k.x != nil && k.x.more != nil {
			t.Error("a key with one window or none still holds a window list")
		}
	}
}

// TestKeyGroupOfIsTheModulo: the mask taken for a power of two of key
// groups gives the key group the modulo gives, for every count.
func TestKeyGroupOfIsTheModulo(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []uint64{1, 2, 3, 7, 128, 1000, 4096, 4097, 65536} {
		for range 1000 {
			h := rng.Uint64()
			if got, want := keyGroupOf(h, n), h%n; got != want {
				t.Fatalf("keyGroupOf(%#x, %d) = %d, want %d", h, n, got, want)
			}
		}
	}
}

// TestAggKeyWin0Reuse: a key's windows, added and removed in a seeded
// random order, read back as a list kept beside them says, each window
// its own memory, and win0 holds a window whenever it was free when the
// window arrived — a key that has one window at a time, one after
// another, is one object — except after a merging step merged win0's
// window away (keySpent), when win0 is never given again.
func TestAggKeyWin0Reuse(t *testing.T) {
	tests := []struct {
		name  string
		spend bool
	}{{"fixed", false}, {"merged away", true}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, 9))
			k := newAggKey(0, KeyHash([]byte("k")), []byte("k"))
			var model []window.Window
			next := mtime.Time(0)
			reused := 0
			for step := range 2000 {
				if len(model) > 0 && (len(model) > 3 || r.IntN(2) == 0) {
					i := r.IntN(len(model))
					var ws *winState
					for j := range k.nwin() {
						if k.win(j).w == model[i] {
							ws = k.win(j)
						}
					}
					if ws == &k.win0 && tc.spend {
						k.bits |= keySpent
					}
					k.removeWindow(ws)
					model = append(model[:i], model[i+1:]...)
				} else {
					free := k.bits&(keyWin0|keySpent) == 0
					w := window.Window{Start: next, End: next + 10}
					next += 10
					ws := k.newWindow(w, window.State{})
					if free != (ws == &k.win0) {
						t.Fatalf("step %d: win0 free %v, but the new window in win0: %v", step, free, ws == &k.win0)
					}
					if free {
						reused++
					}
					model = append(model, w)
				}
				if k.nwin() != len(model) {
					t.Fatalf("step %d: %d windows, want %d", step, k.nwin(), len(model))
				}
				seen := map[*winState]bool{}
				inWin0 := false
				for i := range k.nwin() {
					ws := k.win(i)
					if ws.w != model[i] {
						t.Fatalf("step %d: window %d is %v, want %v", step, i, ws.w, model[i])
					}
					if seen[ws] {
						t.Fatalf("step %d: two windows share their memory", step)
					}
					seen[ws] = true
					inWin0 = inWin0 || ws == &k.win0
				}
				if inWin0 != (k.bits&keyWin0 != 0) {
					t.Fatalf("step %d: win0 holds a window: %v, flag says %v", step, inWin0, k.bits&keyWin0 != 0)
				}
				if len(model) <= 1 && inWin0 && k.x != nil && k.x.more != nil {
					t.Fatalf("step %d: a key with its one window in win0 keeps a list", step)
				}
			}
			if tc.spend && reused > 1 {
				// win0 is taken once, then spent the first time it frees.
				t.Errorf("win0 was given %d times after its window merged away", reused)
			}
			if !tc.spend && reused < 100 {
				t.Errorf("win0 was given to only %d of the windows", reused)
			}
		})
	}
}

// TestAggKeyCompact: a key's one window moves into win0 when win0 is free
// and nothing may point at the window (it is neither queued nor held),
// with its bounds, trigger state and accumulator; the key is then one
// object unless it keeps a value. A queued or held window, a spent win0
// and a key with two windows stay as they are.
func TestAggKeyCompact(t *testing.T) {
	w1 := window.Window{Start: 0, End: 10}
	w2 := window.Window{Start: 10, End: 20}
	tests := []struct {
		name      string
		marks     uint8
		spent     bool
		withVal   bool
		both      bool // w1 stays open beside w2
		wantMoved bool
	}{
		{name: "one window after another", wantMoved: true},
		{name: "a key that keeps its value", withVal: true, wantMoved: true},
		{name: "queued", marks: markQueued},
		{name: "held", marks: markHeld},
		{name: "win0 merged away", spent: true},
		{name: "two windows open", both: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := newAggKey(0, KeyHash([]byte("k")), []byte("k"))
			if tc.withVal {
				k.setVal("k")
			}
			first := k.newWindow(w1, window.State{})
			second := k.newWindow(w2, window.State{NextIndex: 3})
			second.acc = int64(42)
			second.st.SetMarks(tc.marks)
			if !tc.both {
				if tc.spent {
					k.bits |= keySpent
				}
				k.removeWindow(first)
			}
			k.compact()
			if moved := k.nwin() >= 1 && k.win(k.nwin()-1) == &k.win0; moved != tc.wantMoved {
				t.Fatalf("the window moved into win0: %v, want %v", moved, tc.wantMoved)
			}
			last := k.win(k.nwin() - 1)
			if last.w != w2 || last.st.NextIndex != 3 || last.acc != int64(42) || last.st.Marks() != tc.marks {
				t.Fatalf("the window reads %+v after compact, want w2's state", *last)
			}
			if tc.wantMoved {
				if k.nwin() != 1 || k.bits&keyWin0 == 0 {
					t.Fatalf("%d windows, win0 flag %v", k.nwin(), k.bits&keyWin0 != 0)
				}
				if (k.x == nil) == tc.withVal {
					t.Errorf("extra record kept: %v, want %v (a key value)", k.x != nil, tc.withVal)
				}
				if tc.withVal && k.val() != "k" {
					t.Errorf("the key's value is lost")
				}
			}
			if tc.both && k.nwin() != 2 {
				t.Errorf("%d windows, want 2", k.nwin())
			}
		})
	}
}

// TestTimerHeapGivesMemoryBack: a popped timer no longer points at its
// key's record, and a heap that fell below a quarter of its array moves
// to a smaller one, keeping its timers in firing order.
func TestTimerHeapGivesMemoryBack(t *testing.T) {
	var h timerHeap
	const n = 4 * minShrinkTimers
	for i := range n {
		heapPush(&h, timerRef{t: mtime.Time((i * 7919) % n), k: &aggKey{}})
	}
	var fired []mtime.Time
	for range n - n/8 {
		fired = append(fired, heapPop(&h).t)
	}
	for i, r := range h[len(h):cap(h)] {
		if r.k != nil {
			t.Fatalf("popped slot %d still holds its key", len(h)+i)
		}
	}
	before := cap(h)
	h.shrink()
	if cap(h) >= before/2 || len(h) != n/8 {
		t.Fatalf("after shrink: len %d cap %d, was cap %d", len(h), cap(h), before)
	}
	for len(h) > 0 {
		fired = append(fired, heapPop(&h).t)
	}
	if !slices.IsSorted(fired) || len(fired) != n {
		t.Fatalf("%d timers fired, in order: %v", len(fired), slices.IsSorted(fired))
	}
	small := timerHeap(make([]timerRef, 1, minShrinkTimers/2))
	small.shrink()
	if cap(small) != minShrinkTimers/2 {
		t.Errorf("a small heap was moved (cap %d)", cap(small))
	}

	// A stateful step's timers likewise.
	var sf sfTimerHeap
	for i := range 3 {
		heapPush(&sf, sfTimerRef{t: mtime.Time(i), key: "k"})
	}
	heapPop(&sf)
	if r := sf[:cap(sf)][len(sf)]; r.key != "" {
		t.Error("a stateful step's popped timer still holds its key")
	}
}

// refHeap is timerHeap under container/heap, the order timers fired in
// before the runner's own heap functions.
type refHeap []timerRef

func (h refHeap) Len() int           { return len(h) }
func (h refHeap) Less(i, j int) bool { return h[i].t < h[j].t }
func (h refHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *refHeap) Push(x any)        { *h = append(*h, x.(timerRef)) }
func (h *refHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// TestTimerHeapKeepsTheFiringOrder: timers due at the same time fire in
// the order container/heap gave them (an upgraded runner replays a
// restored job's timers as the old one did), through pushes and pops in
// any mix and a heap built at once from a restore.
func TestTimerHeapKeepsTheFiringOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for round := range 20 {
		var got timerHeap
		var want refHeap
		var fromGot, fromWant []*aggKey
		initial := rng.IntN(200)
		for i := range initial {
			r := timerRef{t: mtime.Time(rng.IntN(8)), k: &aggKey{hi: uint32(i)}}
			got, want = append(got, r), append(want, r)
		}
		heapInit(got)
		heap.Init(&want)
		for i := range 2000 {
			if rng.IntN(3) == 0 && len(got) > 0 {
				fromGot = append(fromGot, heapPop(&got).k)
				fromWant = append(fromWant, heap.Pop(&want).(timerRef).k)
				continue
			}
			r := timerRef{t: mtime.Time(rng.IntN(8)), k: &aggKey{hi: uint32(i)}}
			heapPush(&got, r)
			heap.Push(&want, r)
		}
		for len(got) > 0 {
			fromGot = append(fromGot, heapPop(&got).k)
			fromWant = append(fromWant, heap.Pop(&want).(timerRef).k)
		}
		if !slices.Equal(fromGot, fromWant) {
			t.Fatalf("round %d: timers fired in another order than container/heap's", round)
		}
	}
}

// TestTimerHeapRegrowsByDoubling: a heap refilled after giving its array
// back doubles up to the length it gave back (never past it), keeping
// its timers in their places; past that length, append's growth applies.
func TestTimerHeapRegrowsByDoubling(t *testing.T) {
	const gaveBack = 1000
	var h timerHeap
	var caps []int
	for i := range gaveBack + 1 {
		if len(h) == cap(h) && len(h) < gaveBack {
			h = regrown(h, gaveBack)
			caps = append(caps, cap(h))
		}
		heapPush(&h, timerRef{t: mtime.Time(gaveBack - i)})
	}
	if want := []int{64, 128, 256, 512, 1000}; !slices.Equal(caps, want) {
		t.Fatalf("arrays %v, want %v", caps, want)
	}
	if cap(h) <= gaveBack || cap(h) >= 2*gaveBack {
		t.Errorf("past the length given back the array is %d long, want append's growth", cap(h))
	}
	var fired []mtime.Time
	for len(h) > 0 {
		fired = append(fired, heapPop(&h).t)
	}
	if len(fired) != gaveBack+1 || !slices.IsSorted(fired) {
		t.Fatalf("%d timers fired, in order: %v", len(fired), slices.IsSorted(fired))
	}
}
