package yamlpipe

import (
	"errors"
	"fmt"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/yamlpipe/celexpr"
	"github.com/weir-dev/weir/yamlpipe/python"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// celStep gathers what MapToFields, Filter and Validate share: language
// check, side inputs and the CEL scope over the input schema.
func (l *loader) celStep(t *transformSpec, in *coll) (*celexpr.Scope, []weir.StepOption, error) {
	if ln := t.config.Get("language"); ln != nil {
		lang, err := l.str(ln, "language")
		if err != nil {
			return nil, nil, err
		}
		switch lang {
		case "cel", "generic":
		case "sql":
			if t.typ != "MapToFields" && t.typ != "Filter" {
				return nil, nil, l.errf(ln, "language %q is not supported in %s; use CEL (language: generic) or python", lang, t.typ)
			}
			if sn := t.config.Get("side_inputs"); sn != nil {
				return nil, nil, l.errf(sn, "side_inputs are read by CEL expressions; with language: sql they are not supported")
			}
		case "javascript":
			if t.typ != "MapToFields" {
				return nil, nil, l.errf(ln, "language %q is not supported in %s: weir has no %s engine; use CEL (language: generic) or python", lang, t.typ, lang)
			}
		case "python":
			if t.typ == "Validate" {
				return nil, nil, l.errf(ln, "Validate rules are CEL (language: cel); python is accepted by MapToFields, Filter, AssignTimestamps and Partition")
			}
			if sn := t.config.Get("side_inputs"); sn != nil {
				return nil, nil, l.errf(sn, "side_inputs are read by CEL expressions; with language: python they are not supported")
			}
		default:
			return nil, nil, l.errf(ln, "language %q is not supported: weir evaluates CEL expressions (language: cel or generic) and Python in its Starlark dialect (language: python)", lang)
		}
	}
	var keyOf func(name string) (string, *yamlnode.Node, error)
	kn := t.config.Get("side_input_key")
	switch {
	case kn == nil:
		keyOf = func(string) (string, *yamlnode.Node, error) { return "", nil, nil }
	case kn.Kind == yamlnode.Map:
		for _, k := range kn.Keys {
			found := false
			for _, sd := range t.sides {
				found = found || sd.name == k.Text
			}
			if !found {
				return nil, nil, l.errf(k, "side_input_key names %q, which is not a side input", k.Text)
			}
		}
		keyOf = func(name string) (string, *yamlnode.Node, error) {
			n := kn.Get(name)
			if n == nil {
				return "", nil, nil
			}
			s, err := l.str(n, "side_input_key")
			return s, n, err
		}
	default:
		s, err := l.str(kn, "side_input_key")
		if err != nil {
			return nil, nil, err
		}
		if len(t.sides) == 0 {
			return nil, nil, l.errf(kn, "side_input_key needs side_inputs")
		}
		keyOf = func(string) (string, *yamlnode.Node, error) { return s, kn, nil }
	}
	var decls []celexpr.Side
	var views []weir.SideInput
	for _, sd := range t.sides {
		key := sd.from.name
		if sd.tag != "" {
			key += "." + sd.tag
		}
		c := l.outs[key]
		if c == nil || !c.valid() {
			return nil, nil, l.errf(sd.n, "side input %q could not be built", sd.text)
		}
		d := celexpr.Side{Name: sd.name, Schema: c.schema, KeyField: -1}
		field, fn, err := keyOf(sd.name)
		if err != nil {
			return nil, nil, err
		}
		if field != "" {
			if d.KeyField = c.schema.Index(field); d.KeyField < 0 {
				return nil, nil, l.errf(fn, "side_input_key %q is not a field of %q (%s)", field, sd.text, c.schema)
			}
		}
		decls = append(decls, d)
		views = append(views, sideView(sd.name, c))
	}
	sc, err := newCELScope(in.schema, decls)
	if err != nil {
		at := t.config.Get("side_inputs")
		if at == nil {
			at = t.n
		}
		return nil, nil, l.wrapf(at, err, "%s", t.typ)
	}
	var opts []weir.StepOption
	if len(views) > 0 {
		opts = append(opts, weir.WithSideInputs(views...))
	}
	return sc, opts, nil
}

// compileExpr compiles the expression in n, reporting CEL errors at their
// place in the file when the expression is a one-line scalar.
func (l *loader) compileExpr(sc *celexpr.Scope, n *yamlnode.Node, what string) (*celexpr.Program, *cel.Type, error) {
	expr, err := l.str(n, what)
	if err != nil {
		return nil, nil, err
	}
	if strings.TrimSpace(expr) == "" {
		return nil, nil, l.errf(n, "%s is empty", what)
	}
	prg, typ, err := sc.Compile(expr)
	if err != nil {
		var ce *celexpr.Error
		if errors.As(err, &ce) {
			line, col := n.Line, n.Col
			if ce.Line == 1 && !strings.Contains(expr, "\n") && ce.Col > 0 {
				col += ce.Col - 1
				if n.Quoted {
					col++
				}
			}
			return nil, nil, &Error{File: l.file, Line: line, Col: col, Err: err,
				Msg: fmt.Sprintf("%s: CEL: %s in %q (%s)", what, ce.Msg, expr, sc.FieldsHint())}
		}
		return nil, nil, l.wrapf(n, err, "%s", what)
	}
	return prg, typ, nil
}

// ---- MapToFields ----

// fieldOp computes one output field: a copy of input field src, or a program.
type fieldOp struct {
	name string
	src  int
	prg  *celexpr.Program
	py   *python.Program
	typ  row.Type
}

// mapFieldsFn is MapToFields' DoFn.
type mapFieldsFn struct {
	out  *row.Schema
	ops  []fieldOp
	act  celexpr.Activation
	slab slab
	// pys are the Python evaluators of the ops that have one.
	pys []*python.Eval
	// metrics are the step's metrics: (metrics.go).
	metrics []stepMetric
}

// Clone gives each worker its own activation, Python threads and
// allocation slab.
func (f *mapFieldsFn) Clone() any {
	return &mapFieldsFn{out: f.out, ops: f.ops, act: celexpr.NewActivation(f.act.Scope()), pys: newPyEvals(f.ops), metrics: f.metrics}
}

// newPyEvals makes one Python evaluator per op that has Python code.
func newPyEvals(ops []fieldOp) []*python.Eval {
	var out []*python.Eval
	for i := range ops {
		if ops[i].py != nil {
			if out == nil {
				out = make([]*python.Eval, len(ops))
			}
			out[i] = ops[i].py.NewEval()
		}
	}
	return out
}

func (f *mapFieldsFn) apply(in *rowT, pc *contract.ProcessContext) (*rowT, error) {
	f.act.Reset(in, pc)
	if f.metrics != nil {
		if err := evalMetrics(f.metrics, &f.act, pc); err != nil {
			return nil, err
		}
	}
	out := f.slab.row(f.out)
	for i := range f.ops {
		op := &f.ops[i]
		if op.py != nil {
			x, err := f.pys[i].At(pc).Eval(in, "field "+op.name)
			if err != nil {
				return nil, err
			}
			out.Values[i] = x
			continue
		}
		if op.prg == nil {
			if op.src < len(in.Values) {
				out.Values[i] = in.Values[op.src]
			}
			continue
		}
		x, err := f.act.EvalValue(op.prg, op.typ)
		if err != nil {
			return nil, celexpr.EvalError("field "+op.name, err)
		}
		out.Values[i] = x
	}
	return out, nil
}

// Process implements contract.DoFn.
func (f *mapFieldsFn) Process(pc *contract.ProcessContext, e contract.Element) error {
	in, ok := row.AsRow(e.Value)
	if !ok {
		return notARow(e.Value)
	}
	out, err := f.apply(in, pc)
	if err != nil {
		return err
	}
	e.Value = out
	pc.Emit(0, e)
	return nil
}

func notARow(v any) error {
	return &contract.ElementError{Reason: "type_mismatch", Message: fmt.Sprintf("expected a row, got %T", v)}
}

// slab hands out rows and value slices carved from larger allocations.
type slab struct {
	rows []rowT
	vals []any
}

const slabRows = 256

func (s *slab) row(schema *row.Schema) *rowT {
	n := len(schema.Fields)
	if len(s.rows) == 0 {
		s.rows = make([]rowT, slabRows)
	}
	if len(s.vals) < n {
		s.vals = make([]any, n*slabRows)
	}
	r := &s.rows[0]
	s.rows = s.rows[1:]
	r.Schema = schema
	r.Values = s.vals[:n:n]
	s.vals = s.vals[n:]
	return r
}

func buildMapToFields(l *loader, t *transformSpec, ins []*coll) (*coll, error) {
	in := ins[0]
	sc, opts, err := l.celStep(t, in)
	if err != nil {
		return nil, err
	}
	appendIn, err := l.boolean(t.config.Get("append"), "append")
	if err != nil {
		return nil, err
	}
	drops, dropNodes, err := l.strList(t.config.Get("drop"), "drop")
	if err != nil {
		return nil, err
	}
	if len(drops) > 0 && !appendIn {
		return nil, l.errf(t.config.KeyNode("drop"), "drop only applies with append: true (without it, only the listed fields are kept)")
	}
	fn := t.config.Get("fields")
	if fn == nil && !appendIn {
		return nil, l.errf(t.typNode, "MapToFields needs config.fields (name: CEL expression)")
	}
	if fn != nil && fn.Kind != yamlnode.Map {
		return nil, l.errf(fn, "fields must map names to CEL expressions, not %s", fn.Kind)
	}
	isPy := l.isPython(t)
	fieldsOnly := l.fieldNamesOnly(t)
	if fieldsOnly == "sql" && fn != nil && !l.sqlFieldNames(in, fn) {
		// Expressions beyond field names: the fields become one SELECT,
		// run by SQLite per element (beam_sql.go).
		return l.sqlMapToFields(t, in, appendIn, drops, fn)
	}
	var ops []fieldOp
	var fields []row.Field
	if appendIn {
		dropped := map[string]bool{}
		for i, d := range drops {
			if in.schema.Index(d) < 0 {
				return nil, l.errf(dropNodes[i], "drop: %q is not a field of the input (%s)", d, in.schema)
			}
			dropped[d] = true
		}
		for i, f := range in.schema.Fields {
			if !dropped[f.Name] {
				ops = append(ops, fieldOp{name: f.Name, src: i, typ: f.Type})
				fields = append(fields, f)
			}
		}
	}
	if fn != nil {
		for i, k := range fn.Keys {
			en := fn.Vals[i]
			if isPy && (en.Kind != yamlnode.String || !python.IsIdent(en.Text) || in.schema.Index(en.Text) < 0) {
				py, err := l.compilePython(in, en, "field "+k.Text)
				if err != nil {
					return nil, err
				}
				op := fieldOp{name: k.Text, src: -1, py: py, typ: py.Type}
				ops, fields = setField(ops, fields, op)
				continue
			}
			if en.Kind == yamlnode.Map {
				if err := l.checkKeys(en, "a field", "expression"); err != nil {
					return nil, err
				}
				if en = en.Get("expression"); en == nil {
					return nil, l.errf(fn.Vals[i], "field %q needs an expression", k.Text)
				}
			}
			op := fieldOp{name: k.Text, src: -1}
			if fieldsOnly != "" {
				src, err := l.fieldNameOnly(in, en, fieldsOnly, "field "+k.Text)
				if err != nil {
					return nil, err
				}
				op.src, op.typ = src, in.schema.Fields[src].Type
				ops, fields = setField(ops, fields, op)
				continue
			}
			if en.Kind == yamlnode.String && celexpr.Ident.MatchString(en.Text) && in.schema.Index(en.Text) >= 0 {
				// A bare field name is a copy: no program to run.
				op.src = in.schema.Index(en.Text)
				op.typ = in.schema.Fields[op.src].Type
			} else {
				prg, typ, err := l.compileExpr(sc, en, "field "+k.Text)
				if err != nil {
					return nil, err
				}
				op.prg, op.typ = prg, celexpr.RowType(typ)
			}
			ops, fields = setField(ops, fields, op)
		}
	}
	out, err := row.NewSchema(fields...)
	if err != nil {
		return nil, l.wrapf(fn, err, "bad fields")
	}
	if len(fields) == 0 {
		return nil, l.errf(t.typNode, "MapToFields produces no fields")
	}
	metrics, err := l.parseMetrics(t, sc)
	if err != nil {
		return nil, err
	}
	dofn := &mapFieldsFn{out: out, ops: ops, act: celexpr.NewActivation(sc), pys: newPyEvals(ops), metrics: metrics}
	opts = append(stepOpts(t, append(errorOpt(t), weir.WithCoder(out.Coder()))...), opts...)
	res := parDo(l.root, t.name, in, dofn, opts...)
	l.registerErrors(t, res)
	return rowsColl(out, res), nil
}

// setField replaces the field op.name (MapToFields with append) or adds it.
func setField(ops []fieldOp, fields []row.Field, op fieldOp) ([]fieldOp, []row.Field) {
	for j := range fields {
		if fields[j].Name == op.name {
			fields[j].Type, ops[j] = op.typ, op
			return ops, fields
		}
	}
	return append(ops, op), append(fields, row.Field{Name: op.name, Type: op.typ})
}

// ---- Filter ----

// filterFn is Filter's DoFn.
type filterFn struct {
	expr string
	prg  *celexpr.Program
	act  celexpr.Activation
	// py is the Python keep (language: python), with this worker's pe.
	py *python.Program
	pe *python.Eval
	// metrics are the step's metrics: (metrics.go).
	metrics []stepMetric
}

// Clone gives each worker its own activation.
func (f *filterFn) Clone() any {
	c := &filterFn{expr: f.expr, prg: f.prg, act: celexpr.NewActivation(f.act.Scope()), py: f.py, metrics: f.metrics}
	if f.py != nil {
		c.pe = f.py.NewEval()
	}
	return c
}

func (f *filterFn) keep(in *rowT, pc *contract.ProcessContext) (bool, error) {
	if f.metrics != nil {
		f.act.Reset(in, pc)
		if err := evalMetrics(f.metrics, &f.act, pc); err != nil {
			return false, err
		}
	}
	if f.pe != nil {
		return f.pe.At(pc).Truth(in, "keep")
	}
	f.act.Reset(in, pc)
	b, err := f.act.EvalBool(f.prg)
	if err != nil {
		return false, celexpr.EvalError("keep", err)
	}
	return b, nil
}

// Process implements contract.DoFn.
func (f *filterFn) Process(pc *contract.ProcessContext, e contract.Element) error {
	in, ok := row.AsRow(e.Value)
	if !ok {
		return notARow(e.Value)
	}
	keep, err := f.keep(in, pc)
	if err != nil || !keep {
		return err
	}
	e.Value = in
	pc.Emit(0, e)
	return nil
}

// boolExpr compiles an expression that must produce a bool.
func (l *loader) boolExpr(sc *celexpr.Scope, n *yamlnode.Node, what string) (*celexpr.Program, error) {
	prg, typ, err := l.compileExpr(sc, n, what)
	if err != nil {
		return nil, err
	}
	if k := typ.Kind(); k != types.BoolKind && k != types.DynKind && k != types.AnyKind {
		return nil, l.errf(n, "%s must be a boolean expression; %q has type %s", what, n.Text, typ)
	}
	return prg, nil
}

func buildFilter(l *loader, t *transformSpec, ins []*coll) (*coll, error) {
	in := ins[0]
	sc, opts, err := l.celStep(t, in)
	if err != nil {
		return nil, err
	}
	kn := t.config.Get("keep")
	if kn == nil {
		return nil, l.errf(t.typNode, "Filter needs config.keep (a CEL boolean expression)")
	}
	if l.fieldNamesOnly(t) == "sql" {
		return l.sqlFilter(t, in, kn)
	}
	var dofn *filterFn
	if l.isPython(t) {
		py, err := l.compilePython(in, kn, "keep")
		if err != nil {
			return nil, err
		}
		// Beam keeps an element when keep is truthy, as Python's if does.
		dofn = &filterFn{expr: py.Src, py: py, pe: py.NewEval(), act: celexpr.NewActivation(sc)}
	} else {
		prg, err := l.boolExpr(sc, kn, "keep")
		if err != nil {
			return nil, err
		}
		dofn = &filterFn{expr: kn.Text, prg: prg, act: celexpr.NewActivation(sc)}
	}
	if dofn.metrics, err = l.parseMetrics(t, sc); err != nil {
		return nil, err
	}
	opts = append(stepOpts(t, append(errorOpt(t), weir.WithCoder(in.schema.Coder()))...), opts...)
	res := parDo(l.root, t.name, in, dofn, opts...)
	l.registerErrors(t, res)
	return rowsColl(in.schema, res), nil
}

// ---- Validate ----

type rule struct {
	name, expr string
	prg        *celexpr.Program
}

// validateFn is Validate's DoFn: the first failing rule rejects the
// element with the rule's name as reason.
type validateFn struct {
	rules []rule
	act   celexpr.Activation
}

// Clone gives each worker its own activation.
func (f *validateFn) Clone() any {
	return &validateFn{rules: f.rules, act: celexpr.NewActivation(f.act.Scope())}
}

func (f *validateFn) check(in *rowT, pc *contract.ProcessContext) error {
	f.act.Reset(in, pc)
	for i := range f.rules {
		r := &f.rules[i]
		ok, err := f.act.EvalBool(r.prg)
		if err != nil {
			return celexpr.EvalError("rule "+r.name, err)
		}
		if !ok {
			return &contract.ElementError{Reason: r.name, Message: fmt.Sprintf("rule %s failed: %s", r.name, r.expr)}
		}
	}
	return nil
}

// Process implements contract.DoFn.
func (f *validateFn) Process(pc *contract.ProcessContext, e contract.Element) error {
	in, ok := row.AsRow(e.Value)
	if !ok {
		return notARow(e.Value)
	}
	if err := f.check(in, pc); err != nil {
		return err
	}
	e.Value = in
	pc.Emit(0, e)
	return nil
}

func buildValidate(l *loader, t *transformSpec, ins []*coll) (*coll, error) {
	in := ins[0]
	sc, opts, err := l.celStep(t, in)
	if err != nil {
		return nil, err
	}
	rn := t.config.Get("rules")
	if rn == nil || rn.Kind != yamlnode.Map || len(rn.Keys) == 0 {
		at := rn
		if at == nil {
			at = t.typNode
		}
		return nil, l.errf(at, "Validate needs config.rules (rule_name: CEL boolean expression)")
	}
	var rules []rule
	for i, k := range rn.Keys {
		prg, err := l.boolExpr(sc, rn.Vals[i], "rule "+k.Text)
		if err != nil {
			return nil, err
		}
		rules = append(rules, rule{name: k.Text, expr: rn.Vals[i].Text, prg: prg})
	}
	dofn := &validateFn{rules: rules, act: celexpr.NewActivation(sc)}
	opts = append(stepOpts(t, append(errorOpt(t), weir.WithCoder(in.schema.Coder()))...), opts...)
	res := parDo(l.root, t.name, in, dofn, opts...)
	l.registerErrors(t, res)
	return rowsColl(in.schema, res), nil
}

// fieldNamesOnly returns the language of a MapToFields or Filter whose
// expressions are neither CEL nor Python: sql (run by SQLite,
// beam_sql.go, unless every MapToFields field only names a field) or
// javascript (field names only); "" for the others.
func (l *loader) fieldNamesOnly(t *transformSpec) string {
	if ln := t.config.Get("language"); ln != nil && ln.Kind == yamlnode.String && (ln.Text == "sql" || ln.Text == "javascript") {
		return ln.Text
	}
	return ""
}

// fieldNameOnly resolves a sql or javascript expression that must name an
// input field: in SQL it may be quoted with backticks (`rank`), as Beam's
// Calcite dialect quotes identifiers.
func (l *loader) fieldNameOnly(in *coll, n *yamlnode.Node, lang, what string) (int, error) {
	name := n.Text
	if lang == "sql" && len(name) >= 2 && name[0] == '`' && name[len(name)-1] == '`' {
		name = name[1 : len(name)-1]
	}
	if n.Kind == yamlnode.String {
		if i := in.schema.Index(name); i >= 0 {
			return i, nil
		}
	}
	return -1, l.errf(n, "%s: %q is not a field of the input (%s); weir has no %s engine, so language: %s expressions may only name a field: use CEL (language: generic) or python", what, n.Text, in.schema, lang, lang)
}
