package runner

import (
	"fmt"

	"github.com/weir-dev/weir/runner/contract"
)

// This file holds the sink node; with a transactional sink in a
// checkpointed execution it aligns barriers and pre-commits each epoch. A
// RejectingSink's refused elements are rejects of the sink step; a sink
// with an error output forwards control messages to it, in order with the
// rejects.

type sinkNode struct {
	w        *worker
	sp       *stepPlan
	sink     contract.Sink
	counters *stepCounters
	// For transactional sinks in a checkpointed execution: inputs are
	// aligned on barriers and each epoch is pre-committed.
	tx       contract.TransactionalSink
	wms      inputWatermarks
	al       *aligner
	finished bool
	// rs is the sink as a RejectingSink, if it is one; rejects is its
	// reusable scratch.
	rs      contract.RejectingSink
	rejects []contract.SinkReject
	// out holds the step's outputs: none, or its error output (errTag is
	// its index, -1 without one); fwd says there is one, so control
	// messages are forwarded to it.
	out    *outputs
	errTag int
	fwd    bool
}

func newSinkNode(w *worker, sp *stepPlan) *sinkNode {
	n := &sinkNode{w: w, sp: sp, sink: sp.code.(contract.Sink), counters: sp.counters, out: newOutputs(w, sp), errTag: errTag(sp), fwd: len(sp.outTags) > 0}
	n.rs, _ = n.sink.(contract.RejectingSink)
	if tx, ok := n.sink.(contract.TransactionalSink); ok && w.r.opts.Checkpoints {
		n.tx = tx
		n.wms = newInputWatermarks(w.r, sp, w.id, true)
		n.al = &aligner{inner: n, wms: &n.wms}
		if n.fwd {
			n.al.onBarrier = func(_ int, c ctrl) error { return n.out.forward(c) }
		}
		w.r.coord.register(n.key())
	}
	return n
}

func (n *sinkNode) key() string { return fmt.Sprintf("sink/%s/%d", n.sp.step.Name, n.w.id) }

func (n *sinkNode) process(port int, b bundle) error {
	if n.al != nil {
		return n.al.process(port, b)
	}
	return n.processAligned(port, b)
}

func (n *sinkNode) processAligned(_ int, b bundle) error {
	n.counters.in.Add(int64(len(b.elems)))
	if n.rs == nil {
		return n.sink.Write(n.w.r.ctx, n.w.id, b.elems)
	}
	rejects, err := n.rs.WriteRejecting(n.w.r.ctx, n.w.id, b.elems, n.rejects[:0])
	n.rejects = rejects
	if err != nil {
		return err
	}
	if len(rejects) == 0 {
		return nil
	}
	// The sink step's rejects go where any step's do (stateless.go).
	for _, sr := range rejects {
		e := b.elems[sr.Index]
		rj := contract.Reject{Element: e.Value, Step: n.sp.step.Name, Reason: sr.Err.Reason, Message: sr.Err.Message, Source: e.Source}
		ee := sr.Err
		if err := emitReject(n.out, n.sp, n.errTag, e, rj, &ee); err != nil {
			return err
		}
	}
	clear(rejects)
	return n.out.flush()
}

func (n *sinkNode) control(port int, c ctrl) error {
	if n.al == nil {
		if n.fwd {
			return n.out.forward(c)
		}
		return nil
	}
	return n.al.control(port, c)
}

func (n *sinkNode) controlAligned(port int, c ctrl) error {
	if n.fwd && c.kind != ctrlBarrier {
		// In order with the rejects of what the aligner let through.
		if err := n.out.forward(c); err != nil {
			return err
		}
	}
	if c.kind != ctrlWatermark || !n.wms.update(port, c.sender, c.wm) {
		return nil
	}
	if atEnd(n.wms.input()) && !n.finished {
		// Everything this sink will get has arrived: pre-commit it as the
		// final share, which stands in for every later checkpoint.
		n.finished = true
		var part []byte
		var err error
		if f, ok := n.tx.(contract.FinalPreCommitter); ok {
			part, err = f.PreCommitFinal(n.w.r.ctx, n.w.id, n.w.r.epoch.Load()+1)
		} else {
			part, err = n.tx.PreCommit(n.w.r.ctx, n.w.id, n.w.r.epoch.Load()+1)
		}
		if err != nil {
			return fmt.Errorf("pre-committing sink %q: %w", n.sp.step.Name, err)
		}
		n.w.r.coord.submit(n.key(), &report{epoch: n.w.r.epoch.Load(), sink: n.sp.step.Name, worker: n.w.id, part: part, finished: true})
	}
	return nil
}

func (n *sinkNode) snapshot(epoch uint64) error {
	part, err := n.tx.PreCommit(n.w.r.ctx, n.w.id, epoch)
	if err != nil {
		return fmt.Errorf("pre-committing sink %q: %w", n.sp.step.Name, err)
	}
	n.w.r.coord.submit(n.key(), &report{epoch: epoch, sink: n.sp.step.Name, worker: n.w.id, part: part})
	return nil
}
