package runner

import (
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// sideState holds the side inputs of one step on one worker: every side
// element by side window, and the views built from them.
type sideState struct {
	fns   []window.Fn
	data  []map[window.Window][]any
	cache []map[window.Window]any
	wms   *inputWatermarks
}

// sideWindow maps a main-input window to the side input window it reads:
// the side window containing the main window's last instant.
func (s *sideState) sideWindow(i int, main window.Window) window.Window {
	if w, ok := s.fns[i].AssignOne(main.MaxTimestamp()); ok {
		return w
	}
	return s.fns[i].Assign(nil, main.MaxTimestamp())[0]
}

// SideInput returns the view of side input i for main-input window main,
// built by build and cached per side window (contract.SideInputs).
func (s *sideState) SideInput(i int, main window.Window, build func([]any) any) any {
	sw := s.sideWindow(i, main)
	if v, ok := s.cache[i][sw]; ok {
		return v
	}
	v := build(s.data[i][sw])
	s.cache[i][sw] = v
	return v
}

// ready reports whether every side input is complete for main window w:
// the side input's watermark passed the end of the side window.
func (s *sideState) ready(w window.Window) bool {
	for i := range s.fns {
		if s.wms.side(i) <= s.sideWindow(i, w).MaxTimestamp() {
			return false
		}
	}
	return true
}

// sideNode runs a stateless step that reads side inputs. Main-input
// elements wait (buffered, in order) until every side input is complete for
// their window; side elements arrive on every worker.
type sideNode struct {
	*parDoNode
	side     *sideState
	wms      inputWatermarks
	buffered []contract.Element
	outWM    mtime.Time
	done     bool
	al       *aligner
}

func newSideNode(w *worker, sp *stepPlan, out *outputs) *sideNode {
	n := &sideNode{parDoNode: newParDoNode(w, sp, out), outWM: mtime.MinTimestamp}
	n.wms = newInputWatermarks(w.r, sp, w.id, true)
	st := &sideState{wms: &n.wms}
	for _, si := range sp.step.SideInputs {
		col := w.r.prog.Graph.Collection(si.Collection)
		st.fns = append(st.fns, col.Windowing.Fn)
		st.data = append(st.data, map[window.Window][]any{})
		st.cache = append(st.cache, map[window.Window]any{})
	}
	n.side = st
	n.pc = contract.NewProcessContext(w.r.ctx, out, st, w.r.opts.Clock, w.id)
	n.pc.SetMetrics(&sp.counters.user)
	if w.r.opts.Checkpoints {
		// Elements waiting for side inputs are not part of checkpoints yet;
		// the step aligns barriers so that downstream state stays consistent.
		n.al = &aligner{inner: n, wms: &n.wms}
	}
	return n
}

func (n *sideNode) snapshot(epoch uint64) error {
	return n.out.forward(ctrl{kind: ctrlBarrier, sender: n.id(), epoch: epoch})
}

func (n *sideNode) id() int { return n.sp.root*len(n.out.w.r.workers) + n.out.w.id }

func (n *sideNode) finished() bool { return n.done }

func (n *sideNode) step() *stepPlan { return n.sp }

func (n *sideNode) nextDeadline() mtime.Time { return 0 }

func (n *sideNode) onProcessingTime(mtime.Time) error { return nil }

func (n *sideNode) process(port int, b bundle) error {
	prev := n.out.w.cur
	n.out.w.cur = n.id()
	defer func() { n.out.w.cur = prev }()
	if n.al != nil {
		return n.al.process(port, b)
	}
	return n.processAligned(port, b)
}

func (n *sideNode) processAligned(port int, b bundle) error {
	if port > 0 {
		i := port - 1
		for _, e := range b.elems {
			n.side.data[i][e.Window] = append(n.side.data[i][e.Window], e.Value)
			delete(n.side.cache[i], e.Window)
		}
		return nil
	}
	var ready []contract.Element
	for _, e := range b.elems {
		if len(n.buffered) == 0 && n.side.ready(e.Window) {
			ready = append(ready, e)
			continue
		}
		n.buffered = append(n.buffered, e)
	}
	if len(ready) == 0 {
		return nil
	}
	return n.parDoNode.process(0, bundle{elems: ready})
}

// release processes buffered elements whose side inputs became ready, in
// arrival order.
func (n *sideNode) release() error {
	var ready []contract.Element
	kept := n.buffered[:0]
	for _, e := range n.buffered {
		if n.side.ready(e.Window) {
			ready = append(ready, e)
		} else {
			kept = append(kept, e)
		}
	}
	n.buffered = kept
	if len(ready) == 0 {
		return nil
	}
	return n.parDoNode.process(0, bundle{elems: ready})
}

func (n *sideNode) control(port int, c ctrl) error {
	prev := n.out.w.cur
	n.out.w.cur = n.id()
	defer func() { n.out.w.cur = prev }()
	if n.al != nil {
		return n.al.control(port, c)
	}
	return n.controlAligned(port, c)
}

func (n *sideNode) controlAligned(port int, c ctrl) error {
	if c.kind == ctrlBarrier {
		return n.snapshot(c.epoch)
	}
	if c.kind == ctrlTick {
		if port == 0 {
			return n.out.forward(ctrl{kind: ctrlTick, sender: n.id(), now: c.now})
		}
		return nil
	}
	if !n.wms.update(port, c.sender, c.wm) {
		return nil
	}
	if port > 0 {
		if err := n.release(); err != nil {
			return err
		}
	}
	wm := heldWatermark(n.wms.input(), n.buffered)
	if wm <= n.outWM {
		return nil
	}
	n.outWM = wm
	if atEnd(wm) {
		n.done = true
	}
	return n.out.forward(ctrl{kind: ctrlWatermark, sender: n.id(), wm: wm})
}
