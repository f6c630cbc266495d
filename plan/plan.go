// Package plan computes, before anything runs, what changing a running
// pipeline into a new one would do: `weir plan`. Per stateful step, whether
// its state is kept (under its name or a mapped one), dropped, refused or
// starts empty, with the keys it holds when the caller knows them; per sink,
// the columns added, removed, widened or converted, a changed key, mode or
// layout, and what readers of the output will see; per source, how its read
// position is handled by the chosen way of updating. The compatibility
// check (package compat) decides what carries over; a plan only reads the
// two graphs and that report, so it is deterministic and changes nothing.
//
// It may import compat, errcode (the findings' codes), graph, serviceopt
// (the strategy an update's service options ask for) and the standard
// library.
package plan

import (
	"cmp"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/graph"
)

// Strategy is the way of updating a plan describes.
type Strategy string

// The strategies, as `weir run --update` selects them.
const (
	// InPlace: the in-place update (the default of --update).
	InPlace Strategy = "in_place"
	// StopAndReplace: update_strategy_parallel_job_update without an
	// overlap: the old job drains, a new one starts.
	StopAndReplace Strategy = "stop_and_replace"
	// Parallel: a parallel replacement (both run for an overlap, SQL
	// outputs behind façade views).
	Parallel Strategy = "parallel"
)

// Action is what the change does to a step, a sink, a column or a source.
type Action string

// The actions.
const (
	Kept      Action = "kept"      // unchanged, state or position carried over
	Renamed   Action = "renamed"   // carried over under a mapped name
	Dropped   Action = "dropped"   // state or positions dropped on purpose
	Added     Action = "added"     // new in NEW: starts empty
	Removed   Action = "removed"   // gone from NEW
	Refused   Action = "refused"   // the update would be refused for it
	Changed   Action = "changed"   // kept, with a difference listed
	Migrated  Action = "migrated"  // kept through a declared migration
	Widened   Action = "widened"   // a column's type widened (int → float)
	Converted Action = "converted" // a column's type changed otherwise
)

// Options says what a plan describes.
type Options struct {
	// Check are the compatibility check's options (the name mapping).
	Check compat.Options
	// Strategy is the way of updating (default InPlace).
	Strategy Strategy
	// Keys is, per OLD step name, the number of keys the step holds state
	// for (from a running job's metrics or a snapshot); nil: unknown.
	Keys map[string]int64
	// KeysFrom says where Keys came from ("job metrics", "snapshot ID").
	KeysFrom string
	// Windows is, per OLD aggregation step name, the windows it holds open
	// over all its keys (from the same place as Keys); nil: unknown.
	Windows map[string]OpenWindows
	// Rewind is weir_replace_rewind for a replacement (default true).
	Rewind *bool
}

// OpenWindows is the windows an aggregation step holds open, counted or
// estimated.
type OpenWindows struct {
	N         int64
	Estimated bool
}

// Plan is everything a change would do. Its JSON form is the output of
// `weir plan --format json`; slices are never null.
type Plan struct {
	// Strategy is the way of updating described.
	Strategy Strategy `json:"strategy"`
	// Compatible is the compatibility check's verdict: false means the
	// update would be refused and nothing would change.
	Compatible bool `json:"compatible"`
	// Steps are the stateful steps (keyed steps), by OLD name, then the
	// added ones by NEW name.
	Steps []Step `json:"steps"`
	// Sinks are the sinks of either pipeline.
	Sinks []Sink `json:"sinks"`
	// Sources are the sources of either pipeline.
	Sources []Source `json:"sources"`
	// KeysFrom says where the key counts come from; "" when there are none.
	KeysFrom string `json:"keys_from,omitempty"`
	// Check is the compatibility report the plan is built on.
	Check compat.Report `json:"check"`
}

// Step is what happens to one stateful step's state.
type Step struct {
	// Old and New are the step's names; one is "" for a removed or an
	// added step.
	Old    string     `json:"old,omitempty"`
	New    string     `json:"new,omitempty"`
	Kind   graph.Kind `json:"kind"`
	Action Action     `json:"action"`
	// State describes what the step keeps (accumulators, state cells).
	State string `json:"state"`
	// Keys is how many keys the step holds state for, when known.
	Keys *int64 `json:"keys,omitempty"`
	// OpenWindows is how many windows an aggregation step holds open over
	// all its keys, when known: what a migration of its accumulators
	// touches besides the closed windows' rows.
	OpenWindows *int64 `json:"open_windows,omitempty"`
	// OpenWindowsEstimated says OpenWindows is estimated from part of the
	// keys.
	OpenWindowsEstimated bool `json:"open_windows_estimated,omitempty"`
	// Detail explains the action: the refusal's reason and fix, what is
	// dropped, a warning.
	Detail string `json:"detail,omitempty"`
}

// Sink is what happens to one output.
type Sink struct {
	Old    string `json:"old,omitempty"`
	New    string `json:"new,omitempty"`
	Action Action `json:"action"`
	// Kind is the sink's kind (sql, file, pubsub, ...), Identity what it
	// writes (sqlite:table, a path, a topic).
	Kind     string `json:"kind"`
	Identity string `json:"identity"`
	// Key, Mode and Layout are a SQL sink's, old → new when they change.
	Key    Change `json:"key,omitzero"`
	Mode   Change `json:"mode,omitzero"`
	Layout Change `json:"layout,omitzero"`
	// Columns are the row fields that change; unchanged ones are omitted.
	Columns []Column `json:"columns"`
	// Detail says what readers will see, and the fix of a refusal.
	Detail string `json:"detail,omitempty"`
}

// Change is a value before and after; both equal when unchanged.
type Change struct {
	Old string `json:"old"`
	New string `json:"new"`
}

// IsZero reports an absent change (for omitzero).
func (c Change) IsZero() bool { return c.Old == "" && c.New == "" }

// changed reports whether the value differs.
func (c Change) changed() bool { return c.Old != c.New }

// Column is one changed field of a sink's rows.
type Column struct {
	Name   string `json:"name"`
	Action Action `json:"action"`
	// From is the old name of a column renamed in place (Action renamed).
	From string `json:"from,omitempty"`
	// OldType and NewType are the row types ("" when absent).
	OldType string `json:"old_type,omitempty"`
	NewType string `json:"new_type,omitempty"`
	// Effect says what the sink does about it and what readers see.
	Effect string `json:"effect"`
}

// Source is how one source's read position is handled.
type Source struct {
	Old      string `json:"old,omitempty"`
	New      string `json:"new,omitempty"`
	Action   Action `json:"action"`
	Identity string `json:"identity"`
	// Position says where the source reads from after the change.
	Position string `json:"position"`
}

// Make builds the plan of changing old into new.
func Make(old, newp *graph.Pipeline, opts Options) Plan {
	if opts.Strategy == "" {
		opts.Strategy = InPlace
	}
	rep := compat.Check(old, newp, opts.Check)
	p := Plan{Strategy: opts.Strategy, Compatible: rep.Compatible, Check: rep, KeysFrom: opts.KeysFrom,
		Steps: []Step{}, Sinks: []Sink{}, Sources: []Source{}}
	if len(opts.Keys) == 0 {
		p.KeysFrom = ""
	}
	oldSteps, newSteps := index(old), index(newp)
	oldOutputs, _ := compat.CombineSlotsByStep(old, nil)
	p.steps(rep, oldSteps, newSteps, oldOutputs, opts)
	p.sinks(old, newp, oldSteps, newSteps, opts)
	p.sources(rep, oldSteps, newSteps, opts)
	return p
}

func index(g *graph.Pipeline) map[string]*graph.Step {
	m := make(map[string]*graph.Step, len(g.Steps))
	for _, s := range g.Steps {
		m[s.Name] = s
	}
	return m
}

func sortedNames(m map[string]*graph.Step, keep func(*graph.Step) bool) []string {
	var names []string
	for n, s := range m {
		if keep(s) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// findings groups a report's findings by step.
func findings(fs []compat.Finding) map[string][]compat.Finding {
	m := map[string][]compat.Finding{}
	for _, f := range fs {
		m[f.Step] = append(m[f.Step], f)
	}
	return m
}

func detailOf(fs []compat.Finding) string {
	var parts []string
	for _, f := range fs {
		s := string(f.Code) + ": " + f.Reason
		if f.Fix != "" {
			s += " (fix: " + f.Fix + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func (p *Plan) steps(rep compat.Report, oldSteps, newSteps map[string]*graph.Step, oldOutputs map[string][]string, opts Options) {
	errs, warns := findings(rep.Errors), findings(rep.Warnings)
	matched := map[string]string{} // OLD -> NEW
	taken := map[string]bool{}
	for _, m := range rep.Matches {
		matched[m.Old] = m.New
		taken[m.New] = true
	}
	dropped := map[string]compat.DroppedState{}
	for _, d := range rep.DroppedState {
		dropped[d.Step] = d
	}
	keys := func(name string) *int64 {
		if n, ok := opts.Keys[name]; ok {
			return &n
		}
		return nil
	}
	for _, name := range sortedNames(oldSteps, func(s *graph.Step) bool { return s.Kind.IsKeyed() }) {
		o := oldSteps[name]
		st := Step{Old: name, Kind: o.Kind, State: describeState(o), Keys: keys(name)}
		if w, ok := opts.Windows[name]; ok {
			st.OpenWindows, st.OpenWindowsEstimated = &w.N, w.Estimated
		}
		switch n, ok := matched[name]; {
		case len(errs[name]) > 0:
			st.Action, st.Detail = Refused, detailOf(errs[name])
			if ok {
				st.New = n
			}
		case ok && n == name:
			st.New, st.Action = n, Kept
			if ns := newSteps[n]; ns != nil && describeState(ns) != st.State {
				st.Action = Changed
				st.Detail = "keeps its state; now " + describeState(ns)
			}
		case ok:
			st.New, st.Action = n, Renamed
		default:
			st.Action = Dropped
			if d, ok := dropped[name]; ok {
				st.Detail = "state dropped on purpose: " + d.What
			} else {
				st.Detail = "no step of NEW takes over its state"
			}
		}
		if ns := newSteps[st.New]; ns != nil && st.Action != Refused && st.Action != Dropped {
			if r := compat.RenamedOutputs(ns); len(r) > 0 {
				var what []string
				for _, nw := range slices.Sorted(maps.Keys(r)) {
					what = append(what, nw+" from "+r[nw])
				}
				st.Action = Migrated
				st.Detail = strings.TrimPrefix(st.Detail+"; outputs renamed in place (renamed_from), their accumulators carry on in every key and open window: "+strings.Join(what, ", "), "; ")
			}
			if in := appendedInits(ns, oldOutputs[name]); len(in) > 0 {
				st.Action = Migrated
				st.Detail = strings.TrimPrefix(st.Detail+"; outputs appended with an init (migrations: init), computed from the stored accumulators in every key and open window when first touched: "+strings.Join(in, ", "), "; ")
			}
			if l := compat.LossyOutputs(ns); len(l) > 0 {
				st.Action = Migrated
				st.Detail = strings.TrimPrefix(st.Detail+"; outputs allowed a lossy conversion (allow_lossy), their stored accumulators read in the new type (a float as an int truncated toward zero; a latest string as the number it spells, null where it spells none): "+strings.Join(slices.Sorted(maps.Keys(l)), ", "), "; ")
			}
		}
		for _, w := range warns[name] {
			// A Go SDK step's declared migration (weir.MigrateAccumulator,
			// weir.MigrateState), or a Combine's re-key: its state is kept
			// through it.
			if (w.Code == errcode.AccumulatorMigrated || w.Code == errcode.StateMigrated || w.Code == errcode.StateRekeyed) && st.Action != Refused && st.Action != Dropped {
				st.Action = Migrated
			}
		}
		if w := detailOf(warns[name]); w != "" && st.Action != Refused {
			st.Detail = strings.TrimPrefix(st.Detail+"; warning "+w, "; ")
		}
		p.Steps = append(p.Steps, st)
	}
	for _, name := range sortedNames(newSteps, func(s *graph.Step) bool { return s.Kind.IsKeyed() }) {
		if taken[name] {
			continue
		}
		n := newSteps[name]
		p.Steps = append(p.Steps, Step{New: name, Kind: n.Kind, Action: Added, State: describeState(n),
			Detail: "starts with empty state: windows open at the update hold only what arrives after it"})
	}
}

// describeState says what a keyed step keeps, for people: a YAML
// Combine's accumulators, else its state cells and timers, else its key.
func describeState(s *graph.Step) string {
	var parts []string
	if s.Fn != nil && strings.HasSuffix(s.Fn.URN, ":Combine") {
		var cfg struct {
			GroupBy any            `json:"group_by"`
			Combine map[string]any `json:"combine"`
		}
		if json.Unmarshal(s.Fn.Config, &cfg) == nil && len(cfg.Combine) > 0 {
			var accs []string
			for out, fn := range cfg.Combine {
				accs = append(accs, out+"="+combineFn(fn))
			}
			slices.Sort(accs)
			parts = append(parts, "by "+groupBy(cfg.GroupBy)+": "+strings.Join(accs, ", "))
		}
	}
	for _, st := range s.State {
		parts = append(parts, string(st.Kind)+" "+st.ID)
	}
	for _, t := range s.Timers {
		parts = append(parts, "timer "+t.ID)
	}
	if len(parts) == 0 && s.KeyCoder != nil {
		parts = append(parts, "values per key")
	}
	return strings.Join(parts, "; ")
}

// appendedInits returns the outputs YAML Combine n gives an init
// (migrations: init) that the step it takes over did not have (old, its
// outputs: compat.CombineSlotsByStep; nil when it is not a YAML Combine):
// those the init computes when the new execution first touches a stored
// accumulator.
func appendedInits(n *graph.Step, old []string) []string {
	if old == nil {
		return nil
	}
	var out []string
	for _, name := range compat.InitializedOutputs(n) {
		if !slices.Contains(old, name) {
			out = append(out, name)
		}
	}
	return out
}

func groupBy(v any) string {
	switch g := v.(type) {
	case string:
		return g
	case []any:
		var s []string
		for _, x := range g {
			if str, ok := x.(string); ok {
				s = append(s, str)
			}
		}
		return strings.Join(s, ",")
	}
	return "key"
}

func combineFn(v any) string {
	switch f := v.(type) {
	case string:
		return f
	case map[string]any:
		fn := f["fn"]
		if m, ok := fn.(map[string]any); ok {
			fn = m["type"]
		}
		if val, ok := f["value"].(string); ok {
			return cmp.Or(str(fn), "?") + "(" + val + ")"
		}
		return cmp.Or(str(fn), "?")
	}
	return "?"
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
