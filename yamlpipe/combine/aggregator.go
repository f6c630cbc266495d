package combine

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
	"github.com/weir-dev/weir/yamlpipe/keyenc"
)

// Fn names a combine function.
type Fn string

// Combine functions.
const (
	FnSum    Fn = "sum"
	FnCount  Fn = "count"
	FnMin    Fn = "min"
	FnMax    Fn = "max"
	FnMean   Fn = "mean"
	FnLatest Fn = "latest"
	// Beam's built-in combine fns (apache_beam.yaml.yaml_combine).
	FnAll    Fn = "all"
	FnAny    Fn = "any"
	FnGroup  Fn = "group"
	FnConcat Fn = "concat"
	// FnTop is Beam's TopCombineFn: the n largest values, largest first
	// (smallest first with reverse).
	FnTop Fn = "top"
)

// TopCombineFn is the fn type Beam YAML pipelines name for top-N.
const TopCombineFn = "apache_beam.transforms.combiners.TopCombineFn"

// Op is one output of a Combine: Fn over the input field Src.
type Op struct {
	Out string
	Fn  Fn
	Src int // -1: count without a value field
	Typ row.Type
	// N and Reverse configure FnTop.
	N       int
	Reverse bool
	// Retired marks the slot of an output an update removed from before
	// others the step still has: the slot stays, so that the outputs
	// after it keep their stored accumulators, but nothing is added to
	// it, merged into it or output from it.
	Retired bool
}

// Aggregator is Combine's contract.Aggregator. Keys are the group_by fields,
// encoded canonically; the accumulator keeps the group's values and one
// slot per output.
type Aggregator struct {
	Step  string
	Group []int
	Ops   []Op
	Out   *row.Schema
	// ScalarKeys: every group_by field is a scalar (int, float,
	// bool, string, timestamp), whose key encoding decodes to the value
	// itself, so the runner keeps only keys' encodings and accumulators
	// keep no copy of the group values (state.go).
	ScalarKeys bool
	// accs hands out the step's accumulators.
	accs accSlab
	// Beam makes rows of exactly the group_by fields and the aggregates
	// (Beam's shape, for a Combine with a language); otherwise
	// window_start, window_end and pane follow.
	Beam bool
	// Migrations holds the step's declared state migrations (migrate.go);
	// nil without.
	Migrations *Migrations
	// KeyMigration is the step's declared re-key (rekey.go); nil without.
	KeyMigration *KeyMigration
	// Pos maps each op (an accumulator slot) to its output field,
	// counted from the first field after the group_by fields, -1 for a
	// retired slot; nil when slot k is output k. Slots keep the order of
	// the version that first stored them (an update that reorders,
	// inserts or removes outputs keeps the stored slots where they were
	// and appends the new ones), while the output rows follow the
	// pipeline's declared order.
	Pos []int
}

// outPos returns the output field of op k (after the group_by fields),
// -1 for a retired slot.
func (a *Aggregator) outPos(k int) int {
	if a.Pos == nil {
		return k
	}
	return a.Pos[k]
}

// AppendKey encodes the group_by values, each as keyenc.Append writes it.
func (a *Aggregator) AppendKey(dst []byte, v any) []byte {
	r, ok := v.(*row.Row)
	if !ok {
		r, _ = row.AsRow(v)
	}
	if r == nil {
		return dst
	}
	for _, i := range a.Group {
		dst = keyenc.Append(dst, r.Values[i])
	}
	return dst
}

// Key returns the group's values (the accumulator keeps them too).
func (a *Aggregator) Key(v any) any {
	r, _ := row.AsRow(v)
	if r == nil {
		return nil
	}
	k := make([]any, len(a.Group))
	for j, i := range a.Group {
		k[j] = r.Values[i]
	}
	return k
}

// NewAccumulator returns an empty accumulator.
func (a *Aggregator) NewAccumulator() any {
	// A step whose keys are not scalars gives an accumulator its group
	// values with its first row: a *accumulator now, not a compact one
	// converted then.
	return a.accs.take(len(a.Ops), len(a.Group) > 0 && !a.ScalarKeys)
}

// AddInput folds one row into acc. The runner calls AddInputErr instead
// (the aggregator is a contract.RejectingAggregator), so that an element
// that would overflow an integer sum becomes a reject; here it is only
// left out.
func (a *Aggregator) AddInput(acc any, e *contract.Element) any {
	out, _ := a.AddInputErr(acc, e)
	return out
}

// reasonOverflow is the reject reason of an element that would overflow an
// integer sum.
const reasonOverflow = "overflow"

// AddInputErr folds one row into acc, or returns an element error (reason
// overflow) and leaves acc unchanged when the row would overflow an int64
// sum.
func (a *Aggregator) AddInputErr(acc any, e *contract.Element) (any, error) {
	ac, acc := a.conform(acc)
	v := e.Value
	r, ok := v.(*row.Row)
	if !ok {
		if r, ok = row.AsRow(v); !ok {
			return acc, nil
		}
	}
	// Check first, so that a rejected element changes no output.
	for k := range a.Ops {
		op := &a.Ops[k]
		if op.Fn != FnSum || op.Src < 0 || op.Retired {
			continue
		}
		if y, ok := r.Values[op.Src].(int64); ok {
			if _, over := addInt(ac.slots[k].i, y); over {
				return acc, &contract.ElementError{Reason: reasonOverflow,
					Message: fmt.Sprintf("combine %s: the int64 sum overflows (%d + %d)", op.Out, ac.slots[k].i, y)}
			}
		}
	}
	if ac.grp == nil && len(a.Group) > 0 && !a.ScalarKeys {
		g := make([]any, len(a.Group))
		for j, i := range a.Group {
			g[j] = r.Values[i]
		}
		ac.setGroup(g)
		acc = a.accs.wrap(acc, ac)
	}
	for k := range a.Ops {
		op := &a.Ops[k]
		if op.Retired {
			continue
		}
		s := &ac.slots[k]
		if op.Src < 0 {
			countElement(op.Fn, s)
			continue
		}
		x := r.Values[op.Src]
		if x == nil {
			switch op.Fn {
			case FnAll, FnAny, FnGroup:
				// As in Python: None is falsy and is listed.
			default:
				continue
			}
		}
		addValue(op, s, x, e.Time)
	}
	return acc, nil
}

// countElement folds an element into the slot s of an output of fn that
// has no value field (a count of elements).
func countElement(fn Fn, s *slot) {
	switch fn {
	case FnCount, FnMean:
		s.i++
	case FnAll, FnAny:
		s.x++
	default:
		s.markSet()
	}
}

// addInt adds with overflow detection.
func addInt(a, b int64) (int64, bool) {
	c := a + b
	return c, (b > 0 && c < a) || (b < 0 && c > a)
}

func addValue(op *Op, s *slot, x any, t mtime.Time) {
	switch op.Fn {
	case FnSum:
		switch y := x.(type) {
		case int64:
			if c, over := addInt(s.i, y); !over {
				s.i = c
			}
		case float64:
			s.setF(s.f() + y)
		}
		s.markSet()
	case FnCount:
		s.i++
	case FnMean:
		switch y := x.(type) {
		case int64:
			s.setF(s.f() + float64(y))
		case float64:
			s.setF(s.f() + y)
		}
		s.i++
	case FnMin, FnMax:
		if !s.isSet() || (op.Fn == FnMin && less(x, s.v())) || (op.Fn == FnMax && less(s.v(), x)) {
			s.setV(x)
			s.markSet()
		}
	case FnLatest:
		// The value with the latest event time wins; ties go to the later arrival.
		if !s.isSet() || t >= s.t() {
			s.setVT(x, t)
			s.markSet()
		}
	case FnAll, FnAny:
		// s.x counts the truthy values; s.i counts all values.
		if truthy(x) {
			s.x++
		}
		s.i++
	case FnGroup:
		l, _ := s.v().([]any)
		s.setV(append(l, x))
		s.markSet()
	case FnConcat:
		l, _ := s.v().([]any)
		if xs, ok := x.([]any); ok {
			l = append(l, xs...)
		}
		s.setV(l)
		s.markSet()
	case FnTop:
		s.setV(topInsert(op, s.v(), x))
		s.markSet()
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
func topInsert(op *Op, l any, x any) []any {
	list, _ := l.([]any)
	before := func(a, b any) bool {
		if op.Reverse {
			return less(a, b)
		}
		return less(b, a)
	}
	i := len(list)
	for i > 0 && before(x, list[i-1]) {
		i--
	}
	if i >= op.N {
		return list
	}
	list = append(list, nil)
	copy(list[i+1:], list[i:])
	list[i] = x
	if len(list) > op.N {
		list = list[:op.N]
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
func (a *Aggregator) MergeAccumulators(x, y any) any {
	return a.merge(x, y, nil)
}

// The merges a re-key may declare for an output (migrations: rekey:
// merge), besides the output's own combine fn.
const (
	MergeSum = "sum"
	MergeMax = "max"
	MergeMin = "min"
)

// OwnMerge reports whether merge m folds an output of fn as its combine
// fn merges it already (a sum or count by sum, a min by min, a max by
// max), so that declaring it changes nothing.
func OwnMerge(fn Fn, m string) bool {
	switch fn {
	case FnSum, FnCount:
		return m == MergeSum
	case FnMin:
		return m == MergeMin
	case FnMax:
		return m == MergeMax
	}
	return false
}

// MergeRekeyed implements contract.RekeyMerger: the accumulators of two
// earlier keys that a re-key moves to one new key merge as the step
// declares per output (KeyMigration.Merge), the others as their combine
// fns merge them.
func (a *Aggregator) MergeRekeyed(x, y any) any {
	var by map[string]string
	if a.KeyMigration != nil {
		by = a.KeyMigration.Merge
	}
	return a.merge(x, y, by)
}

// merge folds y into x, each output by its merge in by (mergeSlotAs) when
// it has one there, else as its combine fn merges it (mergeSlot).
func (a *Aggregator) merge(x, y any, by map[string]string) any {
	ax, x := a.conform(x)
	ay, _ := a.conform(y)
	if ax.grp == nil && ay.grp != nil {
		ax.grp = ay.grp
		x = a.accs.wrap(x, ax)
	}
	for k := range a.Ops {
		op := &a.Ops[k]
		if op.Retired {
			continue
		}
		s, o := &ax.slots[k], &ay.slots[k]
		if m, ok := by[op.Out]; ok && !OwnMerge(op.Fn, m) {
			mergeSlotAs(op, m, s, o)
		} else {
			a.mergeSlot(op, s, o)
		}
	}
	return x
}

// mergeSlot folds slot o into s as op's combine fn merges.
func (a *Aggregator) mergeSlot(op *Op, s, o *slot) {
	switch op.Fn {
	case FnSum:
		set := s.isSet() || o.isSet()
		if c, over := addInt(s.i, o.i); !over {
			s.i = c
		} else {
			slog.Default().Warn("combine merge overflows int64: the merged sum keeps its previous value", "step", a.Step, "output", op.Out)
		}
		s.setF(s.f() + o.f())
		if set {
			s.markSet()
		}
	case FnCount:
		s.i += o.i
	case FnMean:
		s.setF(s.f() + o.f())
		s.i += o.i
	case FnAll, FnAny:
		s.x += o.x
		s.i += o.i
	case FnMin, FnMax, FnLatest:
		if o.isSet() {
			addValue(op, s, o.v(), o.t())
		}
	case FnGroup, FnConcat:
		if o.isSet() {
			l, _ := s.v().([]any)
			ol, _ := o.v().([]any)
			s.setV(append(l, ol...))
			s.markSet()
		}
	case FnTop:
		ol, _ := o.v().([]any)
		for _, v := range ol {
			s.setV(topInsert(op, s.v(), v))
			s.markSet()
		}
	}
}

// mergeSlotAs folds slot o into s by merge m (MergeSum, MergeMax or
// MergeMin, not the output's own: OwnMerge) of the slots' values: a sum's
// total or a count by max or min, the value of a min, max or latest by
// any of the three (the loader allows only those). An empty slot leaves
// the other as it is.
func mergeSlotAs(op *Op, m string, s, o *slot) {
	switch op.Fn {
	case FnCount:
		switch m {
		case MergeMax:
			s.i = max(s.i, o.i)
		case MergeMin:
			s.i = min(s.i, o.i)
		}
	case FnSum:
		if !o.isSet() {
			return
		}
		if !s.isSet() {
			s.i, s.x = o.i, o.x
			return
		}
		st, ot := float64(s.i)+s.f(), float64(o.i)+o.f()
		switch m {
		case MergeMax:
			if ot > st {
				s.i, s.x = o.i, o.x
			}
		case MergeMin:
			if ot < st {
				s.i, s.x = o.i, o.x
			}
		}
	case FnMin, FnMax, FnLatest:
		if !o.isSet() {
			return
		}
		if !s.isSet() {
			s.setVT(o.v(), o.t())
			s.markSet()
			return
		}
		switch m {
		case MergeSum:
			s.setV(addNumbers(s.v(), o.v()))
		case MergeMax:
			if less(s.v(), o.v()) {
				s.setVT(o.v(), o.t())
			}
		case MergeMin:
			if less(o.v(), s.v()) {
				s.setVT(o.v(), o.t())
			}
		}
	}
}

// addNumbers adds two values of a numeric output: ints as ints (keeping
// a when the sum overflows), else as floats.
func addNumbers(a, b any) any {
	x, xi := a.(int64)
	y, yi := b.(int64)
	if xi && yi {
		if c, over := addInt(x, y); !over {
			return c
		}
		return a
	}
	return toFloat(a) + toFloat(b)
}

// toFloat is a numeric value as a float (0 for anything else).
func toFloat(v any) float64 {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case float64:
		return x
	}
	return 0
}

// Output builds the pane's row: group values, outputs and, unless the step
// has Beam's shape, window and pane.
func (a *Aggregator) Output(key any, acc any, w window.Window, p window.PaneInfo) any {
	ac, _ := a.conform(acc)
	r := row.New(a.Out)
	if vals, ok := key.([]any); ok && len(vals) == len(a.Group) {
		copy(r.Values, vals)
	} else {
		copy(r.Values, ac.group())
	}
	j := len(a.Group)
	if a.Pos == nil {
		for k := range a.Ops {
			r.Values[j] = slotValue(&a.Ops[k], &ac.slots[k])
			j++
		}
	} else {
		for k, p := range a.Pos {
			if p >= 0 {
				r.Values[j+p] = slotValue(&a.Ops[k], &ac.slots[k])
			}
		}
		j = len(r.Values)
		if !a.Beam {
			j -= 3
		}
	}
	if a.Beam {
		return r
	}
	if !w.IsGlobal() {
		r.Values[j], r.Values[j+1] = w.Start, w.End
	}
	r.Values[j+2] = row.PaneRow(p)
	return r
}

// slotValue is output op's value from its accumulator slot s.
func slotValue(op *Op, s *slot) any {
	var v any
	switch op.Fn {
	case FnSum:
		if op.Typ.Kind == row.KindFloat {
			// s.i is 0 unless the sum was an int sum before an update
			// widened its value field to float (compat's
			// COMBINE_OUTPUT_WIDENED): the stored int total carries on.
			v = s.f() + float64(s.i)
		} else {
			// s.f is 0 unless the sum was a float sum before an update
			// narrowed its value field to int (allow_lossy, compat's
			// COMBINE_OUTPUT_NARROWED): the stored float total carries
			// on, truncated toward zero.
			v = s.i
			if f := s.f(); f != 0 {
				v = s.i + truncInt(f)
			}
		}
	case FnCount:
		v = s.i
	case FnMean:
		if s.i > 0 {
			v = s.f() / float64(s.i)
		}
	case FnAll:
		v = int64(s.x) == s.i
	case FnAny:
		v = s.x > 0
	case FnGroup, FnConcat, FnTop:
		l, _ := s.v().([]any)
		if l == nil {
			l = []any{}
		}
		v = append([]any(nil), l...)
	default:
		if s.isSet() {
			v = s.v()
			if i, ok := v.(int64); ok && op.Typ.Kind == row.KindFloat {
				v = float64(i) // a min or max stored before its field widened
			}
			if f, ok := v.(float64); ok && op.Typ.Kind == row.KindInt {
				v = truncInt(f) // stored before its field narrowed (allow_lossy)
			}
			switch op.Typ.Kind {
			case row.KindString:
				v = asText(v) // a latest stored before its field became a string
			case row.KindInt, row.KindFloat:
				if s, ok := v.(string); ok {
					v = asNumber(s, op.Typ.Kind) // stored while its field was a string (allow_lossy)
				}
			}
		}
	}
	return v
}

// asText is a latest value stored before its value field became a string
// (compat's COMBINE_OUTPUT_CONVERTED), as its text: what string() in CEL
// writes for it (an int in decimal, a float in its shortest form, a
// timestamp in RFC 3339); a string as it is.
func asText(v any) any {
	switch x := v.(type) {
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case mtime.Time:
		return x.ToTime().Format(time.RFC3339Nano)
	}
	return v
}

// asNumber is a latest value stored while its value field was a string,
// read as the number it spells, as JSON writes numbers (surrounding
// spaces allowed), or nil where it spells none (compat's
// COMBINE_OUTPUT_CONVERTED, declared allow_lossy): an int only from an
// integer within its range (as a WriteToSql view converts a column), a
// float as parsed.
func asNumber(s string, k row.Kind) any {
	t := strings.TrimSpace(s)
	if !json.Valid([]byte(t)) || t == "" || (t[0] != '-' && (t[0] < '0' || t[0] > '9')) {
		return nil
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsInf(f, 0) {
		return nil
	}
	if k == row.KindFloat {
		return f
	}
	if i, err := strconv.ParseInt(t, 10, 64); err == nil {
		return i
	}
	return nil // a fraction, an exponent, or beyond an int's range
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
	FieldWindowStart = "window_start"
	FieldWindowEnd   = "window_end"
	FieldPane        = "pane"
)

// AccumulatorURN names the identity of Combine's stored accumulator.
const AccumulatorURN = "weir:yaml:combine_accumulator"

// ScalarFields reports whether every field is an int, float, bool, string
// or timestamp: values whose key encoding decodes to the value itself.
func ScalarFields(fs []row.Field) bool {
	for _, f := range fs {
		switch f.Type.Kind {
		case row.KindInt, row.KindFloat, row.KindBool, row.KindString, row.KindTimestamp:
		default:
			return false
		}
	}
	return true
}
