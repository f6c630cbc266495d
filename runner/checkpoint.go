package runner

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// report is one participant's share of a checkpoint.
type report struct {
	epoch     uint64
	source    string
	positions map[int][]byte // split index -> position
	state     []StateEntry
	sink      string
	worker    int
	part      []byte
	finished  bool
	// pending is a keyed step's snapshot, encoded after the barrier.
	pending pendingState
}

// coordinator collects reports and completes checkpoints.
type coordinator struct {
	mu           sync.Mutex
	participants map[string]bool // participant key -> registered
	finals       map[string]*report
	pending      *pendingCheckpoint
	epoch        uint64
}

type pendingCheckpoint struct {
	cp       *Checkpoint
	reported map[string]bool
	done     chan struct{}
}

func newCoordinator() *coordinator {
	return &coordinator{participants: map[string]bool{}, finals: map[string]*report{}}
}

func (c *coordinator) register(key string) { c.participants[key] = true }

func (c *coordinator) add(cp *Checkpoint, r *report) {
	if r.source != "" {
		ps := cp.Positions[r.source]
		for i, p := range r.positions {
			for len(ps) <= i {
				ps = append(ps, nil)
			}
			ps[i] = p
		}
		cp.Positions[r.source] = ps
	}
	cp.State = append(cp.State, r.state...)
	if r.pending != nil {
		cp.Pending = append(cp.Pending, r.pending)
	}
	if r.sink != "" && r.part != nil {
		parts := cp.SinkParts[r.sink]
		for len(parts) <= r.worker {
			parts = append(parts, nil)
		}
		parts[r.worker] = r.part
		cp.SinkParts[r.sink] = parts
	}
}

// submit records a participant's report for the pending epoch; a finished
// participant's report also stands in for every later epoch (its state
// deletions go into the next checkpoint only).
func (c *coordinator) submit(key string, r *report) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.finished {
		c.finals[key] = r
	}
	p := c.pending
	if p == nil || r.epoch != c.epoch || p.reported[key] {
		return
	}
	c.take(p, key, r)
	c.completeLocked()
}

func (c *coordinator) take(p *pendingCheckpoint, key string, r *report) {
	p.reported[key] = true
	c.add(p.cp, r)
	if f := c.finals[key]; f == r {
		// Later checkpoints repeat the positions but not the state.
		c.finals[key] = &report{source: r.source, positions: r.positions, sink: r.sink, worker: r.worker, finished: true}
	}
}

func (c *coordinator) completeLocked() {
	p := c.pending
	if p == nil {
		return
	}
	for key := range c.participants {
		if p.reported[key] {
			continue
		}
		f := c.finals[key]
		if f == nil {
			return
		}
		c.take(p, key, f)
	}
	close(p.done)
	c.pending = nil
}

// begin starts epoch e; it completes at once if every participant finished.
func (c *coordinator) begin(e uint64) *pendingCheckpoint {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch = e
	p := &pendingCheckpoint{
		cp:       &Checkpoint{Epoch: e, Positions: map[string][][]byte{}, SinkParts: map[string][][]byte{}},
		reported: map[string]bool{},
		done:     make(chan struct{}),
	}
	c.pending = p
	c.completeLocked()
	return p
}

// Checkpoint takes an aligned checkpoint: sources record their positions
// and inject a barrier; keyed steps snapshot their changed state when the
// barrier arrived on all inputs; transactional sinks pre-commit. It returns
// when every participant reported (or ctx is done). Only one checkpoint
// runs at a time. Nothing is committed: persist the result, then call Commit.
func (x *Execution) Checkpoint(ctx context.Context) (*Checkpoint, error) {
	return x.checkpoint(ctx, false)
}

// Pause takes a checkpoint at which the execution stops: every source
// reads nothing after injecting the barrier, and keyed steps fire no
// processing-time timer after their snapshot, so once Pause returns the
// in-memory state is exactly the checkpoint's. Cancel the execution next;
// a new execution may then adopt its keyed state in memory (Options.Adopt)
// instead of reading it back from the store — a handover in O(1) of the
// state's size.
func (x *Execution) Pause(ctx context.Context) (*Checkpoint, error) {
	return x.checkpoint(ctx, true)
}

func (x *Execution) checkpoint(ctx context.Context, pause bool) (*Checkpoint, error) {
	r := x.r
	if !r.opts.Checkpoints {
		return nil, fmt.Errorf("%w: the execution was started without Options.Checkpoints", ErrNotCheckpointable)
	}
	x.cpMu.Lock()
	defer x.cpMu.Unlock()
	e := r.epoch.Load() + 1
	if pause {
		r.pauseEpoch.Store(e)
	}
	p := r.coord.begin(e)
	r.epoch.Store(e)
	for _, w := range r.workers {
		w.inbox.wake()
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-x.done:
		// The execution ended; finished participants complete the epoch.
		select {
		case <-p.done:
		default:
			if x.err != nil {
				return nil, fmt.Errorf("checkpoint %d: execution failed: %w", e, x.err)
			}
			<-p.done
		}
	}
	if pause {
		// The paused steps' snapshots are encoded by the execution that
		// adopts their state, or by Complete.
		contract.SortStateEntries(p.cp.State)
		if err := r.closePausedSources(); err != nil {
			return nil, err
		}
		return p.cp, nil
	}
	if !p.cp.Incomplete() {
		contract.SortStateEntries(p.cp.State)
		return p.cp, nil
	}
	if err := p.cp.Complete(ctx); err != nil {
		return nil, err
	}
	return p.cp, nil
}

// closePausedSources closes the splits of the sources a Pause stopped, so
// that nothing they still had in flight (a pull request of a subscription)
// competes with a new execution that resumes the same sources at once.
// After the Pause no worker reads them any more; Commit may still
// acknowledge through them.
func (r *run) closePausedSources() error {
	var errs []error
	for _, w := range r.workers {
		for _, sn := range w.sources {
			if !sn.paused {
				continue
			}
			for _, sp := range sn.splits {
				if sp.closed {
					continue
				}
				sp.closed = true
				if err := sp.split.Close(); err != nil {
					errs = append(errs, fmt.Errorf("closing source %q at the pause: %w", sn.plan.step.Name, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// Commit tells transactional sinks to commit cp's epoch and sources to
// acknowledge what cp covers. Call it only after cp is durable. It may be
// called again for the same checkpoint (after a crash, with the restored
// checkpoint): sinks skip epochs they already committed.
func (x *Execution) Commit(ctx context.Context, cp *Checkpoint) error {
	var errs []error
	for _, sp := range x.r.steps {
		if ts, ok := sp.code.(TransactionalSink); ok && sp.step.Kind == "sink" {
			if err := ts.Commit(ctx, cp.Epoch, cp.SinkParts[sp.step.Name]); err != nil {
				errs = append(errs, fmt.Errorf("committing sink %q for checkpoint %d: %w", sp.step.Name, cp.Epoch, err))
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, w := range x.r.workers {
		for _, sn := range w.sources {
			for _, s := range sn.splits {
				ps, ok := s.split.(PositionedSplit)
				pos := cp.Positions[sn.plan.step.Name]
				if !ok || s.index >= len(pos) || pos[s.index] == nil {
					continue
				}
				if err := ps.Ack(ctx, pos[s.index]); err != nil {
					errs = append(errs, fmt.Errorf("acknowledging source %q: %w", sn.plan.step.Name, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// CommitRestored commits the sink parts of the checkpoint an execution was
// restored from, for the case where the process stopped after the
// checkpoint became durable but before its sinks committed.
func CommitRestored(ctx context.Context, prog *Program, cp *Checkpoint) error {
	var errs []error
	for name, code := range prog.Code {
		if ts, ok := code.(TransactionalSink); ok {
			if parts, ok := cp.SinkParts[name]; ok {
				if err := ts.Commit(ctx, cp.Epoch, parts); err != nil {
					errs = append(errs, fmt.Errorf("committing sink %q for checkpoint %d: %w", name, cp.Epoch, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// Adoption names a paused execution whose keyed state a new execution
// takes over in memory.
type Adoption struct {
	// From is the paused (then cancelled) execution.
	From *Execution
	// Steps maps the new execution's keyed step names to the old ones
	// (identity for steps that kept their name). Steps not listed start
	// from the store (Options.Restore) or empty.
	Steps map[string]string
}

// adoptable returns the old execution's instances (one per old worker) of
// the keyed step that new step name takes over, or nil. Adoption needs the
// same number of key groups; the worker count may differ (rescaling): each
// new instance then takes the key groups the new routing table gives it.
func (r *run) adoptable(step string) []node {
	a := r.opts.Adopt
	if a == nil || a.From == nil {
		return nil
	}
	old := a.From.r
	if old.opts.KeyGroups != r.opts.KeyGroups || old.pauseEpoch.Load() == 0 {
		return nil
	}
	name, ok := a.Steps[step]
	if !ok {
		return nil
	}
	sp := old.byName[name]
	if sp == nil {
		return nil
	}
	out := make([]node, len(old.workers))
	for i, w := range old.workers {
		out[i] = w.nodes[sp.idx]
	}
	return out
}

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
func (c *changeLog[R]) takeNow() ([]StateEntry, error) {
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

// snapshotAndForward is a keyed node's part of checkpoint epoch: freeze at a
// Pause, report the snapshot of the changed state, and send the barrier on.
func snapshotAndForward(w *worker, key string, id int, out *outputs, epoch uint64, frozen *bool, snapshot func(frozen bool) pendingState) error {
	if epoch == w.r.pauseEpoch.Load() {
		*frozen = true
	}
	w.r.coord.submit(key, &report{epoch: epoch, pending: snapshot(*frozen)})
	return out.forward(ctrl{kind: ctrlBarrier, sender: id, epoch: epoch})
}

// ownedBy returns the elements of src whose key group route gives to
// worker w, appended to dst: how rescaling splits key-group states and
// timer heaps among new workers.
func ownedBy[T any](dst, src []T, kg func(T) int, route RoutingTable, w int) []T {
	for _, x := range src {
		if int(route[kg(x)]) == w {
			dst = append(dst, x)
		}
	}
	return dst
}

// keepOwnedGroups copies into dst the non-nil key-group states of src that
// route gives to worker w.
func keepOwnedGroups[G any](dst, src []*G, route RoutingTable, w int) {
	for kg, g := range src {
		if g != nil && int(route[kg]) == w {
			dst[kg] = g
		}
	}
}

// ---- barrier alignment ----

type portSender [2]int

type heldMsg struct {
	port int
	b    bundle
	c    *ctrl
}

// alignedNode is a node whose inputs are aligned on barriers.
type alignedNode interface {
	processAligned(port int, b bundle) error
	controlAligned(port int, c ctrl) error
	// snapshot reports the node's share of checkpoint epoch and forwards
	// the barrier downstream.
	snapshot(epoch uint64) error
}

// aligner holds back the inputs that delivered the barrier of the epoch
// being aligned until every other unfinished input delivered it too, so
// that the snapshot holds exactly what precedes the barrier.
type aligner struct {
	inner alignedNode
	wms   *inputWatermarks
	epoch uint64
	got   map[portSender]bool
	held  []heldMsg
}

func copyBundle(b bundle) bundle {
	c := b
	c.elems = append([]Element(nil), b.elems...)
	c.hashes = append([]uint64(nil), b.hashes...)
	return c
}

func (a *aligner) process(port int, b bundle) error {
	if a.epoch != 0 && a.got[portSender{port, b.sender}] {
		a.held = append(a.held, heldMsg{port: port, b: copyBundle(b)})
		return nil
	}
	return a.inner.processAligned(port, b)
}

func (a *aligner) control(port int, c ctrl) error {
	if a.epoch != 0 && a.got[portSender{port, c.sender}] {
		cc := c
		a.held = append(a.held, heldMsg{port: port, c: &cc})
		return nil
	}
	if c.kind != ctrlBarrier {
		if err := a.inner.controlAligned(port, c); err != nil {
			return err
		}
		if a.epoch != 0 && c.kind == ctrlWatermark && c.wm >= mtime.MaxTimestamp {
			// A finished input no longer owes a barrier.
			return a.maybeComplete()
		}
		return nil
	}
	if _, expected := a.wms.ports[port][c.sender]; !expected || a.wms.ports[port][c.sender] >= mtime.MaxTimestamp {
		return nil
	}
	if a.epoch == 0 {
		a.epoch = c.epoch
		a.got = map[portSender]bool{}
	}
	a.got[portSender{port, c.sender}] = true
	return a.maybeComplete()
}

func (a *aligner) maybeComplete() error {
	for port, senders := range a.wms.ports {
		for s, wm := range senders {
			if wm < mtime.MaxTimestamp && !a.got[portSender{port, s}] {
				return nil
			}
		}
	}
	epoch := a.epoch
	a.epoch, a.got = 0, nil
	if err := a.inner.snapshot(epoch); err != nil {
		return err
	}
	held := a.held
	a.held = nil
	for _, h := range held {
		var err error
		if h.c != nil {
			err = a.control(h.port, *h.c)
		} else {
			err = a.process(h.port, h.b)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ---- state encoding ----

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func readBytes(b []byte) (field, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return nil, nil, fmt.Errorf("corrupt state entry")
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}

func appendWindow(dst []byte, w window.Window) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(w.Start))
	return binary.BigEndian.AppendUint64(dst, uint64(w.End))
}

func readWindow(b []byte) (window.Window, []byte, error) {
	if len(b) < 16 {
		return window.Window{}, nil, fmt.Errorf("corrupt state entry")
	}
	return window.Window{Start: mtime.Time(binary.BigEndian.Uint64(b)), End: mtime.Time(binary.BigEndian.Uint64(b[8:]))}, b[16:], nil
}

// encodeAggKey encodes the windows of one key of an aggregation.
func encodeAggKey(sc StateCoder, k *aggKey) ([]byte, error) {
	return appendAggKey(nil, sc, k)
}

// appendAggKey appends the encoding of encodeAggKey to out.
func appendAggKey(out []byte, sc StateCoder, k *aggKey) ([]byte, error) {
	sa, fast := sc.(StateAppender)
	var err error
	if fast {
		out, err = appendPrefixed(out, func(b []byte) ([]byte, error) { return sa.AppendEncodedKey(b, k.key) })
	} else {
		var kb []byte
		kb, err = sc.EncodeKey(k.key)
		out = appendBytes(out, kb)
	}
	if err != nil {
		return nil, fmt.Errorf("encoding key: %w", err)
	}
	out = binary.AppendUvarint(out, uint64(len(k.wins)))
	for _, ws := range k.wins {
		out = appendWindow(out, ws.w)
		out = ws.st.AppendBinary(out)
		if ws.acc == nil {
			out = append(out, 0)
			continue
		}
		out = append(out, 1)
		if fast {
			out, err = appendPrefixed(out, func(b []byte) ([]byte, error) { return sa.AppendEncodedState(b, AccumulatorCell, ws.acc) })
		} else {
			var acc []byte
			acc, err = sc.EncodeState(AccumulatorCell, ws.acc)
			out = appendBytes(out, acc)
		}
		if err != nil {
			return nil, fmt.Errorf("encoding accumulator: %w", err)
		}
	}
	return out, nil
}

// appendPrefixed appends what enc appends, preceded by its length as
// appendBytes writes it, without a separate buffer.
func appendPrefixed(out []byte, enc func([]byte) ([]byte, error)) ([]byte, error) {
	start := len(out)
	out, err := enc(out)
	if err != nil {
		return out, err
	}
	n := len(out) - start
	var hdr [binary.MaxVarintLen64]byte
	h := binary.PutUvarint(hdr[:], uint64(n))
	out = append(out, hdr[:h]...)
	copy(out[start+h:], out[start:start+n])
	copy(out[start:], hdr[:h])
	return out, nil
}

func decodeAggKey(sc StateCoder, b []byte) (*aggKey, error) {
	kb, b, err := readBytes(b)
	if err != nil {
		return nil, err
	}
	key, err := sc.DecodeKey(kb)
	if err != nil {
		return nil, fmt.Errorf("decoding key: %w", err)
	}
	k := &aggKey{key: key}
	n, m := binary.Uvarint(b)
	if m <= 0 {
		return nil, fmt.Errorf("corrupt state entry")
	}
	b = b[m:]
	for i := uint64(0); i < n; i++ {
		ws := &winState{}
		if ws.w, b, err = readWindow(b); err != nil {
			return nil, err
		}
		if b, err = ws.st.DecodeBinary(b); err != nil {
			return nil, fmt.Errorf("decoding trigger state: %w", err)
		}
		if len(b) == 0 {
			return nil, fmt.Errorf("corrupt state entry")
		}
		has := b[0]
		b = b[1:]
		if has == 1 {
			var acc []byte
			if acc, b, err = readBytes(b); err != nil {
				return nil, err
			}
			if ws.acc, err = sc.DecodeState(AccumulatorCell, acc); err != nil {
				return nil, fmt.Errorf("decoding accumulator: %w", err)
			}
		}
		k.wins = append(k.wins, ws)
	}
	return k, nil
}

// encodeSfKey encodes the windows of one key of a stateful step: value
// cells, bags, maps and timers.
func encodeSfKey(sc StateCoder, k *sfKey) ([]byte, error) {
	return appendSfKey(nil, sc, k)
}

// appendSfKey appends the encoding of encodeSfKey to out.
func appendSfKey(out []byte, sc StateCoder, k *sfKey) ([]byte, error) {
	kb, err := sc.EncodeKey(k.key)
	if err != nil {
		return nil, fmt.Errorf("encoding key: %w", err)
	}
	out = appendBytes(out, kb)
	out = binary.AppendUvarint(out, uint64(len(k.wins)))
	enc := func(cell string, v any) error {
		b, err := sc.EncodeState(cell, v)
		if err != nil {
			return fmt.Errorf("encoding state: %w", err)
		}
		out = appendBytes(out, b)
		return nil
	}
	for _, ws := range k.wins {
		out = appendWindow(out, ws.w)
		out = binary.AppendUvarint(out, uint64(len(ws.values)))
		for _, id := range sortedKeys(ws.values) {
			out = appendBytes(out, []byte(id))
			if err := enc(id, ws.values[id]); err != nil {
				return nil, err
			}
		}
		out = binary.AppendUvarint(out, uint64(len(ws.bags)))
		for _, id := range sortedKeys(ws.bags) {
			out = appendBytes(out, []byte(id))
			out = binary.AppendUvarint(out, uint64(len(ws.bags[id])))
			for _, v := range ws.bags[id] {
				if err := enc(id, v); err != nil {
					return nil, err
				}
			}
		}
		out = binary.AppendUvarint(out, uint64(len(ws.maps)))
		for _, id := range sortedKeys(ws.maps) {
			out = appendBytes(out, []byte(id))
			m := ws.maps[id]
			out = binary.AppendUvarint(out, uint64(len(m)))
			for mk, mv := range m {
				if err := enc(id+"#key", mk); err != nil {
					return nil, err
				}
				if err := enc(id+"#value", mv); err != nil {
					return nil, err
				}
			}
		}
		out = binary.AppendUvarint(out, uint64(len(ws.timers)))
		for _, id := range sortedKeys(ws.timers) {
			t := ws.timers[id]
			out = appendBytes(out, []byte(id))
			out = appendBytes(out, []byte(t.Domain))
			out = binary.BigEndian.AppendUint64(out, uint64(t.Time))
		}
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// stateDecoder reads what encodeSfKey wrote.
type stateDecoder struct {
	b   []byte
	sc  StateCoder
	err error
}

func (d *stateDecoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	n, k := binary.Uvarint(d.b)
	if k <= 0 {
		d.err = fmt.Errorf("corrupt state entry")
		return 0
	}
	d.b = d.b[k:]
	return n
}

func (d *stateDecoder) bytes() []byte {
	if d.err != nil {
		return nil
	}
	var f []byte
	f, d.b, d.err = readBytes(d.b)
	return f
}

func (d *stateDecoder) value(cell string) any {
	b := d.bytes()
	if d.err != nil {
		return nil
	}
	v, err := d.sc.DecodeState(cell, b)
	if err != nil {
		d.err = fmt.Errorf("decoding state: %w", err)
	}
	return v
}

func decodeSfKey(sc StateCoder, b []byte) (*sfKey, error) {
	d := &stateDecoder{b: b, sc: sc}
	kb := d.bytes()
	if d.err != nil {
		return nil, d.err
	}
	key, err := sc.DecodeKey(kb)
	if err != nil {
		return nil, fmt.Errorf("decoding key: %w", err)
	}
	k := &sfKey{key: key}
	nw := d.uvarint()
	for i := uint64(0); i < nw && d.err == nil; i++ {
		ws := &sfWin{}
		if ws.w, d.b, d.err = readWindow(d.b); d.err != nil {
			break
		}
		if n := d.uvarint(); n > 0 {
			ws.values = map[string]any{}
			for j := uint64(0); j < n && d.err == nil; j++ {
				id := string(d.bytes())
				ws.values[id] = d.value(id)
			}
		}
		if n := d.uvarint(); n > 0 {
			ws.bags = map[string][]any{}
			for j := uint64(0); j < n && d.err == nil; j++ {
				id := string(d.bytes())
				m := d.uvarint()
				for x := uint64(0); x < m && d.err == nil; x++ {
					ws.bags[id] = append(ws.bags[id], d.value(id))
				}
			}
		}
		if n := d.uvarint(); n > 0 {
			ws.maps = map[string]map[any]any{}
			for j := uint64(0); j < n && d.err == nil; j++ {
				id := string(d.bytes())
				m := d.uvarint()
				ws.maps[id] = map[any]any{}
				for x := uint64(0); x < m && d.err == nil; x++ {
					mk := d.value(id + "#key")
					mv := d.value(id + "#value")
					if d.err == nil {
						ws.maps[id][mk] = mv
					}
				}
			}
		}
		if n := d.uvarint(); n > 0 {
			ws.timers = map[string]Timer{}
			for j := uint64(0); j < n && d.err == nil; j++ {
				id := string(d.bytes())
				dom := string(d.bytes())
				if d.err == nil && len(d.b) < 8 {
					d.err = fmt.Errorf("corrupt state entry")
				}
				if d.err != nil {
					break
				}
				t := mtime.Time(binary.BigEndian.Uint64(d.b))
				d.b = d.b[8:]
				ws.timers[id] = Timer{ID: id, Domain: dom, Time: t}
			}
		}
		k.wins = append(k.wins, ws)
	}
	if d.err != nil {
		return nil, d.err
	}
	return k, nil
}
