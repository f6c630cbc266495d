package runner

// This file computes, at an update in place, the new keys of a re-keying
// step's adopted state once for all workers: each worker would otherwise
// encode and re-key every earlier key to find the few its key groups
// receive (W× the work). The computation runs on one goroutine per new
// worker over a split of the earlier key groups, inside the first
// worker's restore (sync.Once: the others wait for it, so no worker
// depends on another's progress); each worker then applies the moves to
// the key groups it owns, and the deletions and rejects of the earlier
// keys in the key groups it owns.

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// rekeyShare is the shared re-key of one step's adopted state. nodes and
// from are set while the execution is instantiated (one goroutine); once
// guards compute, whose results apply only reads.
type rekeyShare struct {
	once  sync.Once
	nodes []*aggNode // the step's new instances, by worker
	from  []*aggNode // the paused instances
	parts []rekeyPart
	err   error
	// The last worker to apply drops parts (a record per earlier key),
	// which the run would otherwise hold.
	applyCount
}

// applyCount counts the workers that applied a shared re-key: live is
// how many apply (set by compute), applied those done.
type applyCount struct {
	live    int32
	applied atomic.Int32
}

// last reports whether the caller is the last of the live workers to
// apply.
func (c *applyCount) last() bool { return c.applied.Add(1) == c.live }

// rekeyPart is what one split of the earlier key groups yields, by the
// worker that applies it.
type rekeyPart struct {
	moves [][]rekeyedKey // by the owner of the new key group
	drops [][]rekeyDrop  // by the owner of the earlier key group
	// sizes counts the moves into each new key group (to size its map).
	sizes map[uint16]int
}

// rekeyedKey is one earlier key's windows and the new key they go to.
type rekeyedKey struct {
	moved []byte // the new key's encoding (in the part's arena)
	key   any
	wins  []*winState
	// dropped is what of the earlier key's stored state did not decode (a
	// restore's; reported at the new key).
	dropped []droppedState
	h       uint64
	nkg     uint16
}

// rekeyDrop is an earlier key that leaves its key group: deleted, or,
// when its re-key failed (err), a reject.
type rekeyDrop struct {
	enc  string
	old  any
	wins []*winState
	err  error
	h    uint64 // KeyHash(enc), or at least its upper half (aggKey.tableHash)
	kg   uint16
}

// compute re-keys every earlier key, split over one goroutine per new
// worker, each with its own worker's Rekeyer.
func (s *rekeyShare) compute() {
	type src struct {
		old *aggNode
		kg  int
	}
	var srcs []src
	for _, old := range s.from {
		for kg, g := range old.groups {
			if g != nil {
				srcs = append(srcs, src{old, kg})
			}
		}
	}
	var rekeyers []*aggNode // every instance re-keys alike; each goroutine uses its own
	for _, n := range s.nodes {
		if n != nil {
			rekeyers = append(rekeyers, n)
		}
	}
	s.live = int32(len(rekeyers))
	nw := len(s.nodes)
	route := rekeyers[0].w.r.route
	s.parts = make([]rekeyPart, len(rekeyers))
	s.err = rekeyers[0].w.r.inParallel(rekeyers[0].sp.idx+1, len(rekeyers), func(p int) error {
		n := rekeyers[p]
		// Sized up front: the records are appended by the million.
		var keys int
		for i := p; i < len(srcs); i += len(rekeyers) {
			keys += srcs[i].old.groups[srcs[i].kg].n
		}
		part := &s.parts[p]
		*part = rekeyPart{moves: make([][]rekeyedKey, nw), drops: make([][]rekeyDrop, nw), sizes: map[uint16]int{}}
		for w := range nw {
			part.moves[w] = make([]rekeyedKey, 0, keys/nw+keys/(8*nw)+16)
			part.drops[w] = make([]rekeyDrop, 0, keys/nw+keys/(8*nw)+16)
		}
		var kb, buf, arena []byte
		for i := p; i < len(srcs); i += len(rekeyers) {
			old, kg := srcs[i].old, uint16(srcs[i].kg)
			for k := range old.groups[kg].all() {
				if k.dead() {
					continue
				}
				var err error
				if kb, err = appendAggKeyOnly(kb[:0], old.sc, old.ek, k); err != nil {
					return fmt.Errorf("step %q: encoding a key to re-key it: %w", n.sp.step.Name, err)
				}
				moved, key, oldKey, err := n.rekey.Rekey(buf[:0], kb, k.enc())
				if err != nil {
					part.failed(route, kg, rekeyDrop{enc: k.enc(), old: oldKey, wins: k.windows(), err: err, h: k.tableHash()})
					continue
				}
				buf = moved
				part.moved(route, kg, k.enc(), k.tableHash(), rekeyedKey{moved: arenaCopy(&arena, moved), key: key, wins: k.windows()})
			}
		}
		return nil
	})
}

// apply moves the keys of every part that land in the key groups n's
// worker owns, then deletes (or rejects) the earlier keys it owns.
func (s *rekeyShare) apply(n *aggNode) error {
	ps := make([]*rekeyPart, len(s.parts))
	for i := range s.parts {
		ps[i] = &s.parts[i]
	}
	n.sizeGroups(ps)
	if err := (&rekeyMove{n: n}).applyParts(ps); err != nil {
		return err
	}
	if s.last() {
		s.parts = nil
	}
	return nil
}

// applyParts moves the keys of every part that land in the key groups m's
// worker owns, then deletes (or rejects) the earlier keys it owns, and
// marks what changed.
func (m *rekeyMove) applyParts(ps []*rekeyPart) error {
	n := m.n
	me := n.w.id
	for _, part := range ps {
		for i := range part.moves[me] {
			rk := &part.moves[me][i]
			if err := m.place(rk.nkg, rk.h, rk.moved, rk.key, rk.wins, rk.dropped); err != nil {
				return err
			}
		}
	}
	// The deletions' keys, made in one allocation: they leave the change
	// log together, once the next checkpoint has encoded them.
	var ndrops int
	for _, part := range ps {
		ndrops += len(part.drops[me])
	}
	tombs := make([]aggKey, 0, ndrops)
	m.tombs = slices.Grow(m.tombs, ndrops)
	for _, part := range ps {
		for i := range part.drops[me] {
			rk := &part.drops[me][i]
			if rk.err == nil {
				tombs = append(tombs, deadKey(rk.kg, rk.h, rk.enc))
				m.tombs = append(m.tombs, &tombs[len(tombs)-1])
				continue
			}
			if err := m.reject(rk.kg, rk.enc, rk.old, rk.wins, rk.err); err != nil {
				return err
			}
		}
	}
	m.finish()
	return nil
}

// moved records an earlier key of key group kg (encoded enc, hash h)
// whose re-key gave rk.moved, with its windows: a move into the new key's
// key group, for the worker that owns it, and a deletion of the earlier
// entry, for the worker that owns kg — unless the key stays where it was.
func (p *rekeyPart) moved(route RoutingTable, kg uint16, enc string, h uint64, rk rekeyedKey) {
	rk.h = KeyHash(rk.moved)
	rk.nkg = uint16(keyGroupOf(rk.h, uint64(len(route))))
	dst := int(route[rk.nkg])
	p.moves[dst] = push(p.moves[dst], rk)
	p.sizes[rk.nkg]++
	if rk.nkg != kg || string(rk.moved) != enc {
		owner := int(route[kg])
		p.drops[owner] = push(p.drops[owner], rekeyDrop{enc: enc, h: h, kg: kg})
	}
}

// failed records an earlier key of key group kg whose re-key failed (d
// with its error): a reject, for the worker that owns kg.
func (p *rekeyPart) failed(route RoutingTable, kg uint16, d rekeyDrop) {
	d.kg = kg
	owner := int(route[kg])
	p.drops[owner] = push(p.drops[owner], d)
}

// sizeGroups makes the key groups of n's worker that the parts' records
// land in and that it does not hold yet, with room for them.
func (n *aggNode) sizeGroups(ps []*rekeyPart) {
	me := n.w.id
	for _, part := range ps {
		for kg, size := range part.sizes {
			if int(n.w.r.route[kg]) == me && n.groups[kg] == nil {
				n.groups[kg] = newKeyGroupState(size)
			}
		}
	}
}

// push appends v to s, doubling its capacity when full: a restore appends
// records by the million without knowing how many, and append's growth
// of a large slice (a quarter at a time) copies each record about four
// times over.
func push[T any](s []T, v T) []T {
	if len(s) == cap(s) {
		ns := make([]T, len(s), max(1024, 2*cap(s)))
		copy(ns, s)
		s = ns
	}
	return append(s, v)
}

// arenaCopy copies b into *arena, starting a chunk when it is full, and
// returns the copy: the new keys of a re-key, by the million, in a few
// allocations.
func arenaCopy(arena *[]byte, b []byte) []byte {
	if len(*arena)+len(b) > cap(*arena) {
		*arena = make([]byte, 0, max(64<<10, len(b)))
	}
	start := len(*arena)
	*arena = append(*arena, b...)
	return (*arena)[start:len(*arena):len(*arena)]
}

// inParallel runs fn(0) to fn(n-1), code of step (its stepPlan.idx+1),
// each on a goroutine of its own, and returns the first error by index (a
// panic as r.recovered's).
func (r *run) inParallel(step, n int, fn func(p int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for p := range n {
		wg.Go(func() {
			defer func() {
				if v := recover(); v != nil {
					errs[p] = r.recovered(v, step)
				}
			}()
			errs[p] = fn(p)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
