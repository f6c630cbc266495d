package yamlpipe

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/io/files"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/yamlpipe/celexpr"
	"github.com/weir-dev/weir/yamlpipe/logfortesting"
	"github.com/weir-dev/weir/yamlpipe/python"
	"github.com/weir-dev/weir/yamlpipe/wininfo"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// Beam YAML's elementwise transforms, as Beam's transform catalog defines
// them (apache_beam.yaml.yaml_mapping and yaml_provider): Explode,
// AssignTimestamps, Partition and LogForTesting.

// ---- values: a field or an expression ----

// valueFn computes a value per row: a copy of input field src, or a CEL
// program.
type valueFn struct {
	src  int
	prg  *celexpr.Program
	py   *python.Program // language: python
	typ  row.Type
	expr *yamlnode.Node // while resolving: the expression to compile
}

// exprLanguage reads a Beam language key: cel and generic expressions are
// CEL; python is weir's Starlark dialect; with javascript only field names
// are accepted.
func (l *loader) exprLanguage(t *transformSpec) (string, error) {
	ln := t.config.Get("language")
	if ln == nil {
		return "", nil
	}
	lang, err := l.str(ln, "language")
	if err != nil {
		return "", err
	}
	switch lang {
	case "cel", "generic", "python", "javascript":
		return lang, nil
	}
	return "", l.errf(ln, "language %q is not supported: weir evaluates CEL expressions (language: cel or generic) and Python in its Starlark dialect (language: python); javascript accepts field names only", lang)
}

// fieldOrExpr compiles n, Beam's `field`, `expression` or {expression: ...}:
// a bare input field is read directly; anything else is a CEL expression,
// compiled in the returned scope with the step's side inputs.
func (l *loader) fieldOrExpr(t *transformSpec, in *coll, n *yamlnode.Node, what string) (valueFn, *celexpr.Scope, []weir.StepOption, error) {
	v, err := l.fieldOrExprValue(t, in, n, what)
	if err != nil || v.src >= 0 || v.py != nil {
		return v, nil, nil, err
	}
	sc, sides, err := l.celStep(t, in)
	if err != nil {
		return valueFn{}, nil, nil, err
	}
	prg, typ, err := l.compileExpr(sc, v.expr, what)
	if err != nil {
		return valueFn{}, nil, nil, err
	}
	return valueFn{src: -1, prg: prg, typ: celexpr.RowType(typ)}, sc, sides, nil
}

// fieldOrExprValue resolves n to an input field (src >= 0) or to the node
// of a CEL expression (expr).
func (l *loader) fieldOrExprValue(t *transformSpec, in *coll, n *yamlnode.Node, what string) (valueFn, error) {
	lang, err := l.exprLanguage(t)
	if err != nil {
		return valueFn{}, err
	}
	if lang == "python" && (n.Kind != yamlnode.String || in.schema.Index(n.Text) < 0) {
		py, err := l.compilePython(in, n, what)
		if err != nil {
			return valueFn{}, err
		}
		return valueFn{src: -1, py: py, typ: py.Type}, nil
	}
	if n.Kind == yamlnode.Map {
		if c := n.Get("callable"); c != nil {
			return valueFn{}, l.errf(c, "%s: callable needs language: python (weir's Starlark dialect); or write the expression in CEL", what)
		}
		if err := l.checkKeys(n, what, "expression"); err != nil {
			return valueFn{}, err
		}
		e := n.Get("expression")
		if e == nil {
			return valueFn{}, l.errf(n, "%s needs an expression", what)
		}
		n = e
	}
	if n.Kind == yamlnode.String {
		if i := in.schema.Index(n.Text); i >= 0 {
			return valueFn{src: i, typ: in.schema.Fields[i].Type}, nil
		}
	}
	if lang == "javascript" {
		return valueFn{}, l.errf(n, "%s: %q is not a field of the input (%s); javascript expressions are not supported: use CEL (language: generic) or python", what, n.Text, in.schema)
	}
	return valueFn{src: -1, expr: n}, nil
}

// evaluator evaluates a valueFn; each worker has its own (an activation is
// not safe for concurrent use).
type evaluator struct {
	v   valueFn
	act *celexpr.Activation
	pe  *python.Eval
}

func newEvaluator(v valueFn, sc *celexpr.Scope) evaluator {
	e := evaluator{v: v}
	if v.prg != nil {
		a := celexpr.NewActivation(sc)
		e.act = &a
	}
	if v.py != nil {
		e.pe = v.py.NewEval()
	}
	return e
}

func (e *evaluator) clone() evaluator {
	c := evaluator{v: e.v}
	if e.act != nil {
		a := celexpr.NewActivation(e.act.Scope())
		c.act = &a
	}
	if e.v.py != nil {
		c.pe = e.v.py.NewEval()
	}
	return c
}

func (e *evaluator) eval(r *rowT, pc *contract.ProcessContext, what string) (any, error) {
	if e.pe != nil {
		return e.pe.At(pc).Eval(r, what)
	}
	if e.v.prg == nil {
		return r.Values[e.v.src], nil
	}
	e.act.Reset(r, pc)
	x, err := e.act.EvalValue(e.v.prg, e.v.typ)
	if err != nil {
		return nil, celexpr.EvalError(what, err)
	}
	return x, nil
}

// ---- AssignTimestamps ----

// assignTimestampsFn is AssignTimestamps' DoFn.
type assignTimestampsFn struct{ ev evaluator }

// Clone gives each worker its own evaluator.
func (f *assignTimestampsFn) Clone() any { return &assignTimestampsFn{ev: f.ev.clone()} }

// Process implements contract.DoFn.
func (f *assignTimestampsFn) Process(pc *contract.ProcessContext, e contract.Element) error {
	in, ok := row.AsRow(e.Value)
	if !ok {
		return notARow(e.Value)
	}
	x, err := f.ev.eval(in, pc, "timestamp")
	if err != nil {
		return err
	}
	ts, err := wininfo.EventTime(x)
	if err != nil {
		return &contract.ElementError{Reason: files.ReasonBadTimestamp, Message: "timestamp: " + err.Error()}
	}
	e.Value, e.Time = in, ts
	pc.Emit(0, e)
	return nil
}

func buildAssignTimestamps(l *loader, t *transformSpec, ins []*coll) (*coll, error) {
	in := ins[0]
	tn := t.config.Get("timestamp")
	if tn == nil {
		return nil, l.errf(t.typNode, "AssignTimestamps needs config.timestamp (a field or a CEL expression)")
	}
	v, sc, sides, err := l.fieldOrExpr(t, in, tn, "timestamp")
	if err != nil {
		return nil, err
	}
	switch v.typ.Kind {
	case row.KindTimestamp, row.KindInt, row.KindFloat, row.KindString, row.KindAny:
	default:
		return nil, l.errf(tn, "timestamp has type %s; want a timestamp, seconds since the epoch (int or float) or an RFC 3339 string", v.typ)
	}
	fn := &assignTimestampsFn{ev: newEvaluator(v, sc)}
	opts := append(stepOpts(t, append(errorOpt(t), weir.WithCoder(in.schema.Coder()))...), sides...)
	res := parDo(l.root, t.name, in, fn, opts...)
	l.registerErrors(t, res)
	return rowsColl(in.schema, res), nil
}

// ---- Explode ----

// explodeFn is Explode's DoFn.
type explodeFn struct {
	out    *row.Schema
	fields []int
	cross  bool
}

// Process implements contract.DoFn.
func (f *explodeFn) Process(pc *contract.ProcessContext, e contract.Element) error {
	in, ok := row.AsRow(e.Value)
	if !ok {
		return notARow(e.Value)
	}
	lists := make([][]any, len(f.fields))
	for j, i := range f.fields {
		l, ok := in.Values[i].([]any)
		if !ok {
			return &contract.ElementError{Reason: "type_mismatch",
				Message: fmt.Sprintf("Explode: field %s is %s, not a list", in.Schema.Fields[i].Name, row.GoTypeName(in.Values[i]))}
		}
		lists[j] = l
	}
	emit := func(vals []any) {
		r := &rowT{Schema: f.out, Values: slices.Clone(vals)}
		o := e
		o.Value = r
		pc.Emit(0, o)
	}
	base := slices.Clone(in.Values)
	if f.cross {
		var rec func(k int)
		rec = func(k int) {
			if k == len(f.fields) {
				emit(base)
				return
			}
			for _, v := range lists[k] {
				base[f.fields[k]] = v
				rec(k + 1)
			}
		}
		rec(0)
		return nil
	}
	n := 0
	for _, l := range lists {
		n = max(n, len(l))
	}
	for i := 0; i < n; i++ {
		for j, fi := range f.fields {
			base[fi] = nil
			if i < len(lists[j]) {
				base[fi] = lists[j][i]
			}
		}
		emit(base)
	}
	return nil
}

func buildExplode(l *loader, t *transformSpec, ins []*coll) (*coll, error) {
	in := ins[0]
	if in.isReject {
		return nil, l.errf(t.typNode, "Explode reads rows, not an error output")
	}
	names, nodes, err := l.strList(t.config.Get("fields"), "fields")
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, l.errf(t.typNode, "Explode needs config.fields (a field or a list of fields of list type)")
	}
	cross := true
	cn := t.config.Get("cross_product")
	if cn != nil && cn.Kind != yamlnode.Null {
		if cross, err = l.boolean(cn, "cross_product"); err != nil {
			return nil, err
		}
	} else if len(names) > 1 {
		return nil, l.errf(t.config.KeyNode("fields"), "cross_product must be specified true or false when exploding several fields")
	}
	fields := slices.Clone(in.schema.Fields)
	f := &explodeFn{cross: cross}
	seen := map[string]bool{}
	for i, name := range names {
		idx := in.schema.Index(name)
		if idx < 0 {
			return nil, l.errf(nodes[i], "Explode: %q is not a field of the input (%s)", name, in.schema)
		}
		if seen[name] {
			return nil, l.errf(nodes[i], "Explode: %q is listed twice", name)
		}
		seen[name] = true
		switch ft := in.schema.Fields[idx].Type; ft.Kind {
		case row.KindList:
			fields[idx].Type = *ft.Elem
		case row.KindAny:
		default:
			return nil, l.errf(nodes[i], "Explode: field %q is %s, not a list", name, ft)
		}
		f.fields = append(f.fields, idx)
	}
	out, err := row.NewSchema(fields...)
	if err != nil {
		return nil, l.wrapf(t.typNode, err, "Explode")
	}
	f.out = out
	res := parDo(l.root, t.name, in, f, stepOpts(t, append(errorOpt(t), weir.WithCoder(out.Coder()))...)...)
	l.registerErrors(t, res)
	return rowsColl(out, res), nil
}

// ---- Partition ----

// partitionOutputs returns the outputs a Partition declares (outputs and
// unknown_output), read from its config as written.
func partitionOutputs(t *transformSpec) []string {
	var out []string
	if on := t.config.Get("outputs"); on != nil && on.Kind == yamlnode.Seq {
		for _, o := range on.Seq {
			if o.Kind == yamlnode.String && !slices.Contains(out, o.Text) {
				out = append(out, o.Text)
			}
		}
	}
	if un := t.config.Get("unknown_output"); un != nil && un.Kind == yamlnode.String && !slices.Contains(out, un.Text) {
		out = append(out, un.Text)
	}
	return out
}

// outputTags returns the named outputs of t besides its error output:
// a Partition's outputs.
func (l *loader) outputTags(t *transformSpec) []string {
	if t.typ == "Partition" {
		return partitionOutputs(t)
	}
	return nil
}

// reasonUnknownOutput is the reject reason of an element a Partition sends
// to an output it does not declare.
const reasonUnknownOutput = "unknown_output"

func buildPartition(l *loader, t *transformSpec, ins []*coll) (*coll, error) {
	in := ins[0]
	if in.isReject {
		return nil, l.errf(t.typNode, "Partition reads rows, not an error output")
	}
	outputs, outNodes, err := l.strList(t.config.Get("outputs"), "outputs")
	if err != nil {
		return nil, err
	}
	if len(outputs) == 0 {
		return nil, l.errf(t.typNode, "Partition needs config.outputs (the names of its outputs, read as %s.NAME)", t.name)
	}
	unknown, un, err := l.optStr(t.config, "unknown_output")
	if err != nil {
		return nil, err
	}
	for i, o := range outputs {
		if o == "" || strings.ContainsAny(o, "./ ") {
			return nil, l.errf(outNodes[i], "output name %q is not allowed (use letters, digits, _ and -)", o)
		}
		if o == t.errOut {
			return nil, l.errf(outNodes[i], "error output %q cannot be among the listed outputs", o)
		}
	}
	if unknown != "" && (unknown == t.errOut || strings.ContainsAny(unknown, "./ ")) {
		return nil, l.errf(un, "unknown_output %q is not allowed (it must differ from the error output and use letters, digits, _ and -)", unknown)
	}
	bn := t.config.Get("by")
	if bn == nil {
		return nil, l.errf(t.typNode, "Partition needs config.by (a field or a CEL expression naming the output)")
	}
	v, sc, sides, err := l.fieldOrExpr(t, in, bn, "by")
	if err != nil {
		return nil, err
	}
	if k := v.typ.Kind; k != row.KindString && k != row.KindAny {
		return nil, l.errf(bn, "Partition function %q must return a string, not %s", bn.Text, v.typ)
	}
	_ = sides // Partition's keys have no side_inputs
	tags := partitionOutputs(t)
	decls := make([]weir.OutputDecl, len(tags))
	for i, tag := range tags {
		decls[i] = weir.Output[*rowT](tag)
	}
	known := map[string]bool{}
	for _, o := range outputs {
		known[o] = true
	}
	// An activation is per goroutine: workers take one from the pool.
	pool := sync.Pool{New: func() any { ev := newEvaluator(v, sc); return &ev }}
	fn := func(_ *weir.Context, r *rowT, out *weir.Emitters) error {
		ev := pool.Get().(*evaluator)
		defer pool.Put(ev)
		x, err := ev.eval(r, nil, "by")
		if err != nil {
			return err
		}
		var tag string
		switch y := x.(type) {
		case nil:
			tag = unknown
		case string:
			tag = y
		default:
			return &contract.ElementError{Reason: "type_mismatch", Message: fmt.Sprintf("Partition: by gave a %s, not an output name", row.GoTypeName(x))}
		}
		if !known[tag] {
			if unknown == "" {
				return &contract.ElementError{Reason: reasonUnknownOutput, Message: fmt.Sprintf("Partition: unknown output name %q (outputs: %s; set unknown_output to catch it)", tag, strings.Join(outputs, ", "))}
			}
			tag = unknown
		}
		return out.Emit(tag, r)
	}
	opts := stepOpts(t, append(errorOpt(t), weir.WithCoder(in.schema.Coder()))...)
	res := weir.ParDoN(l.root, t.name, in.rows, fn, decls, opts...)
	for _, tag := range tags {
		c := weir.TaggedOutput[*rowT](res, tag)
		l.outs[t.name+"."+tag] = rowsColl(in.schema, c)
	}
	l.registerErrors(t, weir.TaggedOutput[*rowT](res, tags[0]))
	return nil, nil
}

// ---- LogForTesting ----

// logOutput is where LogForTesting prints: Options.LogOutput, else the
// process's standard output for an in-process run. A job's lines are
// dropped until the job service routes them to the job's events.
func (l *loader) logOutput() *logfortesting.Lines {
	if l.log == nil {
		w := l.opts.LogOutput
		if w == nil {
			w = os.Stdout
			if l.opts.Job != nil {
				w = io.Discard
			}
		}
		l.log = logfortesting.NewLines(w)
	}
	return l.log
}

func buildLogForTesting(l *loader, t *transformSpec, ins []*coll) (*coll, error) {
	in := ins[0]
	if ln := t.config.Get("level"); ln != nil {
		level, err := l.str(ln, "level")
		if err != nil {
			return nil, err
		}
		switch level {
		case "ERROR", "INFO", "DEBUG":
		default:
			return nil, l.errf(ln, "unknown log level %q (want ERROR, INFO or DEBUG)", level)
		}
	}
	prefix, _, err := l.optStr(t.config, "prefix")
	if err != nil {
		return nil, err
	}
	fn := logfortesting.NewFn(prefix, l.logOutput())
	res := parDo(l.root, t.name, in, fn, stepOpts(t, weir.WithCoder(in.schema.Coder()))...)
	return rowsColl(in.schema, res), nil
}
