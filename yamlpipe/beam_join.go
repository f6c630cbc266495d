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
// Each equality maps two or more inputs to a field of each; the joined
// rows are those of SQL's a JOIN b ON a.f = b.g JOIN c ON ..., the inputs
// taken in the order given (an input that no equality links to the inputs
// before it waits until one does), every pair of inputs an equality names
// being one condition. When every equality names every input (the
// `equalities: field` shorthand does) the inputs share one key and rows are
// grouped by it; otherwise (different keys per pair of inputs) a window's
// rows are grouped together and joined by hash lookups per condition.
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
	// keys[i] are the key fields of input i, in equality order, when all
	// inputs share one key (shared); otherwise rows are keyed by window only.
	keys   [][]int
	shared bool
	// order is the order inputs are joined in; conds[k] are the conditions
	// joining input order[k] to those before it; types[k] is how it joins
	// them (types[0], conds[0] unused).
	order []int
	conds [][]joinCond
	types []joinType
	// pick maps each output field to (input, field).
	pick [][2]int
	out  *row.Schema
	// batch is the aggregation's output: the joined rows of a pane.
	batch *row.Schema
}

// joinCond is one condition of an ON clause: field prevField of input
// prev equals field field of the input being joined.
type joinCond struct{ prev, prevField, field int }

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
	if r == nil || !j.shared {
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
	j.conformAcc(a) // rows adopted from an execution of another row type
	n := len(j.ins)
	// combos are tuples of one row (or nil) per input, in input order.
	var combos [][]*rowT
	for _, r := range a.rows[j.order[0]] {
		c := make([]*rowT, n)
		c[j.order[0]] = r
		combos = append(combos, c)
	}
	for k := 1; k < len(j.order); k++ {
		in, conds, typ := j.order[k], j.conds[k], j.types[k]
		rs := a.rows[in]
		// index the rows of this input by their condition fields.
		index := map[string][]int{}
		for ri, r := range rs {
			if key, ok := joinCondKey(r, conds); ok {
				index[key] = append(index[key], ri)
			}
		}
		matched := make([]bool, len(rs))
		var next [][]*rowT
		extend := func(c []*rowT, r *rowT) {
			x := make([]*rowT, n)
			copy(x, c)
			x[in] = r
			next = append(next, x)
		}
		for _, c := range combos {
			hit := false
			if key, ok := joinComboKey(c, conds); ok {
				for _, ri := range index[key] {
					extend(c, rs[ri])
					matched[ri], hit = true, true
				}
			}
			if !hit && (typ == joinLeft || typ == joinFull) {
				extend(c, nil)
			}
		}
		if typ == joinRight || typ == joinFull {
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

// joinCondKey encodes the condition fields of r, the row being joined; a
// null field matches nothing, as in SQL.
func joinCondKey(r *rowT, conds []joinCond) (string, bool) {
	var b []byte
	for _, c := range conds {
		v := r.Values[c.field]
		if v == nil {
			return "", false
		}
		b = appendKeyValue(b, v)
	}
	return string(b), true
}

// joinComboKey encodes the fields of the inputs joined so far that conds
// compare; false when one is missing (an outer join's null side) or null.
func joinComboKey(c []*rowT, conds []joinCond) (string, bool) {
	var b []byte
	for _, cd := range conds {
		r := c[cd.prev]
		if r == nil || r.Values[cd.prevField] == nil {
			return "", false
		}
		b = appendKeyValue(b, r.Values[cd.prevField])
	}
	return string(b), true
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
	j.conformAcc(a) // stored rows have the input's schema (beam_join_migrate.go)
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

// DecodeState implements contract.StateCoder. Rows are read by field name
// into the input's schema, so rows stored with fields the input no longer
// has are read without them (beam_join_migrate.go).
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
	keyCoder := graph.Coder{URN: "weir:yaml:join_window", Version: 1}
	if j.shared {
		for _, ki := range j.keys[0] {
			keyFields = append(keyFields, graph.Field{Name: j.ins[0].Fields[ki].Name, Type: j.ins[0].Fields[ki].Type.String()})
		}
		keyCoder = graph.Coder{URN: "weir:yaml:join_key", Version: 1, Fields: keyFields}
	}
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
// list of {alias: field, ...}, each naming two or more inputs, as Beam's;
// different pairs of inputs may join on different fields.
func (l *loader) joinEqualities(t *transformSpec, j *joinAggregator, aliases []string, index map[string]int) error {
	en := t.config.get("equalities")
	if en == nil {
		return l.errf(t.typNode, "Join needs config.equalities (a field in every input, or a list of {input: field, ...})")
	}
	type equality struct {
		ins    []int // inputs, in the order the equality names them
		fields map[int]int
		at     *node
	}
	var eqs []equality
	field := func(eq *equality, i int, name string, at *node) error {
		fi := j.ins[i].Index(name)
		if fi < 0 {
			return l.errf(at, "equalities: %q is not a field of input %s (%s)", name, aliases[i], j.ins[i])
		}
		if _, dup := eq.fields[i]; !dup {
			eq.ins = append(eq.ins, i)
		}
		eq.fields[i] = fi
		return nil
	}
	switch en.kind {
	case kString:
		eq := equality{fields: map[int]int{}, at: en}
		for i := range aliases {
			if err := field(&eq, i, en.text, en); err != nil {
				return err
			}
		}
		eqs = append(eqs, eq)
	case kSeq:
		if len(en.seq) == 0 {
			return l.errf(en, "equalities is empty")
		}
		for _, en := range en.seq {
			if en.kind != kMap || len(en.keys) < 2 {
				return l.errf(en, "each equality must map at least 2 inputs to fields ({%s: field, %s: field})", aliases[0], aliases[1])
			}
			eq := equality{fields: map[int]int{}, at: en}
			for k, kn := range en.keys {
				i, ok := index[kn.text]
				if !ok {
					return l.errf(kn, "equalities: %q is not an input of the Join (inputs: %s)", kn.text, strings.Join(aliases, ", "))
				}
				name, err := l.str(en.vals[k], "equality field")
				if err != nil {
					return err
				}
				if err := field(&eq, i, name, en.vals[k]); err != nil {
					return err
				}
			}
			eqs = append(eqs, eq)
		}
	default:
		return l.errf(en, "equalities must be a field name or a list of {input: field} mappings, not %s", en.kind)
	}
	// The fields an equality compares have one type.
	for _, eq := range eqs {
		a := eq.ins[0]
		ta := j.ins[a].Fields[eq.fields[a]].Type
		for _, b := range eq.ins[1:] {
			tb := j.ins[b].Fields[eq.fields[b]].Type
			if !ta.Equal(tb) && ta.Kind != row.KindAny && tb.Kind != row.KindAny {
				return l.errf(eq.at, "equalities: %s.%s is %s but %s.%s is %s; cast one in MapToFields first", aliases[a], j.ins[a].Fields[eq.fields[a]].Name, ta, aliases[b], j.ins[b].Fields[eq.fields[b]].Name, tb)
			}
		}
	}
	// One shared key when every equality names every input.
	j.shared = true
	for _, eq := range eqs {
		if len(eq.ins) != len(aliases) {
			j.shared = false
		}
	}
	j.keys = make([][]int, len(aliases))
	if j.shared {
		for _, eq := range eqs {
			for i := range aliases {
				j.keys[i] = append(j.keys[i], eq.fields[i])
			}
		}
	}
	// The join order: the inputs as given, each after one it is linked to.
	joined := map[int]bool{0: true}
	j.order, j.conds = []int{0}, [][]joinCond{nil}
	for len(j.order) < len(aliases) {
		next := -1
		var conds []joinCond
		for i := range aliases {
			if joined[i] {
				continue
			}
			conds = nil
			for _, eq := range eqs {
				fi, ok := eq.fields[i]
				if !ok {
					continue
				}
				for _, p := range eq.ins {
					if joined[p] {
						conds = append(conds, joinCond{prev: p, prevField: eq.fields[p], field: fi})
					}
				}
			}
			if len(conds) > 0 {
				next = i
				break
			}
		}
		if next < 0 {
			var loose []string
			for i := range aliases {
				if !joined[i] {
					loose = append(loose, aliases[i])
				}
			}
			return l.errf(en, "equalities do not link input(s) %s to %s: every input must be joined to another by an equality", strings.Join(loose, ", "), aliases[0])
		}
		joined[next] = true
		j.order = append(j.order, next)
		j.conds = append(j.conds, conds)
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
	for k := 1; k < len(j.order); k++ {
		prev, cur := slices.Contains(outer, aliases[j.order[k-1]]), slices.Contains(outer, aliases[j.order[k]])
		switch {
		case prev && cur:
			j.types[k] = joinFull
		case prev:
			j.types[k] = joinLeft
		case cur:
			j.types[k] = joinRight
		case outer == nil:
			j.types[k] = map[string]joinType{"inner": joinInner, "left": joinLeft, "right": joinRight, "outer": joinFull}[typ]
		default:
			j.types[k] = joinInner
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
