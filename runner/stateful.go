package runner

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// sfWin is the state of one key in one window of a stateful ParDo.
type sfWin struct {
	w      window.Window
	values cells[any]
	// more holds the window's bags, maps and timers; nil until it has one,
	// so that a window of value cells only is 48 bytes.
	more *sfWinMore
}

// sfWinMore is what an sfWin holds besides its value cells.
type sfWinMore struct {
	bags   cells[[]any]
	maps   cells[map[any]any]
	timers cells[contract.Timer]
}

// extra returns ws.more, allocated when ws has none yet.
func (ws *sfWin) extra() *sfWinMore {
	if ws.more == nil {
		ws.more = &sfWinMore{}
	}
	return ws.more
}

// bags returns the window's bags (none: nil).
func (ws *sfWin) bags() cells[[]any] {
	if ws.more == nil {
		return nil
	}
	return ws.more.bags
}

// maps returns the window's maps (none: nil).
func (ws *sfWin) maps() cells[map[any]any] {
	if ws.more == nil {
		return nil
	}
	return ws.more.maps
}

// timers returns the window's timers (none: nil).
func (ws *sfWin) timers() cells[contract.Timer] {
	if ws.more == nil {
		return nil
	}
	return ws.more.timers
}

// sfKey is a stateful step's record of one key: 64 bytes, a size class.
// Most keys have one window at a time, held by win alone; a key's other
// windows are behind one pointer, so that its record needs no list.
type sfKey struct {
	key any
	str string
	// win is the key's first window, nil when it has none; more lists its
	// others in the order they were added (nil when it has none).
	win  *sfWin
	more *[]*sfWin
	// dirty and dead are as aggKey's.
	dirty uint64
	// hi is the upper half of the key's hash (sfGroup).
	hi uint32
	// kg is the key's key group: the change log names a key by its record
	// alone.
	kg   uint16
	dead bool
}

// ownKey returns key, or str when key is a string of the same bytes (a
// string key's encoding is its bytes): a key's record then holds one copy
// of them, not two, and keeps nothing of the element it came from alive
// (a string read from a message may share the message's memory).
func ownKey(key any, str string) any {
	if s, ok := key.(string); ok && s == str {
		return str
	}
	return key
}

// nwins returns how many windows the key has.
func (k *sfKey) nwins() int {
	switch {
	case k.win == nil:
		return 0
	case k.more == nil:
		return 1
	}
	return 1 + len(*k.more)
}

// winAt returns the key's window i, in the order they were added.
func (k *sfKey) winAt(i int) *sfWin {
	if i == 0 {
		return k.win
	}
	return (*k.more)[i-1]
}

// findWin returns the key's state in window w, nil when it has none.
func (k *sfKey) findWin(w window.Window) *sfWin {
	if k.win == nil || k.win.w == w {
		return k.win
	}
	if k.more != nil {
		for _, ws := range *k.more {
			if ws.w == w {
				return ws
			}
		}
	}
	return nil
}

// addWin adds ws, a window the key does not have yet, after its others.
func (k *sfKey) addWin(ws *sfWin) {
	switch {
	case k.win == nil:
		k.win = ws
	case k.more == nil:
		k.more = &[]*sfWin{ws}
	default:
		*k.more = append(*k.more, ws)
	}
}

// removeWin removes window ws, one of the key's, keeping the others'
// order.
func (k *sfKey) removeWin(ws *sfWin) {
	if k.more == nil {
		if k.win == ws {
			k.win = nil
		}
		return
	}
	more := *k.more
	if k.win == ws {
		k.win = more[0]
		more = slices.Delete(more, 0, 1)
	} else if i := slices.Index(more, ws); i >= 0 {
		more = slices.Delete(more, i, i+1)
	}
	if len(more) == 0 {
		k.more = nil
		return
	}
	*k.more = more
}

type sfTimerRef struct {
	t   mtime.Time
	seq uint64
	kg  uint16
	// hi is the key's sfKey.hi: the timer finds its key without hashing
	// it again.
	hi  uint32
	key string
	w   window.Window
	id  string // "" is the window's garbage-collection timer
}

// sfTimerHeap is a stateful step's timers in order of time, then of
// setting (heapPush, heapPop).
type sfTimerHeap []sfTimerRef

func (h sfTimerHeap) less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].seq < h[j].seq
}

// sfContext is the runner's side of the StateContext a stateful DoFn is
// handed (contract.KeyedState): the key and window of the current call. The
// node keeps one, re-pointed at every element and timer.
type sfContext struct {
	n   *statefulNode
	kg  uint16
	key string
	k   *sfKey
	ws  *sfWin
	ts  mtime.Time
	cur *contract.Element
}

// Key returns the current key.
func (sc *sfContext) Key() any { return sc.k.key }

// Window returns the current window.
func (sc *sfContext) Window() window.Window { return sc.ws.w }

// Timestamp returns the event time outputs get: the element's, or the timer's.
func (sc *sfContext) Timestamp() mtime.Time { return sc.ts }

// Now returns processing time.
func (sc *sfContext) Now() mtime.Time { return sc.n.clock.now() }

// Watermark returns the step's input watermark.
func (sc *sfContext) Watermark() mtime.Time { return sc.n.wm }

// Output sends v to the main output at the context's timestamp and window.
func (sc *sfContext) Output(v any) {
	e := contract.Element{Value: v, Time: sc.ts, Window: sc.ws.w, Pane: window.NoFiring}
	if sc.cur != nil {
		e.Source = sc.cur.Source
	}
	sc.n.out.Emit(0, e)
}

// Emit sends e to the output with index tag.
func (sc *sfContext) Emit(tag int, e contract.Element) { sc.n.out.Emit(tag, e) }

func (sc *sfContext) touch() { sc.n.markDirty(sc.k) }

// ReadValue returns the value cell id and whether it is set.
func (sc *sfContext) ReadValue(id string) (any, bool) {
	return sc.ws.values.get(id)
}

// WriteValue sets the value cell id.
func (sc *sfContext) WriteValue(id string, v any) {
	sc.touch()
	sc.ws.values.set(id, v)
}

// ClearValue clears the value cell id.
func (sc *sfContext) ClearValue(id string) {
	sc.touch()
	sc.ws.values.del(id)
}

// ReadBag returns the elements of bag id, in insertion order.
func (sc *sfContext) ReadBag(id string) []any {
	b, _ := sc.ws.bags().get(id)
	return b
}

// AddToBag appends v to bag id.
func (sc *sfContext) AddToBag(id string, v any) {
	sc.touch()
	b := sc.ws.extra().bags.ref(id)
	*b = append(*b, v)
}

// ClearBag empties bag id.
func (sc *sfContext) ClearBag(id string) {
	sc.touch()
	if m := sc.ws.more; m != nil {
		m.bags.del(id)
	}
}

// MapGet returns the entry of map id at key k.
func (sc *sfContext) MapGet(id string, k any) (any, bool) {
	m, _ := sc.ws.maps().get(id)
	v, ok := m[k]
	return v, ok
}

// MapPut sets the entry of map id at key k (k must be comparable).
func (sc *sfContext) MapPut(id string, k, v any) {
	sc.touch()
	m := sc.ws.extra().maps.ref(id)
	if *m == nil {
		*m = map[any]any{}
	}
	(*m)[k] = v
}

// MapDelete removes the entry of map id at key k.
func (sc *sfContext) MapDelete(id string, k any) {
	sc.touch()
	m, _ := sc.ws.maps().get(id)
	delete(m, k)
}

// MapEntries returns map id (do not modify it).
func (sc *sfContext) MapEntries(id string) map[any]any {
	m, _ := sc.ws.maps().get(id)
	return m
}

// ClearMap empties map id.
func (sc *sfContext) ClearMap(id string) {
	sc.touch()
	if m := sc.ws.more; m != nil {
		m.maps.del(id)
	}
}

// SetTimer sets (or resets) timer id of the current key and window to fire
// at t in domain (graph.EventTime: when the watermark passes t;
// graph.ProcessingTime: when the clock reaches t).
func (sc *sfContext) SetTimer(id string, domain graph.TimeDomain, t mtime.Time) {
	sc.touch()
	sc.ws.extra().timers.set(id, contract.Timer{ID: id, Domain: domain, Time: t})
	sc.n.pushTimer(domain, sfTimerAt(t, sc.kg, sc.k, sc.ws.w, id))
}

// ClearTimer cancels timer id of the current key and window.
func (sc *sfContext) ClearTimer(id string) {
	sc.touch()
	if m := sc.ws.more; m != nil {
		m.timers.del(id)
	}
}

// statefulNode runs a stateful ParDo on one worker.
type statefulNode struct {
	keyed
	fn       contract.StatefulDoFn
	strategy window.Strategy
	errTag   int
	groups   []*sfGroup
	events   sfTimerHeap
	proc     sfTimerHeap
	// far counts the windows' expiry timers kept out of events
	// (farTimerAt); user timers always go to the heap.
	far     farTimers
	seq     uint64
	scratch []byte
	sc      sfContext
	// ctx is what the code is handed; its calls go to sc.
	ctx     contract.StateContext
	changes changeLog[sfDirty]
	coder   contract.StateCoder
	late    lateRoute
	// nkeys is the number of keys the node holds (keycount.go).
	nkeys int64
}

// sfDirty is a key in the change log (the key knows its key group).
type sfDirty = *sfKey

func (n *statefulNode) markDirty(k *sfKey) {
	if n.al != nil {
		n.changes.log(&k.dirty, k)
	}
}

// encodeKey appends the state of key k, or reports it has none.
func (n *statefulNode) encodeKey(buf []byte, k sfDirty) ([]byte, bool, error) {
	if k.dead || k.win == nil {
		return buf, false, nil
	}
	buf, err := appendSfKey(buf, n.coder, k)
	return buf, true, err
}

// adopt takes over, in memory, the state and timers of the key groups this
// worker owns from a paused execution's instances (see aggNode.adopt).
func (n *statefulNode) adopt(olds []node) {
	route := n.w.r.route
	whole := adoptFrom(n.w, olds, func(old *statefulNode) {
		n.seq = old.seq
		n.changes.continueAfter(&old.changes, n.w, true)
		n.groups, n.events, n.proc = old.groups, old.events, old.proc
		n.far = old.far
	}, func(old *statefulNode) {
		n.seq = max(n.seq, old.seq)
		n.changes.continueAfter(&old.changes, n.w, false)
		for kg, g := range old.groups {
			if g != nil && int(route[kg]) == n.w.id {
				n.groups[kg] = g
			}
		}
		kg := func(t sfTimerRef) int { return int(t.kg) }
		n.events = ownedBy(n.events, old.events, kg, route, n.w.id)
		n.proc = ownedBy(n.proc, old.proc, kg, route, n.w.id)
		n.far.join(old.far)
	})
	if !whole {
		heapInit(n.events)
		heapInit(n.proc)
	}
	n.nkeys = n.countKeys()
}

// restore loads the checkpointed state of the key groups this worker
// owns, read and decoded by several goroutines (restoreparts.go).
func (n *statefulNode) restore() error {
	kgs := n.w.r.route.Owned(n.w.id)
	return restoreInParts(&n.keyed, kgs, n.w.r.restoreParts(len(kgs)), n.decodeRestored, n.applyRestored)
}

// decodedSfKey is a key of a stateful step a restoring goroutine decoded,
// with the stored values its code dropped.
type decodedSfKey struct {
	k       *sfKey
	dropped []droppedState
}

// decodeRestored decodes one key of a checkpoint (restoreInParts's
// decode).
func (n *statefulNode) decodeRestored(kg uint16, key, value []byte) (decodedSfKey, error) {
	k, dropped, err := decodeSfKey(n.coder, value)
	if err != nil {
		return decodedSfKey{}, err
	}
	k.kg = kg
	k.str = string(key)
	k.key = ownKey(k.key, k.str)
	k.hi = uint32(KeyHash(key) >> 32)
	return decodedSfKey{k: k, dropped: dropped}, nil
}

// applyRestored puts b's keys into their key group with their timers.
func (n *statefulNode) applyRestored(b restoreBatch[decodedSfKey]) error {
	kg := b.kg
	g := n.group(kg)
	g.reserve(g.n + len(b.items))
	for _, d := range b.items {
		k := d.k
		if len(d.dropped) > 0 {
			// The key holds those values no more: its next checkpoint stores
			// it without them, so a later restore does not refuse them again.
			n.markDirty(k)
			if err := reportStateRejects(n.w, n.sp.step.Name, k.key, k.str, d.dropped); err != nil {
				return err
			}
		}
		g.add(k)
		n.nkeys++
		for i := range k.nwins() {
			ws := k.winAt(i)
			n.pushExpiry(kg, k, ws.w)
			for _, c := range ws.timers() {
				n.pushTimer(c.v.Domain, sfTimerAt(c.v.Time, kg, k, ws.w, c.id))
			}
		}
	}
	return nil
}

func newStatefulNode(w *worker, sp *stepPlan, out *outputs) (*statefulNode, error) {
	in := w.r.prog.Graph.Collection(sp.inputs[0])
	fn := sp.code.(contract.StatefulDoFn)
	if c, ok := fn.(contract.Cloner); ok {
		fn = c.Clone().(contract.StatefulDoFn)
	}
	n := &statefulNode{
		keyed: newKeyed(w, sp, out), fn: fn, strategy: in.Windowing, errTag: errTag(sp),
		groups: make([]*sfGroup, w.r.opts.KeyGroups),
		late:   newLateRoute(w, sp, out),
	}
	n.state, n.log = n, &n.changes
	n.changes = newChangeLog(sp.step.Name,
		func(k sfDirty) *uint64 { return &k.dirty },
		func(k sfDirty) dirtyKey { return dirtyKey{k.kg, k.str} },
		n.encodeKey)
	n.sc.n = n
	n.ctx = contract.NewStateContext(&n.sc)
	n.ctx.SetMetrics(&sp.counters.user)
	if w.r.opts.Checkpoints {
		coder, ok := fn.(contract.StateCoder)
		if !ok {
			return nil, fmt.Errorf("%w: step %q has no state coder for its keys and state", contract.ErrNotCheckpointable, sp.step.Name)
		}
		n.coder = coder
		if err := n.enableCheckpoints(n, n.adopt, n.restore); err != nil {
			return nil, err
		}
	}
	return n, nil
}

func (n *statefulNode) timerCount() int { return len(n.events) + len(n.proc) + n.far.n }

// pushExpiry sets the expiry timer of window w of key: in the heap, or
// counted in n.far when it is at or after the end of the global window.
func (n *statefulNode) pushExpiry(kg uint16, k *sfKey, w window.Window) {
	t := n.strategy.GCTime(w)
	if n.far.keep(t) {
		return
	}
	n.pushTimer(graph.EventTime, sfTimerAt(t, kg, k, w, ""))
}

// sfTimerAt returns timer id ("": the window's expiry) at t of window w of
// key k in key group kg; pushTimer numbers it.
func sfTimerAt(t mtime.Time, kg uint16, k *sfKey, w window.Window, id string) sfTimerRef {
	return sfTimerRef{t: t, kg: kg, hi: k.hi, key: k.str, w: w, id: id}
}

// pushTimer numbers ref (timers due at once fire in the order they were
// set) and pushes it onto the heap of its domain.
func (n *statefulNode) pushTimer(domain graph.TimeDomain, ref sfTimerRef) {
	n.seq++
	ref.seq = n.seq
	if domain == graph.ProcessingTime {
		heapPush(&n.proc, ref)
	} else {
		heapPush(&n.events, ref)
	}
}

// loadFarTimers puts the expiry timers kept out of the heap into it, in a
// fixed order (time, key group, key, window), as aggNode's.
func (n *statefulNode) loadFarTimers() {
	var refs []sfTimerRef
	for kg, g := range n.groups {
		for k := range g.all() {
			for i := range k.nwins() {
				ws := k.winAt(i)
				if t := n.strategy.GCTime(ws.w); t >= mtime.EndOfGlobalWindow {
					refs = append(refs, sfTimerAt(t, uint16(kg), k, ws.w, ""))
				}
			}
		}
	}
	slices.SortFunc(refs, func(a, b sfTimerRef) int {
		return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.kg, b.kg), cmp.Compare(a.key, b.key),
			cmp.Compare(a.w.Start, b.w.Start), cmp.Compare(a.w.End, b.w.End))
	})
	n.far.loaded()
	for _, r := range refs {
		n.pushTimer(graph.EventTime, r)
	}
}

func (n *statefulNode) processAligned(_ int, b bundle) error {
	var dropped int64
	route := n.w.r.route
	var seen int64
	for i := range b.elems {
		if b.skip(i, route, n.w.id) {
			continue
		}
		seen++
		e := &b.elems[i]
		if n.strategy.Expired(e.Window, n.wm) {
			dropped++
			if err := n.late.drop(e, n.wm); err != nil {
				return err
			}
			continue
		}
		h := b.hashes[i]
		kg := uint16(keyGroupOf(h, uint64(len(n.groups))))
		g := n.group(kg)
		var enc []byte
		if b.kends != nil {
			enc = b.key(i)
		} else {
			n.scratch = n.fn.AppendKey(n.scratch[:0], e.Value)
			enc = n.scratch
		}
		k := g.findBytes(uint32(h>>32), enc)
		if k == nil {
			str := string(enc)
			k = &sfKey{key: ownKey(n.fn.Key(e.Value), str), str: str, hi: uint32(h >> 32), kg: kg}
			g.add(k)
			n.nkeys++
		}
		key := k.str
		n.markDirty(k)
		ws := k.findWin(e.Window)
		if ws == nil {
			ws = &sfWin{w: e.Window}
			k.addWin(ws)
			n.pushExpiry(kg, k, e.Window)
		}
		n.sc = sfContext{n: n, kg: kg, key: key, k: k, ws: ws, ts: e.Time, cur: e}
		if err := n.fn.Process(&n.ctx, *e); err != nil {
			if err := reject(n.out, n.sp, n.errTag, *e, err); err != nil {
				return err
			}
		}
	}
	n.sp.counters.in.Add(seen)
	if dropped > 0 {
		n.sp.counters.dropped.Add(dropped)
	}
	return n.out.flush()
}

// group returns key group kg's keys, an empty group when it has none yet.
func (n *statefulNode) group(kg uint16) *sfGroup {
	g := n.groups[kg]
	if g == nil {
		g = &sfGroup{}
		n.groups[kg] = g
	}
	return g
}

func (n *statefulNode) find(ref sfTimerRef) (*sfKey, *sfWin) {
	k := n.groups[ref.kg].find(ref.hi, ref.key)
	if k == nil {
		return nil, nil
	}
	return k, k.findWin(ref.w)
}

// fire runs one timer if it is still set as ref describes; GC refs drop the window.
func (n *statefulNode) fire(ref sfTimerRef, domain graph.TimeDomain, ts mtime.Time) error {
	k, ws := n.find(ref)
	if ws == nil {
		return nil
	}
	if ref.id == "" {
		n.markDirty(k)
		k.removeWin(ws)
		if k.win == nil {
			n.groups[ref.kg].remove(k)
			n.nkeys--
			k.dead = true
		}
		return nil
	}
	t, ok := ws.timers().get(ref.id)
	if !ok || t.Time != ref.t || t.Domain != domain {
		return nil
	}
	n.markDirty(k)
	ws.more.timers.del(ref.id)
	n.sc = sfContext{n: n, kg: ref.kg, key: ref.key, k: k, ws: ws, ts: ts}
	if err := n.fn.OnTimer(&n.ctx, t); err != nil {
		return fmt.Errorf("step %q: timer %q for key %v: %w", n.sp.step.Name, t.ID, k.key, err)
	}
	return nil
}

// eventTime fires the event-time timers due at wm; at +∞ the node finishes.
func (n *statefulNode) eventTime(wm mtime.Time) error {
	if atEnd(wm) {
		return n.finish() // expiry timers do not fire there: nothing to load
	}
	if n.far.due(wm) {
		n.loadFarTimers()
	}
	for len(n.events) > 0 && eventTimerDue(n.events[0].t, wm) {
		ref := heapPop(&n.events)
		if err := n.fire(ref, graph.EventTime, ref.t); err != nil {
			return err
		}
	}
	n.events = shrunk(n.events)
	return nil
}

// finishRearmLimit bounds the event-time timers that timer callbacks may
// set at the end of input beyond 64 per timer pending there.
const finishRearmLimit = 1 << 20

// finish runs at the end of input (watermark +∞, also a drain's end): every
// event-time timer fires in time order, including those a timer callback
// sets meanwhile (a flush that arms a cleanup: at +∞ they are due too), up
// to a bound that stops a timer re-arming itself forever; every pending
// processing-time timer fires once, and those set while finishing are
// ignored, so a processing-time timer that keeps re-arming itself cannot
// hold the end (or a drain) forever. Then all state is dropped (the keyed
// part then marks the node done and reports the final changes).
func (n *statefulNode) finish() error {
	proc := n.proc
	n.proc = nil
	n.far = farTimers{} // expiry timers: they do not fire at the end
	limit := 64*len(n.events) + finishRearmLimit
	fired := 0
	for len(n.events) > 0 || len(proc) > 0 {
		for len(n.events) > 0 {
			ref := heapPop(&n.events)
			if ref.id == "" {
				continue
			}
			if fired++; fired > limit {
				return fmt.Errorf("step %q: timer %q keeps setting event-time timers at the end of input (%d fired): a timer that re-arms itself must stop at some time", n.sp.step.Name, ref.id, fired-1)
			}
			if err := n.fire(ref, graph.EventTime, ref.t); err != nil {
				return err
			}
		}
		for len(proc) > 0 {
			ref := heapPop(&proc)
			if err := n.fire(ref, graph.ProcessingTime, n.outputTimeForProcessing(ref.w)); err != nil {
				return err
			}
		}
	}
	n.events, n.proc = nil, nil
	for _, g := range n.groups {
		for k := range g.all() {
			n.markDirty(k)
			k.dead = true
		}
	}
	clear(n.groups)
	n.nkeys = 0
	return nil
}

// outputTimeForProcessing is the event time of outputs from a
// processing-time timer: the input watermark, kept inside the window.
func (n *statefulNode) outputTimeForProcessing(w window.Window) mtime.Time {
	t := mtime.Max(n.wm, w.Start)
	return mtime.Min(t, w.MaxTimestamp())
}

func (n *statefulNode) nextDeadline() mtime.Time {
	if len(n.proc) == 0 {
		return 0
	}
	return n.proc[0].t
}

// processingTime fires the processing-time timers due by now.
func (n *statefulNode) processingTime(now mtime.Time) error {
	for len(n.proc) > 0 && n.proc[0].t <= now {
		ref := heapPop(&n.proc)
		if err := n.fire(ref, graph.ProcessingTime, n.outputTimeForProcessing(ref.w)); err != nil {
			return err
		}
	}
	n.proc = shrunk(n.proc)
	return nil
}
