package runner

import (
	"cmp"
	"fmt"
	"slices"
	"unsafe"

	"github.com/weir-dev/weir/runner/contract"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/window"
)

// sameAny reports whether a and b are the very same interface value (the
// same dynamic type and data word), without comparing the values, which
// may not be comparable.
func sameAny(a, b any) bool {
	return *(*[2]unsafe.Pointer)(unsafe.Pointer(&a)) == *(*[2]unsafe.Pointer)(unsafe.Pointer(&b))
}

// timerRef names a window of a key for a timer; it is checked lazily (the
// window may have been merged away or expired since). A windowed step
// holds one or two per key and open window: 40 bytes.
//
// It points at the key's record rather than naming the key by its
// encoding: a timer that fires then finds its key without a lookup in the
// key group's table — at a million keys, two misses to memory per timer.
// That holds because a record and its timers never part: a key leaves its
// key group only in evaluate, which marks its record dead (lookup skips
// its timers); key groups move between workers with their records and
// timers together (adopt); and a restore or a re-key makes new records
// and sets their timers anew.
type timerRef struct {
	t  mtime.Time
	k  *aggKey
	w  window.Window
	kg uint16
}

// timerAt returns the timer at t of key k's window w in key group kg.
func timerAt(t mtime.Time, kg uint16, k *aggKey, w window.Window) timerRef {
	return timerRef{t: t, kg: kg, k: k, w: w}
}

// timerHeap is an aggregation's timers in order of time (heapPush,
// heapPop).
type timerHeap []timerRef

func (h timerHeap) less(i, j int) bool { return h[i].t < h[j].t }

// shrink gives back the memory of a heap that fell below a quarter of
// its array (shrunk).
func (h *timerHeap) shrink() { *h = shrunk(*h) }

// shrunk returns a timer heap moved to a smaller array when it fell below
// a quarter of its own (the timers of a closed window of every key
// fired): a windowed step's heap grows to two windows' timers per key at
// each window's end, and would hold that high-water mark for good. The
// order of its elements, and so the heap, is kept.
func shrunk[T any](h []T) []T {
	if cap(h) >= minShrinkTimers && len(h) < cap(h)/4 {
		return append(make([]T, 0, 2*len(h)), h...)
	}
	return h
}

// minShrinkTimers is the smallest timer heap array shrunk gives back.
const minShrinkTimers = 1024

// aggNode runs a GroupByKey or CombinePerKey on one worker: it keeps an
// accumulator per key and window for the key groups it owns, and asks the
// window machine when panes fire.
type aggNode struct {
	keyed
	agg       contract.Aggregator
	m         *window.Machine
	merging   bool
	groups    []*keyGroupState
	events    timerHeap
	deadlines timerHeap
	// far holds the event-time timers kept out of events (see
	// farTimerAt); once loaded, later ones go to events.
	far farTimers
	// eventsGaveBack is the length of the array events had before it
	// last gave memory back (shrunk), 0 before it ever did: the heap then
	// grows by doubling up to it again (pushEvent).
	eventsGaveBack int
	scratch        []byte
	// touched are the windows the current bundle touched that may fire
	// (winState.queued), evaluated at its end.
	touched []touchRef
	// held are the windows whose panes were held back while the input
	// watermark was −∞ (Options.HoldPanesAtMinWatermark).
	held    []touchRef
	changes changeLog[dirtyRef]
	sc      contract.StateCoder
	// ek is agg when the node keeps keys as their encodings only (nil
	// otherwise): aggKey.key is then nil (see keyOf).
	ek   contract.EncodedKeyer
	late lateRoute
	// checked is agg when it can refuse an element (nil otherwise).
	checked contract.RejectingAggregator
	// ctxOut is agg when its Output may block and takes the run's
	// context (nil otherwise).
	ctxOut contract.ContextAggregator
	// adoptedRej is agg when it carries adopted accumulators over lazily
	// and this node adopted some (an update in place); nil otherwise.
	// mergedRejects holds what mergeInto took of the accumulators it
	// merged away, for processAligned to report under the merged window.
	adoptedRej    contract.AdoptedStateRejecter
	mergedRejects []*contract.PartialStateError
	// nkeys is the number of keys the node holds (keycount.go).
	nkeys int64
	// rekey is agg when the step declares a re-key migration (rekey.go);
	// nil otherwise. rekeyRestore is the restore from the store it shares
	// with the step's other instances (rekey_restore.go), when it restores.
	rekey        contract.Rekeyer
	rekeyRestore *rekeyRestore
	// rekeyMerge folds the accumulators of two earlier keys a re-key
	// moves to one new key and window: agg's MergeRekeyed when it declares
	// one (contract.RekeyMerger), else its MergeAccumulators.
	rekeyMerge func(a, b any) any
}

type touchRef struct {
	kg uint16
	k  *aggKey
	ws *winState
}

func newAggNode(w *worker, sp *stepPlan, out *outputs) (*aggNode, error) {
	in := w.r.prog.Graph.Collection(sp.inputs[0])
	n := &aggNode{
		keyed: newKeyed(w, sp, out), agg: sp.code.(contract.Aggregator), m: window.NewMachine(in.Windowing),
		merging: in.Windowing.Fn.IsMerging(),
		groups:  make([]*keyGroupState, w.r.opts.KeyGroups),
		late:    newLateRoute(w, sp, out),
	}
	n.checked, _ = n.agg.(contract.RejectingAggregator)
	n.ctxOut, _ = n.agg.(contract.ContextAggregator)
	if ek, ok := n.agg.(contract.EncodedKeyer); ok && ek.KeysFromEncoding() {
		n.ek = ek
	}
	if rk, ok := n.agg.(contract.Rekeyer); ok && rk.RekeysState() {
		n.rekey = rk
	}
	n.rekeyMerge = n.agg.MergeAccumulators
	if rm, ok := n.agg.(contract.RekeyMerger); ok {
		n.rekeyMerge = rm.MergeRekeyed
	}
	n.state, n.log = n, &n.changes
	n.changes = newChangeLog(sp.step.Name,
		func(d dirtyRef) *uint64 { return &d.dirty },
		func(d dirtyRef) dirtyKey { return dirtyKey{d.kg, d.enc()} },
		n.encodeKey)
	if w.r.opts.Checkpoints {
		sc, ok := sp.code.(contract.StateCoder)
		if !ok {
			return nil, fmt.Errorf("%w: step %q has no state coder for its keys and accumulators", contract.ErrNotCheckpointable, sp.step.Name)
		}
		n.sc = sc
		if rs := w.r.opts.Restore; n.rekey != nil && rs != nil && rs.State != nil && w.r.adoptable(sp.step.Name) == nil {
			n.rekeyRestore = w.r.rekeyRestoreOf(sp.step.Name, n)
		}
		if err := n.enableCheckpoints(n, n.adopt, n.restore); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// dirtyRef is a key in the change log (the key knows its key group).
type dirtyRef = *aggKey

type dirtyKey struct {
	kg  uint16
	key string
}

// markDirty records that k changed since the last checkpoint.
func (n *aggNode) markDirty(kg uint16, k *aggKey) {
	if n.al != nil {
		n.changes.log(&k.dirty, k)
	}
}

// encodeKey appends the state of d's key, or reports it has none. Encoding
// carries an adopted accumulator over (contract.AdoptedStateRejecter) when
// no element or firing used it since the update; what did not carry over
// is reported here, before the checkpoint that stores it commits, not at
// the window's next use, which a crash after the commit would never reach.
// A paused node's last snapshot is encoded by the execution that adopted
// its keys, whose run has its own dead-letter hook: it reports nothing
// then (the node's run may be over).
func (n *aggNode) encodeKey(buf []byte, k dirtyRef) ([]byte, bool, error) {
	if k.dead() {
		return buf, false, nil
	}
	buf, err := appendAggKey(buf, n.sc, n.ek, k)
	if err == nil && n.adoptedRej != nil && !n.changes.isFrozen() && n.adoptedRej.PendingStateRejects() {
		for i := range k.nwin() {
			ws := k.win(i)
			if ws.acc == nil {
				continue
			}
			if err := n.reportAdopted(k, ws.w, ws.acc); err != nil {
				return buf, true, err
			}
		}
	}
	return buf, true, err
}

// keyOf returns k's key, from its encoding when the node keeps only that.
func (n *aggNode) keyOf(k *aggKey) (any, error) {
	if v := k.val(); v != nil || n.ek == nil {
		return v, nil
	}
	key, err := n.ek.KeyFromEncoding(k.enc())
	if err != nil {
		return nil, fmt.Errorf("step %q: decoding a key: %w", n.sp.step.Name, err)
	}
	return key, nil
}

// adopt takes over, in memory, the keyed state and timers of the key
// groups this worker owns from a paused execution's instances (one per old
// worker): pointers change hands, nothing is copied or decoded. With the
// same worker count each instance takes its predecessor's whole state; when
// rescaling, key groups move between workers as the routing table says.
func (n *aggNode) adopt(olds []node) {
	if n.rekey != nil && n.oldKeysMove(olds) {
		n.adoptRekeyed(olds)
		return
	}
	route := n.w.r.route
	var oldEK contract.EncodedKeyer
	whole := adoptFrom(n.w, olds, func(old *aggNode) {
		oldEK = cmp.Or(oldEK, old.ek)
		// Same worker count, same routing: take the predecessor's state and
		// timers whole, without touching them.
		n.changes.continueAfter(&old.changes, n.w, true)
		n.groups, n.events, n.deadlines = old.groups, old.events, old.deadlines
		n.far = old.far
		// The windows whose panes are held back (a −∞ watermark) fire
		// when it rises, here as they would have there.
		n.held = old.held
	}, func(old *aggNode) {
		oldEK = cmp.Or(oldEK, old.ek)
		// Keys remember the snapshot interval in which they were last
		// marked; continue the counter past the old.
		n.changes.continueAfter(&old.changes, n.w, false)
		keepOwnedGroups(n.groups, old.groups, route, n.w.id)
		kg := func(t timerRef) int { return int(t.kg) }
		n.events = ownedBy(n.events, old.events, kg, route, n.w.id)
		n.deadlines = ownedBy(n.deadlines, old.deadlines, kg, route, n.w.id)
		n.far.join(old.far)
		for _, h := range old.held {
			if int(route[h.kg]) == n.w.id {
				n.held = append(n.held, h)
			}
		}
	})
	if !whole {
		heapInit(n.events)
		heapInit(n.deadlines)
	}
	n.nkeys = n.countKeys()
	if n.ek == nil && oldEK != nil {
		n.materializeKeys(oldEK)
	}
	n.adoptedRej, _ = n.agg.(contract.AdoptedStateRejecter)
}

// materializeKeys gives every key kept as its encoding only (adopted from
// a node that kept keys so) its key, decoded by ek, for a node that keeps
// keys whole.
func (n *aggNode) materializeKeys(ek contract.EncodedKeyer) {
	for _, g := range n.groups {
		if g == nil {
			continue
		}
		for k := range g.all() {
			if k.val() != nil {
				continue
			}
			key, err := ek.KeyFromEncoding(k.enc())
			if err != nil {
				n.w.r.opts.Logger.Error("adopting a key: decoding it failed; its panes have no key", "step", n.sp.step.Name, "error", err)
				continue
			}
			k.setVal(key)
		}
	}
}

func (n *aggNode) timerCount() int { return len(n.events) + len(n.deadlines) + n.far.n }

func (n *aggNode) group(kg uint16) *keyGroupState {
	g := n.groups[kg]
	if g == nil {
		g = &keyGroupState{}
		n.groups[kg] = g
	}
	return g
}

func (n *aggNode) processAligned(_ int, b bundle) error {
	now := n.clock.now()
	var dropped int64
	route := n.w.r.route
	ngroups := uint64(len(route))
	var seen int64
	var lastW window.Window
	lastDrop, haveLast := false, false
	// The key's encoding is built in a local copy of n.scratch, stored
	// back once: a store into the node per element would cost a GC write
	// barrier per element while the collector marks.
	scratch := n.scratch
	defer func() { n.scratch = scratch }()
	for i := range b.elems {
		if b.skip(i, route, n.w.id) {
			continue
		}
		seen++
		e := &b.elems[i]
		if !haveLast || e.Window != lastW {
			// Consecutive elements mostly share a window: decide once.
			lastW, lastDrop, haveLast = e.Window, n.m.Droppable(e.Window, n.wm), true
		}
		if lastDrop {
			dropped++
			if err := n.late.drop(e, n.wm); err != nil {
				return err
			}
			continue
		}
		h := b.hashes[i]
		kg := uint16(keyGroupOf(h, ngroups))
		g := n.group(kg)
		var enc []byte
		if b.kends != nil {
			enc = b.key(i)
		} else {
			scratch = n.agg.AppendKey(scratch[:0], e.Value)
			enc = scratch
		}
		k := g.findBytes(h, enc)
		if k == nil {
			k = newAggKey(kg, h, enc)
			if n.ek == nil {
				k.setVal(n.agg.Key(e.Value))
			}
			g.add(k)
			n.nkeys++
		} else if x := k.x; x != nil && len(x.more) == 1 {
			// compact checks this too; the guard keeps the call (not
			// inlined) off the path of a key with its window in win0.
			k.compact()
		}
		n.markDirty(kg, k)
		var ws *winState
		if n.merging {
			var grown bool
			ws, grown = n.mergeInto(k, e.Window)
			if grown {
				n.setEventTimers(kg, k, ws)
			}
			if len(n.mergedRejects) > 0 {
				errs := n.mergedRejects
				n.mergedRejects = nil
				if err := n.reportAdoptedErrs(k, ws.w, errs); err != nil {
					return err
				}
			}
		} else {
			ws = k.window(e.Window)
		}
		if ws == nil {
			ws = k.newWindow(e.Window, n.m.NewState())
			n.setEventTimers(kg, k, ws)
		}
		if ws.st.Closed() {
			dropped++
			if err := n.late.drop(e, n.wm); err != nil {
				return err
			}
			continue
		}
		if ws.acc == nil {
			ws.acc = n.agg.NewAccumulator()
		}
		if n.checked != nil {
			acc, err := n.checked.AddInputErr(ws.acc, e)
			ws.acc = acc
			if n.adoptedRej != nil && n.adoptedRej.PendingStateRejects() {
				if err := n.reportAdopted(k, ws.w, acc); err != nil {
					return err
				}
			}
			if err != nil {
				// Refused (an overflow): a reject of the step, routed as a
				// DoFn's is; the window's state is unchanged.
				if err := reject(n.late.out, n.sp, n.late.tag, *e, err); err != nil {
					return err
				}
				continue
			}
		} else {
			if acc := n.agg.AddInput(ws.acc, e); !sameAny(acc, ws.acc) {
				// Most aggregators update the accumulator in place and
				// return it: storing it again would cost a GC write
				// barrier per element while the collector marks.
				ws.acc = acc
			}
			if n.adoptedRej != nil && n.adoptedRej.PendingStateRejects() {
				if err := n.reportAdopted(k, ws.w, ws.acc); err != nil {
					return err
				}
			}
		}
		hadDeadline := n.m.NextDeadline(&ws.st) != 0
		n.m.OnElement(&ws.st, now)
		if !hadDeadline {
			if d := n.m.NextDeadline(&ws.st); d != 0 {
				heapPush(&n.deadlines, timerAt(d, kg, k, ws.w))
			}
		}
		// Triggers are evaluated once after the bundle (as Beam does), and only
		// for windows an element could make fire: firing conditions only grow
		// within a bundle, so checking after each element finds them all.
		if !ws.queued() && n.m.MayFire(&ws.st, ws.w, n.wm, now) {
			ws.setMark(markQueued, true)
			n.touched = append(n.touched, touchRef{kg: kg, k: k, ws: ws})
		}
	}
	n.sp.counters.in.Add(seen)
	if dropped > 0 {
		n.sp.counters.dropped.Add(dropped)
	}
	err := n.evaluateTouched(now)
	clear(n.touched)
	n.touched = n.touched[:0]
	if err != nil {
		return err
	}
	return n.out.flush()
}

// evaluateTouched evaluates the windows the bundle touched that may fire.
// Every one of them leaves the queue, whatever an evaluation returns, so
// that a later bundle queues it again.
func (n *aggNode) evaluateTouched(now mtime.Time) error {
	for _, t := range n.touched {
		t.ws.setMark(markQueued, false)
	}
	for _, t := range n.touched {
		// A window touched earlier in the bundle may since have merged away.
		if n.groups[t.kg].find(t.k.tableHash(), t.k.enc()) == t.k && t.k.has(t.ws) {
			if err := n.evaluate(t.kg, t.k, t.ws, now); err != nil {
				return err
			}
		}
	}
	return nil
}

// mergeInto finds the session window of k that w merges into: every open
// window of k that overlaps w is merged (states and accumulators) into one
// window spanning them all. Open windows never overlap each other, so one
// pass suffices. grown reports that the window's bounds changed (so its
// timers must be set again); nil means w overlaps nothing.
func (n *aggNode) mergeInto(k *aggKey, w window.Window) (ws *winState, grown bool) {
	if k.nwin() == 1 {
		// The usual case, and without building a list: the key's one
		// window grows or stays apart.
		c := k.win(0)
		if c.st.Closed() || !c.w.Intersects(w) {
			return nil, false
		}
		span := w.Span(c.w)
		grown = span != c.w
		c.w = span
		return c, grown
	}
	var target *winState
	span := w
	kept := k.windows()[:0]
	var merged []*winState
	for _, c := range k.windows() {
		if !c.st.Closed() && c.w.Intersects(w) {
			merged = append(merged, c)
			span = span.Span(c.w)
			continue
		}
		kept = append(kept, c)
	}
	if len(merged) == 0 {
		k.setWindows(kept)
		return nil, false
	}
	target = merged[0]
	for _, c := range merged[1:] {
		if c == &k.win0 {
			// The bundle's touched list may still point at win0: it is
			// not given to another window (keySpent).
			k.bits |= keySpent
		}
		n.m.Merge(&target.st, c.st)
		if c.acc != nil {
			if target.acc == nil {
				target.acc = c.acc
			} else {
				target.acc = n.agg.MergeAccumulators(target.acc, c.acc)
				if n.adoptedRej != nil && n.adoptedRej.PendingStateRejects() {
					// c.acc, carried over by the merge, is merged away:
					// its failures are reported under the merged window.
					n.mergedRejects = append(n.mergedRejects, n.adoptedRej.TakeStateRejects(c.acc)...)
				}
			}
		}
	}
	grown = span != target.w
	target.w = span
	k.setWindows(append(kept, target))
	return target, grown
}

func (n *aggNode) setEventTimers(kg uint16, k *aggKey, ws *winState) {
	t, ok, gc := n.eventTimes(ws)
	if ok {
		n.pushEvent(timerAt(t, kg, k, ws.w))
	}
	n.pushEvent(timerAt(gc, kg, k, ws.w))
}

// eventTimes returns the event times at which window ws is evaluated: its
// trigger's next one (ok false when it has none, or when it is the
// window's expiry) and its expiry gc. Without allowed lateness the
// expiry is the window's end: one timer evaluates both (a second
// evaluation at the same watermark would find nothing new to do).
func (n *aggNode) eventTimes(ws *winState) (t mtime.Time, ok bool, gc mtime.Time) {
	gc = n.m.Strategy.GCTime(ws.w)
	t, ok = n.m.NextEventTime(&ws.st, ws.w)
	return t, ok && t != gc, gc
}

// pushEvent adds an event-time timer, or counts it in n.far (farTimerAt).
func (n *aggNode) pushEvent(ref timerRef) {
	if n.far.keep(ref.t) {
		return
	}
	if l := len(n.events); l == cap(n.events) && l < n.eventsGaveBack {
		n.events = regrown(n.events, n.eventsGaveBack)
	}
	heapPush(&n.events, ref)
}

// regrown returns full heap h in an array twice as long, at most gaveBack
// (the length of the array it gave back), at least minHeapTimers. A heap
// refilled after a window's end gave its array back then grows as it
// did before, where append would grow it a quarter at a time, copying
// every timer about five times instead of twice; beyond that length
// append's own growth keeps the slack small.
func regrown(h timerHeap, gaveBack int) timerHeap {
	grown := make(timerHeap, len(h), min(max(2*len(h), minHeapTimers), gaveBack))
	copy(grown, h)
	return grown
}

// minHeapTimers is the shortest array regrown gives a heap.
const minHeapTimers = 64

// loadFarTimers puts the timers kept out of the heap into it: for every
// window of every key the node holds, the timers setEventTimers would have
// set at or after farTimerAt. They are pushed in a fixed order (time, key
// group, key, window), so that timers due at once fire in the same order
// on every run.
func (n *aggNode) loadFarTimers() {
	var refs []timerRef
	for kg, g := range n.groups {
		if g == nil {
			continue
		}
		for k := range g.all() {
			for i := range k.nwin() {
				ws := k.win(i)
				t, ok, gc := n.eventTimes(ws)
				if ok && t >= mtime.EndOfGlobalWindow {
					refs = append(refs, timerAt(t, uint16(kg), k, ws.w))
				}
				if gc >= mtime.EndOfGlobalWindow {
					refs = append(refs, timerAt(gc, uint16(kg), k, ws.w))
				}
			}
		}
	}
	slices.SortFunc(refs, func(a, b timerRef) int {
		return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.kg, b.kg), cmp.Compare(a.k.enc(), b.k.enc()),
			cmp.Compare(a.w.Start, b.w.Start), cmp.Compare(a.w.End, b.w.End))
	})
	n.far.loaded()
	for _, r := range refs {
		heapPush(&n.events, r)
	}
}

// lookup returns the key and window of timer ref; nil when the key left
// its key group, or the worker no longer owns the group.
func (n *aggNode) lookup(ref timerRef) (*aggKey, *winState) {
	k := ref.k
	if k.dead() || n.groups[ref.kg] == nil {
		return nil, nil
	}
	return k, k.window(ref.w)
}

// evaluate asks the machine whether the window fires and emits its pane.
func (n *aggNode) evaluate(kg uint16, k *aggKey, ws *winState, now mtime.Time) error {
	if n.w.r.opts.HoldPanesAtMinWatermark && n.wm <= mtime.MinTimestamp {
		// Catching up: evaluated again when the watermark rises
		// (releaseHeld); the window keeps its contents and trigger state.
		if !ws.held() {
			ws.setMark(markHeld, true)
			n.held = append(n.held, touchRef{kg: kg, k: k, ws: ws})
		}
		return nil
	}
	n.markDirty(kg, k)
	f := n.m.Evaluate(&ws.st, ws.w, n.wm, now)
	if f.Emit && n.cutShort(ws.w) {
		f.Pane.CutShort = true
	}
	if f.Emit {
		acc := ws.acc
		if acc == nil {
			acc = n.agg.NewAccumulator()
		}
		key, err := n.keyOf(k)
		if err != nil {
			return err
		}
		var v any
		if n.ctxOut != nil {
			v = n.ctxOut.OutputContext(n.w.r.ctx, key, acc, ws.w, f.Pane)
		} else {
			v = n.agg.Output(key, acc, ws.w, f.Pane)
		}
		if n.adoptedRej != nil && n.adoptedRej.PendingStateRejects() {
			if err := n.reportAdopted(k, ws.w, acc); err != nil {
				return err
			}
		}
		n.out.Emit(0, contract.Element{Value: v, Time: n.m.Strategy.OutputTimestamp(ws.w, 0, 0), Window: ws.w, Pane: f.Pane})
		if f.Discard {
			ws.acc = nil
		}
	}
	if f.Done {
		k.removeWindow(ws)
		if k.nwin() == 0 {
			n.groups[kg].remove(k)
			n.nkeys--
			k.bits |= keyDead
		}
		return nil
	}
	if d := n.m.NextDeadline(&ws.st); d != 0 {
		heapPush(&n.deadlines, timerAt(d, kg, k, ws.w))
	}
	return nil
}

// cutShort reports whether a pane of w now misses part of the window's
// input: the execution is draining and the watermark jumped to +∞ before
// it passed the window's end (the pane fires at the cut, not because the
// input was complete), or the window began before the job's input started
// (Options.PartialBefore).
func (n *aggNode) cutShort(w window.Window) bool {
	if pb := n.w.r.opts.PartialBefore; pb != 0 && pb > mtime.MinTimestamp && !w.IsGlobal() && w.Start < pb {
		return true
	}
	return atEnd(n.wm) && n.w.r.draining.Load() && n.lastFinite <= w.MaxTimestamp()
}

// eventTime evaluates the windows whose event-time timers are due at wm;
// at +∞ every window fires and nothing waits for processing time any more.
func (n *aggNode) eventTime(wm mtime.Time) error {
	now := n.clock.now()
	if n.far.due(wm) {
		n.loadFarTimers()
	}
	for len(n.events) > 0 && eventTimerDue(n.events[0].t, wm) {
		ref := heapPop(&n.events)
		if k, ws := n.lookup(ref); ws != nil {
			if err := n.evaluate(ref.kg, k, ws, now); err != nil {
				return err
			}
		}
	}
	if wm > mtime.MinTimestamp && len(n.held) > 0 {
		// The watermark left −∞: the held windows are evaluated now, after
		// the on-time panes the timers above fired.
		held := n.held
		n.held = nil
		for _, t := range held {
			if !t.ws.held() {
				continue
			}
			t.ws.setMark(markHeld, false)
			if g := n.groups[t.kg]; g != nil && g.find(t.k.tableHash(), t.k.enc()) == t.k && t.k.has(t.ws) {
				if err := n.evaluate(t.kg, t.k, t.ws, now); err != nil {
					return err
				}
			}
		}
	}
	if atEnd(wm) {
		n.deadlines = nil
	}
	before := cap(n.events)
	if n.events.shrink(); cap(n.events) < before {
		n.eventsGaveBack = before
	}
	return nil
}

func (n *aggNode) nextDeadline() mtime.Time {
	if len(n.deadlines) == 0 {
		return 0
	}
	return n.deadlines[0].t
}

// processingTime evaluates the windows whose trigger deadlines are due by now.
func (n *aggNode) processingTime(now mtime.Time) error {
	for len(n.deadlines) > 0 && n.deadlines[0].t <= now {
		ref := heapPop(&n.deadlines)
		k, ws := n.lookup(ref)
		if ws == nil || n.m.NextDeadline(&ws.st) != ref.t {
			continue
		}
		if err := n.evaluate(ref.kg, k, ws, now); err != nil {
			return err
		}
	}
	n.deadlines.shrink()
	return nil
}
