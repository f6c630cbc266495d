package client

// Plan is what an update would do, before anything runs: the answer of
// `weir plan --format json`, and UpdateResponse.Plan of a validate-only
// update. Actions are "kept", "renamed", "changed", "dropped", "added",
// "removed", "refused", "widened" and "converted".
type Plan struct {
	// Strategy is the way of updating described: in_place,
	// stop_and_replace or parallel.
	Strategy string `json:"strategy"`
	// Compatible is the compatibility check's verdict.
	Compatible bool         `json:"compatible"`
	Steps      []PlanStep   `json:"steps"`
	Sinks      []PlanSink   `json:"sinks"`
	Sources    []PlanSource `json:"sources"`
	// KeysFrom says where the steps' key counts come from.
	KeysFrom string `json:"keys_from,omitempty"`
	// Check is the compatibility report the plan is built on.
	Check CompatReport `json:"check"`
}

// PlanStep is what an update does to one stateful step's state.
type PlanStep struct {
	Old    string `json:"old,omitempty"`
	New    string `json:"new,omitempty"`
	Kind   string `json:"kind"`
	Action string `json:"action"`
	// State says what the step keeps (accumulators, state cells).
	State string `json:"state"`
	// Keys is how many keys the step holds state for, when known.
	Keys *int64 `json:"keys,omitempty"`
	// OpenWindows is how many windows an aggregation step holds open over
	// all its keys, when known (OpenWindowsEstimated: from part of them).
	OpenWindows          *int64 `json:"open_windows,omitempty"`
	OpenWindowsEstimated bool   `json:"open_windows_estimated,omitempty"`
	Detail               string `json:"detail,omitempty"`
}

// PlanSink is what an update does to one output.
type PlanSink struct {
	Old      string       `json:"old,omitempty"`
	New      string       `json:"new,omitempty"`
	Action   string       `json:"action"`
	Kind     string       `json:"kind"`
	Identity string       `json:"identity"`
	Key      *PlanChange  `json:"key,omitempty"`
	Mode     *PlanChange  `json:"mode,omitempty"`
	Layout   *PlanChange  `json:"layout,omitempty"`
	Columns  []PlanColumn `json:"columns"`
	Detail   string       `json:"detail,omitempty"`
}

// PlanChange is a value before and after an update.
type PlanChange struct {
	Old string `json:"old"`
	New string `json:"new"`
}

// PlanColumn is one changed field of a sink's rows.
type PlanColumn struct {
	Name   string `json:"name"`
	Action string `json:"action"`
	// From is the old name of a column renamed in place.
	From    string `json:"from,omitempty"`
	OldType string `json:"old_type,omitempty"`
	NewType string `json:"new_type,omitempty"`
	// Effect says what the sink does about it and what readers see.
	Effect string `json:"effect"`
}

// PlanSource is where one source reads from after an update.
type PlanSource struct {
	Old      string `json:"old,omitempty"`
	New      string `json:"new,omitempty"`
	Action   string `json:"action"`
	Identity string `json:"identity"`
	Position string `json:"position"`
}
