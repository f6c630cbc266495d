package yamlpipe

import (
	"strings"

	"github.com/weir-dev/weir/yamlpipe/combine"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// Combine's config as written: its language, and each output's combine
// fn in any of Beam's forms.

// combineLanguage reads Combine's language (Beam's key). A Combine that
// names a language is written for Beam: its rows have Beam's shape,
// exactly the group_by fields and the aggregates, in every windowing.
func (l *loader) combineLanguage(t *transformSpec) (lang string, beam bool, err error) {
	ln := t.config.Get("language")
	if ln == nil {
		return "", false, nil
	}
	if lang, err = l.str(ln, "language"); err != nil {
		return "", false, err
	}
	switch lang {
	case "generic", "python", "javascript", "cel":
		return lang, true, nil
	}
	return "", false, l.errf(ln, "Combine language %q is not supported (want generic, python, javascript or cel: the built-in combine fns and TopCombineFn over input fields)", lang)
}

// combineFnOf resolves a combine fn name: weir's and Beam's built-in names,
// Beam's TopCombineFn and the largest/smallest shorthands for it.
func combineFnOf(name string) (fn combine.Fn, reverse, ok bool) {
	switch name {
	case combine.TopCombineFn, "TopCombineFn", "largest":
		return combine.FnTop, false, true
	case "smallest":
		return combine.FnTop, true, true
	}
	fn = combine.Fn(strings.ToLower(name))
	switch fn {
	case combine.FnSum, combine.FnCount, combine.FnMin, combine.FnMax, combine.FnMean, combine.FnLatest, combine.FnAll, combine.FnAny, combine.FnGroup, combine.FnConcat:
		return fn, false, true
	}
	return "", false, false
}

// combineFnNames lists the accepted fn names, for messages.
const combineFnNames = "sum, count, min, max, mean, latest, all, any, group, concat, largest, smallest or " + combine.TopCombineFn

// combineSpec is one output of config.combine as written.
type combineSpec struct {
	out                string
	value              string // "" when not given
	valueNode          *yamlnode.Node
	fnName             string
	fnNode, configNode *yamlnode.Node
}

// parseCombineSpec reads one output in any of Beam's forms: `out: fn`,
// `out: {value: field, fn: fn}` and `out: {value: field, fn: {type: fn,
// config: {...}}}`; without value, Beam reads the field named out.
func (l *loader) parseCombineSpec(k, v *yamlnode.Node) (combineSpec, error) {
	cs := combineSpec{out: k.Text}
	switch v.Kind {
	case yamlnode.String:
		cs.fnName, cs.fnNode, cs.value, cs.valueNode = v.Text, v, k.Text, k
		return cs, nil
	case yamlnode.Map:
	default:
		return cs, l.errf(v, "combine output %q must be a function name or {value, fn}, not %s", cs.out, v.Kind)
	}
	if err := l.checkKeys(v, "a combine output", "value", "fn"); err != nil {
		return cs, err
	}
	fn := v.Get("fn")
	if fn == nil {
		return cs, l.errf(v, "combine output %s needs fn", cs.out)
	}
	switch fn.Kind {
	case yamlnode.Map:
		if err := l.checkKeys(fn, "a combine fn", "type", "config"); err != nil {
			return cs, err
		}
		var err error
		if cs.fnName, cs.fnNode, err = l.requireStr(fn, "type", "combine fn of "+cs.out); err != nil {
			return cs, err
		}
		if cn := fn.Get("config"); cn != nil && cn.Kind != yamlnode.Null {
			if cn.Kind != yamlnode.Map {
				return cs, l.errf(cn, "the config of a combine fn must be a mapping, not %s", cn.Kind)
			}
			cs.configNode = cn
		}
	default:
		var err error
		if cs.fnName, err = l.str(fn, "fn"); err != nil {
			return cs, err
		}
		cs.fnNode = fn
	}
	if vn := v.Get("value"); vn != nil {
		var err error
		if cs.value, err = l.str(vn, "value"); err != nil {
			return cs, err
		}
		cs.valueNode = vn
	}
	return cs, nil
}

// topConfig reads TopCombineFn's config: n (required) and reverse.
func (l *loader) topConfig(op *combine.Op, cs combineSpec) error {
	cn := cs.configNode
	if cn == nil {
		return l.errf(cs.fnNode, "combine %q: %s needs config: {n: N} (and optionally reverse: true)", cs.out, cs.fnName)
	}
	if err := l.checkKeys(cn, "the config of "+cs.fnName, "n", "reverse", "key"); err != nil {
		return err
	}
	if kn := cn.Get("key"); kn != nil {
		return l.errf(kn, "combine %q: TopCombineFn's key is a Python callable; weir orders the values themselves (drop key, or compute the value in MapToFields)", cs.out)
	}
	n, err := l.integer(cn.Get("n"), "n")
	if err != nil {
		return err
	}
	if n < 1 || n > 1<<16 {
		at := cn.Get("n")
		if at == nil {
			at = cn
		}
		return l.errf(at, "combine %q: n must be between 1 and %d", cs.out, 1<<16)
	}
	op.N = int(n)
	if rn := cn.Get("reverse"); rn != nil {
		rev, err := l.boolean(rn, "reverse")
		if err != nil {
			return err
		}
		op.Reverse = op.Reverse != rev
	}
	return nil
}
