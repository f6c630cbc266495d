package combine

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
//	      merge: {total: max}       # optional: sum, max, min or combine
//
// Every key the running version kept moves to its new key (a new group_by
// field without an expression takes the old field of its name), and the
// accumulators of keys that land on one new key merge as the step's
// combine fns merge them (sums and counts add, min and max keep the
// extreme, a mean merges its sum and count, latest keeps the latest), in
// every open window: the re-keyed totals are what the new pipeline would
// have computed from the same input. A declared merge folds an output's
// values otherwise (KeyMigration.Merge, MergeRekeyed). The runner moves the keys
// (contract.Rekeyer) at the update in place, or when a restart or a
// --create-from-snapshot restores the earlier version's state; what the
// new version stores is marked (contract.RekeyMark), so a later restore tells the
// two apart. A key whose expression fails is a reject of the migration
// (reason rekey_failed), reported with the key.

// KeyMigration is a Combine's compiled re-key.
type KeyMigration struct {
	// From are the earlier version's key fields, in order.
	From []string
	// Src[i] is the index in from of new key field i, or -1 when expr[i]
	// computes it.
	Src  []int
	Expr []*celexpr.Program
	// Types are the new key fields' Types.
	Types []row.Type
	Names []string
	Scope *celexpr.Scope
	Old   *row.Schema
	// Mark is the contract.RekeyMark of the new key fields, layout what it
	// marks (KeyLayout).
	Mark   []byte
	Layout string
	// Merge holds, by output, how the accumulators of earlier keys that
	// land on one new key merge when the step declares it (migrations:
	// rekey: merge): MergeSum, MergeMax or MergeMin. An output not in it
	// merges as its combine fn merges (MergeAccumulators).
	Merge map[string]string
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

var _ contract.Rekeyer = (*Aggregator)(nil)

// RekeysState implements contract.Rekeyer.
func (a *Aggregator) RekeysState() bool { return a.KeyMigration != nil }

// CurrentKey implements contract.Rekeyer: kb carries this version's mark.
func (a *Aggregator) CurrentKey(kb []byte) bool {
	m := a.KeyMigration
	return m == nil || bytes.HasPrefix(kb, m.Mark)
}

// errRekeyNull is a new key field's expression that evaluated to null.
var errRekeyNull = errors.New("evaluated to null")

// Rekey implements contract.Rekeyer: it decodes the earlier key's values
// from enc (as many as from lists), computes the new key fields and
// appends their key encoding. The runner keeps this step's keys as their
// encodings: the new key is nil, and so is the earlier one unless the
// re-key failed (it is only reported then).
func (a *Aggregator) Rekey(dst, _ []byte, enc string) ([]byte, any, any, error) {
	m := a.KeyMigration
	sc, _ := m.scratch.Get().(*rekeyScratch)
	if sc == nil {
		sc = &rekeyScratch{r: row.New(m.Old), act: celexpr.NewActivation(m.Scope)}
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
	if len(vals) != len(m.From) {
		return dst, nil, slices.Clone(vals), fmt.Errorf("the stored key has %d values, the re-key reads %d (from: %s)", len(vals), len(m.From), strings.Join(m.From, ", "))
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
func (m *KeyMigration) newKey(vals, out []any) ([]any, error) {
	return m.newKeyWith(nil, vals, out)
}

// newKeyWith is newKey evaluating the expressions with sc's row and
// activation (made when sc is nil).
func (m *KeyMigration) newKeyWith(sc *rekeyScratch, vals, out []any) ([]any, error) {
	var act *celexpr.Activation
	for i := range m.Names {
		if j := m.Src[i]; j >= 0 {
			out = append(out, vals[j])
			continue
		}
		if act == nil {
			if sc == nil {
				sc = &rekeyScratch{r: row.New(m.Old), act: celexpr.NewActivation(m.Scope)}
			}
			copy(sc.r.Values, vals)
			act = &sc.act
			act.Reset(sc.r, nil)
		}
		v, err := act.EvalValue(m.Expr[i], m.Types[i])
		if err == nil && v == nil {
			err = errRekeyNull
		}
		if err != nil {
			return out, fmt.Errorf("the re-key expression of %s: %w", m.Names[i], err)
		}
		out = append(out, v)
	}
	return out, nil
}

// KeyLayout is one key field's part of a re-key's layout (what its
// contract.RekeyMark marks): JobEnv.PriorKeyLayouts is made of these.
func KeyLayout(name, typ string) string { return name + ":" + typ + ";" }

// MapValues computes the new key values of an earlier key whose values
// old were read from a table (int64, float64, string, []byte, bool; a bool
// may be an int64 and a float an int64, as SQLite returns them).
func (m *KeyMigration) MapValues(old []any) ([]any, error) {
	if len(old) != len(m.From) {
		return nil, fmt.Errorf("the key has %d values, the re-key reads %d (from: %s)", len(old), len(m.From), strings.Join(m.From, ", "))
	}
	vals := make([]any, len(old))
	for i, v := range old {
		t := m.Old.Fields[i].Type.Kind
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
			return nil, fmt.Errorf("the table's value %v (%T) of %s is not a %s", v, v, m.From[i], m.Old.Fields[i].Type)
		}
	}
	return m.newKey(vals, make([]any, 0, len(m.Names)))
}
