package celexpr

import (
	"math"

	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
)

// A native fast path for the simplest CEL expressions: fields, literals,
// arithmetic, comparisons and boolean logic over int, float, string and
// bool. It is compiled from the type-checked AST into closures over the
// row's values, so the common `amount > 0` or `amount * 100` costs a few
// nanoseconds and no allocation. Whenever the fast path is unsure (a null
// field, an overflow, a division by zero, mixed numeric kinds) it reports
// !ok and the caller evaluates the CEL Program instead, so results and
// errors are always CEL's own. FuzzCEL checks the two agree.

// nval is a native value: kind plus payload.
type nval struct {
	k nkind
	i int64
	f float64
	s string
}

type nkind uint8

const (
	nInt nkind = iota + 1
	nFloat
	nString
	nBool
)

// nfn evaluates an expression over a row's values; ok=false means "ask CEL".
type nfn func(vals []any) (v nval, ok bool)

// compileNative returns the fast path for the checked AST, or nil when the
// expression uses anything outside the supported subset.
func (sc *Scope) compileNative(a *celast.AST) nfn {
	return sc.nativeExpr(a.Expr(), 0)
}

func (sc *Scope) nativeExpr(e celast.Expr, depth int) nfn {
	if depth > 32 {
		return nil
	}
	switch e.Kind() {
	case celast.LiteralKind:
		var v nval
		switch x := e.AsLiteral().(type) {
		case types.Int:
			v = nval{k: nInt, i: int64(x)}
		case types.Double:
			v = nval{k: nFloat, f: float64(x)}
		case types.String:
			v = nval{k: nString, s: string(x)}
		case types.Bool:
			v = nval{k: nBool}
			if x {
				v.i = 1
			}
		default:
			return nil
		}
		return func([]any) (nval, bool) { return v, true }
	case celast.IdentKind:
		slot, ok := sc.slot(e.AsIdent())
		if !ok || slot < 0 {
			return nil
		}
		return func(vals []any) (nval, bool) {
			if slot >= len(vals) {
				return nval{}, false
			}
			return nativeOf(vals[slot])
		}
	case celast.SelectKind:
		get, t, ok := sc.rowPath(e, depth)
		if !ok || t.Kind == row.KindRow {
			return nil
		}
		return func(vals []any) (nval, bool) {
			v, ok := get(vals)
			if !ok {
				return nval{}, false
			}
			return nativeOf(v)
		}
	case celast.CallKind:
		c := e.AsCall()
		if c.IsMemberFunction() {
			return nil
		}
		args := c.Args()
		if f := sc.fieldCompareInt(c.FunctionName(), args); f != nil {
			return f
		}
		fns := make([]nfn, len(args))
		for i, a := range args {
			if fns[i] = sc.nativeExpr(a, depth+1); fns[i] == nil {
				return nil
			}
		}
		return nativeCall(c.FunctionName(), fns)
	}
	return nil
}

// fieldCompareInt is the fast path's fast path: a comparison of a field
// of the row with an integer literal (amount >= 0, price > 1000), the most
// common filter. It reads the value straight from its slot; a value that is
// not an int64 (null, a double) asks CEL, as compareFn would.
func (sc *Scope) fieldCompareInt(fn string, args []celast.Expr) nfn {
	op := opOf(fn)
	if op < opEq || op > opGe || len(args) != 2 || args[0].Kind() != celast.IdentKind || args[1].Kind() != celast.LiteralKind {
		return nil
	}
	lit, isInt := args[1].AsLiteral().(types.Int)
	slot, ok := sc.slot(args[0].AsIdent())
	if !isInt || !ok || slot < 0 {
		return nil
	}
	k := int64(lit)
	return func(vals []any) (nval, bool) {
		if slot >= len(vals) {
			return nval{}, false
		}
		x, ok := vals[slot].(int64)
		if !ok {
			return nval{}, false
		}
		var res bool
		switch op {
		case opEq:
			res = x == k
		case opNe:
			res = x != k
		case opLt:
			res = x < k
		case opLe:
			res = x <= k
		case opGt:
			res = x > k
		default: // opGe
			res = x >= k
		}
		if res {
			return nval{k: nBool, i: 1}, true
		}
		return nval{k: nBool}, true
	}
}

// nativeOf converts a row value of a kind the fast path knows.
func nativeOf(v any) (nval, bool) {
	switch x := v.(type) {
	case int64:
		return nval{k: nInt, i: x}, true
	case float64:
		return nval{k: nFloat, f: x}, true
	case string:
		return nval{k: nString, s: x}, true
	case bool:
		if x {
			return nval{k: nBool, i: 1}, true
		}
		return nval{k: nBool}, true
	}
	return nval{}, false
}

// scalarKind reports whether values of kind k are copied as they are by a
// selection (Program.sel): ints, floats, bools, strings and timestamps.
func scalarKind(k row.Kind) bool {
	switch k {
	case row.KindInt, row.KindFloat, row.KindBool, row.KindString, row.KindTimestamp:
		return true
	}
	return false
}

// kindOfValue returns the kind of a scalar row value (v's Go type), or
// KindAny for any other value (null included).
func kindOfValue(v any) row.Kind {
	switch v.(type) {
	case int64:
		return row.KindInt
	case float64:
		return row.KindFloat
	case bool:
		return row.KindBool
	case string:
		return row.KindString
	case mtime.Time:
		return row.KindTimestamp
	}
	return row.KindAny
}

// rowPath resolves a selection of a nested row's field (bid.price,
// a.b.c) statically against the schema: the returned function reads the
// field's value from a row's values (ok=false when a row on the way is
// null or not of the declared schema, so that CEL decides), and t is the
// field's declared type. ok=false when e is not such a selection.
func (sc *Scope) rowPath(e celast.Expr, depth int) (get func([]any) (any, bool), t row.Type, ok bool) {
	if depth > 32 {
		return nil, row.Type{}, false
	}
	switch e.Kind() {
	case celast.IdentKind:
		slot, found := sc.slot(e.AsIdent())
		if !found || slot < 0 || slot >= len(sc.schema.Fields) {
			return nil, row.Type{}, false
		}
		return func(vals []any) (any, bool) {
			if slot >= len(vals) {
				return nil, false
			}
			return vals[slot], true
		}, sc.schema.Fields[slot].Type, true
	case celast.SelectKind:
		s := e.AsSelect()
		if s.IsTestOnly() {
			return nil, row.Type{}, false
		}
		parent, pt, found := sc.rowPath(s.Operand(), depth+1)
		if !found || pt.Kind != row.KindRow || pt.Row == nil {
			return nil, row.Type{}, false
		}
		schema, name := pt.Row, s.FieldName()
		idx := schema.Index(name)
		if idx < 0 {
			return nil, row.Type{}, false
		}
		return func(vals []any) (any, bool) {
			v, ok := parent(vals)
			if !ok {
				return nil, false
			}
			r, isRow := v.(*row.Row)
			if !isRow || r == nil {
				return nil, false
			}
			i := idx
			if r.Schema != schema {
				// An equal schema decoded elsewhere: find the field by name.
				if i = r.Schema.Index(name); i < 0 {
					return nil, false
				}
			}
			if i >= len(r.Values) {
				return nil, false
			}
			return r.Values[i], true
		}, schema.Fields[idx].Type, true
	}
	return nil, row.Type{}, false
}

func nativeCall(fn string, a []nfn) nfn {
	switch len(a) {
	case 1:
		x := a[0]
		switch fn {
		case operators.LogicalNot:
			return func(v []any) (nval, bool) {
				r, ok := x(v)
				if !ok || r.k != nBool {
					return nval{}, false
				}
				return nval{k: nBool, i: 1 - r.i}, true
			}
		case operators.Negate:
			return func(v []any) (nval, bool) {
				r, ok := x(v)
				switch {
				case !ok:
				case r.k == nInt && r.i != math.MinInt64:
					return nval{k: nInt, i: -r.i}, true
				case r.k == nFloat:
					return nval{k: nFloat, f: -r.f}, true
				}
				return nval{}, false
			}
		}
	case 2:
		x, y := a[0], a[1]
		switch fn {
		case operators.LogicalAnd, operators.LogicalOr:
			and := fn == operators.LogicalAnd
			return func(v []any) (nval, bool) {
				l, ok := x(v)
				if !ok || l.k != nBool {
					return nval{}, false
				}
				if (l.i == 1) != and {
					return l, true // false && _ is false; true || _ is true
				}
				r, ok := y(v)
				if !ok || r.k != nBool {
					return nval{}, false
				}
				return r, true
			}
		case operators.Equals, operators.NotEquals, operators.Less, operators.LessEquals, operators.Greater, operators.GreaterEquals:
			return compareFn(fn, x, y)
		case operators.Add, operators.Subtract, operators.Multiply, operators.Divide, operators.Modulo:
			return arithFn(fn, x, y)
		}
	case 3:
		if fn == operators.Conditional {
			c, t, f := a[0], a[1], a[2]
			return func(v []any) (nval, bool) {
				cv, ok := c(v)
				if !ok || cv.k != nBool {
					return nval{}, false
				}
				if cv.i == 1 {
					return t(v)
				}
				return f(v)
			}
		}
	}
	return nil
}

// nop is a comparison or arithmetic operator, resolved when the fast
// path is compiled (not by its CEL name at every evaluation).
type nop uint8

const (
	opEq nop = iota + 1
	opNe
	opLt
	opLe
	opGt
	opGe
	opAdd
	opSub
	opMul
	opDiv
	opMod
)

// opOf maps a CEL operator's function name to its nop.
func opOf(fn string) nop {
	switch fn {
	case operators.Equals:
		return opEq
	case operators.NotEquals:
		return opNe
	case operators.Less:
		return opLt
	case operators.LessEquals:
		return opLe
	case operators.Greater:
		return opGt
	case operators.GreaterEquals:
		return opGe
	case operators.Add:
		return opAdd
	case operators.Subtract:
		return opSub
	case operators.Multiply:
		return opMul
	case operators.Divide:
		return opDiv
	case operators.Modulo:
		return opMod
	}
	return 0
}

func compareFn(fn string, x, y nfn) nfn {
	op := opOf(fn)
	return func(v []any) (nval, bool) {
		l, ok := x(v)
		if !ok {
			return nval{}, false
		}
		r, ok := y(v)
		if !ok || l.k != r.k {
			return nval{}, false
		}
		var c int // -1, 0, 1
		switch l.k {
		case nInt, nBool:
			c = cmp3(l.i < r.i, l.i > r.i)
		case nString:
			c = cmp3(l.s < r.s, l.s > r.s)
		case nFloat:
			if math.IsNaN(l.f) || math.IsNaN(r.f) {
				return nval{}, false
			}
			c = cmp3(l.f < r.f, l.f > r.f)
		}
		var res bool
		switch op {
		case opEq:
			res = c == 0
		case opNe:
			res = c != 0
		case opLt:
			res = c < 0
		case opLe:
			res = c <= 0
		case opGt:
			res = c > 0
		case opGe:
			res = c >= 0
		}
		if res {
			return nval{k: nBool, i: 1}, true
		}
		return nval{k: nBool}, true
	}
}

func cmp3(lt, gt bool) int {
	switch {
	case lt:
		return -1
	case gt:
		return 1
	}
	return 0
}

func arithFn(fn string, x, y nfn) nfn {
	op := opOf(fn)
	return func(v []any) (nval, bool) {
		l, ok := x(v)
		if !ok {
			return nval{}, false
		}
		r, ok := y(v)
		if !ok || l.k != r.k {
			return nval{}, false
		}
		switch l.k {
		case nInt:
			a, b := l.i, r.i
			var z int64
			switch op {
			case opAdd:
				z = a + b
				if (z > a) != (b > 0) {
					return nval{}, false
				}
			case opSub:
				z = a - b
				if (z < a) != (b > 0) {
					return nval{}, false
				}
			case opMul:
				if a != 0 && b != 0 {
					z = a * b
					if z/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
						return nval{}, false
					}
				}
			case opDiv, opMod:
				if b == 0 || (a == math.MinInt64 && b == -1) {
					return nval{}, false
				}
				if op == opDiv {
					z = a / b
				} else {
					z = a % b
				}
			}
			return nval{k: nInt, i: z}, true
		case nFloat:
			switch op {
			case opAdd:
				return nval{k: nFloat, f: l.f + r.f}, true
			case opSub:
				return nval{k: nFloat, f: l.f - r.f}, true
			case opMul:
				return nval{k: nFloat, f: l.f * r.f}, true
			case opDiv:
				return nval{k: nFloat, f: l.f / r.f}, true
			}
		case nString:
			if op == opAdd {
				return nval{k: nString, s: l.s + r.s}, true
			}
		}
		return nval{}, false
	}
}

// native converts a fast-path result to a row value.
func (v nval) native() any {
	switch v.k {
	case nInt:
		return v.i
	case nFloat:
		return v.f
	case nString:
		return v.s
	case nBool:
		return v.i == 1
	}
	return nil
}
