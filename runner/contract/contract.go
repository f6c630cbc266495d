// Package contract is the runner's contract: what the code bound to a
// pipeline's steps implements and what it is handed, as the executor
// (package runner) and anything else that runs a pipeline — a test harness,
// a future network transport between machines — agree on it. It defines
// elements, rejects and source positions; the Source, Sink, DoFn,
// Aggregator and StatefulDoFn interfaces with the contexts they receive;
// and the durable-source and checkpoint contract (positions, transactional
// sinks, state coders, checkpoint entries, restore). It also declares what
// the job service's flows ask of connectors beyond running them
// (rereading.go, subscriptions.go, sqltables.go): a source that re-reads
// retained input, sinks that write behind façade views or say which SQL
// table they write, the broker's subscriptions and the administration of
// SQL tables behind views, so that the flows name no connector.
//
// Connectors (io/...), the state store, rows and the SDK import this
// package, never the executor. It holds declarations only: no goroutines,
// no scheduling, no wire, YAML or HTTP types.
//
// It may import graph, window, mtime and the standard library.
package contract

import (
	"fmt"
	"sort"

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
	// Fatal makes the error fail the run even where a rejected element
	// would go to an error output or a dead-letter topic: the failure of a
	// check of the pipeline itself (AssertEqual), not bad data.
	Fatal bool
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
	// Late is set on a reject with reason ReasonTooLate: the window the
	// element arrived too late for and the step's input watermark then.
	Late *Lateness
	// Key, on a reject without a source position, identifies it across
	// replays (a stored state value's key, window and cell), so that a
	// dead-letter topic de-duplicates it as it does a source's element.
	Key string
}

// ReasonTooLate is the reason of the reject of an element a keyed step
// dropped as late: its window had expired (the watermark had passed its
// end plus the allowed lateness) or had closed.
const ReasonTooLate = "too_late"

// ReasonStateMigrationFailed is the reason of the reject of a stored state
// value a step's declared migration refused (ErrStateDropped): the
// restore left it out.
const ReasonStateMigrationFailed = "state_migration_failed"

// Lateness says why an element was too late: the window it was for and the
// watermark of the step it reached.
type Lateness struct {
	Window    window.Window
	Watermark mtime.Time
}

// Program is a graph plus the code bound to its steps, by step name:
// a Source, DoFn, Aggregator, StatefulDoFn or Sink. Window-into and flatten
// steps need no code.
type Program struct {
	Graph *graph.Pipeline
	Code  map[string]any
}

// OutputTags returns the output tags of s in the order that output indexes
// (ProcessContext.Emit's tag argument) refer to: "main" first, then the
// others sorted by name.
func OutputTags(s *graph.Step) []string {
	tags := make([]string, 0, len(s.Outputs))
	for tag := range s.Outputs {
		tags = append(tags, tag)
	}
	sort.Slice(tags, func(a, b int) bool {
		if (tags[a] == graph.MainTag) != (tags[b] == graph.MainTag) {
			return tags[a] == graph.MainTag
		}
		return tags[a] < tags[b]
	})
	return tags
}
