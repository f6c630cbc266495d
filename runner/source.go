package runner

import (
	"context"
	"fmt"

	"github.com/weir-dev/weir/runner/contract"

	"github.com/weir-dev/weir/mtime"
)

// This file holds the source node: it reads its splits in turn, hands
// their bundles on, forwards the source's watermark and injects
// checkpoint barriers with the splits' positions.

type splitState struct {
	split contract.SourceSplit
	index int
	wm    mtime.Time
	done  bool
	// closed is set when a Pause closed the split early.
	closed bool
	// empty is set when the split's last read found nothing.
	empty bool
}

type sourceNode struct {
	w       *worker
	plan    *stepPlan
	splits  []*splitState
	out     *outputs
	buf     []contract.Element
	errTag  int
	wm      mtime.Time
	started bool
	done    bool
	next    int
	// epoch is the last checkpoint epoch whose barrier this source injected.
	epoch     uint64
	finalSent bool
	// paused is set at a Pause barrier: the source reads nothing more.
	paused bool
	// got says whether the last read found input.
	got bool
}

func newSourceNode(w *worker, sp *stepPlan, splits []contract.SourceSplit, indexes []int) *sourceNode {
	n := &sourceNode{w: w, plan: sp, out: newOutputs(w, sp), buf: make([]contract.Element, w.r.opts.BundleSize), errTag: errTag(sp), wm: mtime.MinTimestamp, epoch: w.r.epoch.Load()}
	for i, s := range splits {
		n.splits = append(n.splits, &splitState{split: s, index: indexes[i], wm: mtime.MinTimestamp})
	}
	if w.r.opts.Checkpoints && len(splits) > 0 {
		w.r.coord.register(n.key())
	}
	return n
}

func (n *sourceNode) key() string { return fmt.Sprintf("source/%s/%d", n.plan.step.Name, n.w.id) }

// readAllPosition is the position a checkpoint records for a split that
// has no positions (not a contract.PositionedSplit) once it read all its
// input: a byte string no source writes, since such a split writes none.
const readAllPosition = "\x00weir:read-all"

// readAllSplit stands, in an execution restored from a checkpoint, for a
// split without positions that had read all its input before it: it reads
// nothing, and records readAllPosition in every later checkpoint, so that
// a later restore skips it again.
type readAllSplit struct{}

func (readAllSplit) Read(context.Context, []contract.Element) (contract.ReadResult, error) {
	return contract.ReadResult{Watermark: mtime.MaxTimestamp, Done: true}, nil
}

func (readAllSplit) Close() error { return nil }

func (readAllSplit) Position() ([]byte, error) { return []byte(readAllPosition), nil }

func (readAllSplit) Ack(context.Context, []byte) error { return nil }

// readAll reports whether recorded positions say that a source without
// positions had read all its input: every split's is readAllPosition.
func readAll(positions [][]byte) bool {
	if len(positions) == 0 {
		return false
	}
	for _, p := range positions {
		if string(p) != readAllPosition {
			return false
		}
	}
	return true
}

// positions records where every split of this instance stands.
func (n *sourceNode) positions() (map[int][]byte, error) {
	out := map[int][]byte{}
	for _, s := range n.splits {
		ps, ok := s.split.(contract.PositionedSplit)
		if !ok {
			if s.done {
				// A split without positions that read all it had: a
				// restore need not (and cannot) read it again.
				out[s.index] = []byte(readAllPosition)
			}
			continue
		}
		pos, err := ps.Position()
		if err != nil {
			return nil, fmt.Errorf("recording the position of source %q: %w", n.plan.step.Name, err)
		}
		out[s.index] = pos
	}
	return out, nil
}

// barrier records the positions for epoch and sends its barrier downstream,
// in order with the data already sent.
func (n *sourceNode) barrier(epoch uint64) error {
	n.epoch = epoch
	if len(n.splits) == 0 || n.finalSent {
		return nil
	}
	pos, err := n.positions()
	if err != nil {
		return err
	}
	if n.done {
		// A finished source owes no barrier; its final positions stand in
		// for every later checkpoint.
		n.finalSent = true
		n.w.r.coord.submit(n.key(), &report{epoch: epoch, source: n.plan.step.Name, positions: pos, finished: true})
		return nil
	}
	if epoch == n.w.r.pauseEpoch.Load() {
		// Pause: nothing is read after this barrier. Set before the report,
		// which may be the last the Pause waits for: closePausedSources reads
		// the flag once the Pause returns.
		n.paused = true
	}
	n.w.r.coord.submit(n.key(), &report{epoch: epoch, source: n.plan.step.Name, positions: pos})
	prev := n.w.cur
	n.w.cur = n.id()
	defer func() { n.w.cur = prev }()
	return n.out.forward(ctrl{kind: ctrlBarrier, sender: n.id(), epoch: epoch})
}

func (n *sourceNode) id() int { return n.plan.root*len(n.w.r.workers) + n.w.id }

func (n *sourceNode) process(int, bundle) error { return nil }

func (n *sourceNode) control(int, ctrl) error { return nil }

// read reads one bundle from the next unfinished split and pushes it
// downstream, then forwards the source's watermark if it moved.
func (n *sourceNode) read(ctx context.Context) error {
	n.got = false
	prev := n.w.cur
	n.w.cur = n.id()
	defer func() { n.w.cur = prev }()
	draining := n.w.r.draining.Load()
	if draining && !n.catchingUp() {
		// Drain: read nothing more; the watermark goes to +∞.
		n.done = true
		if err := n.out.forward(ctrl{kind: ctrlWatermark, sender: n.id(), wm: mtime.MaxTimestamp}); err != nil {
			return err
		}
		return n.finish()
	}
	if len(n.splits) == 0 {
		n.done = true
		return n.out.forward(ctrl{kind: ctrlWatermark, sender: n.id(), wm: mtime.MaxTimestamp})
	}
	var s *splitState
	for range n.splits {
		c := n.splits[n.next%len(n.splits)]
		n.next++
		if !c.done && (!draining || isCatchingUp(c.split)) {
			s = c
			break
		}
	}
	if s == nil {
		n.done = true
		return nil
	}
	var res contract.ReadResult
	var err error
	var idle contract.IdleReader
	if s.empty && n.w.mayWaitIdle() { // nothing is looked up while input flows
		idle, _ = s.split.(contract.IdleReader)
	}
	if idle != nil {
		rctx, done := n.w.idleReadContext(ctx)
		res, err = idle.ReadIdle(rctx, n.buf)
		done()
		if err != nil && ctx.Err() == nil && rctx.Err() != nil {
			return nil // cut short: the worker has work
		}
	} else {
		res, err = s.split.Read(ctx, n.buf)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("reading source %q: %w", n.plan.step.Name, err)
	}
	s.empty = res.N == 0
	n.got = res.N > 0
	n.plan.counters.in.Add(int64(res.N))
	clean := true
	for i := 0; i < res.N; i++ {
		if _, ok := n.buf[i].Value.(contract.Reject); ok {
			clean = false
			break
		}
	}
	if clean {
		// The common case: hand the read buffer on without copying it.
		if err := n.out.deliverBundle(0, n.buf[:res.N], true); err != nil {
			return err
		}
		res.N = 0
	}
	for i := 0; i < res.N; i++ {
		e := n.buf[i]
		if rj, ok := e.Value.(contract.Reject); ok {
			// A source rejects an element by reading it as a Reject.
			if rj.Step == "" {
				rj.Step = n.plan.step.Name
			}
			if rj.Source == nil {
				rj.Source = e.Source
			}
			if err := emitReject(n.out, n.plan, n.errTag, e, rj, &contract.ElementError{Reason: rj.Reason, Message: rj.Message}); err != nil {
				return err
			}
			continue
		}
		n.out.Emit(0, e)
	}
	if err := n.out.flush(); err != nil {
		return err
	}
	s.advance(res)
	wm, all := splitsWatermark(n.splits)
	if res.ProcessingTimeAdvanced {
		if err := n.out.forward(ctrl{kind: ctrlTick, sender: n.id(), now: n.w.r.opts.Clock.Now()}); err != nil {
			return err
		}
	}
	if wm > n.wm {
		n.wm = wm
		if err := n.out.forward(ctrl{kind: ctrlWatermark, sender: n.id(), wm: wm}); err != nil {
			return err
		}
	}
	n.done = all
	if all {
		return n.finish()
	}
	return nil
}

// catchingUp reports whether a split of the node still catches up
// (CatchingUpSplit): a drain reads those on first, so that the drain's
// panes hold everything an earlier job had read for them.
func (n *sourceNode) catchingUp() bool {
	for _, s := range n.splits {
		if !s.done && isCatchingUp(s.split) {
			return true
		}
	}
	return false
}

func isCatchingUp(s contract.SourceSplit) bool {
	c, ok := s.(contract.CatchingUpSplit)
	return ok && c.CatchingUp()
}

// finish reports a checkpointed source's final positions once it has ended.
func (n *sourceNode) finish() error {
	if !n.w.r.opts.Checkpoints || n.finalSent || len(n.splits) == 0 {
		return nil
	}
	pos, err := n.positions()
	if err != nil {
		return err
	}
	n.finalSent = true
	n.w.r.coord.submit(n.key(), &report{epoch: n.w.r.epoch.Load(), source: n.plan.step.Name, positions: pos, finished: true})
	return nil
}
