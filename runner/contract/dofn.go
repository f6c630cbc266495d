package contract

import (
	"context"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/window"
)

// Emitter receives the elements a step's code emits, by output index (the
// order in which the step's outputs were declared; 0 is the main output).
// The executor implements it; it buffers and must not block for long.
type Emitter interface {
	Emit(tag int, e Element)
}

// SideInputs gives a step's code the side inputs visible to a window. The
// executor implements it for steps that declare side inputs.
type SideInputs interface {
	// SideInput returns the view of side input i for main-input window w,
	// built by build from the side input's elements (and cached).
	SideInput(i int, w window.Window, build func([]any) any) any
}

// ProcessContext is handed to DoFns. It is valid only during the call. The
// executor makes one per step instance (NewProcessContext) and points it at
// each element in turn (SetCurrent), so the per-element cost is a pointer
// store; outputs go to the executor's Emitter.
type ProcessContext struct {
	ctx     context.Context
	out     Emitter
	side    SideInputs
	clock   mtime.Clock
	cur     *Element
	worker  int
	metrics *UserMetrics
}

// NewProcessContext returns the context of one step instance run by worker
// worker in the run of ctx: outputs go to out, Now reads clock, and
// SideInput reads side (nil when the step has no side inputs). For
// executors.
func NewProcessContext(ctx context.Context, out Emitter, side SideInputs, clock mtime.Clock, worker int) ProcessContext {
	return ProcessContext{ctx: ctx, out: out, side: side, clock: clock, worker: worker}
}

// Context returns the context of the run: it is done when the run is
// cancelled, so code that may compute for long (an expression's loop)
// stops with it. A step that stops for it returns an error wrapping
// ctx.Err(), which the executor takes for the end of the run, not for a
// failed element.
func (pc *ProcessContext) Context() context.Context {
	if pc.ctx == nil {
		return context.Background()
	}
	return pc.ctx
}

// SetCurrent makes e the element being processed. For executors, before
// each call of the step's code.
func (pc *ProcessContext) SetCurrent(e *Element) { pc.cur = e }

// Emit sends e to the step's output with index tag (the order in which the
// step's outputs were declared; 0 is the main output).
func (pc *ProcessContext) Emit(tag int, e Element) { pc.out.Emit(tag, e) }

// Output sends v to the main output with the current element's time, window and pane.
func (pc *ProcessContext) Output(v any) {
	e := *pc.cur
	e.Value = v
	pc.out.Emit(0, e)
}

// Current returns the element being processed.
func (pc *ProcessContext) Current() *Element { return pc.cur }

// Now returns processing time from the runner's clock.
func (pc *ProcessContext) Now() mtime.Time { return pc.clock.Now() }

// SetMetrics makes m the step's user-defined metrics. For executors.
func (pc *ProcessContext) SetMetrics(m *UserMetrics) { pc.metrics = m }

// Metrics returns the step's user-defined metrics; nil when the executor
// keeps none.
func (pc *ProcessContext) Metrics() *UserMetrics { return pc.metrics }

// Worker returns the index of the worker running this call.
func (pc *ProcessContext) Worker() int { return pc.worker }

// SideInput returns the elements of side input i visible to the current
// element's window, built into a view by build and cached per window.
func (pc *ProcessContext) SideInput(i int, build func([]any) any) any {
	if pc.side == nil {
		return build(nil)
	}
	return pc.side.SideInput(i, pc.cur.Window, build)
}

// DoFn is the code of a stateless step (ParDo, Map, Filter, ...). Process
// is called once per element, from one goroutine per worker; a DoFn shared
// across workers must be safe for that (see Cloner).
type DoFn interface {
	Process(pc *ProcessContext, e Element) error
}

// Cloner is implemented by DoFns that keep per-call scratch state: the
// runner calls Clone once per worker so each worker has its own copy.
type Cloner interface {
	Clone() any
}

// BundleFinisher is implemented by DoFns that buffer: FinishBundle is called
// after every bundle, before the bundle's watermark moves on.
type BundleFinisher interface {
	FinishBundle(pc *ProcessContext) error
}

// Keyer extracts and canonically encodes the key of an element of a keyed
// step. AppendKey must be deterministic across processes: the encoding is
// hashed to choose the key group.
type Keyer interface {
	AppendKey(dst []byte, v any) []byte
	Key(v any) any
}

// Aggregator is the code of a GroupByKey or CombinePerKey: the runner keeps
// one accumulator per key and window and asks for an output when a pane fires.
type Aggregator interface {
	Keyer
	NewAccumulator() any
	// AddInput folds element e (its Value is the whole keyed element) into
	// acc and returns the accumulator (which may be acc itself, mutated).
	// e is valid only during the call.
	AddInput(acc any, e *Element) any
	MergeAccumulators(a, b any) any
	// Output builds the value of the pane's output element.
	Output(key any, acc any, w window.Window, p window.PaneInfo) any
}

// ContextAggregator is an Aggregator whose Output may block for long (a
// query over the pane's rows): the executor calls OutputContext, with the
// run's context, instead of Output, so that cancelling the run (a job's
// cancel, a server's stop) ends the call instead of waiting for it.
type ContextAggregator interface {
	Aggregator
	OutputContext(ctx context.Context, key any, acc any, w window.Window, p window.PaneInfo) any
}

// RejectingAggregator is an Aggregator that can refuse an element, for
// example one that would overflow an integer sum. The executor calls
// AddInputErr instead of AddInput: a returned error (an *ElementError
// gives the reason) makes e a reject of the step — to its error output,
// else the dead-letter hook, else a failed run, like a DoFn's error — and
// the accumulator returned must then be acc unchanged.
type RejectingAggregator interface {
	Aggregator
	AddInputErr(acc any, e *Element) (any, error)
}

// Timer is a timer firing in a stateful step.
type Timer struct {
	ID     string
	Domain graph.TimeDomain
	Time   mtime.Time
}

// StatefulDoFn is the code of a stateful ParDo: per key and window state,
// and event- or processing-time timers.
type StatefulDoFn interface {
	Keyer
	Process(sc *StateContext, e Element) error
	OnTimer(sc *StateContext, t Timer) error
}

// StateContext gives a stateful DoFn its key, window, state cells and
// timers. It is valid only during the call it is passed to. Its methods are
// those of the KeyedState the executor binds it to (NewStateContext).
type StateContext struct {
	KeyedState
	metrics *UserMetrics
}

// NewStateContext returns a context whose calls go to s, which the executor
// points at the key and window of each call. For executors.
func NewStateContext(s KeyedState) StateContext { return StateContext{KeyedState: s} }

// SetMetrics makes m the step's user-defined metrics. For executors.
func (sc *StateContext) SetMetrics(m *UserMetrics) { sc.metrics = m }

// Metrics returns the step's user-defined metrics; nil when the executor
// keeps none.
func (sc *StateContext) Metrics() *UserMetrics { return sc.metrics }

// KeyedState is the executor's side of a StateContext: the state and timers
// of the key and window being processed, and the step's outputs.
type KeyedState interface {
	// Key returns the current key.
	Key() any
	// Window returns the current window.
	Window() window.Window
	// Timestamp returns the event time outputs get: the element's, or the timer's.
	Timestamp() mtime.Time
	// Now returns processing time.
	Now() mtime.Time
	// Watermark returns the step's input watermark.
	Watermark() mtime.Time
	// Output sends v to the main output at the context's timestamp and window.
	Output(v any)
	// Emit sends e to the output with index tag.
	Emit(tag int, e Element)

	// ReadValue returns the value cell id and whether it is set.
	ReadValue(id string) (any, bool)
	// WriteValue sets the value cell id.
	WriteValue(id string, v any)
	// ClearValue clears the value cell id.
	ClearValue(id string)
	// ReadBag returns the elements of bag id, in insertion order.
	ReadBag(id string) []any
	// AddToBag appends v to bag id.
	AddToBag(id string, v any)
	// ClearBag empties bag id.
	ClearBag(id string)
	// MapGet returns the entry of map id at key k.
	MapGet(id string, k any) (any, bool)
	// MapPut sets the entry of map id at key k (k must be comparable).
	MapPut(id string, k, v any)
	// MapDelete removes the entry of map id at key k.
	MapDelete(id string, k any)
	// MapEntries returns map id (do not modify it).
	MapEntries(id string) map[any]any
	// ClearMap empties map id.
	ClearMap(id string)

	// SetTimer sets (or resets) timer id of the current key and window to
	// fire at t in domain (graph.EventTime: when the watermark passes t;
	// graph.ProcessingTime: when the clock reaches t).
	SetTimer(id string, domain graph.TimeDomain, t mtime.Time)
	// ClearTimer cancels timer id of the current key and window.
	ClearTimer(id string)
}
