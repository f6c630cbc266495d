package yamlpipe

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/yamlpipe/celexpr"
	"github.com/weir-dev/weir/yamlpipe/combine"
	"github.com/weir-dev/weir/yamlpipe/python"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// parseCombineMigrations compiles t's migrations: for agg.
func (l *loader) parseCombineMigrations(t *transformSpec, agg *combine.Aggregator) (*combine.Migrations, error) {
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
	sc, err := celexpr.NewScope(agg.Out, nil, nil)
	if err != nil {
		return nil, l.wrapf(an, err, "migrations")
	}
	m := &combine.Migrations{Init: make([]func(*row.Row) (any, error), len(agg.Ops))}
	outputs := make([]string, len(agg.Ops))
	for i, op := range agg.Ops {
		outputs[i] = op.Out
	}
	for i, k := range an.Keys {
		v := an.Vals[i]
		what := "migration of " + k.Text
		idx := -1
		for j, op := range agg.Ops {
			if op.Out == k.Text {
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
		if err := l.checkKeys(v, what, "init", "language", "renamed_from", "allow_lossy"); err != nil {
			return nil, err
		}
		in, rn, lossy := v.Get("init"), v.Get("renamed_from"), v.Get("allow_lossy")
		if ln := v.Get("language"); ln != nil && in == nil {
			return nil, l.errf(ln, "%s: language says what an init is written in; give init: EXPR beside it, or drop it", what)
		}
		if lossy != nil {
			allow, err := l.lossyLeave(lossy, what, agg.Ops[idx], in)
			if err != nil {
				return nil, err
			}
			if allow {
				if m.Lossy == nil {
					m.Lossy = map[string]bool{}
				}
				m.Lossy[k.Text] = true
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
			for _, op := range agg.Ops {
				if op.Out == old {
					return nil, l.errf(rn, "%s: renamed_from %q, but %q is still an output of this Combine: rename it too, or drop the migration", what, old, old)
				}
			}
			if m.Renamed == nil {
				m.Renamed = map[string]string{}
			}
			for nw, o := range m.Renamed {
				if o == old {
					return nil, l.errf(rn, "%s: renamed_from %q, which %s is already renamed from", what, old, nw)
				}
			}
			m.Renamed[k.Text] = old
			continue
		case in == nil:
			return nil, l.errf(v, "%s needs init: EXPR (a CEL expression over the outputs the running version kept) or renamed_from: OLD", what)
		}
		switch agg.Ops[idx].Fn {
		case combine.FnSum, combine.FnCount, combine.FnMin, combine.FnMax:
		default:
			return nil, l.errf(in, "%s: init sets a sum, count, min or max output; %q is %s", what, k.Text, agg.Ops[idx].Fn)
		}
		lang, err := l.initLanguage(v.Get("language"), what)
		if err != nil {
			return nil, err
		}
		if lang == "python" {
			if m.Init[idx], err = l.pythonInit(in, agg, idx, what+" init"); err != nil {
				return nil, err
			}
			continue
		}
		prg, _, err := l.compileExpr(sc, in, what+" init")
		if err != nil {
			return nil, err
		}
		typ := agg.Ops[idx].Typ
		m.Init[idx] = func(r *row.Row) (any, error) {
			act := celexpr.NewActivation(sc)
			act.Reset(r, nil)
			return act.EvalValue(prg, typ)
		}
	}
	return m, nil
}

// initLanguage reads a migration's language: cel (the default, also
// generic) or python.
func (l *loader) initLanguage(n *yamlnode.Node, what string) (string, error) {
	if n == nil {
		return "cel", nil
	}
	lang, err := l.str(n, what+" language")
	if err != nil {
		return "", err
	}
	switch strings.ToLower(lang) {
	case "cel", "generic":
		return "cel", nil
	case "python":
		return "python", nil
	}
	return "", l.errf(n, "%s: language %q is not supported: an init is CEL (language: cel, the default) or Python (language: python)", what, lang)
}

// pythonInit compiles a Python init (language: python) over the Combine's
// output row as the stored accumulators give it, into a function safe for
// concurrent use (an evaluator per call, pooled) that returns the output's
// value, converted to its type as row.FromJSON converts (an int from a
// whole float, a float from an int), or nil for None.
func (l *loader) pythonInit(n *yamlnode.Node, agg *combine.Aggregator, idx int, what string) (func(*row.Row) (any, error), error) {
	prg, err := l.compilePyExpr(agg.Out, n, what)
	if err != nil {
		return nil, err
	}
	typ := agg.Ops[idx].Typ
	pool := sync.Pool{New: func() any { return prg.NewEval() }}
	return func(r *row.Row) (any, error) {
		e := pool.Get().(*python.Eval)
		defer pool.Put(e)
		v, err := e.Eval(r, what)
		if err != nil {
			return nil, err
		}
		out, err := row.FromJSON(v, typ)
		if err != nil {
			return nil, fmt.Errorf("%s: python: %w", what, err)
		}
		return out, nil
	}, nil
}

// lossyLeave reads an output's allow_lossy: a boolean, on an int sum,
// min, max or latest (whose value field may have been a float: the
// narrowing the leave allows) or a float latest (whose field may have
// been a string), and not beside an init (an appended output
// has no stored accumulator to convert).
func (l *loader) lossyLeave(n *yamlnode.Node, what string, op combine.Op, init *yamlnode.Node) (bool, error) {
	if n.Kind != yamlnode.Bool {
		return false, l.errf(n, "%s: allow_lossy must be true or false, not %q", what, n.Text)
	}
	allow := n.B
	switch {
	case init != nil && allow:
		return false, l.errf(n, "%s: allow_lossy converts the stored accumulator of an output the running version had; an output with init is appended now and has none: drop one of them", what)
	case !allow:
		return false, nil
	case op.Fn == combine.FnLatest && op.Typ.Kind == row.KindFloat:
		// A latest whose field was a string (its stored strings read
		// as the numbers they spell, null where they spell none).
	case op.Typ.Kind != row.KindInt || (op.Fn != combine.FnSum && op.Fn != combine.FnMin && op.Fn != combine.FnMax && op.Fn != combine.FnLatest):
		return false, l.errf(n, "%s: allow_lossy lets an int sum, min, max or latest read the float accumulators stored while its value field was a float (truncated toward zero), and an int or float latest read the strings stored while its field was a string; %q is %s of %s, which narrows nothing", what, op.Out, op.Fn, op.Typ)
	}
	return true, nil
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
