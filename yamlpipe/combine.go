package yamlpipe

import (
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
	"github.com/weir-dev/weir/yamlpipe/keyenc"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
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
	// Beam's built-in combine fns (apache_beam.yaml.yaml_combine).
	fnAll    combineFn = "all"
	fnAny    combineFn = "any"
	fnGroup  combineFn = "group"
	fnConcat combineFn = "concat"
	// fnTop is Beam's TopCombineFn: the n largest values, largest first
	// (smallest first with reverse).
	fnTop combineFn = "top"
)

// topCombineFn is the fn type Beam YAML pipelines name for top-N.
const topCombineFn = "apache_beam.transforms.combiners.TopCombineFn"

// combineOp is one output of a Combine: fn over the input field src.
type combineOp struct {
	out string
	fn  combineFn
	src int // -1: count without a value field
	typ row.Type
	// n and reverse configure fnTop.
	n       int
	reverse bool
}

// aggregator is Combine's contract.Aggregator. Keys are the group_by fields,
// encoded canonically; the accumulator keeps the group's values and one
// slot per output.
type aggregator struct {
	step  string
	group []int
	ops   []combineOp
	out   *row.Schema
	// keysFromEncoding: every group_by field is a scalar (int, float,
	// bool, string, timestamp), whose key encoding decodes to the value
	// itself, so the runner keeps only keys' encodings and accumulators
	// keep no copy of the group values (combine_state.go).
	keysFromEncoding bool
	// accs hands out the step's accumulators.
	accs accSlab
	// beam makes rows of exactly the group_by fields and the aggregates
	// (Beam's shape, for a Combine with a language); otherwise
	// window_start, window_end and pane follow.
	beam bool
	// migrate holds the step's declared state migrations (migrate.go);
	// nil without.
	migrate *combineMigrations
	// rekey is the step's declared re-key (rekey.go); nil without.
	rekey *rekeyMigration
}

// AppendKey encodes the group_by values, each as keyenc.Append writes it.
func (a *aggregator) AppendKey(dst []byte, v any) []byte {
	r, ok := v.(*rowT)
	if !ok {
		r, _ = row.AsRow(v)
	}
	if r == nil {
		return dst
	}
	for _, i := range a.group {
		dst = keyenc.Append(dst, r.Values[i])
	}
	return dst
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
	return newAccumulator(&a.accs, len(a.ops))
}

// AddInput folds one row into acc. The runner calls AddInputErr instead
// (the aggregator is a contract.RejectingAggregator), so that an element
// that would overflow an integer sum becomes a reject; here it is only
// left out.
func (a *aggregator) AddInput(acc any, e *contract.Element) any {
	out, _ := a.AddInputErr(acc, e)
	return out
}

// reasonOverflow is the reject reason of an element that would overflow an
// integer sum.
const reasonOverflow = "overflow"

// AddInputErr folds one row into acc, or returns an element error (reason
// overflow) and leaves acc unchanged when the row would overflow an int64
// sum.
func (a *aggregator) AddInputErr(acc any, e *contract.Element) (any, error) {
	ac := a.conform(acc.(*accumulator))
	v := e.Value
	r, ok := v.(*rowT)
	if !ok {
		if r, ok = row.AsRow(v); !ok {
			return ac, nil
		}
	}
	// Check first, so that a rejected element changes no output.
	for k := range a.ops {
		op := &a.ops[k]
		if op.fn != fnSum || op.src < 0 {
			continue
		}
		if y, ok := r.Values[op.src].(int64); ok {
			if _, over := addInt(ac.slots[k].i, y); over {
				return ac, &contract.ElementError{Reason: reasonOverflow,
					Message: fmt.Sprintf("combine %s: the int64 sum overflows (%d + %d)", op.out, ac.slots[k].i, y)}
			}
		}
	}
	if ac.group == nil && len(a.group) > 0 && !a.keysFromEncoding {
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
			switch op.fn {
			case fnAll, fnAny, fnGroup:
				// As in Python: None is falsy and is listed.
			default:
				continue
			}
		}
		addValue(op, s, x, e.Time)
	}
	return ac, nil
}

// addInt adds with overflow detection.
func addInt(a, b int64) (int64, bool) {
	c := a + b
	return c, (b > 0 && c < a) || (b < 0 && c > a)
}

func addValue(op *combineOp, s *slot, x any, t mtime.Time) {
	switch op.fn {
	case fnSum:
		switch y := x.(type) {
		case int64:
			if c, over := addInt(s.i, y); !over {
				s.i = c
			}
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
		if !s.set || (op.fn == fnMin && less(x, s.v())) || (op.fn == fnMax && less(s.v(), x)) {
			s.setV(x)
			s.set = true
		}
	case fnLatest:
		// The value with the latest event time wins; ties go to the later arrival.
		if !s.set || t >= s.t() {
			s.setVT(x, t)
			s.set = true
		}
	case fnAll, fnAny:
		// s.n counts the truthy values; s.i counts all values.
		if truthy(x) {
			s.n++
		}
		s.i++
	case fnGroup:
		l, _ := s.v().([]any)
		s.setV(append(l, x))
		s.set = true
	case fnConcat:
		l, _ := s.v().([]any)
		if xs, ok := x.([]any); ok {
			l = append(l, xs...)
		}
		s.setV(l)
		s.set = true
	case fnTop:
		s.setV(topInsert(op, s.v(), x))
		s.set = true
	}
}

// truthy is Python's truth value of a row value.
func truthy(x any) bool {
	switch y := x.(type) {
	case nil:
		return false
	case bool:
		return y
	case int64:
		return y != 0
	case float64:
		return y != 0
	case string:
		return y != ""
	case []any:
		return len(y) > 0
	}
	return true
}

// topInsert adds x to the top-n list l, which stays ordered: largest first,
// or smallest first with reverse.
func topInsert(op *combineOp, l any, x any) []any {
	list, _ := l.([]any)
	before := func(a, b any) bool {
		if op.reverse {
			return less(a, b)
		}
		return less(b, a)
	}
	i := len(list)
	for i > 0 && before(x, list[i-1]) {
		i--
	}
	if i >= op.n {
		return list
	}
	list = append(list, nil)
	copy(list[i+1:], list[i:])
	list[i] = x
	if len(list) > op.n {
		list = list[:op.n]
	}
	return list
}

// less orders two values of one field type.
func less(a, b any) bool {
	switch x := a.(type) {
	case int64:
		if y, ok := b.(float64); ok {
			return float64(x) < y // stored before its field widened to float
		}
		y, _ := b.(int64)
		return x < y
	case float64:
		if y, ok := b.(int64); ok {
			return x < float64(y)
		}
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
	ax, ay := a.conform(x.(*accumulator)), a.conform(y.(*accumulator))
	if ax.group == nil {
		ax.group = ay.group
	}
	for k := range a.ops {
		op := &a.ops[k]
		s, o := &ax.slots[k], &ay.slots[k]
		switch op.fn {
		case fnSum:
			if c, over := addInt(s.i, o.i); !over {
				s.i = c
			} else {
				slog.Default().Warn("combine merge overflows int64: the merged sum keeps its previous value", "step", a.step, "output", op.out)
			}
			s.f += o.f
			s.set = s.set || o.set
		case fnCount:
			s.n += o.n
		case fnMean, fnAll, fnAny:
			s.f += o.f
			s.n += o.n
			s.i += o.i
		case fnMin, fnMax, fnLatest:
			if o.set {
				addValue(op, s, o.v(), o.t())
			}
		case fnGroup, fnConcat:
			if o.set {
				l, _ := s.v().([]any)
				ol, _ := o.v().([]any)
				s.setV(append(l, ol...))
				s.set = true
			}
		case fnTop:
			ol, _ := o.v().([]any)
			for _, v := range ol {
				s.setV(topInsert(op, s.v(), v))
				s.set = true
			}
		}
	}
	return ax
}

// Output builds the pane's row: group values, outputs and, unless the step
// has Beam's shape, window and pane.
func (a *aggregator) Output(key any, acc any, w window.Window, p window.PaneInfo) any {
	ac := a.conform(acc.(*accumulator))
	r := row.New(a.out)
	if vals, ok := key.([]any); ok && len(vals) == len(a.group) {
		copy(r.Values, vals)
	} else {
		copy(r.Values, ac.group)
	}
	j := len(a.group)
	for k := range a.ops {
		r.Values[j] = slotValue(&a.ops[k], &ac.slots[k])
		j++
	}
	if a.beam {
		return r
	}
	if !w.IsGlobal() {
		r.Values[j], r.Values[j+1] = w.Start, w.End
	}
	r.Values[j+2] = row.PaneRow(p)
	return r
}

// slotValue is output op's value from its accumulator slot s.
func slotValue(op *combineOp, s *slot) any {
	var v any
	switch op.fn {
	case fnSum:
		if op.typ.Kind == row.KindFloat {
			// s.i is 0 unless the sum was an int sum before an update
			// widened its value field to float (compat's
			// COMBINE_OUTPUT_WIDENED): the stored int total carries on.
			v = s.f + float64(s.i)
		} else {
			// s.f is 0 unless the sum was a float sum before an update
			// narrowed its value field to int (allow_lossy, compat's
			// COMBINE_OUTPUT_NARROWED): the stored float total carries
			// on, truncated toward zero.
			v = s.i
			if s.f != 0 {
				v = s.i + truncInt(s.f)
			}
		}
	case fnCount:
		v = s.n
	case fnMean:
		if s.n > 0 {
			v = s.f / float64(s.n)
		}
	case fnAll:
		v = s.n == s.i
	case fnAny:
		v = s.n > 0
	case fnGroup, fnConcat, fnTop:
		l, _ := s.v().([]any)
		if l == nil {
			l = []any{}
		}
		v = append([]any(nil), l...)
	default:
		if s.set {
			v = s.v()
			if i, ok := v.(int64); ok && op.typ.Kind == row.KindFloat {
				v = float64(i) // a min or max stored before its field widened
			}
			if f, ok := v.(float64); ok && op.typ.Kind == row.KindInt {
				v = truncInt(f) // stored before its field narrowed (allow_lossy)
			}
		}
	}
	return v
}

// truncInt is f truncated toward zero, clamped to int64's range (NaN
// reads 0): the lossy conversion allow_lossy declares.
func truncInt(f float64) int64 {
	switch {
	case f != f:
		return 0
	case f >= math.MaxInt64:
		return math.MaxInt64
	case f <= math.MinInt64:
		return math.MinInt64
	}
	return int64(f)
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
	lang, beamShape, err := l.combineLanguage(t)
	if err != nil {
		return nil, err
	}
	// A Combine written for Beam (with language) has Beam's rows in every
	// windowing: the window and pane are element metadata only (as they are
	// of every element), which ExtractWindowingInfo, CEL's window_start,
	// window_end and pane, and WriteToSql's window and pane columns read.
	// weir's Combine (no language) keeps them as columns too (docs/ARCHITECTURE.md, "Contracts").
	groups, groupNodes, err := l.strList(t.config.Get("group_by"), "group_by")
	if err != nil {
		return nil, err
	}
	agg := &aggregator{step: t.name, beam: beamShape}
	var keyFields, outFields []row.Field
	seen := map[string]bool{}
	if !beamShape {
		seen = map[string]bool{fieldWindowStart: true, fieldWindowEnd: true, fieldPane: true}
	}
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
	agg.keysFromEncoding = scalarFields(keyFields)
	outFields = append(outFields, keyFields...)
	cn := t.config.Get("combine")
	if cn == nil || cn.Kind != yamlnode.Map || len(cn.Keys) == 0 {
		at := cn
		if at == nil {
			at = t.typNode
		}
		return nil, l.errf(at, "Combine needs config.combine (out: {value: field, fn: sum|count|min|max|mean|latest|all|any|group|concat}, or field: fn)")
	}
	var stored []graph.Field
	for i, k := range cn.Keys {
		out, v := k.Text, cn.Vals[i]
		if seen[out] {
			return nil, l.errf(k, "combine output %q clashes with a group_by field or a reserved name (window_start, window_end, pane)", out)
		}
		seen[out] = true
		cs, err := l.parseCombineSpec(k, v)
		if err != nil {
			return nil, err
		}
		fn, reverse, ok := combineFnOf(cs.fnName)
		if !ok {
			return nil, l.errf(cs.fnNode, "unknown combine fn %q (want %s)", cs.fnName, combineFnNames)
		}
		op := combineOp{out: out, fn: fn, src: -1, reverse: reverse}
		if fn == fnTop {
			if err := l.topConfig(&op, cs); err != nil {
				return nil, err
			}
		} else if cs.configNode != nil {
			return nil, l.errf(cs.configNode, "combine %q: %s takes no config", out, cs.fnName)
		}
		value, valueNode := cs.value, cs.valueNode
		if value == "" && fn != fnCount && in.schema.Index(out) >= 0 {
			// Beam: without value, the output aggregates the field of its name.
			value, valueNode = out, k
		}
		var vt row.Type
		// Beam's count counts elements, whatever their value.
		countRows := fn == fnCount && (beamShape || (v.Kind == yamlnode.String && in.schema.Index(value) < 0))
		if value != "" && !countRows {
			op.src = in.schema.Index(value)
			if op.src < 0 {
				at := valueNode
				if at == nil {
					at = k
				}
				hint := ""
				if lang == "python" || lang == "javascript" {
					hint = "; expressions in value are not supported yet: compute the field in MapToFields (CEL) first"
				}
				return nil, l.errf(at, "combine %q: %q is not a field of the input (%s)%s", out, value, in.schema, hint)
			}
			vt = in.schema.Fields[op.src].Type
		} else if fn != fnCount {
			return nil, l.errf(v, "combine %q: %s needs a value field", out, fn)
		}
		switch fn {
		case fnSum, fnMean:
			if !vt.IsNumeric() {
				return nil, l.errf(cs.fnNode, "combine %q: %s needs a numeric field; %q is %s (cast it in MapToFields, e.g. int(x))", out, fn, value, vt)
			}
			op.typ = vt
			if fn == fnMean {
				op.typ = row.Of(row.KindFloat)
			}
		case fnCount:
			op.typ = row.Of(row.KindInt)
		case fnMin, fnMax, fnTop:
			switch vt.Kind {
			case row.KindInt, row.KindFloat, row.KindString, row.KindTimestamp, row.KindBool:
			default:
				return nil, l.errf(cs.fnNode, "combine %q: %s needs an ordered field (int, float, string, timestamp, bool); %q is %s", out, cs.fnName, value, vt)
			}
			op.typ = vt
			if fn == fnTop {
				op.typ = row.ListOf(vt)
			}
		case fnAll, fnAny:
			op.typ = row.Of(row.KindBool)
		case fnGroup:
			op.typ = row.ListOf(vt)
		case fnConcat:
			if vt.Kind != row.KindList {
				return nil, l.errf(cs.fnNode, "combine %q: concat needs a list field; %q is %s (group collects scalar values)", out, value, vt)
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
		name := string(op.fn)
		if fn == fnTop {
			name = fmt.Sprintf("top(%d,reverse=%t)", op.n, op.reverse)
		}
		stored = append(stored, graph.Field{Name: name, Type: valueType})
	}
	if !beamShape {
		outFields = append(outFields,
			row.Field{Name: fieldWindowStart, Type: row.Of(row.KindTimestamp)},
			row.Field{Name: fieldWindowEnd, Type: row.Of(row.KindTimestamp)},
			row.Field{Name: fieldPane, Type: row.RowOf(row.PaneSchema())},
		)
	}
	out, err := row.NewSchema(outFields...)
	if err != nil {
		return nil, l.wrapf(cn, err, "bad combine outputs")
	}
	agg.out = out
	if agg.migrate, err = l.parseCombineMigrations(t, agg); err != nil {
		return nil, err
	}
	if agg.rekey, err = l.parseRekey(t, in.schema, keyFields); err != nil {
		return nil, err
	}
	keyCoder := row.FieldsCoder(keyFields)
	storedCoder := graph.Coder{URN: accumulatorURN, Version: 1, Fields: stored}
	opts := stepOpts(t, append([]weir.StepOption{weir.WithCoder(out.Coder())}, errorOpt(t)...)...)
	var renamed map[string]string
	var lossy map[string]bool
	if m := agg.migrate; m != nil {
		renamed, lossy = m.renamed, m.lossy
	}
	if len(renamed) > 0 || len(lossy) > 0 || agg.rekey != nil {
		// The declared renames, lossy conversions and re-key go in the
		// step's recorded config, where the compatibility check reads
		// them (compat.RenamedOutputs, compat.LossyOutputs,
		// compat.RekeyedFrom).
		opts = append(opts, weir.WithConfig(combineConfigWithMigrations(t, renamed, lossy, agg.rekey)))
	}
	var res weir.PCollection[*rowT]
	if in.isReject {
		res = weir.Aggregate[contract.Reject, *rowT](l.root, t.name, in.rejects, agg, keyCoder, storedCoder, opts...)
	} else {
		res = weir.Aggregate[*rowT, *rowT](l.root, t.name, in.rows, agg, keyCoder, storedCoder, opts...)
	}
	l.registerErrors(t, res)
	c := rowsColl(out, res)
	c.renamed = renamed
	c.keyStep = t.name
	if agg.rekey != nil {
		c.rekey = &combineRekey{step: t.name, m: agg.rekey, merges: map[string]string{}}
		for _, op := range agg.ops {
			switch op.fn {
			case fnSum, fnCount:
				c.rekey.merges[op.out] = "sum"
			case fnMin:
				c.rekey.merges[op.out] = "min"
			case fnMax:
				c.rekey.merges[op.out] = "max"
			}
		}
	}
	return c, nil
}

// combineRekey is a Combine's declared re-key as a WriteToSql fed by it
// sees it: the migration, and how each output merges (sum, min, max).
type combineRekey struct {
	step   string
	m      *rekeyMigration
	merges map[string]string
}

// combineConfigWithMigrations is t's recorded config with the outputs
// renamed in place, as {"renamed_outputs": {NEW: OLD}}, those allowed a
// lossy conversion, as {"lossy_outputs": [NAME...]} (sorted), and the
// earlier key fields of a re-key, as {"rekeyed_from": [FIELD...]}.
func combineConfigWithMigrations(t *transformSpec, renamed map[string]string, lossy map[string]bool, rk *rekeyMigration) any {
	cfg, _ := t.config.Plain().(map[string]any)
	if cfg == nil {
		cfg = map[string]any{}
	}
	if len(t.hints) > 0 {
		cfg[resourceHintsKey] = t.hints
	}
	if len(renamed) > 0 {
		r := make(map[string]any, len(renamed))
		for k, v := range renamed {
			r[k] = v
		}
		cfg[renamedOutputsKey] = r
	}
	if len(lossy) > 0 {
		names := make([]any, 0, len(lossy))
		for _, k := range slices.Sorted(maps.Keys(lossy)) {
			names = append(names, k)
		}
		cfg[lossyOutputsKey] = names
	}
	if rk != nil {
		from := make([]any, len(rk.from))
		for i, f := range rk.from {
			from[i] = f
		}
		cfg[rekeyedFromKey] = from
	}
	return cfg
}

// rekeyedFromKey is the key of a Combine's recorded step config that
// lists the earlier key fields of its declared re-key.
const rekeyedFromKey = "rekeyed_from"

// lossyOutputsKey is the key of a Combine's recorded step config that
// lists the outputs declared allow_lossy.
const lossyOutputsKey = "lossy_outputs"

// renamedOutputsKey is the key of a Combine's recorded step config (its
// graph FnRef's config) that maps each output renamed in place to its old
// name (migrations: renamed_from).
const renamedOutputsKey = "renamed_outputs"

// scalarFields reports whether every field is an int, float, bool, string
// or timestamp: values whose key encoding decodes to the value itself.
func scalarFields(fs []row.Field) bool {
	for _, f := range fs {
		switch f.Type.Kind {
		case row.KindInt, row.KindFloat, row.KindBool, row.KindString, row.KindTimestamp:
		default:
			return false
		}
	}
	return true
}
