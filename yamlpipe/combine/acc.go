package combine

import (
	"sync"

	"github.com/weir-dev/weir/mtime"
)

// Combine's accumulators: the running state of one key in one window, and
// the arrays they are carved from.

// slot is the running state of one combine output. The numeric outputs
// (sum, count, mean, all, any) use i, f and n; the value outputs (min, max,
// latest, group, concat, top) keep their value in val, allocated when they
// first set one, so that a count and a sum per key are 64 bytes, not 112
// with an empty value and time each.
//
// A sum and the value outputs do not count (n): for them n is 1 once they
// hold a value (isSet), 0 before — the flag that was a field of its own
// and cost every slot a word. usesSetFlag tells which outputs these are.
type slot struct {
	i   int64
	f   float64
	n   int64
	val *slotVal
}

// usesSetFlag reports whether fn's slot keeps its set flag in n (isSet).
func usesSetFlag(fn Fn) bool {
	switch fn {
	case FnSum, FnMin, FnMax, FnLatest, FnGroup, FnConcat, FnTop:
		return true
	}
	return false
}

// isSet reports whether the slot of a sum or a value output holds a value.
func (s *slot) isSet() bool { return s.n != 0 }

// markSet records that the slot of a sum or a value output holds a value.
func (s *slot) markSet() { s.n = 1 }

// slotVal is a slot's value and, for latest, the event time of the value.
type slotVal struct {
	v any
	t mtime.Time
}

// v returns the slot's value (nil when it has none).
func (s *slot) v() any {
	if s.val == nil {
		return nil
	}
	return s.val.v
}

// t returns the event time of the slot's value (0 when it has none).
func (s *slot) t() mtime.Time {
	if s.val == nil {
		return 0
	}
	return s.val.t
}

// setV sets the slot's value, keeping its time.
func (s *slot) setV(v any) {
	if s.val == nil {
		s.val = &slotVal{}
	}
	s.val.v = v
}

// setVT sets the slot's value and its event time; a nil value at time 0
// on a slot without one allocates nothing.
func (s *slot) setVT(v any, t mtime.Time) {
	if s.val == nil && v == nil && t == 0 {
		return
	}
	s.setV(v)
	s.val.t = t
}

// accumulator is the state of one key in one window. It is 32 bytes:
// its group values are behind a pointer, since a step whose keys are
// scalars keeps none (they are read from the key's encoding when needed).
type accumulator struct {
	slots []slot
	grp   *[]any
}

// group returns the accumulator's group values, nil when it keeps none.
func (ac *accumulator) group() []any {
	if ac.grp == nil {
		return nil
	}
	return *ac.grp
}

// setGroup makes g the accumulator's group values (nil: none).
func (ac *accumulator) setGroup(g []any) {
	if g == nil {
		ac.grp = nil
		return
	}
	ac.grp = &g
}

// Slab sizes: one allocation holds accSlabLen accumulators, another
// slotSlabLen slots.
const (
	accSlabLen  = 64
	slotSlabLen = 128
)

// accSlab hands out accumulators and their slots carved from arrays: a
// million keys' accumulators are then a few tens of thousands of objects
// for the garbage collector to mark, not two million, and no accumulator
// pays an allocation's rounding. An array stays allocated while any of its
// accumulators (or slots) is referenced, so at worst (one accumulator of an
// array still live) an accumulator holds an array's worth of memory (2 KB
// of accumulators, 5 KB of slots).
//
// Workers create accumulators concurrently (a restore decodes millions at
// once on every worker), so the arrays being carved are kept in a
// sync.Pool: each processor carves its own, with no lock shared between
// workers. A chunk the pool drops at a collection wastes the rest of its
// arrays, a few KB.
type accSlab struct {
	chunks sync.Pool // of *slabChunk
}

// slabChunk is the rest of one accumulator array and one slot array.
type slabChunk struct {
	free  []accumulator
	slots []slot
}

// take returns a zero accumulator of n empty slots.
func (s *accSlab) take(n int) *accumulator {
	c := s.chunk()
	if len(c.free) == 0 {
		c.free = make([]accumulator, accSlabLen)
	}
	ac := &c.free[0]
	c.free = c.free[1:]
	ac.slots = c.takeSlots(n)
	s.chunks.Put(c)
	return ac
}

// takeSlots returns n empty slots.
func (s *accSlab) takeSlots(n int) []slot {
	c := s.chunk()
	out := c.takeSlots(n)
	s.chunks.Put(c)
	return out
}

// chunk takes a chunk from the pool, or a new empty one; the caller puts
// it back.
func (s *accSlab) chunk() *slabChunk {
	if c, ok := s.chunks.Get().(*slabChunk); ok {
		return c
	}
	return &slabChunk{}
}

// takeSlots returns n empty slots carved from c's slot array.
func (c *slabChunk) takeSlots(n int) []slot {
	switch {
	case n == 0:
		return nil
	case n > slotSlabLen/8:
		return make([]slot, n)
	}
	if len(c.slots) < n {
		c.slots = make([]slot, slotSlabLen)
	}
	out := c.slots[:n:n]
	c.slots = c.slots[n:]
	return out
}

// newAccumulator returns an accumulator of n empty slots, from s.
func newAccumulator(s *accSlab, n int) *accumulator {
	return s.take(n)
}
