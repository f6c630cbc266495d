package iceberg

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/apache/iceberg-go"
)

// This file reads ReadFromIceberg's filter: Beam's SQL-like predicate
// ("id > 5 AND status = 'ACTIVE'", in Calcite's syntax), turned into an
// Iceberg row filter that the scan uses both to skip data files (by their
// partitions and column statistics) and to drop rows.
//
// The grammar is the part of SQL's boolean expressions a row filter can
// hold:
//
//	expr      := and { OR and }
//	and       := not { AND not }
//	not       := NOT not | '(' expr ')' | predicate
//	predicate := column op literal | literal op column | column (a boolean)
//	           | column IS [NOT] NULL
//	           | column [NOT] IN '(' literal { ',' literal } ')'
//	           | column [NOT] BETWEEN literal AND literal
//	op        := = | <> | != | < | <= | > | >=
//	literal   := integer | decimal | 'string' (” for a quote) | TRUE | FALSE
//	column    := name | "quoted name" | `quoted name`
//
// Keywords are case-insensitive. A comparison with NULL (always unknown in
// SQL), a function call or arithmetic is refused with its position.

// ParseFilter parses filter into an unbound Iceberg expression; an error
// names the offending position (1-based, in characters).
func ParseFilter(filter string) (iceberg.BooleanExpression, error) {
	p := &filterParser{src: filter}
	if err := p.lex(); err != nil {
		return nil, err
	}
	if len(p.toks) == 1 {
		return nil, errors.New("the filter is empty")
	}
	e, err := p.or()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tokEOF {
		return nil, p.errAt(t, "unexpected %s", t)
	}
	return e, nil
}

// filterColumns returns the columns filter names (none when it does not
// parse).
func filterColumns(filter string) []string {
	p := &filterParser{src: filter}
	if strings.TrimSpace(filter) == "" || p.lex() != nil || len(p.toks) == 1 {
		return nil
	}
	if _, err := p.or(); err != nil {
		return nil
	}
	return p.cols
}

type tokKind int

const (
	tokEOF tokKind = iota
	tokIdent
	tokQuoted // a quoted column name
	tokString
	tokNumber
	tokOp    // = <> != < <= > >=
	tokPunct // ( ) ,
)

type token struct {
	kind tokKind
	text string
	pos  int // 1-based character offset
}

func (t token) String() string {
	switch t.kind {
	case tokEOF:
		return "end of the filter"
	case tokString:
		return fmt.Sprintf("'%s'", t.text)
	case tokQuoted:
		return fmt.Sprintf("%q", t.text)
	}
	return fmt.Sprintf("%q", t.text)
}

// keyword reports whether t is the (case-insensitive) keyword kw.
func (t token) keyword(kw string) bool {
	return t.kind == tokIdent && strings.EqualFold(t.text, kw)
}

type filterParser struct {
	src  string
	toks []token
	i    int
	// cols are the columns the filter names, in order.
	cols []string
}

func (p *filterParser) errAt(t token, format string, args ...any) error {
	return fmt.Errorf("filter %q at character %d: %s", p.src, t.pos, fmt.Sprintf(format, args...))
}

func (p *filterParser) lex() error {
	rs := []rune(p.src)
	for i := 0; i < len(rs); {
		r := rs[i]
		pos := i + 1
		switch {
		case unicode.IsSpace(r):
			i++
		case r == '(' || r == ')' || r == ',':
			p.toks = append(p.toks, token{tokPunct, string(r), pos})
			i++
		case r == '=':
			p.toks = append(p.toks, token{tokOp, "=", pos})
			i++
		case r == '<' || r == '>' || r == '!':
			op := string(r)
			if i+1 < len(rs) && (rs[i+1] == '=' || r == '<' && rs[i+1] == '>') {
				op += string(rs[i+1])
			}
			if op == "!" {
				return p.errAt(token{pos: pos}, "'!' must be followed by '=' (or use NOT)")
			}
			p.toks = append(p.toks, token{tokOp, op, pos})
			i += len(op)
		case r == '\'':
			var b strings.Builder
			j := i + 1
			for ; ; j++ {
				if j >= len(rs) {
					return p.errAt(token{pos: pos}, "the string is not closed")
				}
				if rs[j] == '\'' {
					if j+1 < len(rs) && rs[j+1] == '\'' {
						b.WriteRune('\'')
						j++
						continue
					}
					break
				}
				b.WriteRune(rs[j])
			}
			p.toks = append(p.toks, token{tokString, b.String(), pos})
			i = j + 1
		case r == '"' || r == '`':
			j := i + 1
			for j < len(rs) && rs[j] != r {
				j++
			}
			if j >= len(rs) || j == i+1 {
				return p.errAt(token{pos: pos}, "the quoted column name is not closed or is empty")
			}
			p.toks = append(p.toks, token{tokQuoted, string(rs[i+1 : j]), pos})
			i = j + 1
		case unicode.IsDigit(r) || (r == '-' || r == '+' || r == '.') && i+1 < len(rs) && (unicode.IsDigit(rs[i+1]) || rs[i+1] == '.'):
			j := i + 1
			for j < len(rs) && (unicode.IsDigit(rs[j]) || rs[j] == '.' || rs[j] == 'e' || rs[j] == 'E' ||
				(rs[j] == '-' || rs[j] == '+') && (rs[j-1] == 'e' || rs[j-1] == 'E')) {
				j++
			}
			p.toks = append(p.toks, token{tokNumber, string(rs[i:j]), pos})
			i = j
		case unicode.IsLetter(r) || r == '_':
			j := i + 1
			for j < len(rs) && (unicode.IsLetter(rs[j]) || unicode.IsDigit(rs[j]) || rs[j] == '_') {
				j++
			}
			p.toks = append(p.toks, token{tokIdent, string(rs[i:j]), pos})
			i = j
		default:
			return p.errAt(token{pos: pos}, "unexpected character %q (a filter compares columns with literals: =, <>, <, <=, >, >=, IS NULL, IN, BETWEEN, AND, OR, NOT)", r)
		}
	}
	p.toks = append(p.toks, token{kind: tokEOF, pos: len(rs) + 1})
	return nil
}

func (p *filterParser) peek() token { return p.toks[p.i] }

func (p *filterParser) next() token {
	t := p.toks[p.i]
	if t.kind != tokEOF {
		p.i++
	}
	return t
}

// expect consumes the punctuation or keyword want.
func (p *filterParser) expect(want string) error {
	t := p.next()
	if t.kind == tokPunct && t.text == want || t.keyword(want) {
		return nil
	}
	return p.errAt(t, "want %s, found %s", want, t)
}

func (p *filterParser) or() (iceberg.BooleanExpression, error) {
	return p.chain("OR", p.and, iceberg.NewOr)
}

func (p *filterParser) and() (iceberg.BooleanExpression, error) {
	return p.chain("AND", p.not, iceberg.NewAnd)
}

// chain reads operands joined by the keyword kw (left-associative).
func (p *filterParser) chain(kw string, operand func() (iceberg.BooleanExpression, error),
	join func(l, r iceberg.BooleanExpression, more ...iceberg.BooleanExpression) iceberg.BooleanExpression) (iceberg.BooleanExpression, error) {
	e, err := operand()
	for err == nil && p.peek().keyword(kw) {
		p.next()
		var r iceberg.BooleanExpression
		if r, err = operand(); err == nil {
			e = join(e, r)
		}
	}
	return e, err
}

func (p *filterParser) not() (iceberg.BooleanExpression, error) {
	t := p.peek()
	switch {
	case t.keyword("NOT"):
		p.next()
		e, err := p.not()
		if err != nil {
			return nil, err
		}
		return iceberg.NewNot(e), nil
	case t.kind == tokPunct && t.text == "(":
		p.next()
		e, err := p.or()
		if err != nil {
			return nil, err
		}
		if err := p.expect(")"); err != nil {
			return nil, err
		}
		return e, nil
	}
	return p.predicate()
}

// column reads a column name, if the next token is one.
func (p *filterParser) column() (string, bool) {
	t := p.peek()
	if t.kind == tokQuoted || t.kind == tokIdent && !isReserved(t.text) {
		p.next()
		p.cols = append(p.cols, t.text)
		return t.text, true
	}
	return "", false
}

func isReserved(s string) bool {
	switch strings.ToUpper(s) {
	case "AND", "OR", "NOT", "IS", "NULL", "IN", "BETWEEN", "TRUE", "FALSE":
		return true
	}
	return false
}

// flipped is the comparison with its sides swapped (5 < x is x > 5).
var flipped = map[string]string{"=": "=", "<>": "<>", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}

func (p *filterParser) predicate() (iceberg.BooleanExpression, error) {
	start := p.peek()
	col, ok := p.column()
	if !ok {
		// literal op column
		lit, err := p.literal()
		if err != nil {
			return nil, p.errAt(start, "want a column or a literal, found %s", start)
		}
		op := p.next()
		if op.kind != tokOp {
			return nil, p.errAt(op, "want a comparison (=, <>, <, <=, >, >=), found %s", op)
		}
		colTok := p.peek()
		if col, ok = p.column(); !ok {
			return nil, p.errAt(colTok, "want a column, found %s", colTok)
		}
		return compare(col, flipped[op.text], lit), nil
	}
	if t := p.peek(); t.kind == tokEOF || t.keyword("AND") || t.keyword("OR") || t.kind == tokPunct && t.text == ")" {
		// A boolean column alone: true when the column is.
		return iceberg.EqualTo(iceberg.Reference(col), true), nil
	}
	t := p.next()
	switch {
	case t.kind == tokOp:
		lit, err := p.literal()
		if err != nil {
			return nil, err
		}
		return compare(col, t.text, lit), nil
	case t.keyword("IS"):
		neg := false
		if p.peek().keyword("NOT") {
			p.next()
			neg = true
		}
		if err := p.expect("NULL"); err != nil {
			return nil, err
		}
		if neg {
			return iceberg.NotNull(iceberg.Reference(col)), nil
		}
		return iceberg.IsNull(iceberg.Reference(col)), nil
	case t.keyword("NOT") || t.keyword("IN") || t.keyword("BETWEEN"):
		neg := t.keyword("NOT")
		if neg {
			t = p.next()
		}
		switch {
		case t.keyword("IN"):
			if err := p.expect("("); err != nil {
				return nil, err
			}
			var lits []iceberg.Literal
			for {
				lit, err := p.literal()
				if err != nil {
					return nil, err
				}
				lits = append(lits, lit)
				if sep := p.next(); sep.kind == tokPunct && sep.text == ")" {
					break
				} else if sep.kind != tokPunct || sep.text != "," {
					return nil, p.errAt(sep, "want ',' or ')', found %s", sep)
				}
			}
			op := iceberg.OpIn
			if neg {
				op = iceberg.OpNotIn
			}
			return iceberg.SetPredicate(op, iceberg.Reference(col), lits), nil
		case t.keyword("BETWEEN"):
			lo, err := p.literal()
			if err != nil {
				return nil, err
			}
			if err := p.expect("AND"); err != nil {
				return nil, err
			}
			hi, err := p.literal()
			if err != nil {
				return nil, err
			}
			e := iceberg.NewAnd(compare(col, ">=", lo), compare(col, "<=", hi))
			if neg {
				return iceberg.NewNot(e), nil
			}
			return e, nil
		}
		return nil, p.errAt(t, "want IN or BETWEEN after NOT, found %s", t)
	}
	return nil, p.errAt(t, "want a comparison, IS [NOT] NULL, [NOT] IN or [NOT] BETWEEN after column %s, found %s", col, t)
}

// literal reads a literal: a number, a string, TRUE or FALSE.
func (p *filterParser) literal() (iceberg.Literal, error) {
	t := p.next()
	switch {
	case t.kind == tokString:
		return iceberg.NewLiteral(t.text), nil
	case t.keyword("TRUE"):
		return iceberg.NewLiteral(true), nil
	case t.keyword("FALSE"):
		return iceberg.NewLiteral(false), nil
	case t.keyword("NULL"):
		return nil, p.errAt(t, "a comparison with NULL is never true: use IS NULL or IS NOT NULL")
	case t.kind == tokNumber:
		if n, err := strconv.ParseInt(t.text, 10, 64); err == nil {
			return iceberg.NewLiteral(n), nil
		}
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil {
			return nil, p.errAt(t, "%s is not a number", t)
		}
		return iceberg.NewLiteral(f), nil
	}
	return nil, p.errAt(t, "want a literal (a number, a 'string', TRUE or FALSE), found %s", t)
}

// compare is col op lit.
func compare(col, op string, lit iceberg.Literal) iceberg.BooleanExpression {
	ops := map[string]iceberg.Operation{"=": iceberg.OpEQ, "<>": iceberg.OpNEQ, "!=": iceberg.OpNEQ,
		"<": iceberg.OpLT, "<=": iceberg.OpLTEQ, ">": iceberg.OpGT, ">=": iceberg.OpGTEQ}
	return iceberg.LiteralPredicate(ops[op], iceberg.Reference(col), lit)
}
