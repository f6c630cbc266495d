package runner

import (
	"fmt"
	"strconv"
	"testing"
	"time"
	"unsafe"
)

// testKey is a key of a fake keyed step: its state is one number.
type testKey struct {
	name  string
	v     int
	dirty uint64
	dead  bool
}

func newTestLog() changeLog[*testKey] {
	return newChangeLog("Step",
		func(k *testKey) *uint64 { return &k.dirty },
		func(k *testKey) dirtyKey { return dirtyKey{kg: 0, key: k.name} },
		func(buf []byte, k *testKey) ([]byte, bool, error) {
			if k.dead {
				return buf, false, nil
			}
			return strconv.AppendInt(buf, int64(k.v), 10), true, nil
		})
}

// write changes k as a keyed step does: log first, then mutate.
func write(c *changeLog[*testKey], k *testKey, v int) {
	c.log(&k.dirty, k)
	k.v = v
}

func entries(t *testing.T, p pendingState) map[string]string {
	t.Helper()
	es, err := p.result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range es {
		if _, dup := out[string(e.Key)]; dup {
			t.Fatalf("key %s twice in one snapshot", e.Key)
		}
		if e.Value == nil {
			out[string(e.Key)] = "<deleted>"
		} else {
			out[string(e.Key)] = string(e.Value)
		}
	}
	return out
}

// TestSnapshotCopyOnWrite: a snapshot encoded after its barrier holds every
// key as it was at the barrier, whether a key is encoded before, or —
// copy on write — just before it changes again; keys changed after the
// barrier go to the next snapshot.
func TestSnapshotCopyOnWrite(t *testing.T) {
	tests := []struct {
		name string
		// before encodes this many keys of the snapshot before the writes.
		before int
		writes map[int]int // key index -> new value after the barrier
		kill   int         // key index deleted after the barrier (-1: none)
	}{
		{name: "no writes", before: 0, writes: nil, kill: -1},
		{name: "writes before encoding", before: 0, writes: map[int]int{0: 100, 7: 107, 9: 109}, kill: -1},
		{name: "writes half way", before: 5, writes: map[int]int{1: 101, 6: 106}, kill: 8},
		{name: "writes after encoding", before: 10, writes: map[int]int{2: 102, 3: 103}, kill: 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := &worker{}
			c := newTestLog()
			keys := make([]*testKey, 10)
			for i := range keys {
				keys[i] = &testKey{name: fmt.Sprintf("k%d", i)}
				write(&c, keys[i], i)
			}
			snap := c.snapshot(w, false)
			if len(w.snapshots) != 1 {
				t.Fatalf("worker owns %d snapshots, want 1", len(w.snapshots))
			}
			snap.encodeSome(tc.before)
			for i, v := range tc.writes {
				write(&c, keys[i], v)
			}
			if tc.kill >= 0 {
				c.log(&keys[tc.kill].dirty, keys[tc.kill])
				keys[tc.kill].dead = true
			}
			for len(w.snapshots) > 0 {
				w.encodeSnapshots()
			}
			got := entries(t, snap)
			for i := range keys {
				if want := strconv.Itoa(i); got[keys[i].name] != want {
					t.Errorf("snapshot has %s = %s, want its value at the barrier %s", keys[i].name, got[keys[i].name], want)
				}
			}
			next := entries(t, c.snapshot(w, true).finishAndGet())
			for i, v := range tc.writes {
				if next[keys[i].name] != strconv.Itoa(v) {
					t.Errorf("next snapshot has %s = %q, want %d", keys[i].name, next[keys[i].name], v)
				}
			}
			if tc.kill >= 0 && next[keys[tc.kill].name] != "<deleted>" {
				t.Errorf("next snapshot has %s = %q, want a deletion", keys[tc.kill].name, next[keys[tc.kill].name])
			}
			if want := len(tc.writes) + map[bool]int{true: 1}[tc.kill >= 0]; len(next) != want {
				t.Errorf("next snapshot has %d keys, want %d", len(next), want)
			}
		})
	}
}

// finishAndGet claims a free snapshot and encodes it (as Complete does).
func (l *lazySnapshot[R]) finishAndGet() pendingState {
	if l.claim() {
		l.finishHere()
	}
	<-l.done
	return l
}

// TestSnapshotAdoption: a frozen snapshot is encoded by the worker that
// adopts its keys, or by whoever completes it — never by both.
func TestSnapshotAdoption(t *testing.T) {
	c := newTestLog()
	k := &testKey{name: "a"}
	write(&c, k, 1)
	snap := c.snapshot(&worker{}, true)
	if snap.state.Load() != snapFree {
		t.Fatalf("a frozen snapshot is in state %d, want free", snap.state.Load())
	}
	w2 := &worker{}
	c2 := newTestLog()
	c2.continueAfter(&c, w2, true)
	if snap.claim() {
		t.Fatal("Complete could claim a snapshot an adopting worker owns")
	}
	write(&c2, k, 2) // copy on write through the adopted snapshot
	for len(w2.snapshots) > 0 {
		w2.encodeSnapshots()
	}
	if got := entries(t, snap)["a"]; got != "1" {
		t.Errorf("adopted snapshot has a = %s, want 1", got)
	}
}

// TestSnapshotFinishesAcrossSlices: encoding yields to the data every
// snapSliceTime, but a snapshot encoded to the end (Complete, a rescale, a
// finished step) is complete however slow its keys are.
func TestSnapshotFinishesAcrossSlices(t *testing.T) {
	c := newChangeLog("Step",
		func(k *testKey) *uint64 { return &k.dirty },
		func(k *testKey) dirtyKey { return dirtyKey{key: k.name} },
		func(buf []byte, k *testKey) ([]byte, bool, error) {
			return strconv.AppendInt(buf, int64(k.v), 10), true, nil
		})
	const n = 500 // ≥ 10 ms of encoding: several slices
	for i := range n {
		k := &testKey{name: fmt.Sprintf("k%04d", i)}
		write(&c, k, i)
	}
	snap := c.snapshot(&worker{}, true)
	// Slow keys without sleeping: the slice clock moves 20 µs per reading,
	// and it is read once every snapCheckEvery keys.
	var clock time.Time
	snap.now = func() time.Time {
		clock = clock.Add(20 * time.Microsecond * snapCheckEvery)
		return clock
	}
	if !snap.claim() {
		t.Fatal("could not claim a frozen snapshot")
	}
	snap.finishHere()
	select {
	case <-snap.done:
	default:
		t.Fatal("finishHere returned before the snapshot was complete")
	}
	if got := len(entries(t, snap)); got != n {
		t.Errorf("snapshot has %d keys, want %d", got, n)
	}
}

// TestSnapshotHandsEntriesOutOnce: once a checkpoint took a snapshot's
// entries (Await), the node's change log, which keeps the snapshot until
// its next one, no longer references them (a full checkpoint's encoded
// state would otherwise stay in memory while the job idles), and a second
// Await (a Complete retried after a cancelled one) returns none rather
// than the same entries twice.
func TestSnapshotHandsEntriesOutOnce(t *testing.T) {
	w := &worker{}
	c := newTestLog()
	for i := range 100 {
		write(&c, &testKey{name: fmt.Sprintf("k%d", i)}, i)
	}
	p := c.snapshot(w, true) // frozen: nobody owns it, Await encodes it
	got, err := p.Await(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 100 {
		t.Fatalf("Await: %d entries, want 100", len(got))
	}
	if c.pending != p {
		t.Fatalf("the change log no longer holds its pending snapshot")
	}
	if kept, _ := p.result(); kept != nil {
		t.Errorf("after Await the snapshot still holds %d entries", len(kept))
	}
	again, err := p.Await(t.Context())
	if err != nil || len(again) != 0 {
		t.Errorf("second Await: %d entries, err %v; want none", len(again), err)
	}
}

// TestAggKeySize: a keyed step's record of a key is at most 96 bytes, a
// size class, which every held key pays. It was 112 before its window's
// state (the trigger's deadline and sub-triggers behind one pointer, the
// window's flags in the trigger state's spare bytes) went from 40 bytes to
// 24; 128 before the windows'
// pointer gave way to a flag (win0 holds the one window of most keys) and
// the window's marks moved into its state's padding; 192 (in a 208-byte
// class) before its windows' slice became one pointer, its hash a half,
// its encoding's string header a length byte, and its key value (nil for
// most), a long encoding and the windows of a key that has several moved
// behind one pointer, and its trigger's element count became 32 bits;
// 256 before its flags shared a word; 240 before the key groups' tables
// replaced its hash chain. A window of a key beyond its first is at most
// 56 bytes.
func TestAggKeySize(t *testing.T) {
	if n := unsafe.Sizeof(aggKey{}); n > 96 {
		t.Errorf("aggKey is %d bytes, want at most 96", n)
	}
	if n := unsafe.Sizeof(winState{}); n > 56 {
		t.Errorf("winState is %d bytes, want at most 56", n)
	}
}
