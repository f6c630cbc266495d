// Package celexpr is the CEL bridge of the YAML front door: it compiles
// CEL expressions over the fields of a schema'd row (package row), with a
// native fast path for the simplest ones, and evaluates them per element
// within budgets (see Limits).
//
// An expression sees each field of the element as a top-level variable of
// the field's type, the whole element as `element` (a map), each side input
// by name, and the element metadata the caller declares (Meta) by name when
// the row has no field of that name. Programs are compiled once per step
// against the input schema; at run time an activation (one per worker)
// resolves a variable by an index into the row, converting only the values
// the expression actually reads.
//
// It may import row, mtime, runner/contract, cel.dev/cel-go and the
// standard library.
package celexpr

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// Ident matches names usable as CEL variables.
var Ident = regexp.MustCompile(`^[_a-zA-Z][_a-zA-Z0-9]*$`)

// celReserved are CEL keywords and reserved words: fields so named are
// reachable only as element['name'].
func celReserved(name string) bool {
	switch name {
	case "true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
		"function", "if", "import", "let", "loop", "package", "namespace", "return", "var",
		"void", "while", "element":
		return true
	}
	return false
}

// Variable slots beyond field indexes.
const (
	slotElement = -1
	// slotSide0 - i is side input i.
	slotSide0 = -2
	// slotMeta0 - i is the element metadata meta[i].
	slotMeta0 = -1 << 20
)

// Meta is a piece of element metadata an expression reads by name when the
// row has no field of that name (the YAML front door declares the
// element's window and pane this way).
type Meta struct {
	// Name is the variable's name.
	Name string
	// Type is the type of its values.
	Type row.Type
	// Value returns its value for an element.
	Value func(*contract.Element) any
}

// Side declares a side input visible to CEL: a list of rows, or a map
// of rows keyed by the value of KeyField.
type Side struct {
	Name     string
	Schema   *row.Schema
	KeyField int // -1: a list
}

// Scope is the compiled environment of one step: schema, variables and
// side inputs. It is read-only once built and shared by workers.
type Scope struct {
	env    *cel.Env
	schema *row.Schema
	vars   map[string]int
	// names and slots mirror vars for a linear scan, faster than hashing
	// for the few variables of a typical schema.
	names  []string
	slots  []int
	sides  []Side
	meta   []Meta
	builds []func([]any) any
	// prgOpt plans the programs whose cost is bounded statically;
	// tracked, with the budgets, the others (see limits.go).
	prgOpt  []cel.ProgramOption
	tracked []cel.ProgramOption
}

// celTypeOf maps a row type to the CEL type declared for it.
func celTypeOf(t row.Type) *cel.Type {
	switch t.Kind {
	case row.KindInt:
		return cel.IntType
	case row.KindFloat:
		return cel.DoubleType
	case row.KindBool:
		return cel.BoolType
	case row.KindString:
		return cel.StringType
	case row.KindTimestamp:
		return cel.TimestampType
	case row.KindRow:
		return cel.MapType(cel.StringType, cel.DynType)
	case row.KindList:
		if t.Elem != nil {
			return cel.ListType(celTypeOf(*t.Elem))
		}
		return cel.ListType(cel.DynType)
	}
	return cel.DynType
}

// NewScope builds the environment for expressions over rows of schema,
// with side inputs sides and element metadata meta; prgOpts are extra CEL
// program options.
func NewScope(schema *row.Schema, sides []Side, meta []Meta, prgOpts ...cel.ProgramOption) (*Scope, error) {
	sc := &Scope{schema: schema, vars: map[string]int{}, sides: sides, meta: meta,
		prgOpt:  append([]cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}, prgOpts...),
		tracked: append(append([]cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}, limitOptions()...), prgOpts...)}
	opts := []cel.EnvOption{
		ext.Strings(), boundedReplace(), ext.Math(), ext.Lists(), ext.Sets(), ext.Encoders(),
		cel.CrossTypeNumericComparisons(true),
		cel.ParserExpressionSizeLimit(10000),
		cel.ParserRecursionLimit(100),
	}
	for i, f := range schema.Fields {
		if !Ident.MatchString(f.Name) || (celReserved(f.Name) && f.Name != "element") {
			continue
		}
		sc.vars[f.Name] = i
		opts = append(opts, cel.Variable(f.Name, celTypeOf(f.Type)))
	}
	if _, taken := sc.vars["element"]; !taken {
		sc.vars["element"] = slotElement
		opts = append(opts, cel.Variable("element", cel.MapType(cel.StringType, cel.DynType)))
	}
	for i, sd := range sides {
		if !Ident.MatchString(sd.Name) || celReserved(sd.Name) {
			return nil, fmt.Errorf("side input name %q is not usable in CEL (use letters, digits and _)", sd.Name)
		}
		if _, taken := sc.vars[sd.Name]; taken {
			return nil, fmt.Errorf("side input %q has the name of a field of the input; rename it", sd.Name)
		}
		sc.vars[sd.Name] = slotSide0 - i
		rowT := cel.MapType(cel.StringType, cel.DynType)
		if sd.KeyField < 0 {
			opts = append(opts, cel.Variable(sd.Name, cel.ListType(rowT)))
		} else {
			opts = append(opts, cel.Variable(sd.Name, cel.MapType(celTypeOf(sd.Schema.Fields[sd.KeyField].Type), rowT)))
		}
		sc.builds = append(sc.builds, sideBuilder(sd))
	}
	for i, m := range meta {
		if _, taken := sc.vars[m.Name]; taken {
			continue
		}
		sc.vars[m.Name] = slotMeta0 - i
		opts = append(opts, cel.Variable(m.Name, celTypeOf(m.Type)))
	}
	env, err := cel.NewEnv(opts...)
	if err != nil {
		return nil, fmt.Errorf("building the CEL environment: %w", err)
	}
	if len(sc.vars) <= 12 {
		for name, slot := range sc.vars {
			sc.names = append(sc.names, name)
			sc.slots = append(sc.slots, slot)
		}
	}
	sc.env = env
	return sc, nil
}

// Error is a compile error with its position inside the expression.
type Error struct {
	Line, Col int // 1-based, within the expression
	Msg       string
}

func (e *Error) Error() string { return e.Msg }

// Program is a compiled expression: the CEL Program and, for simple
// expressions, its native fast path.
type Program struct {
	prg    cel.Program
	native nfn
	// sel reads the value of an expression that only selects a field of
	// scalar type selKind (ts, bid.dateTime): EvalValue copies it as it is
	// when the result is of that type, without converting the row (nested
	// rows included) to CEL. nil for other expressions.
	sel     func([]any) (any, bool)
	selKind row.Kind
	// loop is true when the expression has a comprehension: it is
	// evaluated under the run's context (see limits.go).
	loop bool
	// tracked is true when the program runs under CEL's cost and memory
	// accounting (its cost is not bounded statically): each evaluation
	// starts with a fresh budget.
	tracked bool
}

// Compile type-checks expr and returns its Program and output type.
func (sc *Scope) Compile(expr string) (*Program, *cel.Type, error) {
	ast, iss := sc.env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		errs := iss.Errors()
		if len(errs) > 0 {
			e := errs[0]
			return nil, nil, &Error{Line: e.Location.Line(), Col: e.Location.Column() + 1, Msg: e.Message}
		}
		return nil, nil, iss.Err()
	}
	opts, tracked := sc.prgOpt, false
	if !sc.boundedCost(ast) {
		opts, tracked = sc.tracked, true
	}
	prg, err := sc.env.Program(ast, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("planning the expression: %w", err)
	}
	out := ast.OutputType()
	if out.Kind() == types.DynKind {
		// CEL declares a nested row as a map of dyn; a selection of one of
		// its fields has the field's declared type.
		if _, ft, ok := sc.rowPath(ast.NativeRep().Expr(), 0); ok && ft.Kind != row.KindAny {
			out = celTypeOf(ft)
		}
	}
	p := &Program{prg: prg, native: sc.compileNative(ast.NativeRep()), loop: hasLoop(ast.NativeRep()), tracked: tracked}
	if get, ft, ok := sc.rowPath(ast.NativeRep().Expr(), 0); ok && scalarKind(ft.Kind) {
		p.sel, p.selKind = get, ft.Kind
	}
	return p, out, nil
}

// FieldsHint lists the variables an expression may use, for messages.
func (sc *Scope) FieldsHint() string {
	var parts []string
	for _, f := range sc.schema.Fields {
		parts = append(parts, f.Name+" "+f.Type.String())
	}
	for _, sd := range sc.sides {
		parts = append(parts, sd.Name+" (side input)")
	}
	if len(parts) == 0 {
		return "no fields"
	}
	return "fields: " + strings.Join(parts, ", ")
}

// RowType maps an expression's output type to a row type.
func RowType(t *cel.Type) row.Type {
	if t == nil {
		return row.Of(row.KindAny)
	}
	switch t.Kind() {
	case types.IntKind, types.UintKind, types.DurationKind:
		return row.Of(row.KindInt)
	case types.DoubleKind:
		return row.Of(row.KindFloat)
	case types.BoolKind:
		return row.Of(row.KindBool)
	case types.StringKind, types.BytesKind:
		return row.Of(row.KindString)
	case types.TimestampKind:
		return row.Of(row.KindTimestamp)
	case types.ListKind:
		if ps := t.Parameters(); len(ps) == 1 {
			return row.ListOf(RowType(ps[0]))
		}
		return row.ListOf(row.Of(row.KindAny))
	}
	return row.Of(row.KindAny)
}

// Activation resolves variables against one row. Each worker owns one
// (DoFns clone it per worker), so it is never used concurrently.
type Activation struct {
	sc   *Scope
	r    *row.Row
	elem ref.Val
	pc   *contract.ProcessContext
	// frame wraps the Activation for the interpreter. It is created once
	// and reused for every evaluation by this worker, saving a pool round
	// trip per element; it is never shared and never closed.
	frame *interpreter.ExecutionFrame
}

// EvalBool runs a boolean expression over the current row.
func (a *Activation) EvalBool(p *Program) (bool, error) {
	if p.native != nil {
		if v, ok := p.native(a.r.Values); ok && v.k == nBool {
			return v.i == 1, nil
		}
	}
	v, err := a.eval(p)
	if err != nil {
		return false, err
	}
	b, ok := v.(types.Bool)
	if !ok {
		return false, fmt.Errorf("expression returned %s, not a bool", v.Type().TypeName())
	}
	return bool(b), nil
}

// EvalValue runs an expression over the current row and converts its
// result to a row value of type t.
func (a *Activation) EvalValue(p *Program, t row.Type) (any, error) {
	if p.sel != nil && t.Kind == p.selKind {
		if v, ok := p.sel(a.r.Values); ok && kindOfValue(v) == p.selKind {
			return v, nil
		}
	}
	if p.native != nil {
		if v, ok := p.native(a.r.Values); ok {
			return v.native(), nil
		}
	}
	v, err := a.eval(p)
	if err != nil {
		return nil, err
	}
	return FromCEL(v, t)
}

// eval runs p over the current row. A program with a comprehension runs
// under the run's context, in a frame of its own.
func (a *Activation) eval(p *Program) (ref.Val, error) {
	if p.loop && a.pc != nil {
		ctx := a.pc.Context()
		v, _, err := p.prg.ContextEval(ctx, a)
		return v, evalErr(ctx, err)
	}
	if a.frame == nil {
		f, err := interpreter.NewExecutionFrame(a)
		if err != nil {
			return nil, err
		}
		a.frame = f
	}
	if p.tracked {
		// The budgets are per element: the interpreter keeps the tracker
		// it finds in the frame, so the reused frame must not hand one
		// evaluation's spent budget to the next (it starts a fresh one).
		a.frame.SetCostTracker(nil)
	}
	v, _, err := p.prg.Eval(a.frame)
	return v, evalErr(nil, err)
}

// slot returns the variable slot of name.
func (sc *Scope) slot(name string) (int, bool) {
	if sc.names != nil {
		for i, n := range sc.names {
			if n == name {
				return sc.slots[i], true
			}
		}
		return 0, false
	}
	s, ok := sc.vars[name]
	return s, ok
}

var _ interpreter.Activation = (*Activation)(nil)

// NewActivation returns an activation over sc for one worker.
func NewActivation(sc *Scope) Activation { return Activation{sc: sc} }

// Scope returns the scope the activation resolves names in.
func (a *Activation) Scope() *Scope { return a.sc }

// Schema returns the schema the scope's expressions read.
func (sc *Scope) Schema() *row.Schema { return sc.schema }

// WithoutFastPath returns p without its native fast path, so that every
// evaluation goes through CEL (for benchmarks and tests).
func (p *Program) WithoutFastPath() *Program {
	q := *p
	q.native, q.sel = nil, nil
	return &q
}

// Reset points the activation at row r, processed in pc (nil outside a
// step).
func (a *Activation) Reset(r *row.Row, pc *contract.ProcessContext) {
	a.r, a.elem, a.pc = r, nil, pc
}

// ResolveName implements interpreter.Activation.
func (a *Activation) ResolveName(name string) (any, bool) {
	slot, ok := a.sc.slot(name)
	if !ok {
		return nil, false
	}
	switch {
	case slot >= 0:
		if slot >= len(a.r.Values) {
			return types.NullValue, true
		}
		return toCEL(a.r.Values[slot]), true
	case slot == slotElement:
		if a.elem == nil {
			a.elem = rowToCEL(a.r)
		}
		return a.elem, true
	case slot <= slotMeta0:
		var cur *contract.Element
		if a.pc != nil {
			cur = a.pc.Current()
		}
		if cur == nil {
			return types.NullValue, true
		}
		return toCEL(a.sc.meta[slotMeta0-slot].Value(cur)), true
	}
	i := slotSide0 - slot
	if a.pc == nil {
		return a.sc.builds[i](nil), true
	}
	return a.pc.SideInput(i, a.sc.builds[i]), true
}

// Parent implements interpreter.Activation.
func (a *Activation) Parent() interpreter.Activation { return nil }

// toCEL converts a row value to a CEL value.
func toCEL(v any) ref.Val {
	switch x := v.(type) {
	case nil:
		return types.NullValue
	case int64:
		return types.Int(x)
	case float64:
		return types.Double(x)
	case bool:
		return types.Bool(x)
	case string:
		return types.String(x)
	case mtime.Time:
		return types.Timestamp{Time: x.ToTime()}
	case *row.Row:
		return rowToCEL(x)
	case []any:
		l := make([]ref.Val, len(x))
		for i, e := range x {
			l[i] = toCEL(e)
		}
		return types.NewRefValList(types.DefaultTypeAdapter, l)
	case map[string]any:
		m := make(map[ref.Val]ref.Val, len(x))
		for k, e := range x {
			m[types.String(k)] = toCEL(e)
		}
		return types.NewRefValMap(types.DefaultTypeAdapter, m)
	case contract.Reject:
		return rowToCEL(row.FromReject(x))
	}
	return types.DefaultTypeAdapter.NativeToValue(v)
}

// rowToCEL converts a row to a CEL map of its fields.
func rowToCEL(r *row.Row) ref.Val {
	if r == nil {
		return types.NullValue
	}
	m := make(map[ref.Val]ref.Val, len(r.Values))
	for i, f := range r.Schema.Fields {
		m[types.String(f.Name)] = toCEL(r.Values[i])
	}
	return types.NewRefValMap(types.DefaultTypeAdapter, m)
}

// sideBuilder returns the function that turns the elements of a side input
// in one window into the CEL value an expression sees (cached per window by
// the runner).
func sideBuilder(sd Side) func([]any) any {
	return func(elems []any) any {
		if sd.KeyField < 0 {
			l := make([]ref.Val, 0, len(elems))
			for _, e := range elems {
				if r, ok := row.AsRow(e); ok {
					l = append(l, rowToCEL(r))
				}
			}
			return types.NewRefValList(types.DefaultTypeAdapter, l)
		}
		m := make(map[ref.Val]ref.Val, len(elems))
		for _, e := range elems {
			r, ok := row.AsRow(e)
			if !ok || sd.KeyField >= len(r.Values) {
				continue
			}
			m[toCEL(r.Values[sd.KeyField])] = rowToCEL(r)
		}
		return types.NewRefValMap(types.DefaultTypeAdapter, m)
	}
}

// errNotRepresentable reports a CEL value a row cannot hold.
var errNotRepresentable = errors.New("value cannot be stored in a row")

// FromCEL converts an expression's result to a row value of type t.
func FromCEL(v ref.Val, t row.Type) (any, error) {
	if v == nil || v == types.NullValue {
		return nil, nil
	}
	switch t.Kind {
	case row.KindInt:
		switch x := v.(type) {
		case types.Int:
			return int64(x), nil
		case types.Uint:
			if uint64(x) > math.MaxInt64 {
				return nil, fmt.Errorf("%d does not fit an int", uint64(x))
			}
			return int64(x), nil
		case types.Duration:
			return x.Duration.Milliseconds(), nil
		}
	case row.KindFloat:
		switch x := v.(type) {
		case types.Double:
			return float64(x), nil
		case types.Int:
			return float64(x), nil
		}
	case row.KindBool:
		if x, ok := v.(types.Bool); ok {
			return bool(x), nil
		}
	case row.KindString:
		switch x := v.(type) {
		case types.String:
			return string(x), nil
		case types.Bytes:
			return string(x), nil
		}
	case row.KindTimestamp:
		if x, ok := v.(types.Timestamp); ok {
			return mtime.FromTime(x.Time), nil
		}
	default:
		return celToNative(v, 0)
	}
	return nil, fmt.Errorf("expression returned %s, want %s", v.Type().TypeName(), t)
}

// celToNative converts any CEL value to a row value.
func celToNative(v ref.Val, depth int) (any, error) {
	if depth > 64 {
		return nil, fmt.Errorf("%w: nested too deeply", errNotRepresentable)
	}
	switch x := v.(type) {
	case types.Null:
		return nil, nil
	case types.Int:
		return int64(x), nil
	case types.Uint:
		return int64(x), nil
	case types.Double:
		return float64(x), nil
	case types.Bool:
		return bool(x), nil
	case types.String:
		return string(x), nil
	case types.Bytes:
		return string(x), nil
	case types.Timestamp:
		return mtime.FromTime(x.Time), nil
	case types.Duration:
		return int64(x.Duration / time.Millisecond), nil
	case traits.Lister:
		n, ok := x.Size().(types.Int)
		if !ok {
			return nil, errNotRepresentable
		}
		out := make([]any, 0, int(n))
		for it := x.Iterator(); it.HasNext() == types.True; {
			e, err := celToNative(it.Next(), depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		return out, nil
	case traits.Mapper:
		out := map[string]any{}
		for it := x.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			e, err := celToNative(x.Get(k), depth+1)
			if err != nil {
				return nil, err
			}
			ks, ok := k.(types.String)
			if !ok {
				kn, err := celToNative(k, depth+1)
				if err != nil {
					return nil, err
				}
				out[fmt.Sprint(kn)] = e
				continue
			}
			out[string(ks)] = e
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: %s", errNotRepresentable, v.Type().TypeName())
}
