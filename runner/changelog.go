package runner

import "github.com/weir-dev/weir/runner/contract"

// This file tracks the keys of a keyed step that changed since its last
// snapshot, and a keyed node's part of a checkpoint barrier.

// changeLog tracks the keys of a keyed step that changed since its last
// snapshot, for incremental checkpoints. gen counts the node's snapshots
// (it starts at 1): a key records the gen in which it was last logged, so it
// joins refs once per snapshot interval. The previous interval's keys may
// still be being encoded (pending, see snapshot.go).
type changeLog[R any] struct {
	step string
	refs []R
	gen  uint64
	// frozen is set at a Pause barrier: the node fires no timer any more.
	frozen  bool
	pending *lazySnapshot[R]
	// keyGen, id and enc describe the node's keys to its snapshots.
	keyGen func(R) *uint64
	id     func(R) dirtyKey
	enc    func([]byte, R) ([]byte, bool, error)
}

func newChangeLog[R any](step string, keyGen func(R) *uint64, id func(R) dirtyKey, enc func([]byte, R) ([]byte, bool, error)) changeLog[R] {
	return changeLog[R]{step: step, gen: 1, keyGen: keyGen, id: id, enc: enc}
}

// log records ref, whose key is about to change, unless its key (whose last
// logged gen is *keyGen) is already in this interval's refs. A key the
// pending snapshot has not encoded yet is encoded first (copy on write).
func (c *changeLog[R]) log(keyGen *uint64, ref R) {
	if *keyGen != c.gen {
		if p := c.pending; p != nil && *keyGen == p.gen {
			p.encodeRef(ref)
		}
		*keyGen = c.gen
		c.refs = append(c.refs, ref)
	}
}

// finishPending encodes the rest of the previous snapshot when this node's
// worker still owns it: a key carries one pending generation at a time.
func (c *changeLog[R]) finishPending() {
	if p := c.pending; p != nil && p.state.Load() == snapWorker {
		p.finishHere()
	}
}

// snapshot starts the next interval and returns the snapshot of this one's
// keys, encoded later by w (or, when frozen, by whoever adopts or completes it).
func (c *changeLog[R]) snapshot(w *worker, frozen bool) *lazySnapshot[R] {
	c.finishPending()
	state := snapWorker
	if frozen {
		state = snapFree
	}
	l := newLazySnapshot(c.step, c.gen, c.refs, c.keyGen, c.id, c.enc, state)
	c.refs = nil
	c.gen++
	c.pending = l
	if !frozen {
		w.snapshots = append(w.snapshots, l)
	}
	return l
}

// takeNow encodes this interval's keys at once (the final state of a
// finished node) and starts the next interval.
func (c *changeLog[R]) takeNow() ([]contract.StateEntry, error) {
	c.finishPending()
	l := newLazySnapshot(c.step, c.gen, c.refs, c.keyGen, c.id, c.enc, snapClaimed)
	c.refs = nil
	c.gen++
	l.finishHere()
	return l.result()
}

// continueAfter makes c follow the log of a paused instance it adopts keys
// from: keys remember gens of the old log. With whole (the instance takes
// all of the old one's keys), c also takes over the old log's pending
// snapshot and its worker encodes it; otherwise the pending snapshot is
// encoded now, as its keys go to several new instances.
func (c *changeLog[R]) continueAfter(old *changeLog[R], w *worker, whole bool) {
	c.gen = max(c.gen, old.gen+1)
	p := old.pending
	if p == nil {
		return
	}
	if whole {
		p.adoptBy(w)
		c.pending = p
		return
	}
	if p.claim() {
		p.finishHere()
	}
	<-p.done
}

// isFrozen reports whether a Pause froze the node.
func (c *changeLog[R]) isFrozen() bool { return c.frozen }

// snapshotState is snapshot for a keyed node's barrier: freeze (a Pause)
// freezes the node for good first.
func (c *changeLog[R]) snapshotState(w *worker, freeze bool) pendingState {
	if freeze {
		c.frozen = true
	}
	return c.snapshot(w, c.frozen)
}
