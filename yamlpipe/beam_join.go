package yamlpipe

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// ---- Join ----

// Beam YAML's Join (apache_beam.yaml.yaml_join) joins two or more named
// inputs on equalities of their fields, as SQL's SELECT ... FROM a JOIN b
// ON ... does, with the join type inner, left, right or outer (or {outer:
// [inputs]}) and the output fields chosen per input. As in Beam, the join
// happens within windows: rows meet when they have the same key and the
// same window, and a window's joined rows are emitted when its pane fires.
//
// weir joins all inputs on one shared key: every equality names every
// input (the equalities: col shorthand does). Beam's chains of joins on
// different keys per pair of inputs are refused with a message.
//
// Steps: each input is tagged into a union row ({tag, in0, in1, ...}), the
// tagged rows are flattened, an aggregation keyed by the join key collects
// each window's rows per input, and the pane's output is expanded into the
// joined rows.

// joinType is how one input of the SQL chain joins the rows before it.
type joinType string

const (
	joinInner joinType = "INNER"
	joinLeft  joinType = "LEFT"
	joinRight joinType = "RIGHT"
	joinFull  joinType = "FULL"
)

// joinAggregator groups the tagged rows of a window by join key.
type joinAggregator struct {
	ins []*row.Schema
	// keys[i] are the key fields of input i, in equality order.
	keys [][]int
	// types[i] is how input i joins the inputs before it (types[0] unused).
	types []joinType
	// pick maps each output field to (input, field).
	pick [][2]int
	out  *row.Schema
	// batch is the aggregation's output: the joined rows of a pane.
	batch *row.Schema
}

// joinAcc holds a window's rows of one key, per input.
type joinAcc struct{ rows [][]*rowT }

func (j *joinAggregator) tagged(v any) (int, *rowT) {
	u, ok := v.(*rowT)
	if !ok || len(u.Values) == 0 {
		return -1, nil
	}
	tag, _ := u.Values[0].(int64)
	if int(tag) < 0 || int(tag) >= len(j.ins) {
		return -1, nil
	}
	r, _ := u.Values[1+tag].(*rowT)
	return int(tag), r
}

// AppendKey implements contract.Keyer: the key values; a row with a null
// key matches nothing (as in SQL), so it is keyed by itself.
func (j *joinAggregator) AppendKey(dst []byte, v any) []byte {
	tag, r := j.tagged(v)
	if r == nil {
		return dst
	}
	for _, i := range j.keys[tag] {
		if r.Values[i] == nil {
			dst = append(dst, 0xff)
			dst = binary.AppendUvarint(dst, uint64(tag))
			return row.AppendJSON(dst, r)
		}
	}
	for _, i := range j.keys[tag] {
		dst = appendKeyValue(dst, r.Values[i])
	}
	return dst
}

// Key implements contract.Keyer.
func (j *joinAggregator) Key(v any) any { return string(j.AppendKey(nil, v)) }

// NewAccumulator implements contract.Aggregator.
func (j *joinAggregator) NewAccumulator() any { return &joinAcc{rows: make([][]*rowT, len(j.ins))} }

// AddInput implements contract.Aggregator.
func (j *joinAggregator) AddInput(acc any, e *contract.Element) any {
	a := acc.(*joinAcc)
	if tag, r := j.tagged(e.Value); r != nil {
		a.rows[tag] = append(a.rows[tag], r)
	}
	return a
}

// MergeAccumulators implements contract.Aggregator.
func (j *joinAggregator) MergeAccumulators(x, y any) any {
	a, b := x.(*joinAcc), y.(*joinAcc)
	for i := range a.rows {
		a.rows[i] = append(a.rows[i], b.rows[i]...)
	}
	return a
}

// Output implements contract.Aggregator: the joined rows of the key, as
// the SQL chain of joins gives them.
func (j *joinAggregator) Output(_ any, acc any, _ window.Window, _ window.PaneInfo) any {
	a := acc.(*joinAcc)
	// combos are tuples of one row (or nil) per input joined so far.
	var combos [][]*rowT
	for _, r := range a.rows[0] {
		combos = append(combos, []*rowT{r})
	}
	for i := 1; i < len(j.ins); i++ {
		rs := a.rows[i]
		var next [][]*rowT
		extend := func(c []*rowT, r *rowT) {
			n := make([]*rowT, i+1)
			copy(n, c)
			n[i] = r
			next = append(next, n)
		}
		switch {
		case len(combos) > 0 && len(rs) > 0:
			for _, c := range combos {
				for _, r := range rs {
					extend(c, r)
				}
			}
		case len(combos) > 0 && (j.types[i] == joinLeft || j.types[i] == joinFull):
			for _, c := range combos {
				extend(c, nil)
			}
		case len(rs) > 0 && (j.types[i] == joinRight || j.types[i] == joinFull):
			for _, r := range rs {
				extend(nil, r)
			}
		}
		combos = next
	}
	out := make([]any, 0, len(combos))
	for _, c := range combos {
		vals := make([]any, len(j.pick))
		for k, p := range j.pick {
			if r := c[p[0]]; r != nil {
				vals[k] = r.Values[p[1]]
			}
		}
		out = append(out, &rowT{Schema: j.out, Values: vals})
	}
	return &rowT{Schema: j.batch, Values: []any{out}}
}

var _ contract.StateCoder = (*joinAggregator)(nil)

// EncodeKey implements contract.StateCoder.
func (j *joinAggregator) EncodeKey(key any) ([]byte, error) {
	s, ok := key.(string)
	if !ok {
		return nil, fmt.Errorf("join key has type %T", key)
	}
	return []byte(s), nil
}

// DecodeKey implements contract.StateCoder.
func (j *joinAggregator) DecodeKey(b []byte) (any, error) { return string(b), nil }

// EncodeState implements contract.StateCoder: per input, its rows as JSON.
func (j *joinAggregator) EncodeState(_ string, v any) ([]byte, error) {
	a, ok := v.(*joinAcc)
	if !ok {
		return nil, fmt.Errorf("join accumulator has type %T", v)
	}
	var out []byte
	for _, rs := range a.rows {
		out = binary.AppendUvarint(out, uint64(len(rs)))
		for _, r := range rs {
			b := row.AppendJSON(nil, r)
			out = binary.AppendUvarint(out, uint64(len(b)))
			out = append(out, b...)
		}
	}
	return out, nil
}

// DecodeState implements contract.StateCoder.
func (j *joinAggregator) DecodeState(_ string, b []byte) (any, error) {
	a := j.NewAccumulator().(*joinAcc)
	for i := range a.rows {
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
			x, err := row.FromJSON(m, row.RowOf(j.ins[i]))
			if err != nil {
				return nil, fmt.Errorf("join state: %w", err)
			}
			a.rows[i] = append(a.rows[i], x.(*rowT))
			b = b[k+int(l):]
		}
	}
	return a, nil
}

// joinTagFn wraps a row of input tag into the union row.
type joinTagFn struct {
	tag   int64
	union *row.Schema
}

// Process implements contract.DoFn.
func (f *joinTagFn) Process(pc *contract.ProcessContext, e contract.Element) error {
	in, ok := row.AsRow(e.Value)
	if !ok {
		return notARow(e.Value)
	}
	vals := make([]any, len(f.union.Fields))
	vals[0], vals[1+f.tag] = f.tag, in
	e.Value = &rowT{Schema: f.union, Values: vals}
	pc.Emit(0, e)
	return nil
}

// joinEmitFn expands a pane's batch into the joined rows.
type joinEmitFn struct{}

// Process implements contract.DoFn.
func (joinEmitFn) Process(pc *contract.ProcessContext, e contract.Element) error {
	b, ok := e.Value.(*rowT)
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

func buildJoin(l *loader, t *transformSpec, ins []*coll) (*coll, error) {
	in := t.inputNode
	if in == nil || in.kind != kMap || len(in.keys) < 2 {
		at := in
		if at == nil {
			at = t.typNode
		}
		return nil, l.errf(at, "Join needs at least 2 named inputs (input: {a: TransformA, b: TransformB})")
	}
	aliases := make([]string, len(in.keys))
	index := map[string]int{}
	for i, k := range in.keys {
		aliases[i] = k.text
		index[k.text] = i
		if ins[i].isReject {
			return nil, l.errf(in.vals[i], "Join reads rows, not an error output")
		}
	}
	j := &joinAggregator{}
	for _, c := range ins {
		j.ins = append(j.ins, c.schema)
	}
	if err := l.joinEqualities(t, j, aliases, index); err != nil {
		return nil, err
	}
	if err := l.joinTypes(t, j, aliases, index); err != nil {
		return nil, err
	}
	if err := l.joinFields(t, j, aliases, index); err != nil {
		return nil, err
	}
	// The union row: the input's tag, then one nullable row field per input.
	ufields := []row.Field{{Name: "tag", Type: row.Of(row.KindInt)}}
	for i, s := range j.ins {
		ufields = append(ufields, row.Field{Name: "in" + strconv.Itoa(i), Type: row.RowOf(s)})
	}
	union, err := row.NewSchema(ufields...)
	if err != nil {
		return nil, l.wrapf(t.typNode, err, "Join")
	}
	var tagged []weir.PCollection[*rowT]
	for i, c := range ins {
		fn := &joinTagFn{tag: int64(i), union: union}
		tagged = append(tagged, parDo(l.root, t.name+"/tag-"+strconv.Itoa(i), c, fn, stepOpts(t, weir.WithCoder(union.Coder()))...))
	}
	flat := weir.Flatten(l.root, t.name+"/inputs", tagged, stepOpts(t, weir.WithCoder(union.Coder()))...)
	j.batch = row.MustSchema(row.Field{Name: "rows", Type: row.ListOf(row.RowOf(j.out))})
	var keyFields []graph.Field
	for _, ki := range j.keys[0] {
		keyFields = append(keyFields, graph.Field{Name: j.ins[0].Fields[ki].Name, Type: j.ins[0].Fields[ki].Type.String()})
	}
	keyCoder := graph.Coder{URN: "weir:yaml:join_key", Version: 1, Fields: keyFields}
	var stored []graph.Field
	for i, s := range j.ins {
		stored = append(stored, graph.Field{Name: aliases[i], Type: s.String()})
	}
	storedCoder := graph.Coder{URN: "weir:yaml:join_rows", Version: 1, Fields: stored}
	grouped := weir.Aggregate[*rowT, *rowT](l.root, t.name+"/group", flat, j, keyCoder, storedCoder, stepOpts(t, weir.WithCoder(j.batch.Coder()))...)
	res := parDo(l.root, t.name, rowsColl(j.batch, grouped), joinEmitFn{}, stepOpts(t, weir.WithCoder(j.out.Coder()))...)
	return rowsColl(j.out, res), nil
}

// joinEqualities reads equalities: a field name shared by all inputs, or a
// list of {alias: field, ...} naming every input.
func (l *loader) joinEqualities(t *transformSpec, j *joinAggregator, aliases []string, index map[string]int) error {
	en := t.config.get("equalities")
	if en == nil {
		return l.errf(t.typNode, "Join needs config.equalities (a field in every input, or a list of {input: field, ...})")
	}
	j.keys = make([][]int, len(aliases))
	field := func(i int, name string, at *node) error {
		fi := j.ins[i].Index(name)
		if fi < 0 {
			return l.errf(at, "equalities: %q is not a field of input %s (%s)", name, aliases[i], j.ins[i])
		}
		j.keys[i] = append(j.keys[i], fi)
		return nil
	}
	switch en.kind {
	case kString:
		for i := range aliases {
			if err := field(i, en.text, en); err != nil {
				return err
			}
		}
	case kSeq:
		if len(en.seq) == 0 {
			return l.errf(en, "equalities is empty")
		}
		for _, eq := range en.seq {
			if eq.kind != kMap || len(eq.keys) < 2 {
				return l.errf(eq, "each equality must map at least 2 inputs to fields ({%s: field, %s: field})", aliases[0], aliases[1])
			}
			seen := map[int]bool{}
			for k, kn := range eq.keys {
				i, ok := index[kn.text]
				if !ok {
					return l.errf(kn, "equalities: %q is not an input of the Join (inputs: %s)", kn.text, strings.Join(aliases, ", "))
				}
				name, err := l.str(eq.vals[k], "equality field")
				if err != nil {
					return err
				}
				if err := field(i, name, eq.vals[k]); err != nil {
					return err
				}
				seen[i] = true
			}
			if len(seen) != len(aliases) {
				return l.errf(eq, "this equality does not name every input: weir joins all inputs on one shared key, so each equality names each of %s (joins on different keys per pair of inputs are not supported; join two at a time)", strings.Join(aliases, ", "))
			}
		}
	default:
		return l.errf(en, "equalities must be a field name or a list of {input: field} mappings, not %s", en.kind)
	}
	for k := range j.keys[0] {
		t0 := j.ins[0].Fields[j.keys[0][k]].Type
		for i := 1; i < len(aliases); i++ {
			ti := j.ins[i].Fields[j.keys[i][k]].Type
			if !t0.Equal(ti) && t0.Kind != row.KindAny && ti.Kind != row.KindAny {
				return l.errf(en, "equalities: %s.%s is %s but %s.%s is %s; cast one in MapToFields first", aliases[0], j.ins[0].Fields[j.keys[0][k]].Name, t0, aliases[i], j.ins[i].Fields[j.keys[i][k]].Name, ti)
			}
		}
	}
	return nil
}

// joinTypes reads type: inner (default), left, right, outer or {outer:
// [inputs]}, into how each input joins those before it, as Beam's SQL.
func (l *loader) joinTypes(t *transformSpec, j *joinAggregator, aliases []string, index map[string]int) error {
	j.types = make([]joinType, len(aliases))
	tn := t.config.get("type")
	typ := "inner"
	var outer []string
	switch {
	case tn == nil:
	case tn.kind == kString:
		typ = tn.text
		switch typ {
		case "inner", "left", "right", "outer":
		default:
			return l.errf(tn, "Join type %q is not one of inner, left, right, outer (or {outer: [inputs]})", typ)
		}
	case tn.kind == kMap:
		if err := l.checkKeys(tn, "Join type", "outer"); err != nil {
			return err
		}
		names, nodes, err := l.strList(tn.get("outer"), "outer")
		if err != nil {
			return err
		}
		if len(names) == 0 {
			return l.errf(tn, "Join type {outer: [...]} needs a list of inputs")
		}
		for i, n := range names {
			if _, ok := index[n]; !ok {
				return l.errf(nodes[i], "Join type: %q is not an input of the Join (inputs: %s)", n, strings.Join(aliases, ", "))
			}
		}
		outer = names
	default:
		return l.errf(tn, "Join type must be a string or {outer: [inputs]}, not %s", tn.kind)
	}
	for i := 1; i < len(aliases); i++ {
		prev, cur := slices.Contains(outer, aliases[i-1]), slices.Contains(outer, aliases[i])
		switch {
		case prev && cur:
			j.types[i] = joinFull
		case prev:
			j.types[i] = joinLeft
		case cur:
			j.types[i] = joinRight
		case outer == nil:
			j.types[i] = map[string]joinType{"inner": joinInner, "left": joinLeft, "right": joinRight, "outer": joinFull}[typ]
		default:
			j.types[i] = joinInner
		}
	}
	return nil
}

// joinFields reads fields: per input a list of fields or {new: old}; an
// input not listed contributes all its fields, as SQL's input.*. A name
// given twice by * expansion gets a numeric suffix, as Calcite's does.
func (l *loader) joinFields(t *transformSpec, j *joinAggregator, aliases []string, index map[string]int) error {
	fn := t.config.get("fields")
	if fn != nil && fn.kind != kMap {
		return l.errf(fn, "Join fields must map inputs to a list of fields or {new_name: field}, not %s", fn.kind)
	}
	var fields []row.Field
	used := map[string]bool{}
	add := func(name string, i, fi int, at *node, explicit bool) error {
		if used[name] {
			if explicit {
				return l.errf(at, "Join fields: the field name %q is given more than once", name)
			}
			for n := 0; ; n++ {
				if c := name + strconv.Itoa(n); !used[c] {
					name = c
					break
				}
			}
		}
		used[name] = true
		ft := j.ins[i].Fields[fi].Type
		fields = append(fields, row.Field{Name: name, Type: ft})
		j.pick = append(j.pick, [2]int{i, fi})
		return nil
	}
	listed := map[int]bool{}
	if fn != nil {
		for k, kn := range fn.keys {
			i, ok := index[kn.text]
			if !ok {
				return l.errf(kn, "Join fields: %q is not an input of the Join (inputs: %s)", kn.text, strings.Join(aliases, ", "))
			}
			listed[i] = true
			v := fn.vals[k]
			lookup := func(name string, at *node) (int, error) {
				fi := j.ins[i].Index(name)
				if fi < 0 {
					return 0, l.errf(at, "Join fields: %q is not a field of input %s (%s)", name, kn.text, j.ins[i])
				}
				return fi, nil
			}
			switch v.kind {
			case kMap:
				for m, nk := range v.keys {
					old, err := l.str(v.vals[m], "field")
					if err != nil {
						return err
					}
					fi, err := lookup(old, v.vals[m])
					if err != nil {
						return err
					}
					if err := add(nk.text, i, fi, nk, true); err != nil {
						return err
					}
				}
			default:
				names, nodes, err := l.strList(v, "fields of "+kn.text)
				if err != nil {
					return err
				}
				for m, name := range names {
					fi, err := lookup(name, nodes[m])
					if err != nil {
						return err
					}
					if err := add(name, i, fi, nodes[m], true); err != nil {
						return err
					}
				}
			}
		}
	}
	for i := range aliases {
		if listed[i] {
			continue
		}
		for fi, f := range j.ins[i].Fields {
			if err := add(f.Name, i, fi, t.typNode, false); err != nil {
				return err
			}
		}
	}
	out, err := row.NewSchema(fields...)
	if err != nil {
		return l.wrapf(t.typNode, err, "Join fields")
	}
	if len(fields) == 0 {
		return l.errf(fn, "Join produces no fields")
	}
	j.out = out
	return nil
}
