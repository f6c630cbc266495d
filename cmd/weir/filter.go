package main

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// A listFilter is a parsed --filter expression of a list command, in
// gcloud's syntax: terms KEY OP VALUE combined with AND (or juxtaposition),
// OR, NOT (or a leading '-') and parentheses; AND binds tighter than OR.
// OP is = != < <= > >= (numbers compare as numbers, other values as
// text), : (contains, case-insensitively; KEY:* is "has a non-empty
// value"), ~ and !~ (RE2 regular expression). A '*' in the value of =, !=
// and : is a wildcard. A term on a list is true when any element matches;
// a missing key matches only != and !~.
type listFilter interface {
	match(v any) bool
}

type (
	andFilter  []listFilter
	orFilter   []listFilter
	notFilter  struct{ f listFilter }
	termFilter struct {
		path  []string
		op    string
		value string
		re    *regexp.Regexp // ~ and !~
	}
)

func (a andFilter) match(v any) bool {
	for _, f := range a {
		if !f.match(v) {
			return false
		}
	}
	return true
}

func (o orFilter) match(v any) bool {
	for _, f := range o {
		if f.match(v) {
			return true
		}
	}
	return false
}

func (n notFilter) match(v any) bool { return !n.f.match(v) }

func (t termFilter) match(v any) bool {
	x, ok := lookupKey(v, t.path)
	negated := t.op == "!=" || t.op == "!~"
	if !ok || x == nil {
		return negated
	}
	if list, isList := x.([]any); isList {
		if negated { // no element equals / matches
			for _, e := range list {
				if !t.matchOne(e) {
					return false
				}
			}
			return true
		}
		for _, e := range list {
			if t.matchOne(e) {
				return true
			}
		}
		return false
	}
	return t.matchOne(x)
}

// matchOne applies the term to one value.
func (t termFilter) matchOne(x any) bool {
	s := cellText(x)
	switch t.op {
	case ":":
		if t.value == "*" {
			return s != ""
		}
		return wildcard(strings.ToLower(s), "*"+strings.ToLower(t.value)+"*")
	case "=":
		if a, b, ok := numbers(s, t.value); ok {
			return a == b
		}
		return wildcard(s, t.value)
	case "!=":
		if a, b, ok := numbers(s, t.value); ok {
			return a != b
		}
		return !wildcard(s, t.value)
	case "~":
		return t.re.MatchString(s)
	case "!~":
		return !t.re.MatchString(s)
	}
	c := strings.Compare(s, t.value)
	if a, b, ok := numbers(s, t.value); ok {
		c = 0
		if a < b {
			c = -1
		} else if a > b {
			c = 1
		}
	}
	switch t.op {
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	default: // ">="
		return c >= 0
	}
}

// numbers parses a and b as numbers when both are.
func numbers(a, b string) (float64, float64, bool) {
	x, err1 := strconv.ParseFloat(a, 64)
	y, err2 := strconv.ParseFloat(b, 64)
	return x, y, err1 == nil && err2 == nil
}

// wildcard matches s against pattern, whose '*' matches any text.
func wildcard(s, pattern string) bool {
	if !strings.Contains(pattern, "*") {
		return s == pattern
	}
	// path.Match's '*' stops at '/': names such as projects/p/topics/t
	// are matched with the '/' replaced.
	s = strings.ReplaceAll(s, "/", "\x00")
	pattern = strings.ReplaceAll(pattern, "/", "\x00")
	pattern = strings.NewReplacer(`\`, `\\`, "?", `\?`, "[", `\[`).Replace(pattern)
	ok, err := path.Match(pattern, s)
	return err == nil && ok
}

// filterParser is a recursive-descent parser of --filter expressions.
type filterParser struct {
	s   string
	pos int
}

// parseFilter parses a --filter expression; "" is no filter (nil).
// Errors are usage errors naming the position.
func parseFilter(s string) (listFilter, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	p := &filterParser{s: s}
	f, err := p.or()
	if err == nil && p.skipSpace() < len(p.s) {
		err = p.errorf("unexpected %q", p.s[p.pos:])
	}
	if err != nil {
		return nil, usageErrorf("--filter %q: %w", s, err)
	}
	return f, nil
}

func (p *filterParser) errorf(format string, args ...any) error {
	return fmt.Errorf("at character %d: %s", p.pos+1, fmt.Sprintf(format, args...))
}

// skipSpace moves past blanks and returns the position.
func (p *filterParser) skipSpace() int {
	for p.pos < len(p.s) && (p.s[p.pos] == ' ' || p.s[p.pos] == '\t') {
		p.pos++
	}
	return p.pos
}

// keyword consumes the upper-case word w followed by a blank or '('.
func (p *filterParser) keyword(w string) bool {
	p.skipSpace()
	if !strings.HasPrefix(p.s[p.pos:], w) {
		return false
	}
	end := p.pos + len(w)
	if end < len(p.s) && p.s[end] != ' ' && p.s[end] != '\t' && p.s[end] != '(' {
		return false
	}
	p.pos = end
	return true
}

func (p *filterParser) or() (listFilter, error) {
	var terms orFilter
	for {
		f, err := p.and()
		if err != nil {
			return nil, err
		}
		terms = append(terms, f)
		if !p.keyword("OR") {
			break
		}
	}
	if len(terms) == 1 {
		return terms[0], nil
	}
	return terms, nil
}

func (p *filterParser) and() (listFilter, error) {
	var terms andFilter
	for {
		f, err := p.unary()
		if err != nil {
			return nil, err
		}
		terms = append(terms, f)
		if p.keyword("AND") {
			continue
		}
		// Juxtaposition is AND, until OR, ')' or the end.
		if p.skipSpace() == len(p.s) || p.s[p.pos] == ')' || p.peekKeyword("OR") {
			break
		}
	}
	if len(terms) == 1 {
		return terms[0], nil
	}
	return terms, nil
}

// peekKeyword reports whether keyword w comes next, without consuming it.
func (p *filterParser) peekKeyword(w string) bool {
	at := p.pos
	ok := p.keyword(w)
	p.pos = at
	return ok
}

func (p *filterParser) unary() (listFilter, error) {
	if p.keyword("NOT") {
		f, err := p.unary()
		return notFilter{f}, err
	}
	p.skipSpace()
	if p.pos >= len(p.s) {
		return nil, p.errorf("a term is missing at the end")
	}
	switch p.s[p.pos] {
	case '-':
		p.pos++
		f, err := p.unary()
		return notFilter{f}, err
	case '(':
		p.pos++
		f, err := p.or()
		if err != nil {
			return nil, err
		}
		if p.skipSpace() >= len(p.s) || p.s[p.pos] != ')' {
			return nil, p.errorf("'(' without ')'")
		}
		p.pos++
		return f, nil
	}
	return p.term()
}

// term parses KEY OP VALUE.
func (p *filterParser) term() (listFilter, error) {
	start := p.skipSpace()
	for p.pos < len(p.s) && !strings.ContainsRune(" \t=!<>:~()", rune(p.s[p.pos])) {
		p.pos++
	}
	key := p.s[start:p.pos]
	if key == "" {
		return nil, p.errorf("want a key, such as name")
	}
	p.skipSpace()
	var op string
	for _, o := range []string{"!=", "!~", "<=", ">=", "=", "<", ">", ":", "~"} {
		if strings.HasPrefix(p.s[p.pos:], o) {
			op = o
			break
		}
	}
	if op == "" {
		return nil, p.errorf("%q needs an operator and a value, such as %s=VALUE or %s:VALUE", key, key, key)
	}
	p.pos += len(op)
	value, err := p.value()
	if err != nil {
		return nil, err
	}
	t := termFilter{path: strings.Split(key, "."), op: op, value: value}
	if op == "~" || op == "!~" {
		if t.re, err = regexp.Compile(value); err != nil {
			return nil, p.errorf("%s%s%q: %v", key, op, value, err)
		}
	}
	return t, nil
}

// value parses a quoted or a bare value (up to a blank or ')').
func (p *filterParser) value() (string, error) {
	p.skipSpace()
	if p.pos < len(p.s) && (p.s[p.pos] == '"' || p.s[p.pos] == '\'') {
		q := p.s[p.pos]
		end := strings.IndexByte(p.s[p.pos+1:], q)
		if end < 0 {
			return "", p.errorf("unterminated quote")
		}
		v := p.s[p.pos+1 : p.pos+1+end]
		p.pos += end + 2
		return v, nil
	}
	start := p.pos
	for p.pos < len(p.s) && p.s[p.pos] != ' ' && p.s[p.pos] != '\t' && p.s[p.pos] != ')' {
		p.pos++
	}
	if p.pos == start {
		return "", p.errorf("a value is missing")
	}
	return p.s[start:p.pos], nil
}

// listOptions are a list command's --filter, --sort-by and --limit.
type listOptions struct {
	filter string
	sortBy []string
	limit  int
}

// apply filters, sorts and limits the decoded list rows, in that order
// (as gcloud does), returning the rows kept.
func (o listOptions) apply(rows []any) ([]any, error) {
	f, err := parseFilter(o.filter)
	if err != nil {
		return nil, err
	}
	if o.limit < 0 {
		return nil, usageErrorf("--limit %d: want a positive number", o.limit)
	}
	kept := rows[:0:0]
	for _, r := range rows {
		if f == nil || f.match(r) {
			kept = append(kept, r)
		}
	}
	type sortKey struct {
		path []string
		desc bool
	}
	var keys []sortKey
	for _, k := range o.sortBy {
		k = strings.TrimSpace(k)
		desc := strings.HasPrefix(k, "~")
		k = strings.TrimPrefix(k, "~")
		if k == "" {
			return nil, usageErrorf("--sort-by: an empty key (want KEY or ~KEY, descending)")
		}
		keys = append(keys, sortKey{strings.Split(k, "."), desc})
	}
	if len(keys) > 0 {
		sort.SliceStable(kept, func(a, b int) bool {
			for _, k := range keys {
				c := compareValues(kept[a], kept[b], k.path)
				if c == 0 {
					continue
				}
				return c < 0 != k.desc
			}
			return false
		})
	}
	if o.limit > 0 && len(kept) > o.limit {
		kept = kept[:o.limit]
	}
	return kept, nil
}

// compareValues orders rows a and b by their field at path: numbers as
// numbers, other values as text, a missing field first.
func compareValues(a, b any, path []string) int {
	x, okx := lookupKey(a, path)
	y, oky := lookupKey(b, path)
	switch {
	case !okx && !oky:
		return 0
	case !okx:
		return -1
	case !oky:
		return 1
	}
	xn, xIsNum := x.(json.Number)
	yn, yIsNum := y.(json.Number)
	if xIsNum && yIsNum {
		if f, g, ok := numbers(xn.String(), yn.String()); ok {
			switch {
			case f < g:
				return -1
			case f > g:
				return 1
			}
			return 0
		}
	}
	return strings.Compare(cellText(x), cellText(y))
}
