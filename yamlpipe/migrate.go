package yamlpipe

import (
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/yamlpipe/celexpr"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// Declared state migrations of a Combine (weir's extension; docs/JOBS.md,
// "Migrate state"). An output appended to a running Combine starts empty
// in the windows open at the update (compat's COMBINE_OUTPUTS_CHANGED);
// a migration gives it an initial value computed from the accumulators
// the running version kept:
//
//	- type: Combine
//	  name: Totals
//	  config:
//	    group_by: [region]
//	    combine:
//	      total: {value: amount, fn: sum}
//	      n: {value: amount, fn: count}
//	      n_positive: {value: amount, fn: count}   # appended
//	  migrations:
//	    accumulators:
//	      n_positive: {init: "total > 0 ? n : 0"}
//
// An output renamed in place declares its old name,
//
//	  migrations:
//	    accumulators:
//	      amount_total: {renamed_from: total}
//
// so that its stored accumulator carries on under the new name (they are
// kept by position: the renamed output stays where the old one was, which
// the compatibility check verifies against the running job) and a
// WriteToSql reading the Combine renames its column in place (old rows
// keep their values, under the new name).
//
// init is a CEL expression over the step's output row as the stored
// accumulators give it (the outputs the running version had; appended
// ones read null, group_by fields null when the runner keeps keys
// encoded), evaluated once per key and window when the new execution
// first touches an accumulator stored by the old one — from memory at an
// in-place update, from the store after a restart or from a snapshot — so
// the way back (rollback) still finds the old state as it was stored. It
// applies to sum, count, min and max outputs.

// combineMigrations are a Combine's compiled migrations.
type combineMigrations struct {
	scope *celexpr.Scope
	// init holds, by output index, the program of its init (nil: none).
	init []*celexpr.Program
	// failed counts the inits that did not evaluate (the output then
	// starts empty for that key and window); logged the first time.
	failed atomic.Int64
	// The inits that failed when an adopted accumulator was carried over
	// lazily (conform), by accumulator, until the runner takes them
	// (TakeStateRejects) to report them with their key and window; the
	// aggregator is shared by the step's workers. npending counts them,
	// so that the runner's check after each use needs no lock.
	mu       sync.Mutex
	pending  map[*accumulator]string
	npending atomic.Int64
	// renamed maps an output renamed in place to its old name
	// (renamed_from).
	renamed map[string]string
	// lossy names the outputs whose stored float accumulators may be
	// read as ints (allow_lossy: a value field narrowed from float).
	lossy map[string]bool
}

// parseCombineMigrations compiles t's migrations: for agg.
func (l *loader) parseCombineMigrations(t *transformSpec, agg *aggregator) (*combineMigrations, error) {
	mn := t.migrations
	if mn == nil || mn.Kind == yamlnode.Null {
		return nil, nil
	}
	if mn.Kind != yamlnode.Map {
		return nil, l.errf(mn, "migrations must be a mapping with accumulators: {OUTPUT: {init: EXPR} or {renamed_from: OLD}} or rekey: {from: [FIELD...]}, not %s", mn.Kind)
	}
	if err := l.checkKeys(mn, "migrations", "accumulators", "rekey"); err != nil {
		return nil, err
	}
	an := mn.Get("accumulators")
	if an == nil && mn.Get("rekey") != nil {
		return nil, nil // a re-key only (parseRekey)
	}
	if an == nil || an.Kind != yamlnode.Map {
		return nil, l.errf(mn, "migrations needs accumulators: {OUTPUT: {init: EXPR} or {renamed_from: OLD}}")
	}
	sc, err := celexpr.NewScope(agg.out, nil, nil)
	if err != nil {
		return nil, l.wrapf(an, err, "migrations")
	}
	m := &combineMigrations{scope: sc, init: make([]*celexpr.Program, len(agg.ops))}
	outputs := make([]string, len(agg.ops))
	for i, op := range agg.ops {
		outputs[i] = op.out
	}
	for i, k := range an.Keys {
		v := an.Vals[i]
		what := "migration of " + k.Text
		idx := -1
		for j, op := range agg.ops {
			if op.out == k.Text {
				idx = j
			}
		}
		if idx < 0 {
			sorted := append([]string(nil), outputs...)
			sort.Strings(sorted)
			return nil, l.errf(k, "%s: the Combine has no output %q (its outputs: %s)", what, k.Text, strings.Join(sorted, ", "))
		}
		if v.Kind != yamlnode.Map {
			return nil, l.errf(v, "%s must be {init: EXPR} or {renamed_from: OLD}, not %s", what, v.Kind)
		}
		if err := l.checkKeys(v, what, "init", "renamed_from", "allow_lossy"); err != nil {
			return nil, err
		}
		in, rn, lossy := v.Get("init"), v.Get("renamed_from"), v.Get("allow_lossy")
		if lossy != nil {
			allow, err := l.lossyLeave(lossy, what, agg.ops[idx], in)
			if err != nil {
				return nil, err
			}
			if allow {
				if m.lossy == nil {
					m.lossy = map[string]bool{}
				}
				m.lossy[k.Text] = true
			}
			if rn == nil {
				continue
			}
		}
		switch {
		case in != nil && rn != nil:
			return nil, l.errf(rn, "%s: give init (an output appended now) or renamed_from (an output renamed in place, whose accumulator carries on), not both", what)
		case rn != nil:
			old, err := l.str(rn, what+" renamed_from")
			if err != nil {
				return nil, err
			}
			if old == "" || old == k.Text {
				return nil, l.errf(rn, "%s: renamed_from needs the output's old name, another than %q", what, k.Text)
			}
			for _, op := range agg.ops {
				if op.out == old {
					return nil, l.errf(rn, "%s: renamed_from %q, but %q is still an output of this Combine: rename it too, or drop the migration", what, old, old)
				}
			}
			if m.renamed == nil {
				m.renamed = map[string]string{}
			}
			for nw, o := range m.renamed {
				if o == old {
					return nil, l.errf(rn, "%s: renamed_from %q, which %s is already renamed from", what, old, nw)
				}
			}
			m.renamed[k.Text] = old
			continue
		case in == nil:
			return nil, l.errf(v, "%s needs init: EXPR (a CEL expression over the outputs the running version kept) or renamed_from: OLD", what)
		}
		switch agg.ops[idx].fn {
		case fnSum, fnCount, fnMin, fnMax:
		default:
			return nil, l.errf(in, "%s: init sets a sum, count, min or max output; %q is %s", what, k.Text, agg.ops[idx].fn)
		}
		prg, _, err := l.compileExpr(sc, in, what+" init")
		if err != nil {
			return nil, err
		}
		m.init[idx] = prg
	}
	return m, nil
}

// lossyLeave reads an output's allow_lossy: a boolean, on an int sum,
// min, max or latest (whose value field may have been a float: the
// narrowing the leave allows), and not beside an init (an appended output
// has no stored accumulator to convert).
func (l *loader) lossyLeave(n *yamlnode.Node, what string, op combineOp, init *yamlnode.Node) (bool, error) {
	if n.Kind != yamlnode.Bool {
		return false, l.errf(n, "%s: allow_lossy must be true or false, not %q", what, n.Text)
	}
	allow := n.B
	switch {
	case init != nil && allow:
		return false, l.errf(n, "%s: allow_lossy converts the stored accumulator of an output the running version had; an output with init is appended now and has none: drop one of them", what)
	case !allow:
		return false, nil
	case op.typ.Kind != row.KindInt || (op.fn != fnSum && op.fn != fnMin && op.fn != fnMax && op.fn != fnLatest):
		return false, l.errf(n, "%s: allow_lossy lets an int sum, min, max or latest read the float accumulators stored while its value field was a float (truncated toward zero); %q is %s of %s, which narrows nothing", what, op.out, op.fn, op.typ)
	}
	return true, nil
}

// initSlots sets the appended slots of ac (from index from on) that have
// an init, from the values of the slots before them. It returns what did
// not evaluate (empty when every init did): those outputs start empty.
func (a *aggregator) initSlots(ac *accumulator, from int) string {
	m := a.migrate
	if m == nil {
		return ""
	}
	var failed []string
	var r *row.Row
	for k := from; k < len(a.ops); k++ {
		prg := m.init[k]
		if prg == nil {
			continue
		}
		if r == nil {
			r = row.New(a.out)
			copy(r.Values, ac.group)
			j := len(a.group)
			for i := range from {
				r.Values[j+i] = slotValue(&a.ops[i], &ac.slots[i])
			}
		}
		act := celexpr.NewActivation(m.scope)
		act.Reset(r, nil)
		op := &a.ops[k]
		v, err := act.EvalValue(prg, op.typ)
		if err != nil || v == nil {
			if m.failed.Add(1) == 1 {
				slog.Default().Warn("a Combine migration's init did not evaluate for a key and window: its output starts empty there (counted as the step's rejects, reason migration_init_failed)",
					"step", a.step, "output", op.out, "key", fmt.Sprint(ac.group), "error", fmt.Sprint(err))
			}
			why := "it evaluated to null"
			if err != nil {
				why = err.Error()
			}
			failed = append(failed, fmt.Sprintf("the init of output %s did not evaluate (%s): it starts empty", op.out, why))
			continue
		}
		s := &ac.slots[k]
		switch op.fn {
		case fnSum:
			switch x := v.(type) {
			case int64:
				s.i = x
			case float64:
				s.f = x
			}
			s.set = true
		case fnCount:
			if x, ok := v.(int64); ok {
				s.n = x
			}
		case fnMin, fnMax:
			s.setV(v)
			s.set = true
		}
	}
	return strings.Join(failed, "; ")
}

// attachMigrations gives the steps named in a top-level migrations: their
// migrations, as if each had declared them itself:
//
//	migrations:
//	  Totals:
//	    accumulators:
//	      n_positive: {init: "total > 0 ? n : 0"}
//
// or as a list, each item naming its step:
//
//	migrations:
//	  - step: Totals
//	    accumulators: {...}
func (l *loader) attachMigrations(mn *yamlnode.Node) error {
	if mn == nil || mn.Kind == yamlnode.Null {
		return nil
	}
	type entry struct {
		name *yamlnode.Node // the step's name
		body *yamlnode.Node // {accumulators: ...}
	}
	var entries []entry
	switch mn.Kind {
	case yamlnode.Map:
		for i, k := range mn.Keys {
			entries = append(entries, entry{k, mn.Vals[i]})
		}
	case yamlnode.Seq:
		for _, it := range mn.Seq {
			if it.Kind != yamlnode.Map {
				return l.errf(it, "a top-level migration must be a mapping {step: NAME, accumulators: {...}}, not %s", it.Kind)
			}
			if err := l.checkKeys(it, "a top-level migration", "step", "accumulators", "rekey"); err != nil {
				return err
			}
			sn := it.Get("step")
			if sn == nil {
				return l.errf(it, "a top-level migration needs step: NAME (the Combine it migrates)")
			}
			body := &yamlnode.Node{Kind: yamlnode.Map, Line: it.Line, Col: it.Col}
			for i, k := range it.Keys {
				if k.Text != "step" {
					body.Keys, body.Vals = append(body.Keys, k), append(body.Vals, it.Vals[i])
				}
			}
			entries = append(entries, entry{sn, body})
		}
	default:
		return l.errf(mn, "the top-level migrations must map step names to {accumulators: {...}}, or list {step: NAME, accumulators: {...}}, not %s", mn.Kind)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		name, err := l.str(e.name, "a top-level migration's step")
		if err != nil {
			return err
		}
		if seen[name] {
			return l.errf(e.name, "step %q has two top-level migrations: give it one", name)
		}
		seen[name] = true
		var target *transformSpec
		var combines []string
		for _, t := range l.specs {
			if t.typ == "Combine" {
				combines = append(combines, t.name)
			}
			if t.name == name {
				target = t
			}
		}
		switch {
		case target == nil:
			sort.Strings(combines)
			return l.errf(e.name, "a top-level migration names step %q, which the pipeline does not have (its Combine steps: %s)", name, strings.Join(combines, ", "))
		case target.typ != "Combine":
			return l.errf(e.name, "a top-level migration names step %q, a %s: only a Combine declares state migrations", name, target.typ)
		case target.migrations != nil:
			return l.errf(e.name, "step %q declares its migrations: on the step already: declare them in one place", name)
		}
		target.migrations = e.body
	}
	return nil
}

// migrationInitFailed is the reject reason of a key and window whose
// migration init did not evaluate.
const migrationInitFailed = "migration_init_failed"

// StateRejects implements contract.StateRejecter: the keys and windows
// whose migration init did not evaluate.
// PendingStateRejects implements contract.AdoptedStateRejecter.
func (a *aggregator) PendingStateRejects() bool {
	return a.migrate != nil && a.migrate.npending.Load() > 0
}

// TakeStateRejects implements contract.AdoptedStateRejecter: the inits
// that did not evaluate when acc, adopted from the execution this one
// replaced, was carried over.
func (a *aggregator) TakeStateRejects(acc any) []*contract.PartialStateError {
	m := a.migrate
	ac, ok := acc.(*accumulator)
	if m == nil || !ok || m.npending.Load() == 0 {
		return nil
	}
	m.mu.Lock()
	failed, found := m.pending[ac]
	if found {
		delete(m.pending, ac)
		m.npending.Add(-1)
	}
	m.mu.Unlock()
	if !found {
		return nil
	}
	return []*contract.PartialStateError{{Reason: migrationInitFailed, Message: failed}}
}

// adoptedInitFailed records what did not evaluate when adopted
// accumulator ac was carried over, for TakeStateRejects.
func (m *combineMigrations) adoptedInitFailed(ac *accumulator, failed string) {
	m.mu.Lock()
	if m.pending == nil {
		m.pending = map[*accumulator]string{}
	}
	if _, dup := m.pending[ac]; !dup {
		m.npending.Add(1)
	}
	m.pending[ac] = failed
	m.mu.Unlock()
}

func (a *aggregator) StateRejects() map[string]int64 {
	var out map[string]int64
	if a.migrate != nil {
		if n := a.migrate.failed.Load(); n > 0 {
			out = map[string]int64{migrationInitFailed: n}
		}
	}
	if a.rekey != nil {
		if n := a.rekey.failed.Load(); n > 0 {
			if out == nil {
				out = map[string]int64{}
			}
			out[contract.RekeyFailed] = n
		}
	}
	return out
}
