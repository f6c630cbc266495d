package yamlpipe

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"

	"github.com/weir-dev/weir/yamlpipe/yamlscan"
)

// Error is a problem in a pipeline file, at a position. Its text is
// "file:line:column: message", the form editors and terminals link to.
type Error struct {
	File string
	Line int
	Col  int
	Msg  string
	// Err is the underlying error, if any.
	Err error
}

// Error implements error.
func (e *Error) Error() string { return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg) }

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// kind is the kind of a YAML node.
type kind int

const (
	kNull kind = iota
	kBool
	kInt
	kFloat
	kString
	kMap
	kSeq
)

func (k kind) String() string {
	return [...]string{"null", "a boolean", "an integer", "a number", "a string", "a mapping", "a list"}[k]
}

// node is a YAML value with its position: the loader's own tree, so that
// the rest of the package does not depend on the YAML library's AST.
type node struct {
	kind      kind
	line, col int
	// quoted is true for a quoted string scalar.
	quoted bool
	// block is true for a block scalar (| or >); its text starts at
	// bodyLine:bodyCol.
	block             bool
	bodyLine, bodyCol int
	// text is the scalar as written (the string value for strings).
	text string
	b    bool
	i    int64
	f    float64
	// keys and vals hold a mapping's entries in order; seq a list's items.
	keys []*node
	vals []*node
	seq  []*node
}

// get returns the value of key in a mapping, or nil.
func (n *node) get(key string) *node {
	if n == nil || n.kind != kMap {
		return nil
	}
	for i, k := range n.keys {
		if k.text == key {
			return n.vals[i]
		}
	}
	return nil
}

// keyNode returns the key node of key in a mapping, or nil.
func (n *node) keyNode(key string) *node {
	if n == nil || n.kind != kMap {
		return nil
	}
	for _, k := range n.keys {
		if k.text == key {
			return k
		}
	}
	return nil
}

// plain converts n to plain Go values (for recording configs as JSON).
func (n *node) plain() any {
	if n == nil {
		return nil
	}
	switch n.kind {
	case kBool:
		return n.b
	case kInt:
		return n.i
	case kFloat:
		if math.IsInf(n.f, 0) || math.IsNaN(n.f) {
			return n.text
		}
		return n.f
	case kString:
		return n.text
	case kMap:
		m := make(map[string]any, len(n.keys))
		for i, k := range n.keys {
			m[k.text] = n.vals[i].plain()
		}
		return m
	case kSeq:
		l := make([]any, len(n.seq))
		for i, e := range n.seq {
			l[i] = e.plain()
		}
		return l
	}
	return nil
}

// Limits that keep hostile files (deep nesting, alias bombs) cheap.
const (
	maxDepth = yamlscan.MaxDepth
	maxNodes = 1 << 20
	// aliasBytesBase and aliasBytesPerByte bound the text of the tree with
	// its aliases expanded (the alias_bytes budget): a file of n bytes may
	// expand to aliasBytesBase + aliasBytesPerByte*n bytes of scalars, so
	// that what the loader builds from the tree (rows, the graph's config)
	// stays linear in the text. Counting values alone let one anchored
	// 7 MB string aliased 1,000 times take a server to 3 GiB.
	aliasBytesBase    = 1 << 20
	aliasBytesPerByte = 2
)

type converter struct {
	file    string
	anchors map[string]*node
	sizes   map[*node]int
	total   int
	// bytes counts the scalar text of the tree, aliases expanded, against
	// maxBytes; textBytes memoizes it per aliased node.
	bytes, maxBytes int
	textBytes       map[*node]int
	// lines is the source, for the positions of block scalars' bodies.
	lines []string
}

func (c *converter) errAt(tk *token.Token, format string, args ...any) error {
	line, col := 1, 1
	if tk != nil && tk.Position != nil {
		line, col = tk.Position.Line, tk.Position.Column
	}
	return &Error{File: c.file, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

// MaxSourceBytes is the largest pipeline text accepted (the API's request
// limit).
const MaxSourceBytes = yamlscan.MaxSourceBytes

// prescan runs yamlscan's check on the text of file, its refusal an Error
// at its position.
func prescan(file string, src []byte) error {
	var se *yamlscan.Error
	if err := yamlscan.Check(src); errors.As(err, &se) {
		return &Error{File: file, Line: se.Line, Col: se.Col, Msg: se.Msg}
	} else if err != nil {
		return err
	}
	return nil
}

// parseYAML parses src into a node tree. Errors carry positions.
func parseYAML(file string, src []byte) (root *node, err error) {
	defer func() {
		if r := recover(); r != nil {
			root, err = nil, &Error{File: file, Line: 1, Col: 1, Msg: fmt.Sprintf("invalid YAML: the parser failed (%v)", r)}
		}
	}()
	if err := prescan(file, src); err != nil {
		return nil, err
	}
	f, err := parser.ParseBytes(src, 0)
	if err != nil {
		var ye yaml.Error
		if errors.As(err, &ye) {
			tk := ye.GetToken()
			c := &converter{file: file}
			return nil, c.errAt(tk, "invalid YAML: %s", ye.GetMessage())
		}
		return nil, &Error{File: file, Line: 1, Col: 1, Msg: "invalid YAML: " + err.Error(), Err: err}
	}
	var bodies []ast.Node
	var starts []*token.Token
	for _, d := range f.Docs {
		if d != nil && d.Body != nil {
			bodies = append(bodies, d.Body)
			st := d.Start
			if st == nil {
				st = d.Body.GetToken()
			}
			starts = append(starts, st)
		}
	}
	switch len(bodies) {
	case 0:
		return nil, &Error{File: file, Line: 1, Col: 1, Msg: "the file is empty: want a mapping with a pipeline key"}
	case 1:
	default:
		return nil, (&converter{file: file}).errAt(starts[1], "the file holds %d YAML documents; want one pipeline", len(bodies))
	}
	c := &converter{file: file, anchors: map[string]*node{}, sizes: map[*node]int{}, lines: strings.Split(string(src), "\n"),
		maxBytes: aliasBytesBase + aliasBytesPerByte*len(src), textBytes: map[*node]int{}}
	return c.convert(bodies[0], 0)
}

func (c *converter) convert(an ast.Node, depth int) (*node, error) {
	if an == nil {
		return &node{kind: kNull, line: 1, col: 1}, nil
	}
	tk := an.GetToken()
	if depth > maxDepth {
		return nil, c.errAt(tk, "the YAML is nested more than %d levels deep", maxDepth)
	}
	c.total++
	if c.total > maxNodes {
		return nil, c.errAt(tk, "the YAML has more than %d values", maxNodes)
	}
	n := &node{line: 1, col: 1}
	if tk != nil && tk.Position != nil {
		n.line, n.col = tk.Position.Line, tk.Position.Column
	}
	switch x := an.(type) {
	case *ast.NullNode:
		n.kind = kNull
	case *ast.BoolNode:
		n.kind, n.b, n.text = kBool, x.Value, x.Token.Value
	case *ast.IntegerNode:
		n.kind, n.text = kInt, x.Token.Value
		switch v := x.Value.(type) {
		case int64:
			n.i = v
		case uint64:
			if v > math.MaxInt64 {
				return nil, c.errAt(tk, "integer %s is too large", x.Token.Value)
			}
			n.i = int64(v)
		default:
			return nil, c.errAt(tk, "integer %s cannot be read", x.Token.Value)
		}
	case *ast.FloatNode:
		n.kind, n.f, n.text = kFloat, x.Value, x.Token.Value
	case *ast.InfinityNode:
		n.kind, n.f, n.text = kFloat, x.Value, x.Token.Value
	case *ast.NanNode:
		n.kind, n.f, n.text = kFloat, math.NaN(), x.Token.Value
	case *ast.StringNode:
		n.kind, n.text = kString, x.Value
		n.quoted = x.Token != nil && (x.Token.Type == token.DoubleQuoteType || x.Token.Type == token.SingleQuoteType)
	case *ast.LiteralNode:
		n.kind = kString
		if x.Value != nil {
			n.text = x.Value.Value
		}
		n.block, n.bodyLine, n.bodyCol = true, n.line+1, n.col
		// The body starts on the first non-blank line after the indicator,
		// at that line's indentation.
		for i := n.line; i < len(c.lines); i++ {
			if ln := c.lines[i]; strings.TrimSpace(ln) != "" {
				n.bodyLine, n.bodyCol = i+1, len(ln)-len(strings.TrimLeft(ln, " "))+1
				break
			}
		}
		n.text = strings.TrimRight(n.text, "\n")
	case *ast.MappingNode:
		n.kind = kMap
		for _, mv := range x.Values {
			if err := c.addPair(n, mv, depth); err != nil {
				return nil, err
			}
		}
		if !x.IsFlowStyle && len(n.keys) > 0 {
			// A block mapping is where its first key is.
			n.line, n.col = n.keys[0].line, n.keys[0].col
		}
	case *ast.MappingValueNode:
		n.kind = kMap
		if err := c.addPair(n, x, depth); err != nil {
			return nil, err
		}
		n.line, n.col = n.keys[0].line, n.keys[0].col
	case *ast.SequenceNode:
		n.kind = kSeq
		for _, v := range x.Values {
			e, err := c.convert(v, depth+1)
			if err != nil {
				return nil, err
			}
			n.seq = append(n.seq, e)
		}
	case *ast.AnchorNode:
		v, err := c.convert(x.Value, depth)
		if err != nil {
			return nil, err
		}
		if x.Name != nil {
			c.anchors[x.Name.String()] = v
		}
		return v, nil
	case *ast.AliasNode:
		name := ""
		if x.Value != nil {
			name = x.Value.String()
		}
		v, ok := c.anchors[name]
		if !ok {
			return nil, c.errAt(tk, "alias *%s refers to no anchor defined before it", name)
		}
		c.total += c.size(v)
		if c.total > maxNodes {
			return nil, c.errAt(tk, "the YAML has more than %d values once aliases are expanded", maxNodes)
		}
		c.bytes += c.text(v)
		if c.bytes > c.maxBytes {
			e := c.errAt(tk, "alias *%s passes the alias_bytes budget: the YAML's text with its aliases expanded would exceed %d bytes (1 MiB plus %d times the file's %d bytes); write the values out, or alias smaller ones",
				name, c.maxBytes, aliasBytesPerByte, (c.maxBytes-aliasBytesBase)/aliasBytesPerByte).(*Error)
			e.Err = ErrBudgetExceeded
			return nil, e
		}
		return v, nil
	case *ast.TagNode:
		v, err := c.convert(x.Value, depth)
		if err != nil {
			return nil, err
		}
		if x.Start != nil && (x.Start.Value == "!!str" || x.Start.Value == "!str") && v.kind != kMap && v.kind != kSeq {
			cp := *v
			cp.kind = kString
			return &cp, nil
		}
		return v, nil
	default:
		return nil, c.errAt(tk, "unsupported YAML construct (%s)", an.Type())
	}
	c.bytes += len(n.text)
	return n, nil
}

// text is the scalar text of the tree n: the bytes it stands for when
// an alias repeats it.
func (c *converter) text(n *node) int {
	if s, ok := c.textBytes[n]; ok {
		return s
	}
	s := len(n.text)
	for _, k := range n.keys {
		s += len(k.text)
	}
	for _, v := range n.vals {
		s += c.text(v)
	}
	for _, v := range n.seq {
		s += c.text(v)
	}
	c.textBytes[n] = s
	return s
}

func (c *converter) size(n *node) int {
	if s, ok := c.sizes[n]; ok {
		return s
	}
	s := 1
	for _, v := range n.vals {
		s += c.size(v)
	}
	for _, v := range n.seq {
		s += c.size(v)
	}
	if s > maxNodes {
		s = maxNodes + 1
	}
	c.sizes[n] = s
	return s
}

func (c *converter) addPair(m *node, mv *ast.MappingValueNode, depth int) error {
	if mv == nil || mv.Key == nil {
		return c.errAt(m.tokenless(), "a mapping entry has no key")
	}
	if _, ok := mv.Key.(*ast.MergeKeyNode); ok {
		return c.errAt(mv.Key.GetToken(), "merge keys (<<) are not supported; write the entries out")
	}
	k, err := c.convert(mv.Key, depth+1)
	if err != nil {
		return err
	}
	if k.kind == kMap || k.kind == kSeq {
		return c.errAt(mv.Key.GetToken(), "a mapping key must be a scalar, not %s", k.kind)
	}
	if k.kind == kNull {
		k.text = "null"
	}
	for _, prev := range m.keys {
		if prev.text == k.text {
			return &Error{File: c.file, Line: k.line, Col: k.col, Msg: fmt.Sprintf("duplicate key %q (first at line %d)", k.text, prev.line)}
		}
	}
	v, err := c.convert(mv.Value, depth+1)
	if err != nil {
		return err
	}
	if mv.Value == nil || v.kind == kNull && v.line == 1 && v.col == 1 {
		v = &node{kind: kNull, line: k.line, col: k.col}
	}
	m.keys = append(m.keys, k)
	m.vals = append(m.vals, v)
	return nil
}

func (n *node) tokenless() *token.Token {
	return &token.Token{Position: &token.Position{Line: n.line, Column: n.col}}
}

// ---- typed accessors: each reports a positioned error ----

// errf returns a positioned error at n.
func (l *loader) errf(n *node, format string, args ...any) error {
	line, col := 1, 1
	if n != nil {
		line, col = n.line, n.col
	}
	return &Error{File: l.file, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

// wrapf returns a positioned error at n wrapping err.
func (l *loader) wrapf(n *node, err error, format string, args ...any) error {
	e := l.errf(n, format, args...).(*Error)
	e.Msg += ": " + err.Error()
	e.Err = err
	return e
}

// checkKeys reports the first key of mapping n not among allowed.
func (l *loader) checkKeys(n *node, what string, allowed ...string) error {
	if n == nil {
		return nil
	}
	if n.kind != kMap {
		return l.errf(n, "%s must be a mapping, not %s", what, n.kind)
	}
	for _, k := range n.keys {
		ok := false
		for _, a := range allowed {
			if k.text == a {
				ok = true
				break
			}
		}
		if !ok {
			if len(allowed) == 0 {
				return l.errf(k, "unknown key %q: %s takes no keys", k.text, what)
			}
			return l.errf(k, "unknown key %q in %s (allowed: %s)", k.text, what, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// str reads a string scalar (numbers and booleans are taken as written).
func (l *loader) str(n *node, what string) (string, error) {
	if n == nil {
		return "", nil
	}
	switch n.kind {
	case kString, kInt, kFloat, kBool:
		return n.text, nil
	}
	return "", l.errf(n, "%s must be a string, not %s", what, n.kind)
}

// requireStr reads a required, non-empty string at key of m.
func (l *loader) requireStr(m *node, key, what string) (string, *node, error) {
	n := m.get(key)
	if n == nil || n.kind == kNull {
		return "", nil, l.errf(m, "%s needs %q", what, key)
	}
	s, err := l.str(n, what+" "+key)
	if err == nil && strings.TrimSpace(s) == "" {
		err = l.errf(n, "%s %s is empty", what, key)
	}
	return s, n, err
}

func (l *loader) boolean(n *node, what string) (bool, error) {
	if n == nil || n.kind == kNull {
		return false, nil
	}
	if n.kind != kBool {
		return false, l.errf(n, "%s must be true or false, not %s", what, n.kind)
	}
	return n.b, nil
}

func (l *loader) integer(n *node, what string) (int64, error) {
	if n == nil || n.kind == kNull {
		return 0, nil
	}
	if n.kind != kInt {
		if n.kind == kString {
			if v, err := strconv.ParseInt(n.text, 10, 64); err == nil {
				return v, nil
			}
		}
		return 0, l.errf(n, "%s must be an integer, not %s", what, n.kind)
	}
	return n.i, nil
}

func (l *loader) number(n *node, what string) (float64, error) {
	if n == nil || n.kind == kNull {
		return 0, nil
	}
	switch n.kind {
	case kInt:
		return float64(n.i), nil
	case kFloat:
		return n.f, nil
	}
	return 0, l.errf(n, "%s must be a number, not %s", what, n.kind)
}

// strList reads a string or a list of strings.
func (l *loader) strList(n *node, what string) ([]string, []*node, error) {
	if n == nil || n.kind == kNull {
		return nil, nil, nil
	}
	if n.kind != kSeq {
		s, err := l.str(n, what)
		return []string{s}, []*node{n}, err
	}
	out := make([]string, 0, len(n.seq))
	for _, e := range n.seq {
		s, err := l.str(e, what+" item")
		if err != nil {
			return nil, nil, err
		}
		out = append(out, s)
	}
	return out, n.seq, nil
}
