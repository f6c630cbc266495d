package compat

import (
	"cmp"
	"slices"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/graph"
)

// Options adjust a check. The zero value is the strict default: no
// mapping, and a changed source is an error.
type Options struct {
	// Mapping renames steps of OLD before matching (default: none).
	Mapping Mapping
	// AllowSourceChange accepts a source that reads something else, or
	// disappeared: its read positions are dropped and a warning says so
	// (default false: such a change is an error).
	AllowSourceChange bool
}

// Report is the outcome of a check. Its JSON form is the `--format json`
// output of `weir check`; slices are never null.
type Report struct {
	// Compatible is true when there is no error: NEW can take over OLD's state.
	Compatible bool `json:"compatible"`
	// Errors are the reasons the update is refused, sorted by step, code, reason.
	Errors []Finding `json:"errors"`
	// Warnings are reported but do not refuse the update; same order.
	Warnings []Finding `json:"warnings"`
	// DroppedState lists, by OLD step name, exactly which state the update
	// drops on purpose (steps mapped to "", sources changed under
	// AllowSourceChange).
	DroppedState []DroppedState `json:"dropped_state"`
	// Matches pairs every OLD step whose state carries over (keyed steps,
	// and sources whose read positions carry over) with its NEW step, sorted
	// by OLD name; the job service rebinds state namespaces from it. It is
	// only meaningful when Compatible.
	Matches []Match `json:"matches"`
}

// Finding is one reason a check refuses an update (an error) or one thing
// it wants the user to know (a warning).
type Finding struct {
	// Step is the OLD step the finding is about (for mapping findings, the
	// mapping key; for a mapping conflict, the NEW step name).
	Step string `json:"step"`
	// Code is the stable code of the finding (see the package doc).
	Code errcode.Code `json:"code"`
	// Reason says what changed and why it matters, naming the step.
	Reason string `json:"reason"`
	// Fix is a concrete way out, when one can be inferred; "" otherwise.
	Fix string `json:"fix"`
}

// DroppedState is the state of one OLD step that an update drops on purpose.
type DroppedState struct {
	// Step is the OLD step name.
	Step string `json:"step"`
	// Kind is the step's kind.
	Kind graph.Kind `json:"kind"`
	// What describes what the step stored, for people.
	What string `json:"what"`
	// KeyCoder, StoredCoder, State and Timers are what a keyed step stored.
	KeyCoder    *graph.Coder      `json:"key_coder,omitempty"`
	StoredCoder *graph.Coder      `json:"stored_coder,omitempty"`
	State       []graph.StateSpec `json:"state,omitempty"`
	Timers      []graph.TimerSpec `json:"timers,omitempty"`
	// Source is what a source step read; its positions are dropped.
	Source *graph.IOIdentity `json:"source,omitempty"`
}

// Match pairs an OLD step with the NEW step that takes over its state.
type Match struct {
	Old  string     `json:"old"`
	New  string     `json:"new"`
	Kind graph.Kind `json:"kind"`
}

// finish sorts everything and sets Compatible.
func (r *Report) finish() {
	byStep := func(a, b Finding) int {
		return cmp.Or(cmp.Compare(a.Step, b.Step), cmp.Compare(a.Code, b.Code), cmp.Compare(a.Reason, b.Reason), cmp.Compare(a.Fix, b.Fix))
	}
	slices.SortFunc(r.Errors, byStep)
	slices.SortFunc(r.Warnings, byStep)
	slices.SortFunc(r.DroppedState, func(a, b DroppedState) int { return cmp.Compare(a.Step, b.Step) })
	slices.SortFunc(r.Matches, func(a, b Match) int { return cmp.Compare(a.Old, b.Old) })
	r.Compatible = len(r.Errors) == 0
}
