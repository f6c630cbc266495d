package combine

import (
	"math"
	"sync"

	"github.com/weir-dev/weir/mtime"
)

// Combine's accumulators: the running state of one key in one window, and
// the arrays they are carved from.

// slot is the running state of one combine output: two words whose
// meaning depends on the output's fn, and, for the value outputs (min,
// max, latest, group, concat, top), val, allocated when they first set
// one. A count and a sum per key are 48 bytes (64 while every slot had a
// word for an int, one for a float and one for a count; 112 with a value
// and time inline).
//
//	fn          i                  x
//	sum         the int total      the float total's bits
//	count       the count          -
//	mean        the count          the total's bits
//	all, any    the values seen    the truthy ones
//	the others  -                  -  (val holds the value)
//
// A sum and the value outputs are set (isSet) once they hold a value: a
// slot is set when any of its words is not zero, and a sum set at zero
// keeps its float total as −0.0 (negZero), which reads and adds as 0 and
// is stored as 0. The stored layout (appendSlots) is the one the three
// words had: an int, a float, a count, then the set flag, time and value.
type slot struct {
	i   int64
	x   uint64
	val *slotVal
}

// negZero is the bits of −0.0: the float total of a sum set at zero.
const negZero = 1 << 63

// f returns the float total of a sum or a mean.
func (s *slot) f() float64 { return math.Float64frombits(s.x) }

// setF sets the float total of a sum or a mean.
func (s *slot) setF(f float64) { s.x = math.Float64bits(f) }

// storedF returns the float total as stored: 0 for a sum set at zero.
func (s *slot) storedF() float64 {
	if s.x == negZero {
		return 0
	}
	return s.f()
}

// isSet reports whether the slot of a sum or a value output holds a value.
func (s *slot) isSet() bool { return s.i != 0 || s.x != 0 || s.val != nil }

// markSet records that the slot of a sum or a value output holds a value:
// one whose words are all zero (a sum of zeros, a latest null at time 0)
// takes −0.0 as its float total.
func (s *slot) markSet() {
	if !s.isSet() {
		s.x = negZero
	}
}

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

// accumulator is the state of one key in one window: its slots and, for
// a step whose keys are not all scalars, its group values (a step whose
// keys are scalars keeps none: they are read from the key's encoding when
// needed).
//
// The runner holds an accumulator in one of two forms. Most are compact:
// a pointer to their slots' array, *[N]slot for N up to maxCompactSlots,
// whose type says how many slots it has — no header, so a count and a sum
// per key cost 64 bytes, not 96. An accumulator with group values, more
// slots or none is a *accumulator (32 bytes besides its slots). open reads
// either form into an accumulator value; wrap makes the form the runner
// holds from one.
type accumulator struct {
	slots []slot
	grp   *[]any
}

// maxCompactSlots is the most slots a compact accumulator has.
const maxCompactSlots = 8

// compact returns the compact form of an accumulator of slots (the
// pointer to their array), or false when it has none of that length.
func compact(slots []slot) (any, bool) {
	switch len(slots) {
	case 1:
		return (*[1]slot)(slots), true
	case 2:
		return (*[2]slot)(slots), true
	case 3:
		return (*[3]slot)(slots), true
	case 4:
		return (*[4]slot)(slots), true
	case 5:
		return (*[5]slot)(slots), true
	case 6:
		return (*[6]slot)(slots), true
	case 7:
		return (*[7]slot)(slots), true
	case 8:
		return (*[8]slot)(slots), true
	}
	return nil, false
}

// compactSlots returns the slots of a compact accumulator, or false when
// acc is not one.
func compactSlots(acc any) ([]slot, bool) {
	switch p := acc.(type) {
	case *[1]slot:
		return p[:], true
	case *[2]slot:
		return p[:], true
	case *[3]slot:
		return p[:], true
	case *[4]slot:
		return p[:], true
	case *[5]slot:
		return p[:], true
	case *[6]slot:
		return p[:], true
	case *[7]slot:
		return p[:], true
	case *[8]slot:
		return p[:], true
	}
	return nil, false
}

// open returns the accumulator acc holds in either form (a copy of a
// *accumulator's header: its slots are shared), or false when acc is
// neither.
func open(acc any) (accumulator, bool) {
	if p, ok := acc.(*accumulator); ok {
		return *p, true
	}
	s, ok := compactSlots(acc)
	return accumulator{slots: s}, ok
}

// first identifies an accumulator by its first slot, whichever its form
// (nil when it has no slots).
func (ac accumulator) first() *slot {
	if len(ac.slots) == 0 {
		return nil
	}
	return &ac.slots[0]
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

// take returns an accumulator of n empty slots in the form the runner
// holds: compact when it can be, unless header (for a step whose
// accumulators get group values with their first row).
func (s *accSlab) take(n int, header bool) any {
	ac := accumulator{slots: s.takeSlots(n)}
	if header {
		p := s.takeHeader()
		*p = ac
		return p
	}
	return s.wrap(nil, ac)
}

// takeHeader returns a zero *accumulator (the form of an accumulator that
// cannot be compact).
func (s *accSlab) takeHeader() *accumulator {
	c := s.chunk()
	ac := c.takeHeader()
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

// takeHeader returns a zero accumulator carved from c's accumulator array.
func (c *slabChunk) takeHeader() *accumulator {
	if len(c.free) == 0 {
		c.free = make([]accumulator, accSlabLen)
	}
	ac := &c.free[0]
	c.free = c.free[1:]
	return ac
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

// wrap returns the form the runner holds of ac, read by open from orig:
// orig itself when it is a *accumulator (its header updated), the compact
// form when ac can have one, else a new *accumulator.
func (s *accSlab) wrap(orig any, ac accumulator) any {
	if p, ok := orig.(*accumulator); ok {
		*p = ac
		return p
	}
	if ac.grp == nil {
		if c, ok := compact(ac.slots); ok {
			return c
		}
	}
	p := s.takeHeader()
	*p = ac
	return p
}
