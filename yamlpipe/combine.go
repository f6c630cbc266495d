package yamlpipe

import (
	"encoding/binary"
	"math"
	"strings"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// combineFn names a combine function.
type combineFn string

// Combine functions.
const (
	fnSum    combineFn = "sum"
	fnCount  combineFn = "count"
	fnMin    combineFn = "min"
	fnMax    combineFn = "max"
	fnMean   combineFn = "mean"
	fnLatest combineFn = "latest"
)

// combineOp is one output of a Combine: fn over the input field src.
type combineOp struct {
	out string
	fn  combineFn
	src int // -1: count without a value field
	typ row.Type
}

// aggregator is Combine's contract.Aggregator. Keys are the group_by fields,
// encoded canonically; the accumulator keeps the group's values and one
// slot per output.
type aggregator struct {
	group []int
	ops   []combineOp
	out   *row.Schema
}

// slot is the running state of one combine output.
type slot struct {
	i   int64
	f   float64
	n   int64
	v   any
	t   mtime.Time // event time of v, for latest
	set bool
}

// accumulator is the state of one key in one window.
type accumulator struct {
	group []any
	slots []slot
}

// Key-encoding tags: each group_by value is a tag byte and its bytes.
const (
	tagNull byte = iota
	tagInt
	tagFloat
	tagBool
	tagString
	tagTime
	tagOther
)

// AppendKey encodes the group_by values: per value a tag, then 8 bytes
// big-endian for ints, float bits and timestamps, one byte for bools, and a
// uvarint length and the bytes for strings (JSON text for other values).
func (a *aggregator) AppendKey(dst []byte, v any) []byte {
	r, ok := v.(*rowT)
	if !ok {
		r, _ = row.AsRow(v)
	}
	if r == nil {
		return dst
	}
	for _, i := range a.group {
		dst = appendKeyValue(dst, r.Values[i])
	}
	return dst
}

func appendKeyValue(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, tagNull)
	case int64:
		return binary.BigEndian.AppendUint64(append(dst, tagInt), uint64(x))
	case float64:
		return binary.BigEndian.AppendUint64(append(dst, tagFloat), math.Float64bits(x))
	case bool:
		if x {
			return append(dst, tagBool, 1)
		}
		return append(dst, tagBool, 0)
	case string:
		dst = binary.AppendUvarint(append(dst, tagString), uint64(len(x)))
		return append(dst, x...)
	case mtime.Time:
		return binary.BigEndian.AppendUint64(append(dst, tagTime), uint64(x))
	}
	b := row.AppendJSONValue(nil, v)
	dst = binary.AppendUvarint(append(dst, tagOther), uint64(len(b)))
	return append(dst, b...)
}

// Key returns the group's values (the accumulator keeps them too).
func (a *aggregator) Key(v any) any {
	r, _ := row.AsRow(v)
	if r == nil {
		return nil
	}
	k := make([]any, len(a.group))
	for j, i := range a.group {
		k[j] = r.Values[i]
	}
	return k
}

// NewAccumulator returns an empty accumulator.
func (a *aggregator) NewAccumulator() any {
	return &accumulator{slots: make([]slot, len(a.ops))}
}

// AddInput folds one row into acc.
func (a *aggregator) AddInput(acc any, e *contract.Element) any {
	ac := acc.(*accumulator)
	v := e.Value
	r, ok := v.(*rowT)
	if !ok {
		if r, ok = row.AsRow(v); !ok {
			return ac
		}
	}
	if ac.group == nil && len(a.group) > 0 {
		ac.group = make([]any, len(a.group))
		for j, i := range a.group {
			ac.group[j] = r.Values[i]
		}
	}
	for k := range a.ops {
		op := &a.ops[k]
		s := &ac.slots[k]
		if op.src < 0 {
			s.n++
			continue
		}
		x := r.Values[op.src]
		if x == nil {
			continue
		}
		addValue(op, s, x, e.Time)
	}
	return ac
}

func addValue(op *combineOp, s *slot, x any, t mtime.Time) {
	switch op.fn {
	case fnSum:
		switch y := x.(type) {
		case int64:
			s.i += y
		case float64:
			s.f += y
		}
		s.set = true
	case fnCount:
		s.n++
	case fnMean:
		switch y := x.(type) {
		case int64:
			s.f += float64(y)
		case float64:
			s.f += y
		}
		s.n++
	case fnMin, fnMax:
		if !s.set || (op.fn == fnMin && less(x, s.v)) || (op.fn == fnMax && less(s.v, x)) {
			s.v, s.set = x, true
		}
	case fnLatest:
		// The value with the latest event time wins; ties go to the later arrival.
		if !s.set || t >= s.t {
			s.v, s.t, s.set = x, t, true
		}
	}
}

// less orders two values of one field type.
func less(a, b any) bool {
	switch x := a.(type) {
	case int64:
		y, _ := b.(int64)
		return x < y
	case float64:
		y, _ := b.(float64)
		return x < y
	case string:
		y, _ := b.(string)
		return x < y
	case mtime.Time:
		y, _ := b.(mtime.Time)
		return x < y
	case bool:
		y, _ := b.(bool)
		return !x && y
	}
	return false
}

// MergeAccumulators folds b into a.
func (a *aggregator) MergeAccumulators(x, y any) any {
	ax, ay := x.(*accumulator), y.(*accumulator)
	if ax.group == nil {
		ax.group = ay.group
	}
	for k := range a.ops {
		op := &a.ops[k]
		s, o := &ax.slots[k], &ay.slots[k]
		switch op.fn {
		case fnSum:
			s.i += o.i
			s.f += o.f
			s.set = s.set || o.set
		case fnCount:
			s.n += o.n
		case fnMean:
			s.f += o.f
			s.n += o.n
		case fnMin, fnMax, fnLatest:
			if o.set {
				addValue(op, s, o.v, o.t)
			}
		}
	}
	return ax
}

// Output builds the pane's row: group values, outputs, window and pane.
func (a *aggregator) Output(_ any, acc any, w window.Window, p window.PaneInfo) any {
	ac := acc.(*accumulator)
	r := row.New(a.out)
	copy(r.Values, ac.group)
	j := len(a.group)
	for k := range a.ops {
		op, s := &a.ops[k], &ac.slots[k]
		var v any
		switch op.fn {
		case fnSum:
			if op.typ.Kind == row.KindFloat {
				v = s.f
			} else {
				v = s.i
			}
		case fnCount:
			v = s.n
		case fnMean:
			if s.n > 0 {
				v = s.f / float64(s.n)
			}
		default:
			if s.set {
				v = s.v
			}
		}
		r.Values[j] = v
		j++
	}
	if !w.IsGlobal() {
		r.Values[j], r.Values[j+1] = w.Start, w.End
	}
	r.Values[j+2] = row.PaneRow(p)
	return r
}

// Reserved output fields of Combine.
const (
	fieldWindowStart = "window_start"
	fieldWindowEnd   = "window_end"
	fieldPane        = "pane"
)

// accumulatorURN names the identity of Combine's stored accumulator.
const accumulatorURN = "weir:yaml:combine_accumulator"

func buildCombine(l *loader, t *transformSpec, ins []*coll) (*coll, error) {
	in := ins[0]
	groups, groupNodes, err := l.strList(t.config.get("group_by"), "group_by")
	if err != nil {
		return nil, err
	}
	agg := &aggregator{}
	var keyFields, outFields []row.Field
	seen := map[string]bool{fieldWindowStart: true, fieldWindowEnd: true, fieldPane: true}
	for i, g := range groups {
		idx := in.schema.Index(g)
		if idx < 0 {
			return nil, l.errf(groupNodes[i], "group_by: %q is not a field of the input (%s)", g, in.schema)
		}
		if seen[g] {
			return nil, l.errf(groupNodes[i], "group_by: %q is listed twice or is a reserved output name", g)
		}
		seen[g] = true
		agg.group = append(agg.group, idx)
		keyFields = append(keyFields, in.schema.Fields[idx])
	}
	outFields = append(outFields, keyFields...)
	cn := t.config.get("combine")
	if cn == nil || cn.kind != kMap || len(cn.keys) == 0 {
		at := cn
		if at == nil {
			at = t.typNode
		}
		return nil, l.errf(at, "Combine needs config.combine (out: {value: field, fn: sum|count|min|max|mean|latest}, or field: fn)")
	}
	var stored []graph.Field
	for i, k := range cn.keys {
		out, v := k.text, cn.vals[i]
		if seen[out] {
			return nil, l.errf(k, "combine output %q clashes with a group_by field or a reserved name (window_start, window_end, pane)", out)
		}
		seen[out] = true
		value, fnName := out, ""
		var fnNode, valueNode *node
		switch v.kind {
		case kString:
			fnName, fnNode, valueNode = v.text, v, k
		case kMap:
			if err := l.checkKeys(v, "a combine output", "value", "fn"); err != nil {
				return nil, err
			}
			var err error
			if fnName, fnNode, err = l.requireStr(v, "fn", "combine output "+out); err != nil {
				return nil, err
			}
			if vn := v.get("value"); vn != nil {
				if value, err = l.str(vn, "value"); err != nil {
					return nil, err
				}
				valueNode = vn
			} else {
				value, valueNode = "", nil
			}
		default:
			return nil, l.errf(v, "combine output %q must be a function name or {value, fn}, not %s", out, v.kind)
		}
		op := combineOp{out: out, fn: combineFn(strings.ToLower(fnName)), src: -1}
		switch op.fn {
		case fnSum, fnCount, fnMin, fnMax, fnMean, fnLatest:
		default:
			return nil, l.errf(fnNode, "unknown combine fn %q (want sum, count, min, max, mean or latest)", fnName)
		}
		var vt row.Type
		if value != "" {
			op.src = in.schema.Index(value)
			if op.src < 0 && !(op.fn == fnCount && v.kind == kString) {
				at := valueNode
				if at == nil {
					at = k
				}
				return nil, l.errf(at, "combine %q: %q is not a field of the input (%s)", out, value, in.schema)
			}
			if op.src >= 0 {
				vt = in.schema.Fields[op.src].Type
			}
		} else if op.fn != fnCount {
			return nil, l.errf(v, "combine %q: %s needs a value field", out, op.fn)
		}
		switch op.fn {
		case fnSum, fnMean:
			if !vt.IsNumeric() {
				return nil, l.errf(fnNode, "combine %q: %s needs a numeric field; %q is %s (cast it in MapToFields, e.g. int(x))", out, op.fn, value, vt)
			}
			op.typ = vt
			if op.fn == fnMean {
				op.typ = row.Of(row.KindFloat)
			}
		case fnCount:
			op.typ = row.Of(row.KindInt)
		case fnMin, fnMax:
			switch vt.Kind {
			case row.KindInt, row.KindFloat, row.KindString, row.KindTimestamp, row.KindBool:
			default:
				return nil, l.errf(fnNode, "combine %q: %s needs an ordered field (int, float, string, timestamp, bool); %q is %s", out, op.fn, value, vt)
			}
			op.typ = vt
		case fnLatest:
			op.typ = vt
		}
		agg.ops = append(agg.ops, op)
		outFields = append(outFields, row.Field{Name: out, Type: op.typ})
		// The accumulator's identity is positional: the fn and the type of
		// its value field, never the output's name or unrelated fields.
		valueType := "none"
		if op.src >= 0 {
			valueType = vt.String()
		}
		stored = append(stored, graph.Field{Name: string(op.fn), Type: valueType})
	}
	outFields = append(outFields,
		row.Field{Name: fieldWindowStart, Type: row.Of(row.KindTimestamp)},
		row.Field{Name: fieldWindowEnd, Type: row.Of(row.KindTimestamp)},
		row.Field{Name: fieldPane, Type: row.RowOf(row.PaneSchema())},
	)
	out, err := row.NewSchema(outFields...)
	if err != nil {
		return nil, l.wrapf(cn, err, "bad combine outputs")
	}
	agg.out = out
	keyCoder := row.FieldsCoder(keyFields)
	storedCoder := graph.Coder{URN: accumulatorURN, Version: 1, Fields: stored}
	opts := stepOpts(t, weir.WithCoder(out.Coder()))
	var res weir.PCollection[*rowT]
	if in.isReject {
		res = weir.Aggregate[contract.Reject, *rowT](l.root, t.name, in.rejects, agg, keyCoder, storedCoder, opts...)
	} else {
		res = weir.Aggregate[*rowT, *rowT](l.root, t.name, in.rows, agg, keyCoder, storedCoder, opts...)
	}
	return rowsColl(out, res), nil
}
