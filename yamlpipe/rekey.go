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
// schema in whose key fields are keyFields; nil without one.
func (l *loader) parseRekey(t *transformSpec, in *row.Schema, keyFields []row.Field) (*combine.KeyMigration, error) {
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
		return nil, l.errf(rn, "%s must be a mapping {from: [OLD_FIELD...], key: {NEW_FIELD: EXPR}}, not %s", what, rn.Kind)
	}
	if err := l.checkKeys(rn, what, "from", "key"); err != nil {
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
	var layout strings.Builder
	for _, f := range keyFields {
		layout.WriteString(KeyLayout(f.Name, f.Type.String()))
	}
	m.Layout = layout.String()
	m.Mark = contract.RekeyMark(m.Layout)
	return m, nil
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
