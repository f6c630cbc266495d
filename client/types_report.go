package client

import "github.com/weir-dev/weir/errcode"

// CompatReport is the outcome of a compatibility check (an update, a
// creation from a snapshot, a release, a recorded attempt). Its JSON form
// is the `--format json` output of `weir check`; slices are never null.
type CompatReport struct {
	// Compatible is true when there is no error: NEW can take over OLD's state.
	Compatible bool `json:"compatible"`
	// Errors are the reasons the update is refused, sorted by step, code, reason.
	Errors []Finding `json:"errors"`
	// Warnings are reported but do not refuse the update; same order.
	Warnings []Finding `json:"warnings"`
	// DroppedState lists, by OLD step name, exactly which state the update
	// drops on purpose (steps mapped to "", sources changed under
	// allow_source_change).
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
	// Code is the stable code of the finding (package errcode).
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
	Kind StepKind `json:"kind"`
	// What describes what the step stored, for people.
	What string `json:"what"`
	// KeyCoder, StoredCoder, State and Timers are what a keyed step stored.
	KeyCoder    *Coder      `json:"key_coder,omitempty"`
	StoredCoder *Coder      `json:"stored_coder,omitempty"`
	State       []StateSpec `json:"state,omitempty"`
	Timers      []TimerSpec `json:"timers,omitempty"`
	// Source is what a source step read; its positions are dropped.
	Source *IOIdentity `json:"source,omitempty"`
}

// Match pairs an OLD step with the NEW step that takes over its state.
type Match struct {
	Old  string   `json:"old"`
	New  string   `json:"new"`
	Kind StepKind `json:"kind"`
}

// StepKind names what a step does (ParDo, GroupByKey, Combine, ...).
type StepKind string

// Coder is the identity of an encoding: a URN, parameters, and components
// (for composite coders such as KV) or fields (for row coders).
type Coder struct {
	URN        string            `json:"urn"`
	Version    int               `json:"version,omitempty"`
	Params     map[string]string `json:"params,omitempty"`
	Components []Coder           `json:"components,omitempty"`
	Fields     []CoderField      `json:"fields,omitempty"`
}

// CoderField is one named, typed field of a row coder.
type CoderField struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// StateSpec declares one state cell of a stateful step.
type StateSpec struct {
	ID    string    `json:"id"`
	Kind  StateKind `json:"kind"`
	Coder Coder     `json:"coder"`
}

// StateKind names what a state cell holds; it is part of the canonical
// JSON form, so its strings never change.
type StateKind string

// TimerSpec declares one timer family of a stateful step.
type TimerSpec struct {
	ID string `json:"id"`
	// Domain is the time the timers fire in; serialized as its string
	// (event_time or processing_time).
	Domain TimeDomain `json:"domain"`
}

// TimeDomain is the time a timer fires in.
type TimeDomain string

// IOIdentity names what a source reads or a sink writes, so an update can
// tell whether it still reads the same thing.
type IOIdentity struct {
	Kind     string `json:"kind"`
	Identity string `json:"identity"`
	Bounded  bool   `json:"bounded"`
}
