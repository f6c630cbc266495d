package yamlpipe

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

// The CEL bridge. An expression sees each field of the element as a
// top-level variable of the field's type, the whole element as `element`
// (a map), and each side input by name. Programs are compiled once per step
// against the input schema; at run time an activation (one per worker)
// resolves a variable by an index into the row, converting only the values
// the expression actually reads.

// celIdent matches names usable as CEL variables.
var celIdent = regexp.MustCompile(`^[_a-zA-Z][_a-zA-Z0-9]*$`)

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
	// slotMeta0 - i is the element metadata metaVars[i].
	slotMeta0 = -1 << 20
)

// metaVars are the element metadata an expression reads by name when the
// row has no field of that name: the element's window and pane, as
// ExtractWindowingInfo gives them. A Combine written for Beam (with
// language) keeps its rows to the group_by fields and the aggregates, so
// window_start, window_end and pane after it are these, not fields.
var metaVars = []windowInfo{infoWindowStart, infoWindowEnd, infoPaneInfo}

// metaVarName is the variable name of metadata w.
func metaVarName(w windowInfo) string {
	if w == infoPaneInfo {
		return fieldPane
	}
	return string(w)
}

// sideDecl declares a side input visible to CEL: a list of rows, or a map
// of rows keyed by the value of KeyField.
type sideDecl struct {
	Name     string
	Schema   *row.Schema
	KeyField int // -1: a list
}

// celScope is the compiled environment of one step: schema, variables and
// side inputs. It is read-only once built and shared by workers.
type celScope struct {
	env    *cel.Env
	schema *row.Schema
	vars   map[string]int
	// names and slots mirror vars for a linear scan, faster than hashing
	// for the few variables of a typical schema.
	names  []string
	slots  []int
	sides  []sideDecl
	builds []func([]any) any
	prgOpt []cel.ProgramOption
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

// newCELScope builds the environment for expressions over rows of schema.
func newCELScope(schema *row.Schema, sides []sideDecl, prgOpts ...cel.ProgramOption) (*celScope, error) {
	sc := &celScope{schema: schema, vars: map[string]int{}, sides: sides,
		prgOpt: append([]cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}, prgOpts...)}
	opts := []cel.EnvOption{
		ext.Strings(), ext.Math(), ext.Lists(), ext.Sets(), ext.Encoders(),
		cel.CrossTypeNumericComparisons(true),
		cel.ParserExpressionSizeLimit(10000),
		cel.ParserRecursionLimit(100),
	}
	for i, f := range schema.Fields {
		if !celIdent.MatchString(f.Name) || (celReserved(f.Name) && f.Name != "element") {
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
		if !celIdent.MatchString(sd.Name) || celReserved(sd.Name) {
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
	for i, w := range metaVars {
		name := metaVarName(w)
		if _, taken := sc.vars[name]; taken {
			continue
		}
		sc.vars[name] = slotMeta0 - i
		opts = append(opts, cel.Variable(name, celTypeOf(w.typ())))
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

// celError is a compile error with its position inside the expression.
type celError struct {
	Line, Col int // 1-based, within the expression
	Msg       string
}

func (e *celError) Error() string { return e.Msg }

// program is a compiled expression: the CEL program and, for simple
// expressions, its native fast path.
type program struct {
	prg    cel.Program
	native nfn
}

// compile type-checks expr and returns its program and output type.
func (sc *celScope) compile(expr string) (*program, *cel.Type, error) {
	ast, iss := sc.env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		errs := iss.Errors()
		if len(errs) > 0 {
			e := errs[0]
			return nil, nil, &celError{Line: e.Location.Line(), Col: e.Location.Column() + 1, Msg: e.Message}
		}
		return nil, nil, iss.Err()
	}
	prg, err := sc.env.Program(ast, sc.prgOpt...)
	if err != nil {
		return nil, nil, fmt.Errorf("planning the expression: %w", err)
	}
	return &program{prg: prg, native: sc.compileNative(ast.NativeRep())}, ast.OutputType(), nil
}

// fieldsHint lists the variables an expression may use, for messages.
func (sc *celScope) fieldsHint() string {
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

// rowTypeOfCEL maps an expression's output type to a row type.
func rowTypeOfCEL(t *cel.Type) row.Type {
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
			return row.ListOf(rowTypeOfCEL(ps[0]))
		}
		return row.ListOf(row.Of(row.KindAny))
	}
	return row.Of(row.KindAny)
}

// activation resolves variables against one row. Each worker owns one
// (DoFns clone it per worker), so it is never used concurrently.
type activation struct {
	sc   *celScope
	r    *row.Row
	elem ref.Val
	pc   *contract.ProcessContext
	// frame wraps the activation for the interpreter. It is created once
	// and reused for every evaluation by this worker, saving a pool round
	// trip per element; it is never shared and never closed.
	frame *interpreter.ExecutionFrame
}

// evalBool runs a boolean expression over the current row.
func (a *activation) evalBool(p *program) (bool, error) {
	if p.native != nil {
		if v, ok := p.native(a.r.Values); ok && v.k == nBool {
			return v.i == 1, nil
		}
	}
	v, err := a.eval(p.prg)
	if err != nil {
		return false, err
	}
	b, ok := v.(types.Bool)
	if !ok {
		return false, fmt.Errorf("expression returned %s, not a bool", v.Type().TypeName())
	}
	return bool(b), nil
}

// evalValue runs an expression over the current row and converts its
// result to a row value of type t.
func (a *activation) evalValue(p *program, t row.Type) (any, error) {
	if p.native != nil {
		if v, ok := p.native(a.r.Values); ok {
			return v.native(), nil
		}
	}
	v, err := a.eval(p.prg)
	if err != nil {
		return nil, err
	}
	return fromCEL(v, t)
}

// eval runs prg over the current row.
func (a *activation) eval(prg cel.Program) (ref.Val, error) {
	if a.frame == nil {
		f, err := interpreter.NewExecutionFrame(a)
		if err != nil {
			return nil, err
		}
		a.frame = f
	}
	v, _, err := prg.Eval(a.frame)
	return v, err
}

// slot returns the variable slot of name.
func (sc *celScope) slot(name string) (int, bool) {
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

var _ interpreter.Activation = (*activation)(nil)

func (a *activation) reset(r *row.Row, pc *contract.ProcessContext) {
	a.r, a.elem, a.pc = r, nil, pc
}

// ResolveName implements interpreter.Activation.
func (a *activation) ResolveName(name string) (any, bool) {
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
		return toCEL(metaVars[slotMeta0-slot].value(cur)), true
	}
	i := slotSide0 - slot
	if a.pc == nil {
		return a.sc.builds[i](nil), true
	}
	return a.pc.SideInput(i, a.sc.builds[i]), true
}

// Parent implements interpreter.Activation.
func (a *activation) Parent() interpreter.Activation { return nil }

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
func sideBuilder(sd sideDecl) func([]any) any {
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

// fromCEL converts an expression's result to a row value of type t.
func fromCEL(v ref.Val, t row.Type) (any, error) {
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

// evalError wraps a CEL runtime failure as an element error.
func evalError(what string, err error) error {
	return &contract.ElementError{Reason: "evaluation_error", Message: fmt.Sprintf("%s: %v", what, err)}
}
