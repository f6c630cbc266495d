package runner

import (
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
)

// This file owns the runner's watermarks: every watermark the runner
// computes is computed here, by this rule.
//
// A watermark is a promise that no element carrying an earlier event time
// will follow (late data excepted: the windowing's allowed lateness decides
// what happens to it). Watermarks flow in order with the data, as control
// messages (control.go), and only move forward.
//
//  1. Split. Every Read of a source split reports the split's watermark
//     (contract.ReadResult.Watermark); the split's watermark is the largest
//     reported so far, and +∞ once the split is Done. How a split estimates
//     it is the source's own business (a Pub/Sub split's estimator is
//     io/pubsub/watermark.go; a file's is +∞ at its end).
//  2. Source instance. The minimum over the instance's splits; +∞ when it
//     reads no split (such an instance is also idle: nobody waits for it)
//     and when the execution drains. It is forwarded when it rises.
//  3. Receiver port. A root node (keyed step, step with side inputs,
//     transactional sink) tracks, per input port, the latest watermark of
//     every sender (a root instance feeding the port: every worker's
//     instance of the upstream roots for partitioned and broadcast inputs,
//     the same worker's for a local one, idle source instances excepted).
//     The port's watermark is the minimum over its senders; +∞ when it has
//     none. The main port's is the node's input watermark.
//  4. Keyed node (aggregation, stateful ParDo). An event-time timer at t
//     fires once the input watermark passes t (t < wm); at +∞ every pending
//     event-time timer fires and the node has finished. The window machine
//     (window/pane.go) is handed the input watermark to decide lateness
//     (Droppable, Expired) and firing (MayFire, Evaluate); it keeps no
//     watermark of its own. The node's output watermark is its input
//     watermark, forwarded after the timers it made due have fired.
//  5. Side-input node. Its output watermark is held: the minimum of its
//     main input watermark and the event times of the main-input elements
//     it buffers until their side inputs are ready.
//  6. Stateless steps are fused into their root's loop and have no
//     watermark: control messages pass through them.
//  7. A step's watermark in metrics is the minimum of its instances'
//     output watermarks over workers.
//  8. A sender at +∞ owes no checkpoint barrier (barrier.go).

// atEnd reports whether wm is the end of input (+∞).
func atEnd(wm mtime.Time) bool { return wm >= mtime.MaxTimestamp }

// advance records a Read's result in the split's watermark (rule 1).
func (s *splitState) advance(res contract.ReadResult) {
	if res.Done {
		s.done = true
		s.wm = mtime.MaxTimestamp
	} else if res.Watermark > s.wm {
		s.wm = res.Watermark
	}
}

// splitsWatermark returns a source instance's watermark, the minimum over
// its splits (rule 2), and whether every split has ended.
func splitsWatermark(splits []*splitState) (wm mtime.Time, allDone bool) {
	wm, allDone = mtime.MaxTimestamp, true
	for _, c := range splits {
		wm = mtime.Min(wm, c.wm)
		allDone = allDone && c.done
	}
	return wm, allDone
}

// eventTimerDue reports whether an event-time timer at t fires at input
// watermark wm (rule 4).
func eventTimerDue(t, wm mtime.Time) bool { return t < wm || atEnd(wm) }

// heldWatermark returns the output watermark of a node that holds elements
// back: in, held at the earliest event time of held (rule 5).
func heldWatermark(in mtime.Time, held []contract.Element) mtime.Time {
	for _, e := range held {
		in = mtime.Min(in, e.Time)
	}
	return in
}

// watermark returns the minimum output watermark over workers (rule 7).
func (c *stepCounters) watermark() mtime.Time {
	if len(c.wms) == 0 {
		return mtime.MinTimestamp
	}
	m := mtime.MaxTimestamp
	for i := range c.wms {
		m = mtime.Min(m, mtime.Time(c.wms[i].Load()))
	}
	return m
}

// inputWatermarks tracks, per port, the watermark of every sender and the
// minimum (rule 3).
type inputWatermarks struct {
	ports []map[int]mtime.Time
	mins  []mtime.Time
}

// newInputWatermarks returns the tracking of sp's instance on worker:
// localMain says the main port is fed by the same worker's instances only.
func newInputWatermarks(r *run, sp *stepPlan, worker int, localMain bool) inputWatermarks {
	iw := inputWatermarks{ports: make([]map[int]mtime.Time, len(sp.senders)), mins: make([]mtime.Time, len(sp.senders))}
	for p, roots := range sp.senders {
		iw.ports[p] = map[int]mtime.Time{}
		for _, id := range r.senderIDs(roots, p == 0 && localMain, worker) {
			iw.ports[p][id] = mtime.MinTimestamp
		}
		iw.mins[p] = mtime.MinTimestamp
		if len(iw.ports[p]) == 0 {
			iw.mins[p] = mtime.MaxTimestamp
		}
	}
	return iw
}

// input returns the input watermark: the main port's.
func (iw *inputWatermarks) input() mtime.Time { return iw.mins[0] }

// side returns the watermark of side input i (port 1+i).
func (iw *inputWatermarks) side(i int) mtime.Time { return iw.mins[1+i] }

// owesBarrier reports whether sender is an input of port that has not
// ended, and so owes the barriers of later checkpoints (rule 8).
func (iw *inputWatermarks) owesBarrier(port, sender int) bool {
	wm, ok := iw.ports[port][sender]
	return ok && !atEnd(wm)
}

// update records a sender's watermark and reports whether the port's minimum moved.
func (iw *inputWatermarks) update(port, sender int, wm mtime.Time) bool {
	m := iw.ports[port]
	if old, ok := m[sender]; !ok || wm <= old {
		return false
	}
	m[sender] = wm
	min := mtime.MaxTimestamp
	for _, v := range m {
		if v < min {
			min = v
		}
	}
	if min > iw.mins[port] {
		iw.mins[port] = min
		return true
	}
	return false
}
