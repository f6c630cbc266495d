package join

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// Type is how one input of the SQL chain joins the rows before it.
type Type string

const (
	Inner Type = "INNER"
	Left  Type = "LEFT"
	Right Type = "RIGHT"
	Full  Type = "FULL"
)

// Aggregator groups the tagged rows of a window by join key.
type Aggregator struct {
	// Ins are the inputs' row schemas, in input order.
	Ins []*row.Schema
	// Keys[i] are the key fields of input i, in equality order, when all
	// inputs share one key (Shared); otherwise rows are keyed by window only.
	Keys   [][]int
	Shared bool
	// Order is the order inputs are joined in; Conds[k] are the conditions
	// joining input Order[k] to those before it; Types[k] is how it joins
	// them (Types[0], Conds[0] unused).
	Order []int
	Conds [][]Cond
	Types []Type
	// Pick maps each output field to (input, field).
	Pick [][2]int
	// Out is the joined rows' schema.
	Out *row.Schema
	// Batch is the aggregation's output: the joined rows of a pane.
	Batch *row.Schema
	// AppendKeyValue appends the key encoding of one value (Combine's:
	// keys and stored state keep their bytes).
	AppendKeyValue func(dst []byte, v any) []byte
}

// Cond is one condition of an ON clause: field PrevField of input
// Prev equals field Field of the input being joined.
type Cond struct{ Prev, PrevField, Field int }

// Acc holds a window's rows of one key, per input.
type Acc struct{ Rows [][]*row.Row }

func (j *Aggregator) tagged(v any) (int, *row.Row) {
	u, ok := v.(*row.Row)
	if !ok || len(u.Values) == 0 {
		return -1, nil
	}
	tag, _ := u.Values[0].(int64)
	if int(tag) < 0 || int(tag) >= len(j.Ins) {
		return -1, nil
	}
	r, _ := u.Values[1+tag].(*row.Row)
	return int(tag), r
}

// AppendKey implements contract.Keyer: the key values; a row with a null
// key matches nothing (as in SQL), so it is keyed by itself.
func (j *Aggregator) AppendKey(dst []byte, v any) []byte {
	tag, r := j.tagged(v)
	if r == nil || !j.Shared {
		return dst
	}
	for _, i := range j.Keys[tag] {
		if r.Values[i] == nil {
			dst = append(dst, 0xff)
			dst = binary.AppendUvarint(dst, uint64(tag))
			return row.AppendJSON(dst, r)
		}
	}
	for _, i := range j.Keys[tag] {
		dst = j.AppendKeyValue(dst, r.Values[i])
	}
	return dst
}

// Key implements contract.Keyer.
func (j *Aggregator) Key(v any) any { return string(j.AppendKey(nil, v)) }

// NewAccumulator implements contract.Aggregator.
func (j *Aggregator) NewAccumulator() any { return &Acc{Rows: make([][]*row.Row, len(j.Ins))} }

// AddInput implements contract.Aggregator.
func (j *Aggregator) AddInput(acc any, e *contract.Element) any {
	a := acc.(*Acc)
	if tag, r := j.tagged(e.Value); r != nil {
		a.Rows[tag] = append(a.Rows[tag], r)
	}
	return a
}

// MergeAccumulators implements contract.Aggregator.
func (j *Aggregator) MergeAccumulators(x, y any) any {
	a, b := x.(*Acc), y.(*Acc)
	for i := range a.Rows {
		a.Rows[i] = append(a.Rows[i], b.Rows[i]...)
	}
	return a
}

// Output implements contract.Aggregator: the joined rows of the key, as
// the SQL chain of joins gives them.
func (j *Aggregator) Output(_ any, acc any, _ window.Window, _ window.PaneInfo) any {
	a := acc.(*Acc)
	j.conformAcc(a) // rows adopted from an execution of another row type
	n := len(j.Ins)
	// combos are tuples of one row (or nil) per input, in input order.
	var combos [][]*row.Row
	for _, r := range a.Rows[j.Order[0]] {
		c := make([]*row.Row, n)
		c[j.Order[0]] = r
		combos = append(combos, c)
	}
	for k := 1; k < len(j.Order); k++ {
		in, conds, typ := j.Order[k], j.Conds[k], j.Types[k]
		rs := a.Rows[in]
		// index the rows of this input by their condition fields.
		index := map[string][]int{}
		for ri, r := range rs {
			if key, ok := j.condKey(r, conds); ok {
				index[key] = append(index[key], ri)
			}
		}
		matched := make([]bool, len(rs))
		var next [][]*row.Row
		extend := func(c []*row.Row, r *row.Row) {
			x := make([]*row.Row, n)
			copy(x, c)
			x[in] = r
			next = append(next, x)
		}
		for _, c := range combos {
			hit := false
			if key, ok := j.comboKey(c, conds); ok {
				for _, ri := range index[key] {
					extend(c, rs[ri])
					matched[ri], hit = true, true
				}
			}
			if !hit && (typ == Left || typ == Full) {
				extend(c, nil)
			}
		}
		if typ == Right || typ == Full {
			for ri, r := range rs {
				if !matched[ri] {
					extend(nil, r)
				}
			}
		}
		combos = next
	}
	out := make([]any, 0, len(combos))
	for _, c := range combos {
		vals := make([]any, len(j.Pick))
		for k, p := range j.Pick {
			if r := c[p[0]]; r != nil {
				vals[k] = r.Values[p[1]]
			}
		}
		out = append(out, &row.Row{Schema: j.Out, Values: vals})
	}
	return &row.Row{Schema: j.Batch, Values: []any{out}}
}

// condKey encodes the condition fields of r, the row being joined; a
// null field matches nothing, as in SQL.
func (j *Aggregator) condKey(r *row.Row, conds []Cond) (string, bool) {
	var b []byte
	for _, c := range conds {
		v := r.Values[c.Field]
		if v == nil {
			return "", false
		}
		b = j.AppendKeyValue(b, v)
	}
	return string(b), true
}

// comboKey encodes the fields of the inputs joined so far that conds
// compare; false when one is missing (an outer join's null side) or null.
func (j *Aggregator) comboKey(c []*row.Row, conds []Cond) (string, bool) {
	var b []byte
	for _, cd := range conds {
		r := c[cd.Prev]
		if r == nil || r.Values[cd.PrevField] == nil {
			return "", false
		}
		b = j.AppendKeyValue(b, r.Values[cd.PrevField])
	}
	return string(b), true
}

var _ contract.StateCoder = (*Aggregator)(nil)

// EncodeKey implements contract.StateCoder.
func (j *Aggregator) EncodeKey(key any) ([]byte, error) {
	s, ok := key.(string)
	if !ok {
		return nil, fmt.Errorf("join key has type %T", key)
	}
	return []byte(s), nil
}

// DecodeKey implements contract.StateCoder.
func (j *Aggregator) DecodeKey(b []byte) (any, error) { return string(b), nil }

// EncodeState implements contract.StateCoder: per input, its rows as JSON.
func (j *Aggregator) EncodeState(_ string, v any) ([]byte, error) {
	a, ok := v.(*Acc)
	if !ok {
		return nil, fmt.Errorf("join accumulator has type %T", v)
	}
	j.conformAcc(a) // stored rows have the input's schema (beam_join_migrate.go)
	var out []byte
	for _, rs := range a.Rows {
		out = binary.AppendUvarint(out, uint64(len(rs)))
		for _, r := range rs {
			b := row.AppendJSON(nil, r)
			out = binary.AppendUvarint(out, uint64(len(b)))
			out = append(out, b...)
		}
	}
	return out, nil
}

// DecodeState implements contract.StateCoder. Rows are read by field name
// into the input's schema, so rows stored with fields the input no longer
// has are read without them (beam_join_migrate.go).
func (j *Aggregator) DecodeState(_ string, b []byte) (any, error) {
	a := j.NewAccumulator().(*Acc)
	for i := range a.Rows {
		n, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, fmt.Errorf("corrupt join state")
		}
		b = b[k:]
		for ; n > 0; n-- {
			l, k := binary.Uvarint(b)
			if k <= 0 || uint64(len(b)-k) < l {
				return nil, fmt.Errorf("corrupt join state")
			}
			dec := json.NewDecoder(strings.NewReader(string(b[k : k+int(l)])))
			dec.UseNumber()
			var m map[string]any
			if err := dec.Decode(&m); err != nil {
				return nil, fmt.Errorf("corrupt join state: %w", err)
			}
			x, err := row.FromJSON(m, row.RowOf(j.Ins[i]))
			if err != nil {
				return nil, fmt.Errorf("join state: %w", err)
			}
			a.Rows[i] = append(a.Rows[i], x.(*row.Row))
			b = b[k+int(l):]
		}
	}
	return a, nil
}

// TagFn wraps a row of input tag into the union row.
type TagFn struct {
	// Tag is the input's index.
	Tag int64
	// Union is the union row's schema: the tag, then one row per input.
	Union *row.Schema
}

// Process implements contract.DoFn.
func (f *TagFn) Process(pc *contract.ProcessContext, e contract.Element) error {
	in, ok := row.AsRow(e.Value)
	if !ok {
		return notARow(e.Value)
	}
	vals := make([]any, len(f.Union.Fields))
	vals[0], vals[1+f.Tag] = f.Tag, in
	e.Value = &row.Row{Schema: f.Union, Values: vals}
	pc.Emit(0, e)
	return nil
}

// EmitFn expands a pane's batch into the joined rows.
type EmitFn struct{}

// Process implements contract.DoFn.
func (EmitFn) Process(pc *contract.ProcessContext, e contract.Element) error {
	b, ok := e.Value.(*row.Row)
	if !ok || len(b.Values) != 1 {
		return notARow(e.Value)
	}
	rs, _ := b.Values[0].([]any)
	for _, r := range rs {
		o := e
		o.Value = r
		pc.Emit(0, o)
	}
	return nil
}

// notARow is the error of an element that is no row.
func notARow(v any) error {
	return &contract.ElementError{Reason: "type_mismatch", Message: fmt.Sprintf("expected a row, got %T", v)}
}
