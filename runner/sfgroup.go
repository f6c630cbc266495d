package runner

import (
	"iter"
	"unsafe"
)

// sfGroup is a stateful step's keys in one key group: an open-addressing
// table of the keys' records, found by the upper half of the key's hash
// (sfKey.hi) and their encoding, as keyGroupState is for aggregations. A
// Go map of strings cost 58 bytes a key and hashed each key's string
// again, where the element's hash is already known.
type sfGroup struct {
	slots []*sfKey
	// n is the number of keys held.
	n int
}

// home returns the slot where the search for a key with hash h starts
// (the upper half: the lower bits pick the key group).
func (g *sfGroup) home(hi uint32) int { return int(hi) & (len(g.slots) - 1) }

// find returns the key whose hash's upper half is hi and whose encoding
// is key, or nil.
func (g *sfGroup) find(hi uint32, key string) *sfKey {
	// findBytes only reads the bytes: a view of the string, not a copy.
	return g.findBytes(hi, unsafe.Slice(unsafe.StringData(key), len(key)))
}

// findBytes is find for an encoding held in a scratch buffer.
func (g *sfGroup) findBytes(hi uint32, key []byte) *sfKey {
	if g == nil || len(g.slots) == 0 {
		return nil
	}
	mask := len(g.slots) - 1
	for i := g.home(hi); ; i = (i + 1) & mask {
		k := g.slots[i]
		if k == nil {
			return nil
		}
		if k.hi == hi && sameEncoding(k.str, key) {
			return k
		}
	}
}

// add puts k, which the group does not hold, into it.
func (g *sfGroup) add(k *sfKey) {
	if (g.n+1)*4 > len(g.slots)*3 {
		g.grow(max(minKeySlots, 2*len(g.slots)))
	}
	g.put(k)
	g.n++
}

// reserve makes room for n keys in all before the table grows again.
func (g *sfGroup) reserve(n int) {
	if l := slotsFor(n); l > len(g.slots) {
		g.grow(l)
	}
}

// grow moves the keys into a table of l slots.
func (g *sfGroup) grow(l int) {
	old := g.slots
	g.slots = make([]*sfKey, l)
	for _, o := range old {
		if o != nil {
			g.put(o)
		}
	}
}

// put places k in the first free slot from its home on.
func (g *sfGroup) put(k *sfKey) {
	mask := len(g.slots) - 1
	i := g.home(k.hi)
	for g.slots[i] != nil {
		i = (i + 1) & mask
	}
	g.slots[i] = k
}

// remove takes k out of the group; a key it does not hold is ignored.
// The keys after it in its run move back where their search finds them
// (shiftsBack).
func (g *sfGroup) remove(k *sfKey) {
	if len(g.slots) == 0 {
		return
	}
	mask := len(g.slots) - 1
	i := g.home(k.hi)
	for g.slots[i] != k {
		if g.slots[i] == nil {
			return
		}
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; g.slots[j] != nil; j = (j + 1) & mask {
		if shiftsBack(i, j, g.home(g.slots[j].hi)) {
			g.slots[i] = g.slots[j]
			i = j
		}
	}
	g.slots[i] = nil
	g.n--
}

// all yields the group's keys, in no particular order. The group must not
// change while it yields.
func (g *sfGroup) all() iter.Seq[*sfKey] {
	return func(yield func(*sfKey) bool) {
		if g == nil {
			return
		}
		for _, k := range g.slots {
			if k != nil && !yield(k) {
				return
			}
		}
	}
}
