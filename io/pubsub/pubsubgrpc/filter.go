package pubsubgrpc

import (
	"fmt"
	"strconv"
	"strings"
)

// maxFilterLen is Pub/Sub's limit on a subscription filter.
const maxFilterLen = 256

// filter is a parsed subscription filter (Pub/Sub's filter syntax on
// attributes): a message that does not match is acknowledged for the
// subscription without being delivered.
//
//	attributes.KEY = "value"     attributes.KEY != "value"
//	attributes:KEY               (the attribute exists)
//	hasPrefix(attributes.KEY, "prefix")
//	NOT e    -e    (e)    e AND e AND ...    e OR e OR ...
//
// KEY is a name of letters, digits, '_' and '-', or a quoted string; AND
// and OR do not mix without parentheses, as in Pub/Sub.
type filter interface {
	match(attrs map[string]string) bool
}

type (
	fEq struct {
		key, val string
		neg      bool
	}
	fHas    struct{ key string }
	fPrefix struct{ key, prefix string }
	fNot    struct{ e filter }
	fAnd    []filter
	fOr     []filter
)

func (f fEq) match(a map[string]string) bool {
	v, ok := a[f.key]
	if f.neg {
		return !ok || v != f.val
	}
	return ok && v == f.val
}
func (f fHas) match(a map[string]string) bool { _, ok := a[f.key]; return ok }
func (f fPrefix) match(a map[string]string) bool {
	v, ok := a[f.key]
	return ok && strings.HasPrefix(v, f.prefix)
}
func (f fNot) match(a map[string]string) bool { return !f.e.match(a) }
func (f fAnd) match(a map[string]string) bool {
	for _, e := range f {
		if !e.match(a) {
			return false
		}
	}
	return true
}
func (f fOr) match(a map[string]string) bool {
	for _, e := range f {
		if e.match(a) {
			return true
		}
	}
	return false
}

// parseFilter parses a subscription filter; "" is no filter (nil).
func parseFilter(src string) (filter, error) {
	if strings.TrimSpace(src) == "" {
		return nil, nil
	}
	if len(src) > maxFilterLen {
		return nil, fmt.Errorf("filter of %d bytes is longer than Pub/Sub's limit of %d", len(src), maxFilterLen)
	}
	p := &filterParser{src: src}
	e, err := p.expr()
	if err != nil {
		return nil, err
	}
	p.space()
	if p.pos < len(p.src) {
		return nil, p.errf("unexpected %q", p.src[p.pos:])
	}
	return e, nil
}

type filterParser struct {
	src string
	pos int
}

func (p *filterParser) errf(format string, args ...any) error {
	return fmt.Errorf("filter %q at offset %d: %s", p.src, p.pos, fmt.Sprintf(format, args...))
}

func (p *filterParser) space() {
	for p.pos < len(p.src) && (p.src[p.pos] == ' ' || p.src[p.pos] == '\t' || p.src[p.pos] == '\n' || p.src[p.pos] == '\r') {
		p.pos++
	}
}

// word consumes keyword w (followed by a non-name character) if it comes
// next.
func (p *filterParser) word(w string) bool {
	p.space()
	if !strings.HasPrefix(p.src[p.pos:], w) {
		return false
	}
	end := p.pos + len(w)
	if end < len(p.src) && isKeyChar(p.src[end]) {
		return false
	}
	p.pos = end
	return true
}

// lit consumes the literal s if it comes next.
func (p *filterParser) lit(s string) bool {
	p.space()
	if strings.HasPrefix(p.src[p.pos:], s) {
		p.pos += len(s)
		return true
	}
	return false
}

func isKeyChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

func (p *filterParser) expr() (filter, error) {
	first, err := p.term()
	if err != nil {
		return nil, err
	}
	var and fAnd
	var or fOr
	for {
		switch {
		case p.word("AND"):
			if or != nil {
				return nil, p.errf("AND and OR need parentheses to mix")
			}
			e, err := p.term()
			if err != nil {
				return nil, err
			}
			if and == nil {
				and = fAnd{first}
			}
			and = append(and, e)
		case p.word("OR"):
			if and != nil {
				return nil, p.errf("AND and OR need parentheses to mix")
			}
			e, err := p.term()
			if err != nil {
				return nil, err
			}
			if or == nil {
				or = fOr{first}
			}
			or = append(or, e)
		default:
			switch {
			case and != nil:
				return and, nil
			case or != nil:
				return or, nil
			}
			return first, nil
		}
	}
}

func (p *filterParser) term() (filter, error) {
	if p.word("NOT") || p.lit("-") {
		e, err := p.term()
		if err != nil {
			return nil, err
		}
		return fNot{e}, nil
	}
	if p.lit("(") {
		e, err := p.expr()
		if err != nil {
			return nil, err
		}
		if !p.lit(")") {
			return nil, p.errf("missing )")
		}
		return e, nil
	}
	if p.word("hasPrefix") {
		if !p.lit("(") {
			return nil, p.errf("want ( after hasPrefix")
		}
		key, err := p.attribute(".")
		if err != nil {
			return nil, err
		}
		if !p.lit(",") {
			return nil, p.errf("want , in hasPrefix")
		}
		prefix, err := p.str()
		if err != nil {
			return nil, err
		}
		if !p.lit(")") {
			return nil, p.errf("missing ) of hasPrefix")
		}
		return fPrefix{key, prefix}, nil
	}
	p.space()
	if strings.HasPrefix(p.src[p.pos:], "attributes:") {
		key, err := p.attribute(":")
		if err != nil {
			return nil, err
		}
		return fHas{key}, nil
	}
	key, err := p.attribute(".")
	if err != nil {
		return nil, err
	}
	neg := false
	switch {
	case p.lit("!="):
		neg = true
	case p.lit("="):
	default:
		return nil, p.errf("want = or != after attributes.%s", key)
	}
	val, err := p.str()
	if err != nil {
		return nil, err
	}
	return fEq{key, val, neg}, nil
}

// attribute reads attributes<sep>KEY and returns KEY.
func (p *filterParser) attribute(sep string) (string, error) {
	if !p.lit("attributes" + sep) {
		return "", p.errf("want attributes%sKEY, hasPrefix(...), NOT or (", sep)
	}
	if p.pos < len(p.src) && p.src[p.pos] == '"' {
		return p.str()
	}
	start := p.pos
	for p.pos < len(p.src) && isKeyChar(p.src[p.pos]) {
		p.pos++
	}
	if p.pos == start {
		return "", p.errf("want an attribute name")
	}
	return p.src[start:p.pos], nil
}

// str reads a double-quoted string (with Go's escapes).
func (p *filterParser) str() (string, error) {
	p.space()
	if p.pos >= len(p.src) || p.src[p.pos] != '"' {
		return "", p.errf("want a double-quoted string")
	}
	end := p.pos + 1
	for end < len(p.src) && p.src[end] != '"' {
		if p.src[end] == '\\' {
			end++
		}
		end++
	}
	if end >= len(p.src) {
		return "", p.errf("unterminated string")
	}
	v, err := strconv.Unquote(p.src[p.pos : end+1])
	if err != nil {
		return "", p.errf("bad string %s: %v", p.src[p.pos:end+1], err)
	}
	p.pos = end + 1
	return v, nil
}
