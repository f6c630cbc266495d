// Package python is the YAML front door's `language: python`: Beam YAML's
// Python expressions and callables, evaluated by Starlark (go.starlark.net)
// in a dialect close to Python — Python's expression syntax, its builtins
// and string methods, lambdas and def bodies, generator arguments, and the
// re, math and json modules — with no imports, classes, exceptions or other
// modules. Expressions see the row's fields as variables; callables get the
// row, whose fields are attributes (row.field), as Beam's Python does.
// Every call runs within budgets (see Limits).
//
// It may import row, mtime, runner/contract, go.starlark.net and the
// standard library.
package python

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	starmath "go.starlark.net/lib/math"
	"go.starlark.net/resolve"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// reasonPython is the reject reason of an element whose Python code failed.
const reasonPython = "python_error"

// pyFileOptions is the dialect: Starlark with while loops, sets, top-level
// control flow, reassignment and recursion, which Python has.
var pyFileOptions = syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true, Recursion: true}

// pyPredeclared are the names a Python expression sees besides its fields
// and Starlark's builtins: the math, json and re modules, and the
// accounted builtins (budget.go).
func pyPredeclared() starlark.StringDict {
	d := accounted()
	d["math"], d["re"] = starmath.Module, reModule
	return d
}

// Meta is a piece of element metadata Python code reads by name when the
// row has no field of that name (the YAML front door declares the
// element's window and pane this way).
type Meta struct {
	// Name is the variable's (or the row attribute's) name.
	Name string
	// Type is the type of its values.
	Type row.Type
	// Value returns its value for an element.
	Value func(*contract.Element) any
}

// Program is a compiled Python expression or callable. It is read-only and
// shared by the workers of a step.
type Program struct {
	fn starlark.Callable
	// params are the input fields an expression reads, one argument each;
	// nil for a callable, which is called with the row.
	params []int
	meta   []Meta
	// Type is the result type inferred from the code (any when unknown).
	Type row.Type
	// Src is the code.
	Src string
}

// Eval evaluates a Program; each worker has its own (a Starlark thread
// is not safe for concurrent use).
type Eval struct {
	p    *Program
	th   *starlark.Thread
	args starlark.Tuple
	// cur is the element being evaluated, for its window and pane (see
	// Meta); nil when unknown.
	cur *contract.Element
	// ctx is the run's context (contract.ProcessContext.Context).
	ctx context.Context
}

// pyMetaParam0 - i, as a parameter index, is the metadata meta[i].
const pyMetaParam0 = -1

// At sets the element being evaluated to pc's current one.
func (e *Eval) At(pc *contract.ProcessContext) *Eval {
	e.cur, e.ctx = nil, context.Background()
	if pc != nil {
		e.cur, e.ctx = pc.Current(), pc.Context()
	}
	return e
}

// NewEval returns an evaluator of p for one worker.
func (p *Program) NewEval() *Eval {
	n := len(p.params)
	if p.params == nil {
		n = 1
	}
	th := &starlark.Thread{Name: "weir-python", Print: func(*starlark.Thread, string) {}}
	return &Eval{p: p, th: th, args: make(starlark.Tuple, n), ctx: context.Background()}
}

// call runs the program on r and returns Starlark's result.
func (e *Eval) call(r *row.Row, what string) (starlark.Value, error) {
	if e.p.params == nil {
		e.args[0] = &pyRow{r: r, cur: e.cur, meta: e.p.meta}
	} else {
		for i, idx := range e.p.params {
			var v any
			switch {
			case idx < 0:
				if e.cur != nil {
					v = e.p.meta[pyMetaParam0-idx].Value(e.cur)
				}
			case idx < len(r.Values):
				v = r.Values[idx]
			}
			e.args[i] = toStarlark(v)
		}
	}
	b := begin(e.th, e.ctx)
	v, err := starlark.Call(e.th, e.p.fn, e.args, nil)
	if err != nil {
		if e.ctx.Err() != nil {
			return nil, fmt.Errorf("%s: python: %w", what, e.ctx.Err())
		}
		if le := b.limitOr(err); le != nil {
			return nil, &contract.ElementError{Reason: ReasonLimit, Message: fmt.Sprintf("%s: python: %v in %q", what, le, e.p.Src)}
		}
		msg := err.Error()
		var ee *starlark.EvalError
		if errors.As(err, &ee) {
			msg = ee.Msg
		}
		return nil, &contract.ElementError{Reason: reasonPython, Message: fmt.Sprintf("%s: python: %s in %q", what, msg, e.p.Src)}
	}
	return v, nil
}

// Truth runs the program on r and returns the truth of its result, as
// Python's bool() gives it; what names the code in errors.
func (e *Eval) Truth(r *row.Row, what string) (bool, error) {
	v, err := e.call(r, what)
	if err != nil {
		return false, err
	}
	return bool(v.Truth()), nil
}

// Eval runs the program on r and converts the result to a row value of the
// program's type; what names the code in errors.
func (e *Eval) Eval(r *row.Row, what string) (any, error) {
	v, err := e.call(r, what)
	if err != nil {
		return nil, err
	}
	if err := budgetOf(e.th).sizeOf(v); err != nil {
		return nil, &contract.ElementError{Reason: ReasonLimit, Message: fmt.Sprintf("%s: python: the result: %v in %q", what, err, e.p.Src)}
	}
	x, err := fromStarlark(v, 0)
	if err == nil {
		x, err = row.FromJSON(x, e.p.Type)
	}
	if err != nil {
		return nil, &contract.ElementError{Reason: "type_mismatch", Message: fmt.Sprintf("%s: python: %v", what, err)}
	}
	return x, nil
}

// ---- values ----

// toStarlark converts a row value to a Starlark value. Timestamps are
// seconds since the epoch (a float), as Beam's Timestamp compares.
func toStarlark(v any) starlark.Value {
	switch x := v.(type) {
	case nil:
		return starlark.None
	case int64:
		return starlark.MakeInt64(x)
	case float64:
		return starlark.Float(x)
	case string:
		return starlark.String(x)
	case bool:
		return starlark.Bool(x)
	case mtime.Time:
		return starlark.Float(float64(x) / 1000)
	case []any:
		l := make([]starlark.Value, len(x))
		for i, e := range x {
			l[i] = toStarlark(e)
		}
		return starlark.NewList(l)
	case *row.Row:
		return &pyRow{r: x}
	case map[string]any:
		d := starlark.NewDict(len(x))
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			_ = d.SetKey(starlark.String(k), toStarlark(x[k]))
		}
		return d
	}
	return starlark.String(fmt.Sprint(v))
}

// fromStarlark converts a Starlark result to a row value (before the
// conversion to the field's type).
func fromStarlark(v starlark.Value, depth int) (any, error) {
	if depth > 64 {
		return nil, fmt.Errorf("the value is nested too deeply")
	}
	switch x := v.(type) {
	case starlark.NoneType:
		return nil, nil
	case starlark.Bool:
		return bool(x), nil
	case starlark.Int:
		n, ok := x.Int64()
		if !ok {
			return nil, fmt.Errorf("%s does not fit an int", x)
		}
		return n, nil
	case starlark.Float:
		return float64(x), nil
	case starlark.String:
		return string(x), nil
	case *pyRow:
		return x.r, nil
	case *starlark.Dict:
		m := make(map[string]any, x.Len())
		for _, it := range x.Items() {
			k, ok := it[0].(starlark.String)
			if !ok {
				return nil, fmt.Errorf("a dict key is %s, not a string", it[0].Type())
			}
			e, err := fromStarlark(it[1], depth+1)
			if err != nil {
				return nil, err
			}
			m[string(k)] = e
		}
		return m, nil
	case starlark.Indexable: // list, tuple
		out := make([]any, x.Len())
		for i := range out {
			e, err := fromStarlark(x.Index(i), depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = e
		}
		return out, nil
	}
	return nil, fmt.Errorf("a %s cannot be stored in a row", v.Type())
}

// pyRow is a row as Python code sees it: Beam's Row, fields as attributes.
// A callable's row also answers window_start, window_end and pane from the
// element's metadata when it has no such field (cur; see Meta).
type pyRow struct {
	r    *row.Row
	cur  *contract.Element
	meta []Meta
}

// String renders the row as Beam prints one: Row(a=1, b='x').
func (p *pyRow) String() string {
	var b strings.Builder
	b.WriteString("Row(")
	for i, f := range p.r.Schema.Fields {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(f.Name)
		b.WriteByte('=')
		b.WriteString(toStarlark(p.r.Values[i]).String())
	}
	b.WriteByte(')')
	return b.String()
}

// Type implements starlark.Value.
func (p *pyRow) Type() string { return "Row" }

// Freeze implements starlark.Value: a row is never changed by Python code.
func (p *pyRow) Freeze() {}

// Truth implements starlark.Value.
func (p *pyRow) Truth() starlark.Bool { return true }

// Hash implements starlark.Value.
func (p *pyRow) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: Row") }

// Attr returns a field's value.
func (p *pyRow) Attr(name string) (starlark.Value, error) {
	i := p.r.Schema.Index(name)
	if i < 0 && p.cur != nil {
		for _, m := range p.meta {
			if m.Name == name {
				return toStarlark(m.Value(p.cur)), nil
			}
		}
	}
	if i < 0 || i >= len(p.r.Values) {
		return nil, nil
	}
	return toStarlark(p.r.Values[i]), nil
}

// AttrNames lists the fields.
func (p *pyRow) AttrNames() []string { return p.r.Schema.Names() }

// ---- compiling ----

// pyBlankStrings returns src with the contents of its string literals and
// comments replaced by spaces, so a scan for keywords sees only code.
func pyBlankStrings(src string) string {
	b := []byte(src)
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '#':
			for ; i < len(b) && b[i] != '\n'; i++ {
				b[i] = ' '
			}
		case '"', '\'':
			q := string(c)
			if strings.HasPrefix(string(b[i:]), strings.Repeat(q, 3)) {
				q = strings.Repeat(q, 3)
			}
			j := i + len(q)
			for j < len(b) && !strings.HasPrefix(string(b[j:]), q) {
				if b[j] == '\\' && j+1 < len(b) {
					b[j] = ' '
					j++
				}
				if b[j] != '\n' {
					b[j] = ' '
				}
				j++
			}
			i = j + len(q) - 1
		}
	}
	return string(b)
}

// pyConstructs are the Python constructs weir's dialect lacks, found by
// pattern in the code (string literals blanked); group 1 is the construct.
var pyConstructs = []struct {
	re  *regexp.Regexp
	msg string
}{
	{regexp.MustCompile(`(?:^|[^\w.])(import\s+\w|from\s+[\w.]+\s+import\b)`), "imports are not supported (weir's Python dialect is Starlark: no modules besides re, math and json, which need no import)"},
	{regexp.MustCompile(`(?:^|[^\w.])(class\s+\w)`), "classes are not supported (weir's Python dialect is Starlark: use functions, dicts and lists)"},
	{regexp.MustCompile(`(?:^|[^\w.])(try\s*:|except\b|finally\s*:|raise\b)`), "exceptions (try/except/raise) are not supported (weir's Python dialect is Starlark; an element whose code fails goes to the error output)"},
	{regexp.MustCompile(`(?:^|[^\w.])(with|yield|async|await|global|nonlocal|del)\b`), "this statement is not supported (weir's Python dialect is Starlark: no with, yield, async, global, nonlocal or del)"},
	{regexp.MustCompile(`(?:^|[^\w.])(is)\b`), "the is operator is not supported (weir's Python dialect is Starlark: compare with ==, e.g. x == None)"},
	{regexp.MustCompile(`[\w)\]]\s*(\*\*)`), "the ** operator is not supported (weir's Python dialect is Starlark: use math.pow)"},
	{regexp.MustCompile(`(:=)`), "assignment expressions (:=) are not supported (weir's Python dialect is Starlark)"},
	{regexp.MustCompile(`(?m)^\s*(@)\w`), "decorators are not supported (weir's Python dialect is Starlark)"},
}

// pyFString finds an f-string prefix: f, rf or fr before a quote.
var pyFString = regexp.MustCompile(`(?:^|[^\w.])([fF][rR]?|[rR][fF])["']`)

// pyUnsupported finds the first Python construct in src that the dialect
// lacks: what to say, and its position in src (1-based line and column).
func pyUnsupported(src string) (msg string, line, col int) {
	code := pyBlankStrings(src)
	best := -1
	try := func(at int, m string) {
		if at >= 0 && (best < 0 || at < best) {
			best, msg = at, m
		}
	}
	for _, m := range pyFString.FindAllStringSubmatchIndex(src, -1) {
		// A prefix outside any string literal is code.
		if code[m[2]:m[3]] == src[m[2]:m[3]] {
			try(m[2], "this f-string is not supported: weir's Python dialect (Starlark) takes f'...{expr}...' with !r and !s, but no format spec ({x:.2f}), {x=}, raw or triple-quoted f-strings, or a quote of the f-string's own kind inside {}: use \"{}\".format(x) or %")
			break
		}
	}
	for _, c := range pyConstructs {
		if m := c.re.FindStringSubmatchIndex(code); m != nil {
			try(m[2], c.msg)
		}
	}
	if best < 0 {
		return "", 0, 0
	}
	line = 1 + strings.Count(src[:best], "\n")
	col = best - strings.LastIndex(src[:best], "\n")
	return msg, line, col
}

// CodeError is a compile error in the code itself (syntax, an undefined
// name, a failing definition), for ErrorAt to place.
type CodeError struct{ Err error }

func (e *CodeError) Error() string { return e.Err.Error() }

// Unwrap returns the Starlark error.
func (e *CodeError) Unwrap() error { return e.Err }

// DefsError is a callable whose definitions failed to run.
type DefsError struct{ Err error }

func (e *DefsError) Error() string { return e.Err.Error() }

// Unwrap returns the Starlark error.
func (e *DefsError) Unwrap() error { return e.Err }

// ErrorAt places a compile error of src (a CodeError's Err): the 1-based
// line and column in src it points at (0 when unknown) and what to say,
// naming what is unsupported when it is Python outside the dialect; fields
// lists the input's fields for an undefined name. ok is false when err is
// not about the code.
func ErrorAt(err error, src, fields string) (line, col int, msg string, ok bool) {
	var pos syntax.Position
	var se syntax.Error
	var re resolve.ErrorList
	switch {
	case errors.As(err, &se):
		pos, msg = se.Pos, se.Msg
	case errors.As(err, &re) && len(re) > 0:
		pos, msg = re[0].Pos, re[0].Msg
		if name, ok := strings.CutPrefix(msg, "undefined: "); ok {
			switch name {
			case "true", "false", "null":
				msg = fmt.Sprintf("name %q is not defined: Python spells it %s", name, map[string]string{"true": "True", "false": "False", "null": "None"}[name])
			default:
				msg = fmt.Sprintf("name %q is not defined: it is neither a field of the input (%s) nor a builtin; third-party modules are not available", name, fields)
			}
		}
	default:
		return 0, 0, "", false
	}
	if hint, hl, hc := pyUnsupported(src); hint != "" {
		// The parser stops at a token after the construct; name the
		// construct where it is.
		return hl, hc, hint, true
	}
	return int(pos.Line), int(pos.Col), msg, true
}

// identRE matches names usable as parameters.
var identRE = regexp.MustCompile(`^[_a-zA-Z][_a-zA-Z0-9]*$`)

// IsIdent says whether name can be a Python parameter.
func IsIdent(name string) bool {
	if name == "" || identRE.FindString(name) != name {
		return false
	}
	_, err := syntax.ParseExpr("", name, 0)
	return err == nil && name != "None" && name != "True" && name != "False"
}

// CompileExpr compiles src (as Prepare returns it), a Python expression
// whose variables are the fields of schema and the metadata meta, in file
// (for positions). Its errors are CodeErrors.
func CompileExpr(file, src string, schema *row.Schema, meta []Meta) (*Program, error) {
	// Parse the text alone so positions are the text's; wrapping it in
	// parentheses would allow line breaks but shift the columns.
	expr, err := pyFileOptions.ParseExpr(file, src, 0)
	if err != nil {
		return nil, &CodeError{err}
	}
	// The expression becomes the body of a lambda over the fields it names.
	used := map[string]bool{}
	syntax.Walk(expr, func(x syntax.Node) bool {
		if id, ok := x.(*syntax.Ident); ok {
			used[id.Name] = true
		}
		return true
	})
	p := &Program{Src: src, params: []int{}, meta: meta}
	var params []syntax.Expr
	start, _ := expr.Span()
	types := map[string]row.Type{}
	for i, f := range schema.Fields {
		if used[f.Name] && IsIdent(f.Name) {
			p.params = append(p.params, i)
			params = append(params, &syntax.Ident{NamePos: start, Name: f.Name})
			types[f.Name] = f.Type
		}
	}
	// The element's window and pane, by name, when the row has no such
	// field (a Combine written for Beam keeps them as metadata).
	for k, m := range meta {
		if used[m.Name] && schema.Index(m.Name) < 0 {
			p.params = append(p.params, pyMetaParam0-k)
			params = append(params, &syntax.Ident{NamePos: start, Name: m.Name})
			types[m.Name] = m.Type
		}
	}
	p.Type = pyInfer(expr, types)
	expr = (&rewriter{names: types}).expr(expr)
	lam := &syntax.LambdaExpr{Lambda: start, Params: params, Body: expr}
	th := &starlark.Thread{Name: "weir-python-compile"}
	v, err := starlark.EvalExprOptions(&pyFileOptions, th, lam, pyPredeclared())
	if err != nil {
		return nil, &CodeError{err}
	}
	p.fn = v.(starlark.Callable)
	return p, nil
}

// CompileCallable compiles src (as Prepare returns it), Beam's callable: a
// lambda, or a def whose last defined function is called with the row (of
// schema; the metadata meta are attributes of the row when it has no such
// field). Errors in the code are CodeErrors; a failure of the definitions
// is a DefsError; other errors say what is wrong with the callable.
func CompileCallable(file, src string, schema *row.Schema, meta []Meta) (*Program, error) {
	trimmed := strings.TrimSpace(src)
	p := &Program{Src: trimmed, Type: row.Of(row.KindAny), meta: meta}
	th := &starlark.Thread{Name: "weir-python-compile", Print: func(*starlark.Thread, string) {}}
	th.SetMaxExecutionSteps(MaxSteps)
	if strings.HasPrefix(trimmed, "lambda") {
		expr, err := pyFileOptions.ParseExpr(file, src, 0)
		if err != nil {
			return nil, &CodeError{err}
		}
		if lam, ok := expr.(*syntax.LambdaExpr); ok && len(lam.Params) == 1 {
			if id, ok := lam.Params[0].(*syntax.Ident); ok {
				p.Type = pyInfer(lam.Body, map[string]row.Type{id.Name: row.RowOf(schema)})
			}
		}
		expr = (&rewriter{}).expr(expr)
		v, err := starlark.EvalExprOptions(&pyFileOptions, th, expr, pyPredeclared())
		if err != nil {
			return nil, &CodeError{err}
		}
		fn, ok := v.(starlark.Callable)
		if !ok {
			return nil, fmt.Errorf("the callable is a %s, not a function", v.Type())
		}
		p.fn = fn
		return p, nil
	}
	f, err := pyFileOptions.Parse(file, src, 0)
	if err != nil {
		return nil, &CodeError{err}
	}
	last := ""
	for _, s := range f.Stmts {
		if d, ok := s.(*syntax.DefStmt); ok {
			last = d.Name.Name
		}
	}
	if last == "" {
		return nil, errors.New("a callable is a lambda or a def (its last def is called with the row)")
	}
	(&rewriter{}).stmts(f.Stmts)
	prog, err := starlark.FileProgram(f, pyPredeclared().Has)
	if err != nil {
		return nil, &CodeError{err}
	}
	g, err := prog.Init(th, pyPredeclared())
	if err != nil {
		return nil, &DefsError{err}
	}
	g.Freeze()
	fn, ok := g[last].(starlark.Callable)
	if !ok {
		return nil, fmt.Errorf("%s is not a function", last)
	}
	p.fn = fn
	return p, nil
}

// ---- type inference ----

var (
	tAny    = row.Of(row.KindAny)
	tInt    = row.Of(row.KindInt)
	tFloat  = row.Of(row.KindFloat)
	tBool   = row.Of(row.KindBool)
	tString = row.Of(row.KindString)
)

// pyStringMethods are the str methods by result type.
var pyStringMethods = map[string]row.Type{
	"upper": tString, "lower": tString, "strip": tString, "lstrip": tString, "rstrip": tString,
	"title": tString, "capitalize": tString, "replace": tString, "format": tString, "join": tString,
	"removeprefix": tString, "removesuffix": tString,
	"startswith": tBool, "endswith": tBool, "isdigit": tBool, "isalpha": tBool, "isalnum": tBool,
	"isspace": tBool, "islower": tBool, "isupper": tBool, "istitle": tBool,
	"find": tInt, "rfind": tInt, "index": tInt, "rindex": tInt, "count": tInt,
	"split": row.ListOf(tString), "rsplit": row.ListOf(tString), "splitlines": row.ListOf(tString),
}

// pyInfer infers the type of a Python expression from the types of the
// names it reads, the way Beam infers a schema; any when it cannot tell.
func pyInfer(e syntax.Expr, names map[string]row.Type) row.Type {
	switch x := e.(type) {
	case *syntax.Ident:
		if t, ok := names[x.Name]; ok {
			if t.Kind == row.KindTimestamp {
				return tFloat
			}
			return t
		}
		switch x.Name {
		case "True", "False":
			return tBool
		}
	case *syntax.Literal:
		switch x.Token {
		case syntax.INT:
			return tInt
		case syntax.FLOAT:
			return tFloat
		case syntax.STRING:
			return tString
		}
	case *syntax.ParenExpr:
		return pyInfer(x.X, names)
	case *syntax.UnaryExpr:
		switch x.Op {
		case syntax.NOT:
			return tBool
		case syntax.MINUS, syntax.PLUS:
			if t := pyInfer(x.X, names); t.IsNumeric() {
				return t
			}
		}
	case *syntax.BinaryExpr:
		switch x.Op {
		case syntax.EQL, syntax.NEQ, syntax.LT, syntax.GT, syntax.LE, syntax.GE, syntax.IN, syntax.NOT_IN:
			return tBool
		case syntax.AND, syntax.OR:
			a, b := pyInfer(x.X, names), pyInfer(x.Y, names)
			if a.Equal(b) {
				return a
			}
			return tAny
		case syntax.SLASH:
			a, b := pyInfer(x.X, names), pyInfer(x.Y, names)
			if a.IsNumeric() && b.IsNumeric() {
				return tFloat
			}
		case syntax.PLUS, syntax.MINUS, syntax.STAR, syntax.SLASHSLASH, syntax.PERCENT:
			a, b := pyInfer(x.X, names), pyInfer(x.Y, names)
			switch {
			case a.Kind == row.KindInt && b.Kind == row.KindInt:
				return tInt
			case a.IsNumeric() && b.IsNumeric():
				return tFloat
			case x.Op == syntax.PLUS && a.Kind == row.KindString && b.Kind == row.KindString:
				return tString
			case x.Op == syntax.PERCENT && a.Kind == row.KindString:
				return tString
			case x.Op == syntax.STAR && (a.Kind == row.KindString && b.Kind == row.KindInt || a.Kind == row.KindInt && b.Kind == row.KindString):
				return tString
			}
		}
	case *syntax.CondExpr:
		a, b := pyInfer(x.True, names), pyInfer(x.False, names)
		if a.Equal(b) {
			return a
		}
		if a.IsNumeric() && b.IsNumeric() {
			return tFloat
		}
	case *syntax.DotExpr:
		if t := pyInfer(x.X, names); t.Kind == row.KindRow && t.Row != nil {
			if i := t.Row.Index(x.Name.Name); i >= 0 {
				ft := t.Row.Fields[i].Type
				if ft.Kind == row.KindTimestamp {
					return tFloat
				}
				return ft
			}
		}
	case *syntax.CallExpr:
		switch fn := x.Fn.(type) {
		case *syntax.Ident:
			if _, shadowed := names[fn.Name]; shadowed {
				return tAny
			}
			switch fn.Name {
			case "str", "repr":
				return tString
			case "int", "len", "hash":
				return tInt
			case "float":
				return tFloat
			case "bool":
				return tBool
			case "abs":
				if len(x.Args) == 1 {
					if t := pyInfer(x.Args[0], names); t.IsNumeric() {
						return t
					}
				}
			}
		case *syntax.DotExpr:
			if t := pyInfer(fn.X, names); t.Kind == row.KindString {
				if rt, ok := pyStringMethods[fn.Name.Name]; ok {
					return rt
				}
			}
			if id, ok := fn.X.(*syntax.Ident); ok && id.Name == "math" {
				if _, shadowed := names["math"]; !shadowed {
					switch fn.Name.Name {
					case "floor", "ceil":
						return tInt
					case "sqrt", "pow", "exp", "log", "sin", "cos", "tan", "fabs", "hypot", "round":
						return tFloat
					}
				}
			}
		}
	case *syntax.ListExpr:
		var elem *row.Type
		for _, it := range x.List {
			t := pyInfer(it, names)
			if elem == nil {
				elem = &t
			} else if !elem.Equal(t) {
				return row.ListOf(tAny)
			}
		}
		if elem == nil {
			return row.ListOf(tAny)
		}
		return row.ListOf(*elem)
	}
	return tAny
}
