package runner

// This file is the re-key migration of an aggregation's state
// (contract.Rekeyer): when a step's key changed and the step declares how
// an earlier key becomes a new one, every key the earlier version kept —
// restored from the store, or adopted in memory at an update in place —
// moves to its new key and key group, the accumulators of keys that land
// on one new key merge window by window, and the earlier keys' entries are
// deleted by the first checkpoint, which writes every moved key: the store
// then holds the new keys only, atomically with that checkpoint. Until it
// commits, a restart re-keys the earlier checkpoint's state again; the
// rollback snapshot keeps it as it was.
//
// A key moves to another key group, so to another worker's share. The
// new keys are computed once for all workers, over a split of the key
// groups — read from the store at a restore (rekey_restore.go), taken from
// the paused instances at an update in place (rekey_share.go) — and each
// worker applies its share: the keys that land in the key groups it owns,
// and the deletions of the earlier entries in the key groups it owns.
// Each moved window has one owner, which alone writes it.

import (
	"fmt"

	"github.com/weir-dev/weir/runner/contract"
)

// rekeyMove gathers, on one worker, the keys moved to the key groups it
// owns and the earlier keys it deletes.
type rekeyMove struct {
	n *aggNode
	// moved are the new keys that received moved state, in the order they
	// were made (timers are set in that order, once every merge is done).
	moved []dirtyRef
	// tombs are the earlier keys, in the key groups the worker owns, whose
	// entries the next checkpoint deletes.
	tombs []dirtyRef
}

// reject leaves out the earlier key enc of key group kg (old decoded),
// whose re-key failed with err: its entry is deleted and its windows are
// rejects of the step, reason rekey_failed.
func (m *rekeyMove) reject(kg uint16, enc string, old any, wins []*winState, err error) error {
	n := m.n
	m.tombs = append(m.tombs, tombstone(kg, enc))
	rej := make([]droppedState, 0, len(wins))
	for _, ws := range wins {
		rej = append(rej, droppedState{win: ws.w, cell: contract.AccumulatorCell, reason: contract.RekeyFailed, err: err})
	}
	n.w.r.opts.Logger.Warn("a key's re-key migration did not evaluate: its state is left out (a reject of the step, reason rekey_failed)",
		"step", n.sp.step.Name, "key", fmt.Sprint(old), "error", err)
	return reportStateRejects(n.w, n.sp.step.Name, old, enc, rej)
}

// place adds wins, the windows of an earlier key, to the new key encoded
// as moved (hash h) in key group nkg, which this worker owns: merged into
// the key's windows when it holds some already, else to a key made for
// them. dropped is what of the earlier key's state did not decode.
func (m *rekeyMove) place(nkg uint16, h uint64, moved []byte, key any, wins []*winState, dropped []droppedState) error {
	n := m.n
	g := n.group(nkg)
	dst := g.findBytes(h, moved)
	if dst == nil {
		dst = newAggKey(nkg, h, moved)
		if n.ek == nil {
			dst.setVal(key)
		}
		g.add(dst)
		n.nkeys++
		m.moved = append(m.moved, dst)
	}
	for _, ws := range wins {
		n.mergeMoved(dst, ws)
	}
	if len(dropped) > 0 {
		key, err := n.keyOf(dst)
		if err != nil {
			return err
		}
		return reportStateRejects(n.w, n.sp.step.Name, key, dst.enc(), dropped)
	}
	return nil
}

// tombstone is a key that leaves its key group: its checkpoint entry is
// a deletion.
func tombstone(kg uint16, enc string) dirtyRef {
	k := deadKey(kg, KeyHash([]byte(enc)), enc)
	return &k
}

// finish marks every moved key changed, sets its timers, and marks the
// earlier keys deleted — except one that a moved key now holds (its new
// encoding equals an earlier one in the same key group).
func (m *rekeyMove) finish() {
	n := m.n
	for _, k := range m.moved {
		n.markDirty(k.kg, k)
		n.setTimers(k.kg, k)
	}
	for _, t := range m.tombs {
		if g := n.groups[t.kg]; g != nil && g.find(t.tableHash(), t.enc()) != nil {
			continue
		}
		n.markDirty(t.kg, t)
	}
}

// mergeMoved adds ws, a window of an earlier key, to dst: merged into
// dst's state of the same window when it has one (the accumulators with
// rekeyMerge; the trigger states as merging windows merge), else
// as a window of its own; merging windows (sessions) then merge with
// those they overlap.
func (n *aggNode) mergeMoved(dst *aggKey, ws *winState) {
	for i := range dst.nwin() {
		t := dst.win(i)
		if t.w != ws.w {
			continue
		}
		n.m.Merge(&t.st, ws.st)
		switch {
		case t.acc == nil:
			t.acc = ws.acc
		case ws.acc != nil:
			t.acc = n.rekeyMerge(t.acc, ws.acc)
		}
		return
	}
	// A window of its own in dst (win0 when free), not the earlier key's:
	// that one may be the earlier key's win0, which would keep the whole
	// earlier key in memory.
	nw := dst.newWindow(ws.w, ws.st)
	nw.acc = ws.acc
	nw.st.SetMarks(0)
	if n.merging {
		n.mergeInto(dst, ws.w)
	}
}

// oldKeysMove reports whether the keys of the paused instances olds were
// kept under an earlier key (so an update in place re-keys them): it asks
// the step about the first key it finds. Without keys there is nothing to
// move.
func (n *aggNode) oldKeysMove(olds []node) bool {
	for _, o := range olds {
		old, ok := o.(*aggNode)
		if !ok {
			continue
		}
		for _, g := range old.groups {
			if g == nil {
				continue
			}
			for k := range g.all() {
				kb, err := appendAggKeyOnly(nil, old.sc, old.ek, k)
				return err != nil || !n.rekey.CurrentKey(kb)
			}
		}
	}
	return false
}

// adoptRekeyed is adopt for a step that re-keys the paused instances'
// keys: their last snapshot (the handover checkpoint) is encoded first, as
// they kept it, and the move runs among the restores Start runs on each
// worker before any worker starts. The new keys are computed once for all
// workers (rekeyShare), the application split by the key groups each
// worker owns.
func (n *aggNode) adoptRekeyed(olds []node) {
	var from []*aggNode
	for _, o := range olds {
		if old, ok := o.(*aggNode); ok {
			n.changes.continueAfter(&old.changes, n.w, false)
			from = append(from, old)
		}
	}
	n.adoptedRej, _ = n.agg.(contract.AdoptedStateRejecter)
	r := n.w.r
	share := r.rekeys[n.sp.step.Name]
	if share == nil {
		share = &rekeyShare{nodes: make([]*aggNode, len(r.workers)), from: from}
		if r.rekeys == nil {
			r.rekeys = map[string]*rekeyShare{}
		}
		r.rekeys[n.sp.step.Name] = share
	}
	share.nodes[n.w.id] = n
	n.w.restores = append(n.w.restores, func() error {
		share.once.Do(share.compute)
		if share.err != nil {
			return share.err
		}
		if err := share.apply(n); err != nil {
			return err
		}
		n.publishKeys()
		return nil
	})
}
