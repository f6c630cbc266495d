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
func SortStateEntries(es []StateEntry) {
	n := len(es)
	if n < 2 {
		return
	}
	b, nb, ok := stateBuckets(es)
	if !ok {
		sortStateIndexes(es)
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
	for i, id := range b {
		tmp[next[id]] = es[i]
		next[id]++
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
				items = sortBucket(es, tmp, lo, hi, items)
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
func stateBuckets(es []StateEntry) (b []uint32, nb int, ok bool) {
	var steps []string
	seen := map[string]bool{}
	last, maxKG := "", 0
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
	groups := maxKG + 1
	nb = len(steps) * groups
	if nb > 2*len(es)+1<<16 {
		return nil, 0, false
	}
	slices.Sort(steps)
	rank := make(map[string]uint32, len(steps))
	for i, s := range steps {
		rank[s] = uint32(i * groups)
	}
	b = make([]uint32, len(es))
	var base uint32
	for i := range es {
		e := &es[i]
		if i == 0 || e.Step != last {
			base, last = rank[e.Step], e.Step
		}
		b[i] = base + uint32(e.KeyGroup)
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
