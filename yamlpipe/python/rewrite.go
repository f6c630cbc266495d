package python

import (
	"go.starlark.net/syntax"

	"github.com/weir-dev/weir/row"
)

// The names of the accounted operations the rewritten code calls (see
// budget.go). They cannot clash with a field: a field name starting with
// "_weir_" is not a Python parameter weir passes.
const (
	opAdd    = "_weir_add"
	opMul    = "_weir_mul"
	opMod    = "_weir_mod"
	opIAdd   = "_weir_iadd"
	opMethod = "_weir_method"
)

// accountedMethods are the methods whose calls go through opMethod.
var accountedMethods = map[string]bool{"replace": true, "join": true, "extend": true, "format": true}

// rewriter rewrites parsed code so that the operations that can build
// large values are accounted. names are the types of the names an
// expression reads (its fields), to leave arithmetic on numbers alone.
type rewriter struct {
	names map[string]row.Type
}

// call makes fn(args...) at pos.
func call(fn string, pos syntax.Position, args ...syntax.Expr) *syntax.CallExpr {
	return &syntax.CallExpr{Fn: &syntax.Ident{NamePos: pos, Name: fn}, Lparen: pos, Args: args, Rparen: pos}
}

// numeric says whether e is known to be a number.
func (rw *rewriter) numeric(e syntax.Expr) bool {
	return pyInfer(e, rw.names).IsNumeric()
}

func (rw *rewriter) exprs(es []syntax.Expr) {
	for i := range es {
		es[i] = rw.expr(es[i])
	}
}

// expr rewrites e and returns what replaces it.
func (rw *rewriter) expr(e syntax.Expr) syntax.Expr {
	switch x := e.(type) {
	case nil:
		return nil
	case *syntax.BinaryExpr:
		accounted := (x.Op == syntax.PLUS || x.Op == syntax.STAR || x.Op == syntax.PERCENT) &&
			!(rw.numeric(x.X) && rw.numeric(x.Y))
		x.X, x.Y = rw.expr(x.X), rw.expr(x.Y)
		if accounted {
			fn := map[syntax.Token]string{syntax.PLUS: opAdd, syntax.STAR: opMul, syntax.PERCENT: opMod}[x.Op]
			return call(fn, x.OpPos, x.X, x.Y)
		}
	case *syntax.CallExpr:
		rw.exprs(x.Args)
		if d, ok := x.Fn.(*syntax.DotExpr); ok && accountedMethods[d.Name.Name] {
			recv := rw.expr(d.X)
			name := &syntax.Literal{Token: syntax.STRING, TokenPos: d.NamePos, Raw: `"` + d.Name.Name + `"`, Value: d.Name.Name}
			return &syntax.CallExpr{Fn: &syntax.Ident{NamePos: d.NamePos, Name: opMethod}, Lparen: x.Lparen,
				Args: append([]syntax.Expr{recv, name}, x.Args...), Rparen: x.Rparen}
		}
		x.Fn = rw.expr(x.Fn)
	case *syntax.UnaryExpr:
		x.X = rw.expr(x.X)
	case *syntax.ParenExpr:
		x.X = rw.expr(x.X)
	case *syntax.DotExpr:
		x.X = rw.expr(x.X)
	case *syntax.IndexExpr:
		x.X, x.Y = rw.expr(x.X), rw.expr(x.Y)
	case *syntax.SliceExpr:
		x.X, x.Lo, x.Hi, x.Step = rw.expr(x.X), rw.expr(x.Lo), rw.expr(x.Hi), rw.expr(x.Step)
	case *syntax.CondExpr:
		x.Cond, x.True, x.False = rw.expr(x.Cond), rw.expr(x.True), rw.expr(x.False)
	case *syntax.ListExpr:
		rw.exprs(x.List)
	case *syntax.TupleExpr:
		rw.exprs(x.List)
	case *syntax.DictExpr:
		rw.exprs(x.List)
	case *syntax.DictEntry:
		x.Key, x.Value = rw.expr(x.Key), rw.expr(x.Value)
	case *syntax.LambdaExpr:
		rw.params(x.Params)
		x.Body = rw.expr(x.Body)
	case *syntax.Comprehension:
		x.Body = rw.expr(x.Body)
		for _, c := range x.Clauses {
			switch c := c.(type) {
			case *syntax.ForClause:
				c.X = rw.expr(c.X)
			case *syntax.IfClause:
				c.Cond = rw.expr(c.Cond)
			}
		}
	}
	return e
}

// params rewrites the defaults of parameters.
func (rw *rewriter) params(ps []syntax.Expr) {
	for _, p := range ps {
		if b, ok := p.(*syntax.BinaryExpr); ok && b.Op == syntax.EQ {
			b.Y = rw.expr(b.Y)
		}
	}
}

// stmts rewrites a block.
func (rw *rewriter) stmts(ss []syntax.Stmt) {
	for i, s := range ss {
		ss[i] = rw.stmt(s)
	}
}

func (rw *rewriter) stmt(s syntax.Stmt) syntax.Stmt {
	switch x := s.(type) {
	case *syntax.ExprStmt:
		x.X = rw.expr(x.X)
	case *syntax.AssignStmt:
		x.RHS = rw.expr(x.RHS)
		if id, ok := x.LHS.(*syntax.Ident); ok && (x.Op == syntax.PLUS_EQ || x.Op == syntax.STAR_EQ || x.Op == syntax.PERCENT_EQ) {
			// name op= value is name = op(name, value): the name is
			// evaluated once either way (a list's += stays in place).
			fn := map[syntax.Token]string{syntax.PLUS_EQ: opIAdd, syntax.STAR_EQ: opMul, syntax.PERCENT_EQ: opMod}[x.Op]
			use := &syntax.Ident{NamePos: id.NamePos, Name: id.Name}
			return &syntax.AssignStmt{OpPos: x.OpPos, Op: syntax.EQ, LHS: x.LHS, RHS: call(fn, x.OpPos, use, x.RHS)}
		}
		x.LHS = rw.expr(x.LHS)
	case *syntax.DefStmt:
		rw.params(x.Params)
		rw.stmts(x.Body)
	case *syntax.ForStmt:
		x.X = rw.expr(x.X)
		rw.stmts(x.Body)
	case *syntax.WhileStmt:
		x.Cond = rw.expr(x.Cond)
		rw.stmts(x.Body)
	case *syntax.IfStmt:
		x.Cond = rw.expr(x.Cond)
		rw.stmts(x.True)
		rw.stmts(x.False)
	case *syntax.ReturnStmt:
		x.Result = rw.expr(x.Result)
	}
	return s
}
