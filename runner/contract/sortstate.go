package contract

import (
	"bytes"
	"cmp"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// SortStateEntries orders entries by step, key group and key; for one key,
// a deletion comes before a value (a key deleted and created again in one
// interval ends with its value); entries equal in all of these keep their
// order. It is the order of a complete checkpoint's State.
//
// A checkpoint's entries come in the order its keyed steps' maps gave
// them, so one comparison sort of the whole slice followed pointers to a
// random entry and key at every comparison: at millions of keys that was
// most of a full checkpoint's time. Instead, one stable counting pass puts
// the entries in buckets, one per step and key group, and each bucket is
// then sorted by key on its own, the buckets spread over GOMAXPROCS
// goroutines; each entry is moved twice.
func SortStateEntries(es []StateEntry) { sortParts(es, [][]StateEntry{es}) }

// SortedStateEntries returns the entries of parts, taken in their order
// (parts[0] first), in one new slice in SortStateEntries' order. It moves
// each entry twice, where appending the parts into one slice and sorting
// it would move each three times (at millions of entries, into fresh
// memory each time).
func SortedStateEntries(parts [][]StateEntry) []StateEntry {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n == 0 {
		return nil
	}
	out := make([]StateEntry, n)
	sortParts(out, parts)
	return out
}

// sortParts writes the entries of parts, in SortStateEntries' order, into
// dst, which holds as many; dst may be parts' only element (an in-place
// sort).
func sortParts(dst []StateEntry, parts [][]StateEntry) {
	n := len(dst)
	inPlace := len(parts) == 1 && n > 0 && &parts[0][0] == &dst[0]
	if n < 2 {
		if !inPlace {
			concat(dst, parts)
		}
		return
	}
	b, nb, ok := stateBuckets(parts)
	if !ok {
		if !inPlace {
			concat(dst, parts)
		}
		sortStateIndexes(dst)
		return
	}
	// starts[i] is where bucket i begins in the bucketed order.
	starts := make([]int, nb+1)
	for _, id := range b {
		starts[id+1]++
	}
	for i := 1; i <= nb; i++ {
		starts[i] += starts[i-1]
	}
	tmp := make([]StateEntry, n)
	next := slices.Clone(starts[:nb])
	i := 0
	for _, p := range parts {
		for j := range p {
			id := b[i]
			tmp[next[id]] = p[j]
			next[id]++
			i++
		}
	}
	workers := min(runtime.GOMAXPROCS(0), 1+n/parallelSortMin)
	var bucket atomic.Int64
	sortSome := func() {
		var items []keyItem
		for {
			i := int(bucket.Add(1) - 1)
			if i >= nb {
				return
			}
			if lo, hi := starts[i], starts[i+1]; hi > lo {
				items = sortBucket(dst, tmp, lo, hi, items)
			}
		}
	}
	if workers <= 1 {
		sortSome()
		return
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(sortSome)
	}
	wg.Wait()
}

// concat copies the entries of parts, one part after the other, into dst.
func concat(dst []StateEntry, parts [][]StateEntry) {
	k := 0
	for _, p := range parts {
		k += copy(dst[k:], p)
	}
}

// parallelSortMin is the number of entries each further goroutine of
// SortStateEntries is given at least (fewer are sorted faster on one).
const parallelSortMin = 1 << 16

// keyItem is an entry of a bucket being sorted: its key, whether it is a
// deletion, and its position in the bucket (the tie that keeps the order
// stable).
type keyItem struct {
	key []byte
	del bool
	pos int32
}

// sortBucket writes tmp[lo:hi], the entries of one step and key group, into
// es[lo:hi] in key order; items is scratch space, returned for reuse.
func sortBucket(es, tmp []StateEntry, lo, hi int, items []keyItem) []keyItem {
	items = items[:0]
	for p := lo; p < hi; p++ {
		items = append(items, keyItem{key: tmp[p].Key, del: tmp[p].Value == nil, pos: int32(p - lo)})
	}
	slices.SortFunc(items, func(a, b keyItem) int {
		if c := bytes.Compare(a.key, b.key); c != 0 {
			return c
		}
		if a.del != b.del {
			if a.del {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.pos, b.pos)
	})
	for k, it := range items {
		es[lo+k] = tmp[lo+int(it.pos)]
	}
	return items
}

// stateBuckets returns each entry's bucket (its step's rank among the
// entries' steps, times the key groups, plus its key group) and the number
// of buckets; ok is false when there would be far more buckets than
// entries (many steps and sparse key groups), where one comparison sort is
// cheaper.
func stateBuckets(parts [][]StateEntry) (b []uint32, nb int, ok bool) {
	var steps []string
	seen := map[string]bool{}
	n, maxKG := 0, 0
	for _, es := range parts {
		last := ""
		for i := range es {
			e := &es[i]
			if i == 0 || e.Step != last {
				if !seen[e.Step] {
					seen[e.Step] = true
					steps = append(steps, e.Step)
				}
				last = e.Step
			}
			maxKG = max(maxKG, int(e.KeyGroup))
		}
		n += len(es)
	}
	groups := maxKG + 1
	nb = len(steps) * groups
	if nb > 2*n+1<<16 {
		return nil, 0, false
	}
	slices.Sort(steps)
	rank := make(map[string]uint32, len(steps))
	for i, s := range steps {
		rank[s] = uint32(i * groups)
	}
	b = make([]uint32, 0, n)
	for _, es := range parts {
		var base uint32
		last := ""
		for i := range es {
			e := &es[i]
			if i == 0 || e.Step != last {
				base, last = rank[e.Step], e.Step
			}
			b = append(b, base+uint32(e.KeyGroup))
		}
	}
	return b, nb, true
}

// sortStateIndexes is SortStateEntries by one comparison sort of indexes
// (not of the 72-byte entries), tied on the index so that it is stable;
// then each entry is moved once.
func sortStateIndexes(es []StateEntry) {
	idx := make([]int32, len(es))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(i, j int32) int {
		if c := compareEntries(&es[i], &es[j]); c != 0 {
			return c
		}
		return cmp.Compare(i, j)
	})
	sorted := make([]StateEntry, len(es))
	for k, i := range idx {
		sorted[k] = es[i]
	}
	copy(es, sorted)
}

// compareEntries is SortStateEntries' order.
func compareEntries(a, b *StateEntry) int {
	if c := cmp.Compare(a.Step, b.Step); c != 0 {
		return c
	}
	if c := cmp.Compare(a.KeyGroup, b.KeyGroup); c != 0 {
		return c
	}
	if c := bytes.Compare(a.Key, b.Key); c != 0 {
		return c
	}
	switch {
	case a.Value == nil && b.Value != nil:
		return -1
	case a.Value != nil && b.Value == nil:
		return 1
	}
	return 0
}
