package runner

import "github.com/weir-dev/weir/runner/contract"

// This file aligns a node's inputs on checkpoint barriers: inputs that
// delivered the barrier of the epoch being aligned are held back until every
// other unfinished input delivered it too.

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
	// onBarrier, when set, is called with every barrier the aligner takes
	// from an input, at its place in that input's stream (a sink with an
	// error output forwards it downstream).
	onBarrier func(port int, c ctrl) error
}

func copyBundle(b bundle) bundle {
	c := b
	c.elems = append([]contract.Element(nil), b.elems...)
	c.hashes = append([]uint64(nil), b.hashes...)
	c.keys = append([]byte(nil), b.keys...)
	c.kends = append([]uint32(nil), b.kends...)
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
		if a.epoch != 0 && c.kind == ctrlWatermark && atEnd(c.wm) {
			// A finished input no longer owes a barrier.
			return a.maybeComplete()
		}
		return nil
	}
	if !a.wms.owesBarrier(port, c.sender) {
		return nil
	}
	if a.epoch == 0 {
		a.epoch = c.epoch
		a.got = map[portSender]bool{}
	}
	a.got[portSender{port, c.sender}] = true
	if a.onBarrier != nil {
		if err := a.onBarrier(port, c); err != nil {
			return err
		}
	}
	return a.maybeComplete()
}

func (a *aligner) maybeComplete() error {
	for port, senders := range a.wms.ports {
		for s, wm := range senders {
			if !atEnd(wm) && !a.got[portSender{port, s}] {
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
