package runner

// This file restores an aggregation's keys from a checkpoint's state (a
// plain restore; a re-keying one is in rekey.go).

import (
	"github.com/weir-dev/weir/mtime"
)

// restore loads the checkpointed state of the key groups this worker owns.
func (n *aggNode) restore() error {
	if s := n.rekeyRestore; s != nil {
		if len(s.nodes) == 1 {
			return n.restoreAlone()
		}
		s.once.Do(s.compute)
		if s.err != nil {
			return s.err
		}
		return s.apply(n)
	}
	// Several goroutines read and decode the worker's key groups
	// (restoreparts.go); with one, the same code runs.
	kgs := n.w.r.route.Owned(n.w.id)
	return restoreInParts(&n.keyed, kgs, n.w.r.restoreParts(len(kgs)), n.decodeRestored, n.applyRestored)
}

// restoreKey adds k, restored from the store under key in key group kg
// (kb is its key as the StateCoder stored it, dropped what of its state
// did not decode), with its timers.
func (n *aggNode) restoreKey(kg uint16, key []byte, k *aggKey, kb []byte, dropped []droppedState) error {
	k.setEncoding(key)
	return n.addRestored(kg, k, kb, dropped)
}

// addRestored adds k, restored from the store into key group kg with its
// encoding and hash set, with its timers (kb and dropped as for
// restoreKey).
func (n *aggNode) addRestored(kg uint16, k *aggKey, kb []byte, dropped []droppedState) error {
	k.kg = kg
	n.group(kg).add(k)
	return n.restored(kg, k, kb, dropped)
}

// restored does for k, restored into key group kg (which holds it, or
// will once its batch is flushed), what follows its addition: the
// report of what did not decode, the key count and its timers.
func (n *aggNode) restored(kg uint16, k *aggKey, kb []byte, dropped []droppedState) error {
	var err error
	if len(dropped) > 0 {
		// The accumulators hold what the migration made of them: the
		// next checkpoint stores them so, and a later restore does not
		// report the failure again.
		n.markDirty(kg, k)
		shown := k.val()
		if shown == nil {
			if shown, err = n.sc.DecodeKey(kb); err != nil {
				shown = string(kb)
			}
		}
		if err := reportStateRejects(n.w, n.sp.step.Name, shown, k.enc(), dropped); err != nil {
			return err
		}
	}
	n.nkeys++
	n.setTimers(kg, k)
	return nil
}

// setTimers sets the event-time timers and the processing-time deadlines
// of every window of k, a key restored or moved into key group kg.
//
// While panes are held back at a −∞ watermark
// (Options.HoldPanesAtMinWatermark), it also holds every window of k with
// elements no pane has shown yet: which of them were held is not stored,
// and an element-driven trigger (after_count) that fired while the
// watermark was −∞ would otherwise wait for the window's next element or
// its end. Evaluated when the watermark rises, a window whose trigger
// does not fire is left as it was. The default trigger fires only on the
// watermark, which its timers follow.
func (n *aggNode) setTimers(kg uint16, k *aggKey) {
	hold := n.w.r.opts.HoldPanesAtMinWatermark && n.wm <= mtime.MinTimestamp && !n.m.FiresOnWatermarkOnly()
	for i := range k.nwin() {
		ws := k.win(i)
		n.setEventTimers(kg, k, ws)
		if d := n.m.NextDeadline(&ws.st); d != 0 {
			heapPush(&n.deadlines, timerAt(d, kg, k, ws.w))
		}
		if hold && ws.st.NewData() && !ws.held() {
			ws.setMark(markHeld, true)
			n.held = append(n.held, touchRef{kg: kg, k: k, ws: ws})
		}
	}
}
