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
// most of a full checkpoint's time. Instead, the entries are put in
// buckets, one per step and key group, by a stable counting pass over
// their indexes; each bucket's indexes are then sorted by key on their
// own, the buckets spread over GOMAXPROCS goroutines; and the entries are
// moved once, in place, along the cycles of that permutation. Beside the
// entries it takes 8 bytes an entry (the buckets and the indexes), not a
// scratch copy of the 72-byte entries: at ten million keys, 80 MB where
// the copy was 720 MB of fresh memory.
func SortStateEntries(es []StateEntry) {
	if len(es) < 2 {
		return
	}
	order, ok := sortedOrder([][]StateEntry{es})
	if !ok {
		sortStateIndexes(es)
		return
	}
	permute(es, order)
}

// permute moves each entry of es to its place: position k receives the
// entry at order[k]. It follows the permutation's cycles, each entry moved
// once and one held aside per cycle; order is used up (every element ends
// equal to its index).
func permute(es []StateEntry, order []int32) {
	for i := range order {
		if int(order[i]) == i {
			continue
		}
		held := es[i]
		j := i
		for {
			k := int(order[j])
			order[j] = int32(j)
			if k == i {
				es[j] = held
				break
			}
			es[j] = es[k]
			j = k
		}
	}
}

// SortedStateEntries returns the entries of parts, taken in their order
// (parts[0] first), in one new slice in SortStateEntries' order: each
// entry is moved once, from its part straight to its place, where
// appending the parts into one slice and sorting it would move it three
// times (at millions of entries, into fresh memory each time).
func SortedStateEntries(parts [][]StateEntry) []StateEntry {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n == 0 {
		return nil
	}
	dst := make([]StateEntry, n)
	order, ok := sortedOrder(parts)
	if !ok {
		concat(dst, parts)
		sortStateIndexes(dst)
		return dst
	}
	at := entryAt(parts)
	for k, i := range order {
		dst[k] = *at(i)
	}
	return dst
}

// sortedOrder returns the order of the entries of parts (numbered across
// the parts, parts[0]'s first) in SortStateEntries' order: order[k] is the
// entry that goes to position k. The entries are put in buckets, one per
// step and key group, by a stable counting pass over their numbers; each
// bucket's numbers are then sorted by key on their own, the buckets
// spread over GOMAXPROCS goroutines. ok is false when there would be far
// more buckets than entries (stateBuckets).
func sortedOrder(parts [][]StateEntry) (order []int32, ok bool) {
	b, nb, ok := stateBuckets(parts)
	if !ok {
		return nil, false
	}
	n := len(b)
	starts := bucketStarts(b, nb)
	order = make([]int32, n)
	next := slices.Clone(starts[:nb])
	for i, id := range b {
		order[next[id]] = int32(i)
		next[id]++
	}
	at := entryAt(parts)
	forBuckets(n, nb, func(i int, items []keyItem) []keyItem {
		lo, hi := starts[i], starts[i+1]
		if hi-lo < 2 {
			return items
		}
		items = items[:0]
		for _, g := range order[lo:hi] {
			e := at(g)
			items = append(items, keyItem{key: e.Key, del: e.Value == nil, pos: g})
		}
		sortKeyItems(items)
		for k, it := range items {
			order[lo+k] = it.pos
		}
		return items
	})
	return order, true
}

// entryAt returns a function that finds the entry numbered i across parts
// (parts[0]'s first).
func entryAt(parts [][]StateEntry) func(i int32) *StateEntry {
	if len(parts) == 1 {
		es := parts[0]
		return func(i int32) *StateEntry { return &es[i] }
	}
	// ends[p] is the number after parts[p]'s last entry.
	ends := make([]int32, len(parts))
	var n int32
	for p, es := range parts {
		n += int32(len(es))
		ends[p] = n
	}
	return func(i int32) *StateEntry {
		p, _ := slices.BinarySearch(ends, i+1)
		if p > 0 {
			i -= ends[p-1]
		}
		return &parts[p][i]
	}
}

// bucketStarts returns where each of the nb buckets begins in the bucketed
// order of entries whose buckets are b; the last element is len(b).
func bucketStarts(b []uint32, nb int) []int {
	starts := make([]int, nb+1)
	for _, id := range b {
		starts[id+1]++
	}
	for i := 1; i <= nb; i++ {
		starts[i] += starts[i-1]
	}
	return starts
}

// forBuckets calls sortBucket for each of nb buckets of n entries in all,
// the buckets shared among up to GOMAXPROCS goroutines; each goroutine
// passes its scratch items from call to call.
func forBuckets(n, nb int, sortBucket func(i int, items []keyItem) []keyItem) {
	workers := min(runtime.GOMAXPROCS(0), 1+n/parallelSortMin)
	var bucket atomic.Int64
	sortSome := func() {
		var items []keyItem
		for {
			i := int(bucket.Add(1) - 1)
			if i >= nb {
				return
			}
			items = sortBucket(i, items)
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
// deletion, and its position (the tie that keeps the order stable).
type keyItem struct {
	key []byte
	del bool
	pos int32
}

// sortKeyItems sorts one bucket's items by key, a deletion before a value
// of the same key, then by position.
func sortKeyItems(items []keyItem) {
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
