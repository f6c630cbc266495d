package runner

import (
	"errors"
	"fmt"

	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// This file holds the stateless nodes fused into their producer's loop
// (ParDo, WindowInto, Flatten) and the handling of rejected elements.

type parDoNode struct {
	sp     *stepPlan
	fn     contract.DoFn
	out    *outputs
	pc     contract.ProcessContext
	errTag int
	fin    contract.BundleFinisher
}

func newParDoNode(w *worker, sp *stepPlan, out *outputs) *parDoNode {
	fn := sp.code.(contract.DoFn)
	if c, ok := fn.(contract.Cloner); ok {
		fn = c.Clone().(contract.DoFn)
	}
	n := &parDoNode{sp: sp, fn: fn, out: out, errTag: errTag(sp)}
	n.fin, _ = fn.(contract.BundleFinisher)
	n.pc = contract.NewProcessContext(w.r.ctx, out, nil, w.r.opts.Clock, w.id)
	n.pc.SetMetrics(&sp.counters.user)
	return n
}

func errTag(sp *stepPlan) int {
	if sp.step.ErrorOutput == "" {
		return -1
	}
	for i, t := range sp.outTags {
		if t == sp.step.ErrorOutput {
			return i
		}
	}
	return -1
}

// reject routes a failed element to the error output or the dead-letter
// hook, or fails the run (when there is neither, or the error is Fatal).
//
// An error that wraps the run's own cancellation (a step that stopped
// computing because the run was cancelled, contract.ProcessContext.Context)
// is no reject: it ends the run like the cancellation itself, and the
// element is not acknowledged.
func reject(out *outputs, sp *stepPlan, tag int, e contract.Element, err error) error {
	if done := out.w.r.ctx.Err(); done != nil && errors.Is(err, done) {
		return err
	}
	rj := contract.Reject{Element: e.Value, Step: sp.step.Name, Reason: "error", Message: err.Error(), Source: e.Source}
	var ee *contract.ElementError
	if errors.As(err, &ee) {
		rj.Reason, rj.Message = ee.Reason, ee.Message
		if ee.Fatal {
			return &StepError{Step: rj.Step, Reason: rj.Reason, Message: rj.Message, Source: rj.Source, Err: err}
		}
	}
	return emitReject(out, sp, tag, e, rj, err)
}

// emitReject sends rj to the error output with index tag, or fails the run
// when the step declares none.
func emitReject(out *outputs, sp *stepPlan, tag int, e contract.Element, rj contract.Reject, err error) error {
	sp.counters.countReject(rj.Reason)
	if tag < 0 {
		if dl := out.w.r.opts.DeadLetter; dl != nil {
			if err := dl(out.w.r.ctx, rj); err != nil {
				return fmt.Errorf("sending a reject of step %q to the dead-letter topic: %w", rj.Step, err)
			}
			return nil
		}
		return &StepError{Step: rj.Step, Reason: rj.Reason, Message: rj.Message, Source: rj.Source, Err: err}
	}
	out.Emit(tag, contract.Element{Value: rj, Time: e.Time, Window: e.Window, Pane: e.Pane, Source: e.Source})
	return nil
}

func (n *parDoNode) process(_ int, b bundle) error {
	n.sp.counters.in.Add(int64(len(b.elems)))
	for i := range b.elems {
		n.pc.SetCurrent(&b.elems[i])
		if err := n.fn.Process(&n.pc, b.elems[i]); err != nil {
			if err := reject(n.out, n.sp, n.errTag, b.elems[i], err); err != nil {
				return err
			}
		}
	}
	if n.fin != nil {
		if err := n.fin.FinishBundle(&n.pc); err != nil {
			return fmt.Errorf("step %q: finishing bundle: %w", n.sp.step.Name, err)
		}
	}
	return n.out.flush()
}

func (n *parDoNode) control(_ int, c ctrl) error { return n.out.forward(c) }

type windowNode struct {
	out      *outputs
	fn       window.Fn
	last     window.Window
	scratch  []window.Window
	counters *stepCounters
}

func (n *windowNode) process(_ int, b bundle) error {
	n.counters.in.Add(int64(len(b.elems)))
	if b.owned && n.fn.Kind != window.KindSliding {
		// One window per element: assign in place and pass the bundle on.
		for i := range b.elems {
			e := &b.elems[i]
			e.Pane = window.NoFiring
			if !n.last.Contains(e.Time) || n.fn.Kind == window.KindSessions {
				n.last, _ = n.fn.AssignOne(e.Time)
			}
			e.Window = n.last
		}
		return n.out.deliverBundle(0, b.elems, true)
	}
	for _, e := range b.elems {
		e.Pane = window.NoFiring
		if n.last.Contains(e.Time) && n.fn.Kind != window.KindSliding && n.fn.Kind != window.KindSessions {
			// Consecutive elements mostly share a fixed window.
			e.Window = n.last
			n.out.Emit(0, e)
			continue
		}
		if w, ok := n.fn.AssignOne(e.Time); ok {
			n.last = w
			e.Window = w
			n.out.Emit(0, e)
			continue
		}
		n.scratch = n.fn.Assign(n.scratch[:0], e.Time)
		for _, w := range n.scratch {
			e.Window = w
			n.out.Emit(0, e)
		}
	}
	return n.out.flush()
}

func (n *windowNode) control(_ int, c ctrl) error { return n.out.forward(c) }

type flattenNode struct {
	out      *outputs
	counters *stepCounters
}

func (n *flattenNode) process(_ int, b bundle) error {
	n.counters.in.Add(int64(len(b.elems)))
	n.counters.out.Add(int64(len(b.elems)))
	owned := b.owned && len(n.out.edges[0]) == 1
	for i, e := range n.out.edges[0] {
		if err := n.out.w.deliver(e, b.elems, &n.out.scratch[0][i], owned); err != nil {
			return err
		}
	}
	return nil
}

func (n *flattenNode) control(_ int, c ctrl) error { return n.out.forward(c) }
