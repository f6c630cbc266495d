package yamlpipe

import (
	"sync"

	"github.com/weir-dev/weir/mtime"
)

// Combine's accumulators: the running state of one key in one window, and
// the arrays they are carved from.

// slot is the running state of one combine output.
type slot struct {
	i   int64
	f   float64
	n   int64
	v   any
	t   mtime.Time // event time of v, for latest
	set bool
}

// accumulator is the state of one key in one window.
type accumulator struct {
	group []any
	slots []slot
	// slot0 holds the slot of a one-aggregate combine inside the
	// accumulator: one object per key and window, not two (a million
	// keys are a million objects fewer for the garbage collector).
	slot0 [1]slot
}

// accSlabLen is how many accumulators one allocation of an accSlab holds.
const accSlabLen = 32

// accSlab hands out accumulators carved from arrays of accSlabLen: a
// million keys' accumulators are then about 31,000 objects for the garbage
// collector to mark, not a million. An array stays allocated while any of
// its accumulators is referenced, so at worst (one accumulator of an array
// still live) an accumulator holds accSlabLen's worth of memory (3.3 KB).
type accSlab struct {
	// mu guards free. Workers create accumulators concurrently; it is taken
	// alone, for a slice operation, never with another lock held.
	mu   sync.Mutex
	free []accumulator
}

// take returns a zero accumulator.
func (s *accSlab) take() *accumulator {
	s.mu.Lock() // a leaf
	if len(s.free) == 0 {
		s.free = make([]accumulator, accSlabLen)
	}
	ac := &s.free[0]
	s.free = s.free[1:]
	s.mu.Unlock()
	return ac
}

// newAccumulator returns an accumulator of n empty slots, from s.
func newAccumulator(s *accSlab, n int) *accumulator {
	ac := s.take()
	if n <= len(ac.slot0) {
		ac.slots = ac.slot0[:n]
	} else {
		ac.slots = make([]slot, n)
	}
	return ac
}
