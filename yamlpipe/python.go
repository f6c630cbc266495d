package yamlpipe

import (
	"errors"
	"fmt"
	"strings"

	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/yamlpipe/python"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// Beam YAML's `language: python` (package python): the loader finds the
// code in the step's config, compiles it against the step's input, and
// places its errors in the file.

// isPython says whether t is written in Python (language: python).
func (l *loader) isPython(t *transformSpec) bool {
	ln := t.config.Get("language")
	return ln != nil && ln.Kind == yamlnode.String && ln.Text == "python"
}

// pyMeta declares metaVars to Python code.
func pyMeta() []python.Meta {
	out := make([]python.Meta, len(metaVars))
	for i, w := range metaVars {
		out[i] = python.Meta{Name: metaVarName(w), Type: w.Type(), Value: w.Value}
	}
	return out
}

// pyPos maps a position (1-based line and column; 0 when unknown) in the
// code of n to the file.
func (l *loader) pyPos(n *yamlnode.Node, pl, pc int) (line, col int) {
	if pl < 1 {
		return n.Line, n.Col
	}
	if n.Block {
		return n.BodyLine + pl - 1, n.BodyCol + max(pc, 1) - 1
	}
	if pl == 1 {
		col = n.Col + max(pc, 1) - 1
		if n.Quoted {
			col++
		}
		return n.Line, col
	}
	return n.Line + pl - 1, max(pc, 1)
}

// pyError turns a Starlark compile error into an error at its place in
// the file, naming what is unsupported when it is Python outside the
// dialect.
func (l *loader) pyError(n *yamlnode.Node, src, what, fields string, err error) error {
	pl, pc, msg, ok := python.ErrorAt(err, src, fields)
	if !ok {
		return l.wrapf(n, err, "%s: python", what)
	}
	line, col := l.pyPos(n, pl, pc)
	return &Error{File: l.file, Line: line, Col: col, Err: err, Msg: fmt.Sprintf("%s: python: %s in %q", what, msg, src)}
}

// pyCompileError places an error of python.CompileExpr or
// python.CompileCallable.
func (l *loader) pyCompileError(n *yamlnode.Node, src, what, fields string, err error) error {
	var ce *python.CodeError
	var de *python.DefsError
	switch {
	case errors.As(err, &ce):
		return l.pyError(n, src, what, fields, ce.Err)
	case errors.As(err, &de):
		return l.wrapf(n, de.Err, "%s: running the callable's definitions", what)
	}
	return l.errf(n, "%s: %v", what, err)
}

// compilePython compiles n, a Python expression (the fields are
// variables), or a {expression: ...} or {callable: ...} mapping.
func (l *loader) compilePython(in *coll, n *yamlnode.Node, what string) (*python.Program, error) {
	if n.Kind == yamlnode.Map {
		if err := l.checkKeys(n, what, "expression", "callable"); err != nil {
			return nil, err
		}
		if c := n.Get("callable"); c != nil {
			if n.Get("expression") != nil {
				return nil, l.errf(c, "%s: give expression or callable, not both", what)
			}
			return l.compilePyCallable(in, c, what)
		}
		e := n.Get("expression")
		if e == nil {
			return nil, l.errf(n, "%s needs an expression or a callable", what)
		}
		n = e
	}
	return l.compilePyExpr(in.schema, n, what)
}

// compilePyExpr compiles n, a Python expression over the fields of schema
// (the fields are variables).
func (l *loader) compilePyExpr(schema *row.Schema, n *yamlnode.Node, what string) (*python.Program, error) {
	src, err := l.str(n, what)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(src) == "" {
		return nil, l.errf(n, "%s is empty", what)
	}
	src = python.Prepare(src)
	p, err := python.CompileExpr(l.file, src, schema, pyMeta())
	if err != nil {
		return nil, l.pyCompileError(n, src, what, schema.String(), err)
	}
	return p, nil
}

// compilePyCallable compiles Beam's callable: a lambda, or a def whose
// last defined function is called with the row.
func (l *loader) compilePyCallable(in *coll, n *yamlnode.Node, what string) (*python.Program, error) {
	src, err := l.str(n, what+" callable")
	if err != nil {
		return nil, err
	}
	src = python.Prepare(src)
	p, err := python.CompileCallable(l.file, src, in.schema, pyMeta())
	if err != nil {
		return nil, l.pyCompileError(n, src, what, in.schema.String(), err)
	}
	return p, nil
}
