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
	// live is how many workers apply (set by compute); applied counts
	// those done, the last of which drops parts (a record per earlier
	// key), which the run would otherwise hold.
	live    int32
	applied atomic.Int32
}

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
	h    uint64 // KeyHash(enc)
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
	errs := make([]error, len(rekeyers))
	var wg sync.WaitGroup
	for p, n := range rekeyers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Sized up front: the records are appended by the million.
			var keys int
			for i := p; i < len(srcs); i += len(rekeyers) {
				keys += srcs[i].old.groups[srcs[i].kg].n
			}
			part := rekeyPart{moves: make([][]rekeyedKey, nw), drops: make([][]rekeyDrop, nw), sizes: map[uint16]int{}}
			for w := range nw {
				part.moves[w] = make([]rekeyedKey, 0, keys/nw+keys/(8*nw)+16)
				part.drops[w] = make([]rekeyDrop, 0, keys/nw+keys/(8*nw)+16)
			}
			var kb, buf, arena []byte
			for i := p; i < len(srcs); i += len(rekeyers) {
				old, kg := srcs[i].old, uint16(srcs[i].kg)
				owner := int(route[kg])
				for _, head := range old.groups[kg].keys {
					for k := head; k != nil; k = k.next {
						if k.dead {
							continue
						}
						var err error
						if kb, err = appendAggKeyOnly(kb[:0], old.sc, old.ek, k); err != nil {
							errs[p] = fmt.Errorf("step %q: encoding a key to re-key it: %w", n.sp.step.Name, err)
							return
						}
						moved, key, oldKey, err := n.rekey.Rekey(buf[:0], kb, k.str)
						if err != nil {
							part.drops[owner] = append(part.drops[owner], rekeyDrop{enc: k.str, old: oldKey, wins: k.wins, err: err, kg: kg})
							continue
						}
						buf = moved
						if arena == nil {
							arena = make([]byte, 0, keys*(len(moved)+1))
						}
						start := len(arena)
						arena = append(arena, moved...)
						rk := rekeyedKey{moved: arena[start:len(arena):len(arena)], key: key, wins: k.wins, h: KeyHash(moved)}
						rk.nkg = uint16(rk.h % uint64(len(route)))
						dst := int(route[rk.nkg])
						part.moves[dst] = append(part.moves[dst], rk)
						part.sizes[rk.nkg]++
						if rk.nkg != kg || string(moved) != k.str {
							part.drops[owner] = append(part.drops[owner], rekeyDrop{enc: k.str, h: k.hash, kg: kg})
						}
					}
				}
			}
			s.parts[p] = part
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			s.err = err
			return
		}
	}
}

// apply moves the keys of every part that land in the key groups n's
// worker owns, then deletes (or rejects) the earlier keys it owns.
func (s *rekeyShare) apply(n *aggNode) error {
	me := n.w.id
	for _, part := range s.parts {
		for nkg, size := range part.sizes {
			if int(n.w.r.route[nkg]) == me && n.groups[nkg] == nil {
				n.groups[nkg] = &keyGroupState{keys: make(map[uint64]*aggKey, size)}
			}
		}
	}
	ps := make([]*rekeyPart, len(s.parts))
	for i := range s.parts {
		ps[i] = &s.parts[i]
	}
	m := &rekeyMove{n: n}
	if err := m.applyParts(ps); err != nil {
		return err
	}
	if s.applied.Add(1) == s.live {
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
				tombs = append(tombs, aggKey{str: rk.enc, hash: rk.h, dead: true})
				m.tombs = append(m.tombs, dirtyRef{kg: rk.kg, k: &tombs[len(tombs)-1]})
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
