package runner

import (
	"iter"
	"unsafe"
)

// keyGroupState holds the keys of one key group. State is addressed by
// (step, key group, key, window), so a key group can be moved or persisted
// as a unit.
//
// The keys sit in an open-addressing table: slots is nil or a power of two
// long, at most three quarters full, and a key sits in the first free slot
// at or after its home slot (home), wrapping around. A removal shifts the
// keys that follow it back towards their homes, so a lookup can stop at
// the first free slot (no tombstones). Against a Go map of hash to a chain
// of keys, a lookup follows one pointer fewer and a key costs 8 to 16
// bytes of table instead of about 40.
type keyGroupState struct {
	slots []*aggKey
	// n is the number of keys held, for key counts.
	n int
}

// minKeySlots is the length of a key group's table when its first key
// arrives.
const minKeySlots = 4

// newKeyGroupState returns a key group with room for size keys before its
// table grows.
func newKeyGroupState(size int) *keyGroupState {
	g := &keyGroupState{}
	if size > 0 {
		g.slots = make([]*aggKey, slotsFor(size))
	}
	return g
}

// slotsFor returns the table length that holds n keys at most three
// quarters full.
func slotsFor(n int) int {
	l := minKeySlots
	for l*3 < n*4 {
		l *= 2
	}
	return l
}

// home returns the slot where the search for a key with hash h starts.
// It takes the hash's upper half: the lower bits pick the key group, so
// within one group they are much alike.
func (g *keyGroupState) home(h uint64) int {
	return int(h>>32) & (len(g.slots) - 1)
}

// find returns the key with hash h and encoding key, or nil.
func (g *keyGroupState) find(h uint64, key string) *aggKey {
	// findBytes only reads the bytes: a view of the string, not a copy.
	return g.findBytes(h, unsafe.Slice(unsafe.StringData(key), len(key)))
}

// findBytes is find for an encoding held in a scratch buffer.
func (g *keyGroupState) findBytes(h uint64, key []byte) *aggKey {
	if len(g.slots) == 0 {
		return nil
	}
	mask := len(g.slots) - 1
	for i := g.home(h); ; i = (i + 1) & mask {
		k := g.slots[i]
		if k == nil {
			return nil
		}
		if k.hi == uint32(h>>32) && sameEncoding(k.enc(), key) {
			return k
		}
	}
}

// reserve makes room for n keys in all before the table grows again.
func (g *keyGroupState) reserve(n int) {
	if l := slotsFor(n); l > len(g.slots) {
		g.grow(l)
	}
}

// sameEncoding reports whether s and b hold the same bytes. Keys of 8 to
// 16 bytes (an integer's encoding is 8) are compared as two words, which
// the compiler keeps inline, where string equality calls a loop made for
// long strings.
func sameEncoding(s string, b []byte) bool {
	n := len(s)
	if n != len(b) {
		return false
	}
	if n < 8 || n > 16 {
		return s == string(b)
	}
	ps, pb := unsafe.Pointer(unsafe.StringData(s)), unsafe.Pointer(unsafe.SliceData(b))
	return *(*uint64)(ps) == *(*uint64)(pb) &&
		*(*uint64)(unsafe.Add(ps, n-8)) == *(*uint64)(unsafe.Add(pb, n-8))
}

// add puts k, which the group does not hold, into it.
func (g *keyGroupState) add(k *aggKey) {
	if (g.n+1)*4 > len(g.slots)*3 {
		g.grow(max(minKeySlots, 2*len(g.slots)))
	}
	g.put(k)
	g.n++
}

// put places k in the first free slot from its home on; the table has
// one.
func (g *keyGroupState) put(k *aggKey) {
	mask := len(g.slots) - 1
	i := g.home(k.tableHash())
	for g.slots[i] != nil {
		i = (i + 1) & mask
	}
	g.slots[i] = k
}

// grow moves the keys into a table of l slots.
func (g *keyGroupState) grow(l int) {
	old := g.slots
	g.slots = make([]*aggKey, l)
	for _, k := range old {
		if k != nil {
			g.put(k)
		}
	}
}

// remove takes k out of the group; a key it does not hold is ignored.
func (g *keyGroupState) remove(k *aggKey) {
	if len(g.slots) == 0 {
		return
	}
	mask := len(g.slots) - 1
	i := g.home(k.tableHash())
	for g.slots[i] != k {
		if g.slots[i] == nil {
			return
		}
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; g.slots[j] != nil; j = (j + 1) & mask {
		if shiftsBack(i, j, g.home(g.slots[j].tableHash())) {
			g.slots[i] = g.slots[j]
			i = j
		}
	}
	g.slots[i] = nil
	g.n--
}

// shiftsBack reports whether, once slot i of a run of an open-addressing
// table is freed, the key at slot j after it in the run, whose home slot
// is h, moves back to i (backward-shift deletion): when h is not in
// (i, j], cyclically. Aggregations' and stateful steps' key groups
// (sfGroup) remove keys so.
func shiftsBack(i, j, h int) bool {
	if i <= j {
		return h <= i || h > j
	}
	return h <= i && h > j
}

// all yields the group's keys, in no particular order. The group must not
// change while it yields.
func (g *keyGroupState) all() iter.Seq[*aggKey] {
	return func(yield func(*aggKey) bool) {
		for _, k := range g.slots {
			if k != nil && !yield(k) {
				return
			}
		}
	}
}
