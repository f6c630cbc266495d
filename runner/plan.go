package runner

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
)

// This file plans a run: it orders the steps, checks the code bound to
// them, wires the edges between them, computes which root instances every
// receiver waits for, and instantiates one node per step and worker.

// stepCounters are live counters of one step, summed over workers.
type stepCounters struct {
	in, out, rejects, dropped atomic.Int64
	// reasons counts the rejects by reason: reason → *atomic.Int64.
	reasons sync.Map
	// wms holds, per worker, the output watermark of a root step's instance.
	wms []atomic.Int64
	// timers holds, per worker, the timers a keyed step's instance has set
	// and not fired (event- and processing-time, including window ends).
	timers []atomic.Int64
	// keys holds, per worker, the keys a keyed step's instance holds
	// state for (keycount.go); nil for other steps.
	keys []atomic.Int64
	// user are the step code's user-defined metrics (the SDK's Counter
	// and Distribution), shared by its instances.
	user contract.UserMetrics
}

// countReject counts one reject with the given reason.
func (c *stepCounters) countReject(reason string) {
	c.rejects.Add(1)
	n, ok := c.reasons.Load(reason)
	if !ok {
		n, _ = c.reasons.LoadOrStore(reason, new(atomic.Int64))
	}
	n.(*atomic.Int64).Add(1)
}

// rejectsByReason returns the rejects counted by reason, nil when none.
func (c *stepCounters) rejectsByReason() map[string]int64 {
	var out map[string]int64
	c.reasons.Range(func(k, v any) bool {
		if out == nil {
			out = map[string]int64{}
		}
		out[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

func (c *stepCounters) pendingTimers() int64 {
	var n int64
	for i := range c.timers {
		n += c.timers[i].Load()
	}
	return n
}

// stepPlan is what the runner knows about one step before instantiating it.
type stepPlan struct {
	idx     int
	step    *graph.Step
	code    any
	root    int // root index, or -1 for stateless steps
	outTags []string
	edges   [][]edge // per output tag
	inputs  []string // main input collection IDs
	// senders lists, per input port, the root instance ids a receiver waits for.
	senders  [][]int
	counters *stepCounters
}

// OutputTags is contract.OutputTags: the output tags of s in the order that
// output indexes refer to.
func OutputTags(s *graph.Step) []string { return contract.OutputTags(s) }

// isRoot reports whether a step starts a stage: it has its own watermark
// and is not fused into its producer.
func isRoot(s *graph.Step) bool {
	return s.Kind == graph.KindSource || s.Kind.IsKeyed() || len(s.SideInputs) > 0
}

// plan orders the steps, checks their code, wires edges and computes which
// root instances each receiver waits for.
func (r *run) plan() error {
	g := r.prog.Graph
	order, err := g.Topological()
	if err != nil {
		return err
	}
	for i, s := range order {
		sp := &stepPlan{idx: i, step: s, code: r.prog.Code[s.Name], root: -1, counters: &stepCounters{}}
		if isRoot(s) {
			sp.root = r.nroots
			r.nroots++
			sp.counters.wms = make([]atomic.Int64, r.opts.NumWorkers)
			sp.counters.timers = make([]atomic.Int64, r.opts.NumWorkers)
			if s.Kind.IsKeyed() {
				sp.counters.keys = make([]atomic.Int64, r.opts.NumWorkers)
			}
			for w := range sp.counters.wms {
				sp.counters.wms[w].Store(int64(mtime.MinTimestamp))
			}
		}
		if err := checkCode(s, sp.code); err != nil {
			return err
		}
		sp.outTags = OutputTags(s)
		sp.edges = make([][]edge, len(sp.outTags))
		inTags := make([]string, 0, len(s.Inputs))
		for tag := range s.Inputs {
			inTags = append(inTags, tag)
		}
		sort.Strings(inTags)
		for _, t := range inTags {
			sp.inputs = append(sp.inputs, s.Inputs[t])
		}
		r.steps = append(r.steps, sp)
		r.byName[s.Name] = sp
	}
	colTag := map[string]struct {
		sp  *stepPlan
		tag int
	}{}
	for _, sp := range r.steps {
		for i, tag := range sp.outTags {
			colTag[sp.step.Outputs[tag]] = struct {
				sp  *stepPlan
				tag int
			}{sp, i}
		}
	}
	// Wire edges.
	for _, sp := range r.steps {
		s := sp.step
		kind := edgeLocal
		var keyer contract.Keyer
		if s.Kind.IsKeyed() {
			kind = edgePartition
			keyer, _ = sp.code.(contract.Keyer)
		}
		for _, in := range sp.inputs {
			src := colTag[in]
			src.sp.edges[src.tag] = append(src.sp.edges[src.tag], edge{kind: kind, step: sp.idx, port: 0, keyer: keyer})
		}
		for i, si := range s.SideInputs {
			src := colTag[si.Collection]
			src.sp.edges[src.tag] = append(src.sp.edges[src.tag], edge{kind: edgeBroadcast, step: sp.idx, port: 1 + i})
		}
	}
	// Senders per receiver port.
	upstream := map[int][]int{} // step idx -> root indices feeding it (for stateless steps)
	var rootsOf func(col string) []int
	rootsOf = func(col string) []int {
		p := colTag[col].sp
		if p.root >= 0 {
			return []int{p.root}
		}
		if cached, ok := upstream[p.idx]; ok {
			return cached
		}
		set := map[int]bool{}
		for _, in := range p.inputs {
			for _, rt := range rootsOf(in) {
				set[rt] = true
			}
		}
		out := make([]int, 0, len(set))
		for rt := range set {
			out = append(out, rt)
		}
		sort.Ints(out)
		upstream[p.idx] = out
		return out
	}
	for _, sp := range r.steps {
		if (sp.root < 0 && sp.step.Kind != graph.KindSink) || sp.step.Kind == graph.KindSource {
			continue
		}
		ports := 1 + len(sp.step.SideInputs)
		sp.senders = make([][]int, ports)
		set := map[int]bool{}
		for _, in := range sp.inputs {
			for _, rt := range rootsOf(in) {
				set[rt] = true
			}
		}
		for rt := range set {
			sp.senders[0] = append(sp.senders[0], rt)
		}
		for i, si := range sp.step.SideInputs {
			sp.senders[1+i] = rootsOf(si.Collection)
		}
	}
	return nil
}

func checkCode(s *graph.Step, code any) error {
	need := func(ok bool, what string) error {
		if !ok {
			return fmt.Errorf("step %q (%s) has no %s bound to it", s.Name, s.Kind, what)
		}
		return nil
	}
	switch s.Kind {
	case graph.KindSource:
		_, ok := code.(contract.Source)
		return need(ok, "Source")
	case graph.KindParDo:
		_, ok := code.(contract.DoFn)
		return need(ok, "DoFn")
	case graph.KindGroupByKey, graph.KindCombinePerKey:
		_, ok := code.(contract.Aggregator)
		return need(ok, "Aggregator")
	case graph.KindStatefulParDo:
		_, ok := code.(contract.StatefulDoFn)
		return need(ok, "StatefulDoFn")
	case graph.KindSink:
		_, ok := code.(contract.Sink)
		return need(ok, "Sink")
	case graph.KindWindowInto:
		return need(s.Windowing != nil, "windowing strategy")
	case graph.KindFlatten:
		return nil
	}
	return fmt.Errorf("step %q has unknown kind %q", s.Name, s.Kind)
}

// senderIDs expands root indices to root instance ids: every worker's
// instance for partitioned and broadcast ports, the same worker's for local ones.
func (r *run) senderIDs(roots []int, local bool, worker int) []int {
	var out []int
	for _, rt := range roots {
		if local {
			out = append(out, rt*r.opts.NumWorkers+worker)
			continue
		}
		for w := 0; w < r.opts.NumWorkers; w++ {
			if id := rt*r.opts.NumWorkers + w; !r.idle[id] {
				out = append(out, id)
			}
		}
	}
	return out
}

func (r *run) instantiate() error {
	if r.opts.Checkpoints {
		// Without checkpoints a buffering sink empties only at its end.
		for _, sp := range r.steps {
			if bs, ok := sp.code.(contract.BufferingSink); ok && sp.step.Kind == graph.KindSink {
				r.buffering = append(r.buffering, bs)
			}
		}
	}
	n := r.opts.NumWorkers
	r.workers = make([]*worker, n)
	for i := range r.workers {
		r.workers[i] = &worker{id: i, r: r, nodes: make([]node, len(r.steps)), sinkWaitFrom: noSinkWait}
		r.workers[i].inbox.notify = make(chan struct{}, 1)
	}
	for _, sp := range r.steps {
		if sp.step.Kind != graph.KindSource {
			continue
		}
		var splits []contract.SourceSplit
		var err error
		_, resumable := sp.code.(contract.ResumableSource)
		skip := false
		if rs := r.opts.Restore; rs != nil && !resumable && readAll(rs.Positions[sp.step.Name]) && hasUnboundedSource(r.prog.Graph) {
			// A bounded source of a streaming job that had read all its
			// input before the checkpoint, whose state holds what it read:
			// nothing to read again. (A batch job reruns instead: its
			// plain sinks rewrite their whole output.)
			skip = true
		}
		if rs := r.opts.Restore; rs != nil && !skip {
			// A checkpoint records every source it covered, with null
			// positions for one that has none: such a source would read
			// again from its beginning what the restored keyed state
			// already holds, every element counted twice. (A restore
			// without positions, such as a rehearsal's state seeded from
			// a snapshot, replays its input on purpose.)
			_, recorded := rs.Positions[sp.step.Name]
			if recorded && !resumable && feedsKeyedState(r.prog.Graph, sp.step) {
				return fmt.Errorf("%w: source %q cannot resume from a checkpoint, and the restored state holds what it read", contract.ErrNotCheckpointable, sp.step.Name)
			}
		}
		if skip {
			splits = make([]contract.SourceSplit, len(r.opts.Restore.Positions[sp.step.Name]))
			for i := range splits {
				splits[i] = readAllSplit{}
			}
		} else if rs := r.opts.Restore; rs != nil && rs.Positions[sp.step.Name] != nil {
			res, ok := sp.code.(contract.ResumableSource)
			if !ok {
				return fmt.Errorf("%w: source %q cannot resume from a checkpoint", contract.ErrNotCheckpointable, sp.step.Name)
			}
			if ad, ok := sp.code.(contract.SourceAdopter); ok {
				if old := r.adoptableSource(sp.step.Name); old != nil && old != sp.code {
					ad.AdoptSource(old)
				}
			}
			splits, err = res.Resume(r.ctx, rs.Positions[sp.step.Name])
		} else {
			splits, err = sp.code.(contract.Source).Split(r.ctx, n)
		}
		if err != nil {
			return fmt.Errorf("splitting source %q: %w", sp.step.Name, err)
		}
		perWorker := make([][]contract.SourceSplit, n)
		indexes := make([][]int, n)
		for i, s := range splits {
			perWorker[i%n] = append(perWorker[i%n], s)
			indexes[i%n] = append(indexes[i%n], i)
		}
		for w, ss := range perWorker {
			if len(ss) == 0 {
				r.idle[sp.root*n+w] = true
			}
		}
		for w, ss := range perWorker {
			sn := newSourceNode(r.workers[w], sp, ss, indexes[w])
			r.workers[w].nodes[sp.idx] = sn
			r.workers[w].sources = append(r.workers[w].sources, sn)
		}
	}
	for _, w := range r.workers {
		for _, sp := range r.steps {
			if sp.step.Kind == graph.KindSource {
				continue
			}
			nd, err := w.newNode(sp)
			if err != nil {
				return err
			}
			w.nodes[sp.idx] = nd
			if rc, ok := nd.(receiver); ok {
				w.receivers = append(w.receivers, rc)
			}
		}
	}
	return nil
}

func (w *worker) newNode(sp *stepPlan) (node, error) {
	out := newOutputs(w, sp)
	switch sp.step.Kind {
	case graph.KindParDo:
		if len(sp.step.SideInputs) > 0 {
			return newSideNode(w, sp, out), nil
		}
		return newParDoNode(w, sp, out), nil
	case graph.KindWindowInto:
		return &windowNode{out: out, fn: sp.step.Windowing.Fn, counters: sp.counters}, nil
	case graph.KindFlatten:
		return &flattenNode{out: out, counters: sp.counters}, nil
	case graph.KindSink:
		return newSinkNode(w, sp), nil
	case graph.KindGroupByKey, graph.KindCombinePerKey:
		return newAggNode(w, sp, out)
	case graph.KindStatefulParDo:
		return newStatefulNode(w, sp, out)
	}
	return nil, fmt.Errorf("step %q has unknown kind %q", sp.step.Name, sp.step.Kind)
}

// hasUnboundedSource reports whether g reads an unbounded source (a
// streaming job).
func hasUnboundedSource(g *graph.Pipeline) bool {
	for _, st := range g.Steps {
		if st.Kind == graph.KindSource && st.Source != nil && !st.Source.Bounded {
			return true
		}
	}
	return false
}

// feedsKeyedState reports whether the elements of source step src reach a
// keyed step of g through main inputs (a side input is read whole again
// by a restored execution, so it does not count).
func feedsKeyedState(g *graph.Pipeline, src *graph.Step) bool {
	consumers := map[string][]*graph.Step{}
	for _, st := range g.Steps {
		for _, c := range st.Inputs {
			consumers[c] = append(consumers[c], st)
		}
	}
	seen := map[string]bool{src.Name: true}
	queue := []*graph.Step{src}
	for len(queue) > 0 {
		st := queue[0]
		queue = queue[1:]
		for _, c := range st.Outputs {
			for _, next := range consumers[c] {
				if next.Kind.IsKeyed() {
					return true
				}
				if !seen[next.Name] {
					seen[next.Name] = true
					queue = append(queue, next)
				}
			}
		}
	}
	return false
}
