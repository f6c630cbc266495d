package runner

// This file restores a re-keying step's state from the store once for all
// workers: a stored key of the earlier version may move to a key group of
// any worker, so each worker would otherwise read and decode every key
// group and re-key every earlier key to find the few its key groups
// receive (W× the work). The store is read on one goroutine per new
// worker over a split of the key groups, inside the first worker's
// restore (sync.Once: the others wait for it, so no worker depends on
// another's progress); each worker then adds the keys that land in the
// key groups it owns — those of the current version first, then the moved
// ones, merged into them where they meet — and deletes (or rejects) the
// earlier keys of the key groups it owns. A step with one instance
// re-keys as it reads (restoreAlone): it owns every key group.

import (
	"bytes"
	"fmt"
	"sync"
)

// rekeyRestore is the shared restore of one re-keying step. nodes is set
// while the execution is instantiated (one goroutine); once guards
// compute, whose results apply only reads.
type rekeyRestore struct {
	once  sync.Once
	nodes []*aggNode // the step's instances, by worker
	parts []rekeyRestorePart
	err   error
	// The last worker to apply drops parts (a record per stored key).
	applyCount
}

// rekeyRestorePart is what one split of the key groups yields, by the
// worker that applies it: the moves and deletions of the earlier keys
// (rekeyPart), and the keys the current version stored, which stay.
type rekeyRestorePart struct {
	rekeyPart
	keeps [][]restoredKey // by the owner of the key group
}

// restoredKey is a key stored by the current version, decoded, its
// encoding and hash set.
type restoredKey struct {
	k       *aggKey
	kb      []byte // the key as stored, kept only to report dropped
	dropped []droppedState
	kg      uint16
}

// rekeyRestoreOf returns the shared restore of step, registering n (an
// instance being made) in it. It runs while the execution is
// instantiated, on one goroutine.
func (r *run) rekeyRestoreOf(step string, n *aggNode) *rekeyRestore {
	s := r.rekeyRestores[step]
	if s == nil {
		s = &rekeyRestore{nodes: make([]*aggNode, len(r.workers))}
		if r.rekeyRestores == nil {
			r.rekeyRestores = map[string]*rekeyRestore{}
		}
		r.rekeyRestores[step] = s
	}
	s.nodes[n.w.id] = n
	return s
}

// compute reads every key group of the step, split over one goroutine per
// instance, each decoding with its own instance's coder and re-keying with
// its Rekeyer (both safe for concurrent use).
func (s *rekeyRestore) compute() {
	var nodes []*aggNode
	for _, n := range s.nodes {
		if n != nil {
			nodes = append(nodes, n)
		}
	}
	s.live = int32(len(nodes))
	r := nodes[0].w.r
	route, nw, step := r.route, len(s.nodes), nodes[0].sp.step.Name
	s.parts = make([]rekeyRestorePart, len(nodes))
	s.err = r.inParallel(nodes[0].sp.idx+1, len(nodes), func(p int) error {
		n := nodes[p]
		var kgs []int
		for kg := p; kg < len(route); kg += len(nodes) {
			kgs = append(kgs, kg)
		}
		part := &s.parts[p]
		*part = rekeyRestorePart{
			rekeyPart: rekeyPart{moves: make([][]rekeyedKey, nw), drops: make([][]rekeyDrop, nw), sizes: map[uint16]int{}},
			keeps:     make([][]restoredKey, nw),
		}
		var buf, arena []byte
		err := r.opts.Restore.State.Scan(r.ctx, step, kgs, func(kg uint16, key, value []byte) error {
			k, kb, dropped, current, err := n.decodeStored(value)
			if err != nil {
				return err
			}
			if current {
				k.setEncoding(key)
				rk := restoredKey{k: k, dropped: dropped, kg: kg}
				if len(dropped) > 0 {
					rk.kb = bytes.Clone(kb)
				}
				owner := int(route[kg])
				part.keeps[owner] = push(part.keeps[owner], rk)
				part.sizes[kg]++
				return nil
			}
			enc := string(key)
			moved, nkey, old, err := n.rekey.Rekey(buf[:0], kb, enc)
			if err != nil {
				part.failed(route, kg, rekeyDrop{enc: enc, old: old, wins: k.windows(), err: err, h: KeyHash(key)})
				return nil
			}
			buf = moved
			part.moved(route, kg, enc, KeyHash(key), rekeyedKey{moved: arenaCopy(&arena, moved), key: nkey, wins: k.windows(), dropped: dropped})
			return nil
		})
		if err != nil {
			return fmt.Errorf("restoring step %q: %w", step, err)
		}
		return nil
	})
}

// decodeStored decodes a stored entry of a re-keying step: the key's
// state, its key as stored, what of its state did not decode, and whether
// the current version stored it — then its key is decoded too, unless the
// node keeps keys as their encodings. An earlier version's key is left
// encoded: it may not decode as today's.
func (n *aggNode) decodeStored(value []byte) (k *aggKey, kb []byte, dropped []droppedState, current bool, err error) {
	k, kb, dropped, err = decodeAggKey(n.sc, value, true)
	if err != nil || !n.rekey.CurrentKey(kb) {
		return k, kb, dropped, false, err
	}
	if n.ek == nil {
		key, err := n.sc.DecodeKey(kb)
		if err != nil {
			return nil, nil, nil, false, fmt.Errorf("decoding key: %w", err)
		}
		k.setVal(key)
	}
	return k, kb, dropped, true, nil
}

// apply adds to n the keys of every part that land in the key groups n's
// worker owns — the current version's first, then the moved ones — and
// deletes (or rejects) the earlier keys it owns.
func (s *rekeyRestore) apply(n *aggNode) error {
	me := n.w.id
	ps := make([]*rekeyPart, len(s.parts))
	for i := range s.parts {
		ps[i] = &s.parts[i].rekeyPart
	}
	n.sizeGroups(ps)
	for _, part := range s.parts {
		for _, rk := range part.keeps[me] {
			if err := n.addRestored(rk.kg, rk.k, rk.kb, rk.dropped); err != nil {
				return err
			}
		}
	}
	if err := (&rekeyMove{n: n}).applyParts(ps); err != nil {
		return err
	}
	if s.last() {
		s.parts = nil
	}
	return nil
}

// restoreAlone is the restore of a re-keying step's only instance: it
// owns every key group, so it re-keys each earlier key as it reads it,
// without the records a split between workers needs.
func (n *aggNode) restoreAlone() error {
	r := n.w.r
	route := r.route
	m := &rekeyMove{n: n}
	var buf []byte
	err := r.opts.Restore.State.Scan(r.ctx, n.sp.step.Name, route.Owned(n.w.id), func(kg uint16, key, value []byte) error {
		k, kb, dropped, current, err := n.decodeStored(value)
		if err != nil {
			return err
		}
		if current {
			return n.restoreKey(kg, key, k, kb, dropped)
		}
		enc := string(key)
		moved, nkey, old, err := n.rekey.Rekey(buf[:0], kb, enc)
		if err != nil {
			return m.reject(kg, enc, old, k.windows(), err)
		}
		buf = moved
		h := KeyHash(moved)
		nkg := uint16(keyGroupOf(h, uint64(len(route))))
		if nkg != kg || string(moved) != enc {
			m.tombs = append(m.tombs, tombstone(kg, enc))
		}
		return m.place(nkg, h, moved, nkey, k.windows(), dropped)
	})
	if err != nil {
		return fmt.Errorf("restoring step %q: %w", n.sp.step.Name, err)
	}
	m.finish()
	return nil
}
