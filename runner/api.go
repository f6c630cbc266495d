// Package runner is weir's executor. It takes a pipeline graph plus the code
// bound to each step and runs it: elements move in bundles, consecutive
// stateless steps are fused into one loop, keyed steps are partitioned by key
// group over N workers, watermarks flow with the data, and triggers decide
// when windows fire (through package window's deterministic machine).
//
// The runner speaks in step names, bundles and watermarks. It may import
// graph, window, mtime and the standard library; it knows nothing of YAML,
// HTTP or the job store.
package runner

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/window"
)

// Element is one value at one event time in one window, with the pane that
// produced it and, when known, where it came from.
type Element struct {
	Value  any
	Time   mtime.Time
	Window window.Window
	Pane   window.PaneInfo
	// Source is where the element (or the element it was derived from) was
	// read; nil when unknown.
	Source *SourcePos
}

// SourcePos is the position of an element in its source: a file and line, a
// topic and sequence number.
type SourcePos struct {
	Source string `json:"source"`
	Offset int64  `json:"offset"`
}

// String renders the position as source:offset.
func (p *SourcePos) String() string {
	if p == nil {
		return "unknown position"
	}
	return fmt.Sprintf("%s:%d", p.Source, p.Offset)
}

// ElementError is a failure of one element. Returned from a DoFn (or placed
// by a source as a Reject), it sends the element to the step's error output
// when one is declared; otherwise it fails a bounded run.
type ElementError struct {
	// Reason is a short stable word (a rule name, "schema_mismatch", ...).
	Reason  string
	Message string
}

// Error implements error.
func (e *ElementError) Error() string { return e.Reason + ": " + e.Message }

// Reject is the value carried on an error output: the failing element, what
// failed, and where it came from.
type Reject struct {
	Element any
	Step    string
	Reason  string
	Message string
	Source  *SourcePos
}

// ProcessContext is handed to DoFns. It is valid only during the call.
type ProcessContext struct {
	out    *outputs
	side   *sideState
	cur    *Element
	clock  mtime.Clock
	worker int
}

// Emit sends e to the step's output with index tag (the order in which the
// step's outputs were declared; 0 is the main output).
func (pc *ProcessContext) Emit(tag int, e Element) { pc.out.emit(tag, e) }

// Output sends v to the main output with the current element's time, window and pane.
func (pc *ProcessContext) Output(v any) {
	e := *pc.cur
	e.Value = v
	pc.out.emit(0, e)
}

// Current returns the element being processed.
func (pc *ProcessContext) Current() *Element { return pc.cur }

// Now returns processing time from the runner's clock.
func (pc *ProcessContext) Now() mtime.Time { return pc.clock.Now() }

// Worker returns the index of the worker running this call.
func (pc *ProcessContext) Worker() int { return pc.worker }

// SideInput returns the elements of side input i visible to the current
// element's window, built into a view by build and cached per window.
func (pc *ProcessContext) SideInput(i int, build func([]any) any) any {
	if pc.side == nil {
		return build(nil)
	}
	return pc.side.view(i, pc.cur.Window, build)
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

// Timer is a timer firing in a stateful step.
type Timer struct {
	ID     string
	Domain string // graph.EventTime or graph.ProcessingTime
	Time   mtime.Time
}

// StatefulDoFn is the code of a stateful ParDo: per key and window state,
// and event- or processing-time timers.
type StatefulDoFn interface {
	Keyer
	Process(sc *StateContext, e Element) error
	OnTimer(sc *StateContext, t Timer) error
}

// ReadResult says what one Read call produced.
type ReadResult struct {
	// N is how many elements were written to the buffer.
	N int
	// Watermark is the split's watermark after these elements: no later
	// element will carry an earlier event time (late data excepted).
	Watermark mtime.Time
	// Done says the split has ended; its watermark is then +∞.
	Done bool
	// ProcessingTimeAdvanced says the split moved the processing-time clock
	// (TestStream), so timers must be re-evaluated after these elements.
	ProcessingTimeAdvanced bool
}

// Source is the code of a source step.
type Source interface {
	// Split divides the source into at most n parts that workers read
	// independently; a source that cannot split returns one.
	Split(ctx context.Context, n int) ([]SourceSplit, error)
}

// SourceSplit is one independently readable part of a source. Read is
// called repeatedly from one goroutine until it reports Done; it fills buf
// with up to len(buf) elements. A value of type Reject in an element sends
// it to the step's error output. Read may block briefly (an unbounded source
// waiting for data) but must return when ctx is done. Close is called once.
type SourceSplit interface {
	Read(ctx context.Context, buf []Element) (ReadResult, error)
	Close() error
}

// Sink is the code of a sink step. Write is called with each bundle, from
// the worker that produced it (so concurrently across workers), and must not
// keep elems after it returns (the runner reuses the slice); Close is called
// once after all input has been written and must flush everything.
type Sink interface {
	Write(ctx context.Context, worker int, elems []Element) error
	Close(ctx context.Context) error
}

// Program is a graph plus the code bound to its steps, by step name:
// a Source, DoFn, Aggregator, StatefulDoFn or Sink. Window-into and flatten
// steps need no code.
type Program struct {
	Graph *graph.Pipeline
	Code  map[string]any
}

// Options configure one run.
type Options struct {
	// NumWorkers is the number of workers (goroutines). Default 1.
	NumWorkers int
	// KeyGroups is the fixed number of key groups keys hash into. Default 4096.
	KeyGroups int
	// BundleSize is the most elements a source reads at once. Default 1024.
	BundleSize int
	// Clock gives processing time. Default the wall clock.
	Clock mtime.Clock
	// Logger receives the run's logs. Default slog.Default().
	Logger *slog.Logger
	// Checkpoints enables Execution.Checkpoint: keyed steps track changed
	// state, transactional sinks commit only through Commit (not at the end
	// of the run), and every keyed step's code must implement StateCoder.
	Checkpoints bool
	// Restore, when set, resumes sources and keyed state from a checkpoint.
	Restore *Restore
	// Adopt, when set, takes the keyed state of a paused execution over in
	// memory for the steps it names (see Execution.Pause); those steps do
	// not read Restore.State.
	Adopt *Adoption
	// DeadLetter, when set, receives the rejects of steps that declare no
	// error output instead of failing the execution (a server job sends
	// them to its dead-letter topic). It is called from worker goroutines;
	// an error it returns fails the execution.
	DeadLetter func(ctx context.Context, r Reject) error
}

// DefaultKeyGroups is the number of key groups used when none is set.
const DefaultKeyGroups = 4096

// EnsureDefaults fills unset options with their defaults.
func (o *Options) EnsureDefaults() {
	if o.NumWorkers <= 0 {
		o.NumWorkers = 1
	}
	if o.KeyGroups <= 0 {
		o.KeyGroups = DefaultKeyGroups
	}
	if o.BundleSize <= 0 {
		o.BundleSize = 1024
	}
	if o.Clock == nil {
		o.Clock = mtime.WallClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Validate reports options that cannot work.
func (o Options) Validate() error {
	if o.KeyGroups > 1<<16 {
		return fmt.Errorf("key groups %d exceeds the maximum of 65536", o.KeyGroups)
	}
	if o.NumWorkers > o.KeyGroups {
		return fmt.Errorf("%d workers exceed the %d key groups", o.NumWorkers, o.KeyGroups)
	}
	return nil
}

// StepMetrics are the counters of one step.
type StepMetrics struct {
	Name                string `json:"name"`
	ElementsIn          int64  `json:"elements_in"`
	ElementsOut         int64  `json:"elements_out"`
	Rejects             int64  `json:"rejects"`
	DroppedLateElements int64  `json:"dropped_late_elements"`
	// Watermark is the output watermark of a step that has one (sources,
	// keyed steps, steps with side inputs); mtime.MinTimestamp otherwise.
	Watermark mtime.Time `json:"-"`
	// PendingTimers counts the timers keyed instances have set and not yet
	// fired, as of their last watermark move (window-end and expiry timers
	// included; lazily cancelled ones too).
	PendingTimers int64 `json:"-"`
}

// Result is the outcome of a completed run.
type Result struct {
	Steps []StepMetrics `json:"steps"`
}

// Step returns the metrics of a step by name.
func (r *Result) Step(name string) StepMetrics {
	for _, s := range r.Steps {
		if s.Name == name {
			return s
		}
	}
	return StepMetrics{Name: name}
}
