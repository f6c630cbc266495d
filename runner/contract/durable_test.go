package contract

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortStateEntries: entries come out by step, key group and key, a
// deletion before a value of the same key, and entries that compare equal
// keep their order (the last of two values of one key is the one a store
// keeps).
func TestSortStateEntries(t *testing.T) {
	del := func(step string, kg uint16, key string) StateEntry {
		return StateEntry{Step: step, KeyGroup: kg, Key: []byte(key)}
	}
	val := func(step string, kg uint16, key, v string) StateEntry {
		return StateEntry{Step: step, KeyGroup: kg, Key: []byte(key), Value: []byte(v)}
	}
	for _, tc := range []struct {
		name     string
		in, want []StateEntry
	}{
		{"empty", nil, nil},
		{"by step, key group, key",
			[]StateEntry{val("b", 0, "a", "1"), val("a", 2, "a", "2"), val("a", 1, "b", "3"), val("a", 1, "a", "4")},
			[]StateEntry{val("a", 1, "a", "4"), val("a", 1, "b", "3"), val("a", 2, "a", "2"), val("b", 0, "a", "1")}},
		{"deletion before value",
			[]StateEntry{val("s", 0, "k", "new"), del("s", 0, "k")},
			[]StateEntry{del("s", 0, "k"), val("s", 0, "k", "new")}},
		{"equal entries keep their order",
			[]StateEntry{val("s", 0, "k", "first"), val("s", 0, "a", "x"), val("s", 0, "k", "second")},
			[]StateEntry{val("s", 0, "a", "x"), val("s", 0, "k", "first"), val("s", 0, "k", "second")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := slices.Clone(tc.in)
			SortStateEntries(got)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %v\nwant %v", got, tc.want)
			}
		})
	}
}

// TestSortStateEntriesMatchesStableSort: on random entries with repeated
// keys, deletions and values, the order is a stable sort's — with few
// entries (one goroutine), with enough for the buckets to be sorted in
// parallel, and with many steps over sparse key groups (one comparison
// sort instead of buckets).
func TestSortStateEntriesMatchesStableSort(t *testing.T) {
	for _, tc := range []struct {
		name          string
		n, steps, kgs int
		keys          int
	}{
		{"few entries", 5000, 3, 4, 50},
		{"parallel buckets", 300_000, 3, 128, 20_000},
		{"one key group", 100_000, 1, 1, 30_000},
		{"sparse key groups of many steps", 2000, 40, 65536, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, uint64(tc.n)))
			es := make([]StateEntry, tc.n)
			for i := range es {
				es[i] = StateEntry{Step: fmt.Sprint("s", r.IntN(tc.steps)), KeyGroup: uint16(r.IntN(tc.kgs)), Key: []byte(fmt.Sprint("k", r.IntN(tc.keys)))}
				if r.IntN(4) > 0 {
					es[i].Value = []byte(fmt.Sprint(i))
				}
			}
			want := slices.Clone(es)
			slices.SortStableFunc(want, func(a, b StateEntry) int { return compareEntries(&a, &b) })
			SortStateEntries(es)
			for i := range es {
				g, w := es[i], want[i]
				if g.Step != w.Step || g.KeyGroup != w.KeyGroup || !bytes.Equal(g.Key, w.Key) || (g.Value == nil) != (w.Value == nil) || !bytes.Equal(g.Value, w.Value) {
					t.Fatalf("entry %d: got %v, want %v (a stable sort's)", i, g, w)
				}
			}
		})
	}
}

// BenchmarkSortStateEntries sorts a full checkpoint's entries of one step:
// keys like a Combine's, in random order over 128 key groups; "in place"
// as one worker's part (SortStateEntries), "2 parts" as two workers'
// (SortedStateEntries). It reports the heap it allocates per sort.
func BenchmarkSortStateEntries(b *testing.B) {
	for _, n := range []int{1000, 100_000, 1_000_000, 4_000_000} {
		r := rand.New(rand.NewPCG(1, 2))
		src := make([]StateEntry, n)
		for i := range src {
			src[i] = StateEntry{Step: "Sum", KeyGroup: uint16(r.IntN(128)), Key: fmt.Appendf(nil, "\"key-%d\"", i), Value: []byte("accumulator")}
		}
		r.Shuffle(n, func(i, j int) { src[i], src[j] = src[j], src[i] })
		b.Run(fmt.Sprint("in place/", n), func(b *testing.B) {
			es := make([]StateEntry, n)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				copy(es, src)
				b.StartTimer()
				SortStateEntries(es)
			}
		})
		b.Run(fmt.Sprint("2 parts/", n), func(b *testing.B) {
			parts := [][]StateEntry{src[:n/2], src[n/2:]}
			b.ReportAllocs()
			for range b.N {
				_ = SortedStateEntries(parts)
			}
		})
	}
}

// TestSortedStateEntriesOfParts: the entries of several parts come out
// in one slice in the order of a stable sort of the parts one after the
// other — through the buckets, and through the comparison sort of many
// steps over sparse key groups — and Complete puts a checkpoint's
// entries and its pending parts together so.
func TestSortedStateEntriesOfParts(t *testing.T) {
	for _, tc := range []struct {
		name       string
		parts      []int
		steps, kgs int
		keys       int
	}{
		{"two workers", []int{40_000, 35_000}, 2, 64, 5000},
		{"one empty part", []int{0, 3000, 0}, 1, 16, 100},
		{"sparse key groups of many steps", []int{700, 900, 400}, 40, 65536, 100},
		{"one entry", []int{0, 1}, 1, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(2, uint64(len(tc.parts))))
			var parts [][]StateEntry
			var all []StateEntry
			for pi, n := range tc.parts {
				p := make([]StateEntry, n)
				for i := range p {
					p[i] = StateEntry{Step: fmt.Sprint("s", r.IntN(tc.steps)), KeyGroup: uint16(r.IntN(tc.kgs)), Key: []byte(fmt.Sprint("k", r.IntN(tc.keys)))}
					if r.IntN(4) > 0 {
						p[i].Value = []byte(fmt.Sprint(pi, "/", i))
					}
				}
				parts = append(parts, p)
				all = append(all, p...)
			}
			want := slices.Clone(all)
			slices.SortStableFunc(want, func(a, b StateEntry) int { return compareEntries(&a, &b) })
			check := func(what string, got []StateEntry) {
				t.Helper()
				if len(got) != len(want) {
					t.Fatalf("%s: %d entries, want %d", what, len(got), len(want))
				}
				for i := range got {
					g, w := got[i], want[i]
					if g.Step != w.Step || g.KeyGroup != w.KeyGroup || !bytes.Equal(g.Key, w.Key) || (g.Value == nil) != (w.Value == nil) || !bytes.Equal(g.Value, w.Value) {
						t.Fatalf("%s: entry %d: got %v, want %v (a stable sort's)", what, i, g, w)
					}
				}
			}
			check("SortedStateEntries", SortedStateEntries(parts))
			cp := &Checkpoint{Epoch: 1, State: slices.Clone(parts[0])}
			for _, p := range parts[1:] {
				cp.Pending = append(cp.Pending, &donePart{slices.Clone(p)})
			}
			if err := cp.Complete(context.Background()); err != nil {
				t.Fatal(err)
			}
			check("Complete", cp.State)
		})
	}
}

// donePart is a PendingState already encoded.
type donePart struct{ es []StateEntry }

func (d *donePart) Await(context.Context) ([]StateEntry, error) {
	es := d.es
	d.es = nil
	return es, nil
}
