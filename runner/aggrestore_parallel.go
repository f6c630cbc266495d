package runner

// This file restores an aggregation's keys with several goroutines: each
// reads and decodes a contiguous range of the worker's key groups (the
// store's reads and the decoding are most of a restore's time), and the
// worker puts the decoded keys into its groups, one group at a time. A
// default job has one worker: without this, its restore used one core.

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sync"
)

// maxRestoreParts bounds the goroutines a worker restores with.
const maxRestoreParts = 8

// minRestoreGroups is the fewest key groups a restoring goroutine reads.
const minRestoreGroups = 16

// restoreParts returns how many goroutines a worker that owns nkgs key
// groups restores an aggregation with (Options.RestoreParts).
func (r *run) restoreParts(nkgs int) int {
	p := r.opts.RestoreParts
	if p <= 0 {
		p = min((runtime.GOMAXPROCS(0)+len(r.workers)-1)/len(r.workers), maxRestoreParts, nkgs/minRestoreGroups)
	}
	return max(1, min(p, nkgs))
}

// restoredGroup is what a restoring goroutine decoded of one key group:
// its keys, and, for the few whose state did not all decode, what the
// worker reports of them (restored).
type restoredGroup struct {
	kg      uint16
	keys    []*aggKey
	dropped []restoredDrop
}

// restoredDrop is a restored key part of whose state did not decode: its
// key as the state coder stored it (a copy: the store lends its buffers)
// and what was dropped.
type restoredDrop struct {
	k       *aggKey
	kb      []byte
	dropped []droppedState
}

// restoreGroups restores the key groups kgs with parts goroutines. The
// worker puts the key groups in place in kgs's order, as a restore with
// one goroutine does: timers due at the same time then fire in the same
// order whatever the goroutines' pace (the timer heaps order by time
// only). Each goroutine's channel holds all of its key groups, so none
// waits for the worker: the keys it decodes are the state kept anyway,
// and a queued group costs a slice of pointers to them.
func (n *aggNode) restoreGroups(kgs []int, parts int) error {
	ctx, cancel := context.WithCancel(n.w.r.ctx)
	defer cancel()
	var (
		errMu   sync.Mutex // guards firstEr; a leaf
		firstEr error
	)
	fail := func(err error) {
		errMu.Lock()
		if firstEr == nil {
			firstEr = err
		}
		errMu.Unlock()
		cancel()
	}
	size := (len(kgs) + parts - 1) / parts
	var outs []chan restoredGroup
	for lo := 0; lo < len(kgs); lo += size {
		part := kgs[lo:min(lo+size, len(kgs))]
		out := make(chan restoredGroup, len(part))
		outs = append(outs, out)
		go func() {
			defer close(out)
			if err := n.decodeGroups(ctx, part, out); err != nil {
				fail(err)
			}
		}()
	}
	for _, out := range outs {
		for g := range out {
			if ctx.Err() != nil {
				continue // failing: the goroutines stop, their channels close
			}
			if err := n.applyRestored(g); err != nil {
				fail(err)
			}
		}
	}
	errMu.Lock()
	defer errMu.Unlock()
	if firstEr == nil && n.w.r.ctx.Err() != nil {
		return fmt.Errorf("restoring step %q: %w", n.sp.step.Name, n.w.r.ctx.Err())
	}
	return firstEr
}

// decodeGroups reads and decodes the keys of key groups kgs and sends
// them to out a key group at a time (out has room for all of them). It
// stops when ctx ends.
func (n *aggNode) decodeGroups(ctx context.Context, kgs []int, out chan<- restoredGroup) error {
	var cur restoredGroup
	send := func() bool {
		if len(cur.keys) == 0 {
			return true
		}
		select {
		case out <- cur:
			cur = restoredGroup{}
			return true
		case <-ctx.Done():
			return false
		}
	}
	err := n.w.r.opts.Restore.State.Scan(ctx, n.sp.step.Name, kgs, func(kg uint16, key, value []byte) error {
		if kg != cur.kg && !send() {
			return ctx.Err()
		}
		cur.kg = kg
		k, kb, dropped, err := decodeAggKey(n.sc, value, n.ek != nil)
		if err != nil {
			return err
		}
		k.setEncoding(key)
		cur.keys = append(cur.keys, k)
		if len(dropped) > 0 {
			cur.dropped = append(cur.dropped, restoredDrop{k: k, kb: bytes.Clone(kb), dropped: dropped})
		}
		return nil
	})
	if err == nil && !send() {
		err = ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("restoring step %q: %w", n.sp.step.Name, err)
	}
	return nil
}

// applyRestored puts g's keys into their key group, sized for them at
// once instead of growing the table a doubling at a time, and does for
// each what follows its addition (restored).
func (n *aggNode) applyRestored(g restoredGroup) error {
	grp := n.group(g.kg)
	grp.reserve(grp.n + len(g.keys))
	for _, k := range g.keys {
		grp.add(k)
	}
	d := g.dropped
	for _, k := range g.keys {
		var kb []byte
		var dropped []droppedState
		if len(d) > 0 && d[0].k == k {
			kb, dropped, d = d[0].kb, d[0].dropped, d[1:]
		}
		if err := n.restored(g.kg, k, kb, dropped); err != nil {
			return err
		}
	}
	return nil
}
