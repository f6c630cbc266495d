package runner

import (
	"fmt"
	"sync"

	"github.com/weir-dev/weir/runner/contract"

	"github.com/weir-dev/weir/mtime"
)

// This file is what the two keyed node kinds — the aggregation (agg.go)
// and the stateful ParDo (stateful.go) — share: their identity as a root
// instance, their input watermarks and processing time, barrier alignment
// in a checkpointed execution, and one control protocol:
//
//   - a barrier snapshots the node's changed state (frozen at a Pause:
//     no timer fires after it) and is forwarded;
//   - a processing-time tick moves the node's processing time to the
//     tick's time, fires the processing-time timers due, and is forwarded;
//   - a watermark that raises the input watermark fires the event-time
//     timers it makes due (watermark.go's rule); at +∞ the node finishes
//     (its final state changes stand in for every later checkpoint); the
//     input watermark is then forwarded as the node's output watermark.
//
// What differs between the kinds — how elements change state, which
// timers exist and what firing them does — is the keyedState a node plugs
// in; its change log (changelog.go) is the stateLog.

// keyedState is the part of a keyed node that differs between the kinds.
// All calls come from the worker's goroutine, with the worker's current
// root instance set to the node's.
type keyedState interface {
	// processAligned adds a bundle's elements (those of the key groups this
	// worker owns) to the state.
	processAligned(port int, b bundle) error
	// eventTime fires the event-time timers due at input watermark wm; at
	// +∞ it fires every pending timer and drops what the node no longer needs.
	eventTime(wm mtime.Time) error
	// processingTime fires the processing-time timers due by now.
	processingTime(now mtime.Time) error
	// nkeysField is where the node counts the keys it holds state for
	// (keycount.go).
	nkeysField() *int64
}

// stateLog is a keyed node's change log as the control protocol sees it
// (implemented by *changeLog).
type stateLog interface {
	// snapshotState starts the next interval and returns this one's
	// snapshot; freeze (a Pause) stops the node's timers for good.
	snapshotState(w *worker, freeze bool) pendingState
	// isFrozen reports whether a Pause stopped the node's timers.
	isFrozen() bool
	// takeNow encodes the changes not yet in a checkpoint, at the end of
	// input.
	takeNow() ([]contract.StateEntry, error)
}

// keyed is the shared part of a keyed node on one worker.
type keyed struct {
	w   *worker
	sp  *stepPlan
	out *outputs
	wms inputWatermarks
	// wm is the input watermark.
	wm mtime.Time
	// lastFinite is the last input watermark below +∞: where the input
	// stood when it ended (a drain's cut).
	lastFinite mtime.Time
	clock      procClock
	// al aligns barriers in a checkpointed execution; nil otherwise.
	al    *aligner
	done  bool
	state keyedState
	log   stateLog
	// nkeys points at the node's key count; published is the count last
	// stored in the step's counters (keycount.go).
	nkeys         *int64
	published     int64
	publishedOnce bool
}

func newKeyed(w *worker, sp *stepPlan, out *outputs) keyed {
	return keyed{
		w: w, sp: sp, out: out,
		wms: newInputWatermarks(w.r, sp, w.id, false), wm: mtime.MinTimestamp, lastFinite: mtime.MinTimestamp,
		clock: procClock{r: w.r, tick: w.r.opts.Clock.Now()},
	}
}

// enableCheckpoints makes the node take part in checkpoints: inner (the
// node itself) is aligned on barriers, and its state is adopted from a
// paused execution (adopt) or restored from the store (restore) when the
// options say so. A restore is queued on the worker (worker.restores):
// Start runs every worker's restores at once, each worker's on its own
// goroutine, before any worker starts.
func (k *keyed) enableCheckpoints(inner alignedNode, adopt func([]node), restore func() error) error {
	k.al = &aligner{inner: inner, wms: &k.wms}
	k.w.r.coord.register(k.key())
	if olds := k.w.r.adoptable(k.sp.step.Name); olds != nil {
		adopt(olds)
		k.publishKeys()
		return nil
	}
	if rs := k.w.r.opts.Restore; rs != nil && rs.State != nil {
		k.w.restores = append(k.w.restores, func() error {
			if err := restore(); err != nil {
				return err
			}
			k.publishKeys()
			return nil
		})
	}
	return nil
}

func (k *keyed) key() string { return fmt.Sprintf("state/%s/%d", k.sp.step.Name, k.w.id) }

func (k *keyed) id() int { return k.sp.root*len(k.w.r.workers) + k.w.id }

func (k *keyed) finished() bool { return k.done }

func (k *keyed) step() *stepPlan { return k.sp }

// enter makes the node the worker's current root instance (the sender of
// what it emits) and returns the previous one, for leave.
func (k *keyed) enter() (prev int) {
	prev = k.w.cur
	k.w.cur = k.id()
	return prev
}

// leave restores the worker's current root instance that enter returned.
func (k *keyed) leave(prev int) { k.w.cur = prev }

func (k *keyed) process(port int, b bundle) error {
	defer k.leave(k.enter())
	defer k.publishKeys()
	if k.al != nil {
		return k.al.process(port, b)
	}
	return k.state.processAligned(port, b)
}

func (k *keyed) control(port int, c ctrl) error {
	defer k.leave(k.enter())
	defer k.publishKeys()
	if k.al != nil {
		return k.al.control(port, c)
	}
	return k.controlAligned(port, c)
}

// controlAligned is the control protocol of the keyed nodes (see the top
// of this file).
func (k *keyed) controlAligned(port int, c ctrl) error {
	switch c.kind {
	case ctrlBarrier:
		return k.snapshot(c.epoch)
	case ctrlTick:
		k.clock.tick = mtime.Max(k.clock.tick, c.now)
		if err := k.onProcessingTime(k.clock.now()); err != nil {
			return err
		}
		return k.out.forward(ctrl{kind: ctrlTick, sender: k.id(), now: c.now})
	}
	if !k.wms.update(port, c.sender, c.wm) {
		return nil
	}
	k.wm = k.wms.input()
	if !atEnd(k.wm) {
		k.lastFinite = k.wm
	}
	if err := k.state.eventTime(k.wm); err != nil {
		return err
	}
	if atEnd(k.wm) {
		k.done = true
		if k.al != nil {
			// The final state changes stand in for every later checkpoint.
			entries, err := k.log.takeNow()
			if err != nil {
				return err
			}
			k.w.r.coord.submit(k.key(), &report{epoch: k.w.r.epoch.Load(), state: entries, finished: true})
		}
	}
	return k.out.forward(ctrl{kind: ctrlWatermark, sender: k.id(), wm: k.wm})
}

// snapshot is the node's part of checkpoint epoch: freeze at a Pause,
// report the snapshot of the changed state, and send the barrier on.
func (k *keyed) snapshot(epoch uint64) error {
	pending := k.log.snapshotState(k.w, epoch == k.w.r.pauseEpoch.Load())
	k.w.r.coord.submit(k.key(), &report{epoch: epoch, pending: pending})
	return k.out.forward(ctrl{kind: ctrlBarrier, sender: k.id(), epoch: epoch})
}

// onProcessingTime fires the processing-time timers due by now, unless a
// Pause froze the node.
func (k *keyed) onProcessingTime(now mtime.Time) error {
	if k.log.isFrozen() {
		return nil
	}
	defer k.leave(k.enter())
	if err := k.state.processingTime(now); err != nil {
		return err
	}
	return k.out.flush()
}

// Both keyed node kinds are receivers aligned on barriers (the worker
// finds receivers by a type assertion, so check it here).
var (
	_ receiver    = (*aggNode)(nil)
	_ receiver    = (*statefulNode)(nil)
	_ alignedNode = (*aggNode)(nil)
	_ alignedNode = (*statefulNode)(nil)
	_ keyedState  = (*aggNode)(nil)
	_ keyedState  = (*statefulNode)(nil)
)

var (
	_ stateLog = (*changeLog[dirtyRef])(nil)
	_ stateLog = (*changeLog[sfDirty])(nil)
)

// restoreState runs the restores the workers' keyed nodes queued, each
// worker's on its own goroutine: a worker's nodes own disjoint key groups
// and touch only their own state (the state reader and the step's coder
// are safe for concurrent use), so a restore of millions of keys takes
// the time of one worker's share. It returns the first worker's failure
// (workers reading one store usually fail alike).
func (r *run) restoreState() error {
	errs := make([]error, len(r.workers))
	var wg sync.WaitGroup
	for i, w := range r.workers {
		if len(w.restores) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					errs[i] = r.recovered(p, 0)
				}
			}()
			for _, restore := range w.restores {
				if err := restore(); err != nil {
					errs[i] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, w := range r.workers {
		w.restores = nil
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
