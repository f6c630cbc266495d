package yamlpipe

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/yamlpipe/celexpr"
	"github.com/weir-dev/weir/yamlpipe/keyenc"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// A re-key migration (weir's extension; docs/JOBS.md, "Migrate state"):
// a Combine whose group_by changed declares the running version's key
// fields and, for a new key field that is not one of them, how to compute
// it from them:
//
//	- type: Combine
//	  name: Totals
//	  config:
//	    group_by: [region]          # was [region, store]
//	    combine: {total: {value: amount, fn: sum}}
//	  migrations:
//	    rekey:
//	      from: [region, store]
//	      key: {region: "region"}   # optional: a CEL expression per new field
//
// Every key the running version kept moves to its new key (a new group_by
// field without an expression takes the old field of its name), and the
// accumulators of keys that land on one new key merge as the step's
// combine fns merge them (sums and counts add, min and max keep the
// extreme, a mean merges its sum and count, latest keeps the latest), in
// every open window: the re-keyed totals are what the new pipeline would
// have computed from the same input. The runner moves the keys
// (contract.Rekeyer) at the update in place, or when a restart or a
// --create-from-snapshot restores the earlier version's state; what the
// new version stores is marked (contract.RekeyMark), so a later restore tells the
// two apart. A key whose expression fails is a reject of the migration
// (reason rekey_failed), reported with the key.

// rekeyMigration is a Combine's compiled re-key.
type rekeyMigration struct {
	// from are the earlier version's key fields, in order.
	from []string
	// src[i] is the index in from of new key field i, or -1 when expr[i]
	// computes it.
	src  []int
	expr []*celexpr.Program
	// types are the new key fields' types.
	types []row.Type
	names []string
	scope *celexpr.Scope
	old   *row.Schema
	// mark is the contract.RekeyMark of the new key fields, layout what it
	// marks (KeyLayout).
	mark   []byte
	layout string
	// failed counts the keys whose re-key failed.
	failed atomic.Int64
	// scratch recycles Rekey's buffers (a *rekeyScratch): the runner
	// re-keys a million keys from several goroutines at once.
	scratch sync.Pool
}

// rekeyScratch is what one Rekey call needs besides its result: the
// earlier key's values, the row and the activation an expression reads.
type rekeyScratch struct {
	vals []any
	out  []any
	r    *row.Row
	act  celexpr.Activation
}

// parseRekey compiles t's migrations: rekey, for a Combine over input
// schema in whose key fields are keyFields; nil without one.
func (l *loader) parseRekey(t *transformSpec, in *row.Schema, keyFields []row.Field) (*rekeyMigration, error) {
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
	if !scalarFields(keyFields) {
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
	if !scalarFields(oldFields) {
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
	m := &rekeyMigration{from: from, old: old, scope: sc,
		src: make([]int, len(keyFields)), expr: make([]*celexpr.Program, len(keyFields))}
	for i, f := range keyFields {
		m.names = append(m.names, f.Name)
		m.types = append(m.types, f.Type)
		m.src[i] = old.Index(f.Name)
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
				return nil, l.errf(k, "%s: key names %q, which is not a group_by field of the Combine (%s)", what, k.Text, strings.Join(m.names, ", "))
			}
			prg, _, err := l.compileExpr(sc, kn.Vals[i], fmt.Sprintf("%s key %s", what, k.Text))
			if err != nil {
				return nil, err
			}
			m.expr[j], m.src[j] = prg, -1
		}
	}
	if sameNames(from, keyFields) && !slices.ContainsFunc(m.expr, func(p *celexpr.Program) bool { return p != nil }) {
		return nil, l.errf(fn, "%s: from lists the step's group_by fields as they are and key computes none: the key does not change; drop the rekey migration", what)
	}
	for i, name := range m.names {
		if m.src[i] < 0 && m.expr[i] == nil {
			return nil, l.errf(rn, "%s: the new group_by field %q is not one of from (%s): give it an expression, key: {%s: EXPR}", what, name, strings.Join(from, ", "), name)
		}
	}
	var layout strings.Builder
	for _, f := range keyFields {
		layout.WriteString(KeyLayout(f.Name, f.Type.String()))
	}
	m.layout = layout.String()
	m.mark = contract.RekeyMark(m.layout)
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

var _ contract.Rekeyer = (*aggregator)(nil)

// RekeysState implements contract.Rekeyer.
func (a *aggregator) RekeysState() bool { return a.rekey != nil }

// CurrentKey implements contract.Rekeyer: kb carries this version's mark.
func (a *aggregator) CurrentKey(kb []byte) bool {
	m := a.rekey
	return m == nil || bytes.HasPrefix(kb, m.mark)
}

// errRekeyNull is a new key field's expression that evaluated to null.
var errRekeyNull = errors.New("evaluated to null")

// Rekey implements contract.Rekeyer: it decodes the earlier key's values
// from enc (as many as from lists), computes the new key fields and
// appends their key encoding. The runner keeps this step's keys as their
// encodings: the new key is nil, and so is the earlier one unless the
// re-key failed (it is only reported then).
func (a *aggregator) Rekey(dst, _ []byte, enc string) ([]byte, any, any, error) {
	m := a.rekey
	sc, _ := m.scratch.Get().(*rekeyScratch)
	if sc == nil {
		sc = &rekeyScratch{r: row.New(m.old), act: celexpr.NewActivation(m.scope)}
	}
	defer m.scratch.Put(sc)
	vals := sc.vals[:0]
	rest := enc
	for rest != "" {
		v, r, err := keyenc.ReadString(rest)
		if err != nil {
			return dst, nil, slices.Clone(vals), fmt.Errorf("decoding the stored key: %w", err)
		}
		vals, rest = append(vals, v), r
	}
	sc.vals = vals
	if len(vals) != len(m.from) {
		return dst, nil, slices.Clone(vals), fmt.Errorf("the stored key has %d values, the re-key reads %d (from: %s)", len(vals), len(m.from), strings.Join(m.from, ", "))
	}
	nv, err := m.newKeyWith(sc, vals, sc.out[:0])
	clear(sc.r.Values) // the scratch holds no key's values between calls
	if err != nil {
		m.failed.Add(1) // the runner logs and reports the key
		return dst, nil, slices.Clone(vals), err
	}
	for _, v := range nv {
		dst = keyenc.Append(dst, v)
	}
	clear(nv)
	clear(vals)
	sc.out = nv[:0]
	return dst, nil, nil, nil
}

// newKey appends to out the new key's values (in the order of the new
// group_by fields) of the earlier key whose values, in from's order, are
// vals.
func (m *rekeyMigration) newKey(vals, out []any) ([]any, error) {
	return m.newKeyWith(nil, vals, out)
}

// newKeyWith is newKey evaluating the expressions with sc's row and
// activation (made when sc is nil).
func (m *rekeyMigration) newKeyWith(sc *rekeyScratch, vals, out []any) ([]any, error) {
	var act *celexpr.Activation
	for i := range m.names {
		if j := m.src[i]; j >= 0 {
			out = append(out, vals[j])
			continue
		}
		if act == nil {
			if sc == nil {
				sc = &rekeyScratch{r: row.New(m.old), act: celexpr.NewActivation(m.scope)}
			}
			copy(sc.r.Values, vals)
			act = &sc.act
			act.Reset(sc.r, nil)
		}
		v, err := act.EvalValue(m.expr[i], m.types[i])
		if err == nil && v == nil {
			err = errRekeyNull
		}
		if err != nil {
			return out, fmt.Errorf("the re-key expression of %s: %w", m.names[i], err)
		}
		out = append(out, v)
	}
	return out, nil
}

// KeyLayout is one key field's part of a re-key's layout (what its
// contract.RekeyMark marks): JobEnv.PriorKeyLayouts is made of these.
func KeyLayout(name, typ string) string { return name + ":" + typ + ";" }

// mapValues computes the new key values of an earlier key whose values
// old were read from a table (int64, float64, string, []byte, bool; a bool
// may be an int64 and a float an int64, as SQLite returns them).
func (m *rekeyMigration) mapValues(old []any) ([]any, error) {
	if len(old) != len(m.from) {
		return nil, fmt.Errorf("the key has %d values, the re-key reads %d (from: %s)", len(old), len(m.from), strings.Join(m.from, ", "))
	}
	vals := make([]any, len(old))
	for i, v := range old {
		t := m.old.Fields[i].Type.Kind
		switch x := v.(type) {
		case int64:
			switch t {
			case row.KindInt:
				vals[i] = x
			case row.KindFloat:
				vals[i] = float64(x)
			case row.KindBool:
				vals[i] = x != 0
			}
		case float64:
			if t == row.KindFloat {
				vals[i] = x
			}
		case string:
			if t == row.KindString {
				vals[i] = x
			}
		case []byte:
			if t == row.KindString {
				vals[i] = string(x)
			}
		case bool:
			if t == row.KindBool {
				vals[i] = x
			}
		}
		if vals[i] == nil {
			return nil, fmt.Errorf("the table's value %v (%T) of %s is not a %s", v, v, m.from[i], m.old.Fields[i].Type)
		}
	}
	return m.newKey(vals, make([]any, 0, len(m.names)))
}
