package yamlpipe

import (
	"fmt"
	"slices"
	"strings"

	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/yamlpipe/celexpr"
	"github.com/weir-dev/weir/yamlpipe/combine"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// parseRekey compiles t's migrations: rekey, for a Combine over input
// schema in whose key fields are keyFields and whose outputs are ops;
// nil without one.
func (l *loader) parseRekey(t *transformSpec, in *row.Schema, keyFields []row.Field, ops []combine.Op) (*combine.KeyMigration, error) {
	mn := t.migrations
	if mn == nil || mn.Kind != yamlnode.Map {
		return nil, nil
	}
	rn := mn.Get("rekey")
	if rn == nil {
		return nil, nil
	}
	const what = "migrations: rekey"
	if rn.Kind != yamlnode.Map {
		return nil, l.errf(rn, "%s must be a mapping {from: [OLD_FIELD...], key: {NEW_FIELD: EXPR}, merge: ...}, not %s", what, rn.Kind)
	}
	if err := l.checkKeys(rn, what, "from", "key", "merge"); err != nil {
		return nil, err
	}
	fn := rn.Get("from")
	if fn == nil {
		return nil, l.errf(rn, "%s needs from: [FIELD...], the group_by fields of the running version", what)
	}
	from, fromNodes, err := l.strList(fn, what+" from")
	if err != nil {
		return nil, err
	}
	if len(from) == 0 {
		return nil, l.errf(fn, "%s: from lists no field: give the running version's group_by fields", what)
	}
	if !combine.ScalarFields(keyFields) {
		return nil, l.errf(rn, "%s: a re-key needs scalar group_by fields (int, float, bool, string, timestamp)", what)
	}
	var oldFields []row.Field
	seen := map[string]bool{}
	for i, f := range from {
		if seen[f] {
			return nil, l.errf(fromNodes[i], "%s: from lists %q twice", what, f)
		}
		seen[f] = true
		idx := in.Index(f)
		if idx < 0 {
			return nil, l.errf(fromNodes[i], "%s: from names %q, which is not a field of the Combine's input (%s): the earlier key's fields are read with the input's types", what, f, in)
		}
		oldFields = append(oldFields, in.Fields[idx])
	}
	if !combine.ScalarFields(oldFields) {
		return nil, l.errf(fn, "%s: the earlier key's fields must be scalars (int, float, bool, string, timestamp)", what)
	}
	old, err := row.NewSchema(oldFields...)
	if err != nil {
		return nil, l.wrapf(fn, err, what)
	}
	sc, err := celexpr.NewScope(old, nil, nil)
	if err != nil {
		return nil, l.wrapf(rn, err, what)
	}
	m := &combine.KeyMigration{From: from, Old: old, Scope: sc,
		Src: make([]int, len(keyFields)), Expr: make([]*celexpr.Program, len(keyFields))}
	for i, f := range keyFields {
		m.Names = append(m.Names, f.Name)
		m.Types = append(m.Types, f.Type)
		m.Src[i] = old.Index(f.Name)
	}
	if kn := rn.Get("key"); kn != nil {
		if kn.Kind != yamlnode.Map {
			return nil, l.errf(kn, "%s: key must map new group_by fields to CEL expressions over the earlier key's fields, not %s", what, kn.Kind)
		}
		for i, k := range kn.Keys {
			j := -1
			for x, f := range keyFields {
				if f.Name == k.Text {
					j = x
				}
			}
			if j < 0 {
				return nil, l.errf(k, "%s: key names %q, which is not a group_by field of the Combine (%s)", what, k.Text, strings.Join(m.Names, ", "))
			}
			prg, _, err := l.compileExpr(sc, kn.Vals[i], fmt.Sprintf("%s key %s", what, k.Text))
			if err != nil {
				return nil, err
			}
			m.Expr[j], m.Src[j] = prg, -1
		}
	}
	if sameNames(from, keyFields) && !slices.ContainsFunc(m.Expr, func(p *celexpr.Program) bool { return p != nil }) {
		return nil, l.errf(fn, "%s: from lists the step's group_by fields as they are and key computes none: the key does not change; drop the rekey migration", what)
	}
	for i, name := range m.Names {
		if m.Src[i] < 0 && m.Expr[i] == nil {
			return nil, l.errf(rn, "%s: the new group_by field %q is not one of from (%s): give it an expression, key: {%s: EXPR}", what, name, strings.Join(from, ", "), name)
		}
	}
	if m.Merge, err = l.parseRekeyMerge(rn.Get("merge"), what, ops); err != nil {
		return nil, err
	}
	var layout strings.Builder
	for _, f := range keyFields {
		layout.WriteString(KeyLayout(f.Name, f.Type.String()))
	}
	m.Layout = layout.String()
	m.Mark = contract.RekeyMark(m.Layout)
	return m, nil
}

// rekeyMerges names the merges a re-key may declare (rekey: merge).
const rekeyMerges = "sum, max, min or combine"

// parseRekeyMerge reads a re-key's merge: how the accumulators of earlier
// keys that land on one new key merge, for every output (merge: FN) or
// per output (merge: {OUTPUT: FN}), FN one of sum, max, min (of the
// outputs' values: a sum's total, a count, a min's, max's or latest's
// value) or combine (as the output's combine fn merges, the default).
// It returns the outputs merged otherwise than by their combine fn.
func (l *loader) parseRekeyMerge(n *yamlnode.Node, what string, ops []combine.Op) (map[string]string, error) {
	if n == nil {
		return nil, nil
	}
	out := map[string]string{}
	set := func(op combine.Op, fn *yamlnode.Node) error {
		if fn.Kind != yamlnode.String {
			return l.errf(fn, "%s: merge of output %s must be %s, not %s", what, op.Out, rekeyMerges, fn.Kind)
		}
		m := fn.Text
		switch m {
		case "combine":
			return nil
		case combine.MergeSum, combine.MergeMax, combine.MergeMin:
		default:
			return l.errf(fn, "%s: merge %q is not one of %s", what, m, rekeyMerges)
		}
		switch op.Fn {
		case combine.FnSum, combine.FnCount:
		case combine.FnMin, combine.FnMax, combine.FnLatest:
			if m == combine.MergeSum && !op.Typ.IsNumeric() {
				return l.errf(fn, "%s: merge sum adds the values of output %s, which is %s of %s, not a number: merge it by max, min or combine", what, op.Out, op.Fn, op.Typ)
			}
		default:
			return l.errf(fn, "%s: output %s is %s, whose accumulator merges only as its combine fn merges it: drop its merge or make it combine", what, op.Out, op.Fn)
		}
		if combine.OwnMerge(op.Fn, m) {
			return nil
		}
		out[op.Out] = m
		return nil
	}
	switch n.Kind {
	case yamlnode.String:
		switch n.Text {
		case "combine":
			return nil, nil
		case combine.MergeSum, combine.MergeMax, combine.MergeMin:
		default:
			return nil, l.errf(n, "%s: merge %q is not one of %s", what, n.Text, rekeyMerges)
		}
		for _, op := range ops {
			switch op.Fn {
			case combine.FnSum, combine.FnCount, combine.FnMin, combine.FnMax, combine.FnLatest:
			default:
				return nil, l.errf(n, "%s: merge %s applies to every output, but output %s is %s, whose accumulator merges only as its combine fn merges it: give merge per output, merge: {OUTPUT: FN}", what, n.Text, op.Out, op.Fn)
			}
			if err := set(op, n); err != nil {
				return nil, err
			}
		}
	case yamlnode.Map:
		for i, k := range n.Keys {
			j := slices.IndexFunc(ops, func(op combine.Op) bool { return op.Out == k.Text })
			if j < 0 {
				names := make([]string, len(ops))
				for x, op := range ops {
					names[x] = op.Out
				}
				return nil, l.errf(k, "%s: merge names %q, which is not an output of the Combine (%s)", what, k.Text, strings.Join(names, ", "))
			}
			if err := set(ops[j], n.Vals[i]); err != nil {
				return nil, err
			}
		}
	default:
		return nil, l.errf(n, "%s: merge must be %s for every output, or a mapping {OUTPUT: FN}, not %s", what, rekeyMerges, n.Kind)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// sameNames reports whether names are exactly fs's names, in order.
func sameNames(names []string, fs []row.Field) bool {
	if len(names) != len(fs) {
		return false
	}
	for i, f := range fs {
		if f.Name != names[i] {
			return false
		}
	}
	return true
}

// KeyLayout is one key field's part of a re-key's layout (what its
// contract.RekeyMark marks): JobEnv.PriorKeyLayouts is made of these.
func KeyLayout(name, typ string) string { return combine.KeyLayout(name, typ) }
