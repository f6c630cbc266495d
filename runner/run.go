package runner

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// StepError is the failure of a run caused by one element in a step that
// declares no error output.
type StepError struct {
	Step    string
	Reason  string
	Message string
	Source  *SourcePos
	Err     error
}

// Error names the step, the element's source position and the reason.
func (e *StepError) Error() string {
	return fmt.Sprintf("step %q failed on the element at %s: %s: %s", e.Step, e.Source, e.Reason, e.Message)
}

// Unwrap returns the underlying error, if any.
func (e *StepError) Unwrap() error { return e.Err }

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
	keyer Keyer
}

type ctrlKind int

const (
	ctrlWatermark ctrlKind = iota
	// ctrlTick says processing time moved (TestStream): re-evaluate
	// processing-time timers.
	ctrlTick
	// ctrlBarrier is a checkpoint barrier for epoch.
	ctrlBarrier
)

type ctrl struct {
	kind   ctrlKind
	sender int // root instance id: rootIndex*workers + worker
	wm     mtime.Time
	epoch  uint64
}

type bundle struct {
	elems []Element
	// hashes holds, for bundles of keyed steps, the KeyHash of each
	// element's key; its key group is the hash modulo the key groups.
	hashes []uint64
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
	return b.shared && int(route[b.hashes[i]%uint64(len(route))]) != self
}

// node is one step's instance on one worker. All calls come from the
// worker's goroutine.
type node interface {
	process(port int, b bundle) error
	control(port int, c ctrl) error
}

// stepCounters are live counters of one step, summed over workers.
type stepCounters struct {
	in, out, rejects, dropped atomic.Int64
	// wms holds, per worker, the output watermark of a root step's instance.
	wms []atomic.Int64
	// timers holds, per worker, the timers a keyed step's instance has set
	// and not fired (event- and processing-time, including window ends).
	timers []atomic.Int64
}

func (c *stepCounters) pendingTimers() int64 {
	var n int64
	for i := range c.timers {
		n += c.timers[i].Load()
	}
	return n
}

// watermark returns the minimum output watermark over workers.
func (c *stepCounters) watermark() mtime.Time {
	if len(c.wms) == 0 {
		return mtime.MinTimestamp
	}
	m := mtime.MaxTimestamp
	for i := range c.wms {
		m = mtime.Min(m, mtime.Time(c.wms[i].Load()))
	}
	return m
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

type run struct {
	ctx     context.Context
	cancel  context.CancelCauseFunc
	opts    Options
	prog    *Program
	steps   []*stepPlan
	byName  map[string]*stepPlan
	nroots  int
	route   RoutingTable
	workers []*worker
	// idle marks source instances that read no split: receivers do not wait
	// for their watermark, so a source with fewer splits than workers does
	// not hold watermarks back (and a TestStream stays deterministic).
	idle      map[int]bool
	draining  atomic.Bool
	cancelled atomic.Bool
	coord     *coordinator
	// epoch is the latest checkpoint epoch requested.
	epoch atomic.Uint64
	// pauseEpoch is the epoch at which the execution stops (Pause); 0: none.
	pauseEpoch atomic.Uint64
	// bundles recycles the bundles sent to other workers.
	bundles sync.Pool
	// manual is true when processing time is a manual clock (TestStream):
	// it then moves only with tick messages, in order with the data.
	manual bool
}

// procClock is the processing time a receiver sees: the wall clock, or in
// manual mode the time carried by the last tick it received, so that every
// worker sees processing time move at the same point of the stream.
type procClock struct {
	r    *run
	tick mtime.Time
}

func (c *procClock) now() mtime.Time {
	if c.r.manual {
		return c.tick
	}
	return c.r.opts.Clock.Now()
}

// Run executes prog until every source has ended and every window has
// fired, or until ctx is done or an element fails in a step without an
// error output.
func Run(ctx context.Context, prog *Program, opts Options) (*Result, error) {
	x, err := Start(ctx, prog, opts)
	if err != nil {
		return nil, err
	}
	return x.Wait()
}

// Execution is a running program. Its methods are safe for concurrent use.
type Execution struct {
	r    *run
	cpMu sync.Mutex
	done chan struct{}
	res  *Result
	err  error
}

// Start plans prog and starts its workers. It returns once the workers run;
// Wait for the outcome. Cancelling ctx cancels the execution.
func Start(ctx context.Context, prog *Program, opts Options) (*Execution, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := prog.Graph.Validate(); err != nil {
		return nil, err
	}
	r := &run{opts: opts, prog: prog, byName: map[string]*stepPlan{}, idle: map[int]bool{}, coord: newCoordinator()}
	if opts.Restore != nil {
		r.epoch.Store(opts.Restore.Epoch)
	}
	_, r.manual = opts.Clock.(*mtime.ManualClock)
	r.ctx, r.cancel = context.WithCancelCause(ctx)
	if err := r.plan(); err != nil {
		r.cancel(nil)
		return nil, err
	}
	r.route = NewRoutingTable(opts.KeyGroups, opts.NumWorkers)
	if err := r.instantiate(); err != nil {
		r.cancel(nil)
		return nil, err
	}
	x := &Execution{r: r, done: make(chan struct{})}
	var wg sync.WaitGroup
	for _, w := range r.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer w.exited.Store(true)
			defer w.releaseSnapshots()
			if err := w.loop(); err != nil {
				r.cancel(err)
			}
		}()
	}
	go func() {
		wg.Wait()
		runErr := context.Cause(r.ctx)
		if errors.Is(runErr, context.Canceled) && ctx.Err() == nil && !r.cancelled.Load() {
			runErr = nil
		}
		closeErr := r.close()
		r.cancel(nil)
		x.res = r.result()
		x.err = runErr
		if x.err == nil {
			x.err = closeErr
		}
		close(x.done)
	}()
	return x, nil
}

// Wait blocks until the execution ends and returns its metrics and error.
func (x *Execution) Wait() (*Result, error) {
	<-x.done
	return x.res, x.err
}

// Done is closed when the execution has ended.
func (x *Execution) Done() <-chan struct{} { return x.done }

// Drain stops reading every source and moves its watermark to +∞, so that
// every open window fires (its last pane has is_last) and event-time timers
// fire; the execution then ends by itself. Draining twice is harmless.
func (x *Execution) Drain() {
	x.r.draining.Store(true)
	for _, w := range x.r.workers {
		w.inbox.wake()
	}
}

// Cancel stops the execution as fast as possible; buffered state and open
// windows are discarded. Wait then returns ErrCancelled.
func (x *Execution) Cancel() {
	x.r.cancelled.Store(true)
	x.r.cancel(ErrCancelled)
}

// ErrCancelled is the error of an execution stopped by Cancel.
var ErrCancelled = errors.New("execution cancelled")

// CloseSinks closes the transactional sinks of a checkpointed execution,
// after its final checkpoint was committed. Other sinks close by themselves.
func (x *Execution) CloseSinks(ctx context.Context) error {
	var errs []error
	for _, sp := range x.r.steps {
		if ts, ok := sp.code.(TransactionalSink); ok && sp.step.Kind == graph.KindSink {
			if err := ts.Close(ctx); err != nil {
				errs = append(errs, fmt.Errorf("closing sink %q: %w", sp.step.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Metrics returns the live counters and watermarks of every step.
func (x *Execution) Metrics() *Result { return x.r.result() }

func (r *run) result() *Result {
	res := &Result{}
	for _, sp := range r.steps {
		c := sp.counters
		res.Steps = append(res.Steps, StepMetrics{
			Name: sp.step.Name, ElementsIn: c.in.Load(), ElementsOut: c.out.Load(),
			Rejects: c.rejects.Load(), DroppedLateElements: c.dropped.Load(),
			Watermark: c.watermark(), PendingTimers: c.pendingTimers(),
		})
	}
	sort.Slice(res.Steps, func(i, j int) bool { return res.Steps[i].Name < res.Steps[j].Name })
	return res
}

func (r *run) close() error {
	var errs []error
	closeCtx := context.WithoutCancel(r.ctx)
	for _, sp := range r.steps {
		if s, ok := sp.code.(Sink); ok && sp.step.Kind == graph.KindSink {
			if _, tx := s.(TransactionalSink); tx && r.opts.Checkpoints {
				continue // closed by Execution.CloseSinks after the final commit
			}
			if err := s.Close(closeCtx); err != nil {
				errs = append(errs, fmt.Errorf("closing sink %q: %w", sp.step.Name, err))
			}
		}
	}
	for _, w := range r.workers {
		for _, sn := range w.sources {
			for _, sp := range sn.splits {
				if sp.closed {
					continue
				}
				if err := sp.split.Close(); err != nil {
					errs = append(errs, fmt.Errorf("closing source %q: %w", sn.plan.step.Name, err))
				}
			}
		}
	}
	return errors.Join(errs...)
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
		var keyer Keyer
		if s.Kind.IsKeyed() {
			kind = edgePartition
			keyer, _ = sp.code.(Keyer)
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
		_, ok := code.(Source)
		return need(ok, "Source")
	case graph.KindParDo:
		_, ok := code.(DoFn)
		return need(ok, "DoFn")
	case graph.KindGroupByKey, graph.KindCombinePerKey:
		_, ok := code.(Aggregator)
		return need(ok, "Aggregator")
	case graph.KindStatefulParDo:
		_, ok := code.(StatefulDoFn)
		return need(ok, "StatefulDoFn")
	case graph.KindSink:
		_, ok := code.(Sink)
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
	n := r.opts.NumWorkers
	r.workers = make([]*worker, n)
	for i := range r.workers {
		r.workers[i] = &worker{id: i, r: r, nodes: make([]node, len(r.steps))}
		r.workers[i].inbox.notify = make(chan struct{}, 1)
	}
	for _, sp := range r.steps {
		if sp.step.Kind != graph.KindSource {
			continue
		}
		var splits []SourceSplit
		var err error
		if rs := r.opts.Restore; rs != nil && rs.Positions[sp.step.Name] != nil {
			res, ok := sp.code.(ResumableSource)
			if !ok {
				return fmt.Errorf("%w: source %q cannot resume from a checkpoint", ErrNotCheckpointable, sp.step.Name)
			}
			splits, err = res.Resume(r.ctx, rs.Positions[sp.step.Name])
		} else {
			splits, err = sp.code.(Source).Split(r.ctx, n)
		}
		if err != nil {
			return fmt.Errorf("splitting source %q: %w", sp.step.Name, err)
		}
		perWorker := make([][]SourceSplit, n)
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

// receiver is a root node fed by other nodes: it tracks input watermarks.
type receiver interface {
	node
	finished() bool
	// nextDeadline returns the earliest pending processing-time timer (0: none).
	nextDeadline() mtime.Time
	// onProcessingTime fires processing-time timers due by now.
	onProcessingTime(now mtime.Time) error
}

// ---- worker ----

const maxInflight = 64

type message struct {
	step, port int
	b          bundle
	c          *ctrl
	from       int
	// pooled is returned to the run's bundle pool once processed.
	pooled *bundle
}

type inbox struct {
	mu     sync.Mutex
	q      []message
	notify chan struct{}
}

func (ib *inbox) push(m message) {
	ib.mu.Lock()
	ib.q = append(ib.q, m)
	ib.mu.Unlock()
	ib.wake()
}

func (ib *inbox) wake() {
	select {
	case ib.notify <- struct{}{}:
	default:
	}
}

func (ib *inbox) take(buf []message) []message {
	ib.mu.Lock()
	q := ib.q
	ib.q = buf[:0]
	ib.mu.Unlock()
	return q
}

type worker struct {
	id        int
	r         *run
	nodes     []node
	sources   []*sourceNode
	receivers []receiver
	inbox     inbox
	// inflight counts bundles this worker sent to others that were not yet processed.
	inflight atomic.Int64
	// exited is set when the worker's loop returned; messages to it are dropped.
	exited  atomic.Bool
	scratch []byte
	spare   []message
	// snapshots are checkpoint snapshots of this worker's keyed steps still
	// being encoded, oldest first (see snapshot.go).
	snapshots []snapshotTask
	nextSrc   int
	// cur is the root instance whose output is being delivered.
	cur int
}

func (w *worker) loop() error {
	ctx := w.r.ctx
	clock := w.r.opts.Clock
	var timer *time.Timer
	for {
		if err := ctx.Err(); err != nil {
			return nil
		}
		msgs := w.inbox.take(w.spare)
		for i := range msgs {
			m := &msgs[i]
			var err error
			if m.c != nil {
				err = w.nodes[m.step].control(m.port, *m.c)
			} else {
				err = w.nodes[m.step].process(m.port, m.b)
				if m.pooled != nil {
					clear(m.b.elems)
					m.pooled.elems, m.pooled.hashes = m.b.elems[:0], m.b.hashes[:0]
					w.r.bundles.Put(m.pooled)
				}
				if m.from != w.id {
					w.r.workers[m.from].creditReturned()
				}
			}
			if err != nil {
				return err
			}
			msgs[i] = message{}
		}
		w.spare = msgs
		if !w.r.manual {
			if err := w.fireProcessingTimers(clock.Now()); err != nil {
				return err
			}
		}
		if e := w.r.epoch.Load(); w.r.opts.Checkpoints {
			for _, sn := range w.sources {
				if sn.epoch < e {
					if err := sn.barrier(e); err != nil {
						return err
					}
				}
			}
		}
		if w.done() {
			return nil
		}
		read := false
		if w.inflight.Load() < maxInflight {
			var err error
			read, err = w.readSource()
			if err != nil {
				return err
			}
		}
		encoded := w.encodeSnapshots()
		if read || len(msgs) > 0 || encoded {
			continue
		}
		// Nothing to do: wait for a message, a processing-time deadline or cancellation.
		wait := 50 * time.Millisecond
		if d := w.nextDeadline(); d != 0 && !w.r.manual {
			if until := time.Duration(d-clock.Now()) * time.Millisecond; until < wait {
				wait = until
			}
		}
		if wait <= 0 {
			continue
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
		case <-w.inbox.notify:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

func (w *worker) creditReturned() {
	if w.inflight.Add(-1) == maxInflight/2 {
		w.inbox.wake()
	}
}

func (w *worker) done() bool {
	for _, s := range w.sources {
		if !s.done {
			return false
		}
	}
	for _, rc := range w.receivers {
		if !rc.finished() {
			return false
		}
	}
	w.inbox.mu.Lock()
	empty := len(w.inbox.q) == 0
	w.inbox.mu.Unlock()
	return empty
}

func (w *worker) readSource() (bool, error) {
	for range w.sources {
		s := w.sources[w.nextSrc%len(w.sources)]
		w.nextSrc++
		if s.done || s.paused {
			continue
		}
		return true, s.read(w.r.ctx)
	}
	return false, nil
}

func (w *worker) nextDeadline() mtime.Time {
	var best mtime.Time
	for _, rc := range w.receivers {
		if d := rc.nextDeadline(); d != 0 && (best == 0 || d < best) {
			best = d
		}
	}
	return best
}

func (w *worker) fireProcessingTimers(now mtime.Time) error {
	for _, rc := range w.receivers {
		if d := rc.nextDeadline(); d != 0 && d <= now {
			if err := rc.onProcessingTime(now); err != nil {
				return err
			}
		}
	}
	return nil
}

// edgeScratch holds the reusable buffers of one producer's edge: the key
// groups and the local part of partitioned bundles. A DAG never re-enters the
// same edge while it is delivering, so the buffers are safe to reuse.
type edgeScratch struct {
	hashes []uint64
}

// deliver hands a bundle produced on this worker to the consumer of edge e.
// The consumer must not keep elems after returning; bundles sent to other
// workers are copied.
func (w *worker) deliver(e edge, elems []Element, sc *edgeScratch, owned bool) error {
	switch e.kind {
	case edgeLocal:
		return w.nodes[e.step].process(e.port, bundle{elems: elems, sender: w.cur, owned: owned})
	case edgeBroadcast:
		for _, other := range w.r.workers {
			if other.id == w.id {
				continue
			}
			w.send(other, e, bundle{elems: append([]Element(nil), elems...), sender: w.cur})
		}
		return w.nodes[e.step].process(e.port, bundle{elems: elems, sender: w.cur})
	}
	// Partition by key group.
	nw := len(w.r.workers)
	route := w.r.route
	ngroups := uint64(len(route))
	if nw == 1 {
		hs := sc.hashes[:0]
		for i := range elems {
			w.scratch = e.keyer.AppendKey(w.scratch[:0], elems[i].Value)
			hs = append(hs, KeyHash(w.scratch))
		}
		sc.hashes = hs
		return w.nodes[e.step].process(e.port, bundle{elems: elems, hashes: hs, sender: w.cur})
	}
	// Remote shares are copied into pooled bundles; the local share is the
	// producer's bundle itself, with the hashes telling which elements are ours.
	parts := make([]*bundle, nw)
	hs := sc.hashes[:0]
	local := 0
	for i := range elems {
		w.scratch = e.keyer.AppendKey(w.scratch[:0], elems[i].Value)
		h := KeyHash(w.scratch)
		hs = append(hs, h)
		o := int(route[h%ngroups])
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
	sc.hashes = hs
	for o, p := range parts {
		if p == nil {
			continue
		}
		w.push(w.r.workers[o], message{step: e.step, port: e.port, b: *p, pooled: p, from: w.id})
	}
	if local > 0 {
		return w.nodes[e.step].process(e.port, bundle{elems: elems, hashes: hs, shared: true, sender: w.cur})
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
	return w.nodes[e.step].control(e.port, c)
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

// ---- outputs: per-tag buffers flushed along edges ----

type outputs struct {
	w        *worker
	sp       *stepPlan
	bufs     [][]Element
	edges    [][]edge
	scratch  [][]edgeScratch
	ctrlTo   []edge // unique consumers for control messages
	counters *stepCounters
	limit    int
	err      error
	errTag   int
}

func newOutputs(w *worker, sp *stepPlan) *outputs {
	o := &outputs{w: w, sp: sp, bufs: make([][]Element, len(sp.edges)), edges: sp.edges, counters: sp.counters, limit: w.r.opts.BundleSize, errTag: errTag(sp)}
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
func (o *outputs) Emit(tag int, e Element) {
	o.bufs[tag] = append(o.bufs[tag], e)
	if len(o.bufs[tag]) >= o.limit && o.err == nil {
		o.err = o.flushTag(tag)
	}
}

func (o *outputs) flushTag(tag int) error {
	buf := o.bufs[tag]
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
	o.bufs[tag] = buf[:0]
	return nil
}

// deliverBundle hands elems to the consumers of tag without copying them
// into the output buffer (after anything already buffered, to keep order).
// owned says the caller gives the elements up: with a single consumer, that
// consumer may then modify them in place.
func (o *outputs) deliverBundle(tag int, elems []Element, owned bool) error {
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

// ---- stateless nodes ----

type parDoNode struct {
	sp     *stepPlan
	fn     DoFn
	out    *outputs
	pc     ProcessContext
	errTag int
	fin    BundleFinisher
}

func newParDoNode(w *worker, sp *stepPlan, out *outputs) *parDoNode {
	fn := sp.code.(DoFn)
	if c, ok := fn.(Cloner); ok {
		fn = c.Clone().(DoFn)
	}
	n := &parDoNode{sp: sp, fn: fn, out: out, errTag: errTag(sp)}
	n.fin, _ = fn.(BundleFinisher)
	n.pc = contract.NewProcessContext(out, nil, w.r.opts.Clock, w.id)
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

// reject routes a failed element to the error output, or fails the run.
func reject(out *outputs, sp *stepPlan, tag int, e Element, err error) error {
	rj := Reject{Element: e.Value, Step: sp.step.Name, Reason: "error", Message: err.Error(), Source: e.Source}
	var ee *ElementError
	if errors.As(err, &ee) {
		rj.Reason, rj.Message = ee.Reason, ee.Message
	}
	return emitReject(out, sp, tag, e, rj, err)
}

// emitReject sends rj to the error output with index tag, or fails the run
// when the step declares none.
func emitReject(out *outputs, sp *stepPlan, tag int, e Element, rj Reject, err error) error {
	sp.counters.rejects.Add(1)
	if tag < 0 {
		if dl := out.w.r.opts.DeadLetter; dl != nil {
			if err := dl(out.w.r.ctx, rj); err != nil {
				return fmt.Errorf("sending a reject of step %q to the dead-letter topic: %w", rj.Step, err)
			}
			return nil
		}
		return &StepError{Step: rj.Step, Reason: rj.Reason, Message: rj.Message, Source: rj.Source, Err: err}
	}
	out.Emit(tag, Element{Value: rj, Time: e.Time, Window: e.Window, Pane: e.Pane, Source: e.Source})
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

type sinkNode struct {
	w        *worker
	sp       *stepPlan
	sink     Sink
	counters *stepCounters
	// For transactional sinks in a checkpointed execution: inputs are
	// aligned on barriers and each epoch is pre-committed.
	tx       TransactionalSink
	wms      inputWatermarks
	al       *aligner
	finished bool
}

func newSinkNode(w *worker, sp *stepPlan) *sinkNode {
	n := &sinkNode{w: w, sp: sp, sink: sp.code.(Sink), counters: sp.counters}
	if tx, ok := n.sink.(TransactionalSink); ok && w.r.opts.Checkpoints {
		n.tx = tx
		n.wms = newInputWatermarks(w.r, sp, w.id, true)
		n.al = &aligner{inner: n, wms: &n.wms}
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
	return n.sink.Write(n.w.r.ctx, n.w.id, b.elems)
}

func (n *sinkNode) control(port int, c ctrl) error {
	if n.al == nil {
		return nil
	}
	return n.al.control(port, c)
}

func (n *sinkNode) controlAligned(port int, c ctrl) error {
	if c.kind != ctrlWatermark || !n.wms.update(port, c.sender, c.wm) {
		return nil
	}
	if n.wms.mins[0] >= mtime.MaxTimestamp && !n.finished {
		// Everything this sink will get has arrived: pre-commit it as the
		// final share, which stands in for every later checkpoint.
		n.finished = true
		part, err := n.tx.PreCommit(n.w.r.ctx, n.w.id, n.w.r.epoch.Load()+1)
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

// ---- sources ----

type splitState struct {
	split SourceSplit
	index int
	wm    mtime.Time
	done  bool
	// closed is set when a Pause closed the split early.
	closed bool
}

type sourceNode struct {
	w       *worker
	plan    *stepPlan
	splits  []*splitState
	out     *outputs
	buf     []Element
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
}

func newSourceNode(w *worker, sp *stepPlan, splits []SourceSplit, indexes []int) *sourceNode {
	n := &sourceNode{w: w, plan: sp, out: newOutputs(w, sp), buf: make([]Element, w.r.opts.BundleSize), errTag: errTag(sp), wm: mtime.MinTimestamp, epoch: w.r.epoch.Load()}
	for i, s := range splits {
		n.splits = append(n.splits, &splitState{split: s, index: indexes[i], wm: mtime.MinTimestamp})
	}
	if w.r.opts.Checkpoints && len(splits) > 0 {
		w.r.coord.register(n.key())
	}
	return n
}

func (n *sourceNode) key() string { return fmt.Sprintf("source/%s/%d", n.plan.step.Name, n.w.id) }

// positions records where every split of this instance stands.
func (n *sourceNode) positions() (map[int][]byte, error) {
	out := map[int][]byte{}
	for _, s := range n.splits {
		ps, ok := s.split.(PositionedSplit)
		if !ok {
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
	n.w.r.coord.submit(n.key(), &report{epoch: epoch, source: n.plan.step.Name, positions: pos})
	prev := n.w.cur
	n.w.cur = n.id()
	defer func() { n.w.cur = prev }()
	if epoch == n.w.r.pauseEpoch.Load() {
		// Pause: nothing is read after this barrier.
		n.paused = true
	}
	return n.out.forward(ctrl{kind: ctrlBarrier, sender: n.id(), epoch: epoch})
}

func (n *sourceNode) id() int { return n.plan.root*len(n.w.r.workers) + n.w.id }

func (n *sourceNode) process(int, bundle) error { return nil }
func (n *sourceNode) control(int, ctrl) error   { return nil }

// read reads one bundle from the next unfinished split and pushes it
// downstream, then forwards the source's watermark if it moved.
func (n *sourceNode) read(ctx context.Context) error {
	prev := n.w.cur
	n.w.cur = n.id()
	defer func() { n.w.cur = prev }()
	if n.w.r.draining.Load() {
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
		if !c.done {
			s = c
			break
		}
	}
	if s == nil {
		n.done = true
		return nil
	}
	res, err := s.split.Read(ctx, n.buf)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("reading source %q: %w", n.plan.step.Name, err)
	}
	n.plan.counters.in.Add(int64(res.N))
	clean := true
	for i := 0; i < res.N; i++ {
		if _, ok := n.buf[i].Value.(Reject); ok {
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
		if rj, ok := e.Value.(Reject); ok {
			// A source rejects an element by reading it as a Reject.
			if rj.Step == "" {
				rj.Step = n.plan.step.Name
			}
			if rj.Source == nil {
				rj.Source = e.Source
			}
			if err := emitReject(n.out, n.plan, n.errTag, e, rj, &ElementError{Reason: rj.Reason, Message: rj.Message}); err != nil {
				return err
			}
			continue
		}
		n.out.Emit(0, e)
	}
	if err := n.out.flush(); err != nil {
		return err
	}
	if res.Done {
		s.done = true
		s.wm = mtime.MaxTimestamp
	} else if res.Watermark > s.wm {
		s.wm = res.Watermark
	}
	wm := mtime.MaxTimestamp
	all := true
	for _, c := range n.splits {
		wm = mtime.Min(wm, c.wm)
		all = all && c.done
	}
	if res.ProcessingTimeAdvanced {
		if err := n.out.forward(ctrl{kind: ctrlTick, sender: n.id(), wm: n.w.r.opts.Clock.Now()}); err != nil {
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

// ---- watermark tracking for receivers ----

// inputWatermarks tracks, per port, the watermark of every sender and the minimum.
type inputWatermarks struct {
	ports []map[int]mtime.Time
	mins  []mtime.Time
}

func newInputWatermarks(r *run, sp *stepPlan, worker int, localMain bool) inputWatermarks {
	iw := inputWatermarks{ports: make([]map[int]mtime.Time, len(sp.senders)), mins: make([]mtime.Time, len(sp.senders))}
	for p, roots := range sp.senders {
		iw.ports[p] = map[int]mtime.Time{}
		for _, id := range r.senderIDs(roots, p == 0 && localMain, worker) {
			iw.ports[p][id] = mtime.MinTimestamp
		}
		iw.mins[p] = mtime.MinTimestamp
		if len(iw.ports[p]) == 0 {
			iw.mins[p] = mtime.MaxTimestamp
		}
	}
	return iw
}

// update records a sender's watermark and reports whether the port's minimum moved.
func (iw *inputWatermarks) update(port, sender int, wm mtime.Time) bool {
	m := iw.ports[port]
	if old, ok := m[sender]; !ok || wm <= old {
		return false
	}
	m[sender] = wm
	min := mtime.MaxTimestamp
	for _, v := range m {
		if v < min {
			min = v
		}
	}
	if min > iw.mins[port] {
		iw.mins[port] = min
		return true
	}
	return false
}
