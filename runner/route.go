package runner

import "github.com/weir-dev/weir/runner/contract"

// This file moves data between nodes: edges, bundles, delivery on the same
// worker, partitioning by key group and broadcasting to other workers, and
// the per-step output buffers that flush along the edges.

// edgeKind says how elements cross from a producer to a consumer step.
type edgeKind int

const (
	// edgeLocal hands elements to the consumer on the same worker.
	edgeLocal edgeKind = iota
	// edgePartition routes each element to the worker owning its key group.
	edgePartition
	// edgeBroadcast sends every element to every worker (side inputs).
	edgeBroadcast
)

type edge struct {
	kind  edgeKind
	step  int // consumer step index
	port  int // consumer input port: 0 main, 1+i side input i
	keyer contract.Keyer
}

type bundle struct {
	elems []contract.Element
	// hashes holds, for bundles of keyed steps, the KeyHash of each
	// element's key; its key group is the hash modulo the key groups.
	hashes []uint64
	// keys and kends hold, beside hashes, each element's key as the
	// consumer's Keyer encoded it to hash it: element i's encoding is
	// keys[kends[i-1]:kends[i]] (from 0 for the first). The keyed step
	// reads it instead of encoding the key a second time. Both are nil
	// when the bundle did not keep them (the step then encodes the key):
	// the shares sent to other workers do not, since copying the bytes
	// cost the sender more than encoding them again cost the receiver
	// (BenchmarkWindowedSumW2).
	keys  []byte
	kends []uint32
	// sender is the root instance the elements come from.
	sender int
	// owned says the receiver may modify the elements in place: no other
	// consumer reads them and the producer will not read them again.
	owned bool
	// shared says the bundle is a whole partitioned bundle of which the
	// receiving worker handles only the elements of the key groups it owns
	// (the local share, passed without copying).
	shared bool
}

// skip reports whether element i of a shared bundle belongs to a worker
// other than self.
func (b *bundle) skip(i int, route RoutingTable, self int) bool {
	return b.shared && int(route[keyGroupOf(b.hashes[i], uint64(len(route)))]) != self
}

// key returns the encoding of element i's key, which b holds (b.kends
// is not nil). The result is capped: appending to it copies.
func (b *bundle) key(i int) []byte {
	var start uint32
	if i > 0 {
		start = b.kends[i-1]
	}
	end := b.kends[i]
	return b.keys[start:end:end]
}

// edgeScratch holds the reusable buffers of one producer's edge: the key
// groups and the local part of partitioned bundles. A DAG never re-enters the
// same edge while it is delivering, so the buffers are safe to reuse.
type edgeScratch struct {
	hashes []uint64
	keys   []byte
	kends  []uint32
}

// deliver hands a bundle produced on this worker to the consumer of edge e.
// The consumer must not keep elems after returning; bundles sent to other
// workers are copied.
func (w *worker) deliver(e edge, elems []contract.Element, sc *edgeScratch, owned bool) error {
	switch e.kind {
	case edgeLocal:
		return w.process(e.step, e.port, bundle{elems: elems, sender: w.cur, owned: owned})
	case edgeBroadcast:
		for _, other := range w.r.workers {
			if other.id == w.id {
				continue
			}
			w.send(other, e, bundle{elems: append([]contract.Element(nil), elems...), sender: w.cur})
		}
		return w.process(e.step, e.port, bundle{elems: elems, sender: w.cur})
	}
	// Partition by key group.
	nw := len(w.r.workers)
	route := w.r.route
	ngroups := uint64(len(route))
	// Keys are encoded into local copies of the edge's buffers, stored
	// back once: a store into the scratch per element would cost a GC
	// write barrier per element while the collector marks.
	hs, ks, ke := sc.hashes[:0], sc.keys[:0], sc.kends[:0]
	if nw == 1 {
		for i := range elems {
			start := len(ks)
			ks = e.keyer.AppendKey(ks, elems[i].Value)
			ke = append(ke, uint32(len(ks)))
			hs = append(hs, KeyHash(ks[start:]))
		}
		sc.hashes, sc.keys, sc.kends = hs, ks, ke
		return w.process(e.step, e.port, bundle{elems: elems, hashes: hs, keys: ks, kends: ke, sender: w.cur})
	}
	// Remote shares are copied into pooled bundles; the local share is the
	// producer's bundle itself, with the hashes telling which elements are ours.
	parts := make([]*bundle, nw)
	local := 0
	for i := range elems {
		start := len(ks)
		ks = e.keyer.AppendKey(ks, elems[i].Value)
		ke = append(ke, uint32(len(ks)))
		h := KeyHash(ks[start:])
		hs = append(hs, h)
		o := int(route[keyGroupOf(h, ngroups)])
		if o == w.id {
			local++
			continue
		}
		p := parts[o]
		if p == nil {
			p, _ = w.r.bundles.Get().(*bundle)
			if p == nil {
				p = &bundle{}
			}
			p.elems, p.hashes, p.sender = p.elems[:0], p.hashes[:0], w.cur
			parts[o] = p
		}
		p.elems = append(p.elems, elems[i])
		p.hashes = append(p.hashes, h)
	}
	sc.hashes, sc.keys, sc.kends = hs, ks, ke
	for o, p := range parts {
		if p == nil {
			continue
		}
		w.push(w.r.workers[o], message{step: e.step, port: e.port, b: *p, pooled: p, from: w.id})
	}
	if local > 0 {
		return w.process(e.step, e.port, bundle{elems: elems, hashes: hs, keys: ks, kends: ke, shared: true, sender: w.cur})
	}
	return nil
}

func (w *worker) send(to *worker, e edge, b bundle) {
	w.push(to, message{step: e.step, port: e.port, b: b, from: w.id})
}

// push queues a data message for another worker, counting it against this
// worker's credit. A worker that has finished needs nothing more (all of its
// receivers saw the end of their inputs), so messages to it are dropped.
func (w *worker) push(to *worker, m message) {
	if to.exited.Load() {
		return
	}
	w.inflight.Add(1)
	to.inbox.push(m)
}

// deliverCtrl sends a control message along edge e: to this worker's
// consumer for local edges, to every worker's otherwise.
func (w *worker) deliverCtrl(e edge, c ctrl) error {
	if e.kind != edgeLocal {
		for _, other := range w.r.workers {
			if other.id != w.id {
				cc := c
				other.inbox.push(message{step: e.step, port: e.port, c: &cc, from: w.id})
			}
		}
	}
	return w.control(e.step, e.port, c)
}

type outputs struct {
	w  *worker
	sp *stepPlan
	// bufs[tag][:lens[tag]] is what is buffered for output tag; bufs keep
	// their length (the capacity in use), so that an Emit stores no slice
	// header, which would cost a GC write barrier per element while the
	// collector marks.
	bufs     [][]contract.Element
	lens     []int
	edges    [][]edge
	scratch  [][]edgeScratch
	ctrlTo   []edge // unique consumers for control messages
	counters *stepCounters
	limit    int
	err      error
	errTag   int
}

func newOutputs(w *worker, sp *stepPlan) *outputs {
	o := &outputs{w: w, sp: sp, bufs: make([][]contract.Element, len(sp.edges)), lens: make([]int, len(sp.edges)), edges: sp.edges, counters: sp.counters, limit: w.r.opts.BundleSize, errTag: errTag(sp)}
	o.scratch = make([][]edgeScratch, len(sp.edges))
	for i, es := range sp.edges {
		o.scratch[i] = make([]edgeScratch, len(es))
	}
	seen := map[[2]int]bool{}
	for _, es := range sp.edges {
		for _, e := range es {
			k := [2]int{e.step, e.port}
			if !seen[k] {
				seen[k] = true
				o.ctrlTo = append(o.ctrlTo, e)
			}
		}
	}
	return o
}

// Emit buffers e for output tag, flushing the buffer when it is full
// (contract.Emitter).
func (o *outputs) Emit(tag int, e contract.Element) {
	n, buf := o.lens[tag], o.bufs[tag]
	if n == len(buf) {
		buf = o.grow(tag)
	}
	// Field by field: copying a whole Element would cost a bulk GC write
	// barrier per element while the collector marks.
	d := &buf[n]
	d.Value, d.Time, d.Window, d.Pane = e.Value, e.Time, e.Window, e.Pane
	if d.Source != e.Source {
		d.Source = e.Source
	}
	n++
	o.lens[tag] = n
	if n >= o.limit && o.err == nil {
		o.err = o.flushTag(tag)
	}
}

// grow doubles the buffer of tag (16 elements at first), keeping what it
// holds.
func (o *outputs) grow(tag int) []contract.Element {
	old := o.bufs[tag]
	buf := make([]contract.Element, max(16, 2*len(old)))
	copy(buf, old)
	o.bufs[tag] = buf
	return buf
}

func (o *outputs) flushTag(tag int) error {
	buf := o.bufs[tag][:o.lens[tag]]
	if len(buf) == 0 {
		return nil
	}
	if tag != o.errTag {
		// elements_out counts what a step produced; rejects are counted apart.
		o.counters.out.Add(int64(len(buf)))
	}
	owned := len(o.edges[tag]) == 1
	for i, e := range o.edges[tag] {
		if err := o.w.deliver(e, buf, &o.scratch[tag][i], owned); err != nil {
			return err
		}
	}
	clear(buf)
	o.lens[tag] = 0
	return nil
}

// deliverBundle hands elems to the consumers of tag without copying them
// into the output buffer (after anything already buffered, to keep order).
// owned says the caller gives the elements up: with a single consumer, that
// consumer may then modify them in place.
func (o *outputs) deliverBundle(tag int, elems []contract.Element, owned bool) error {
	if err := o.flush(); err != nil {
		return err
	}
	if len(elems) == 0 {
		return nil
	}
	if tag != o.errTag {
		o.counters.out.Add(int64(len(elems)))
	}
	owned = owned && len(o.edges[tag]) == 1
	for i, e := range o.edges[tag] {
		if err := o.w.deliver(e, elems, &o.scratch[tag][i], owned); err != nil {
			return err
		}
	}
	return nil
}

// flush delivers everything buffered and reports the first delivery error.
func (o *outputs) flush() error {
	if err := o.err; err != nil {
		o.err = nil
		return err
	}
	for tag := range o.bufs {
		if err := o.flushTag(tag); err != nil {
			return err
		}
	}
	return nil
}

// forward sends a control message to every consumer, after flushing data.
func (o *outputs) forward(c ctrl) error {
	if err := o.flush(); err != nil {
		return err
	}
	if c.kind == ctrlWatermark && o.sp.root >= 0 {
		o.counters.wms[o.w.id].Store(int64(c.wm))
		if t, ok := o.w.nodes[o.sp.idx].(interface{ timerCount() int }); ok {
			o.counters.timers[o.w.id].Store(int64(t.timerCount()))
		}
	}
	for _, e := range o.ctrlTo {
		if err := o.w.deliverCtrl(e, c); err != nil {
			return err
		}
	}
	return nil
}
