package yamlnode

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"

	"github.com/weir-dev/weir/yamlpipe/yamlscan"
)

// ErrAliasBudget is the Err of the Error of a text whose aliases expand
// past the alias_bytes budget (package yamlpipe gives it as its
// ErrBudgetExceeded).
var ErrAliasBudget = errors.New("the alias_bytes budget is exceeded")

// Error is a problem in the text, at a position: package yamlpipe gives
// it as its own Error.
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

// Kind is the kind of a YAML node.
type Kind int

// The kinds of nodes.
const (
	Null Kind = iota
	Bool
	Int
	Float
	String
	Map
	Seq
)

// String names the kind as messages do ("a mapping").
func (k Kind) String() string {
	return [...]string{"null", "a boolean", "an integer", "a number", "a string", "a mapping", "a list"}[k]
}

// Node is a YAML value with its position: the loader's own tree, so that
// the loader does not depend on the YAML library's AST.
type Node struct {
	Kind Kind
	// Line and Col are the value's 1-based position in the file.
	Line, Col int
	// Quoted is true for a quoted string scalar.
	Quoted bool
	// Block is true for a block scalar (| or >); its text starts at
	// BodyLine:BodyCol.
	Block             bool
	BodyLine, BodyCol int
	// Text is the scalar as written (the string value for strings).
	Text string
	// B, I and F are the value of a boolean, an integer and a number.
	B bool
	I int64
	F float64
	// Keys and Vals hold a mapping's entries in order; Seq a list's items.
	Keys []*Node
	Vals []*Node
	Seq  []*Node
}

// Get returns the value of key in a mapping, or nil.
func (n *Node) Get(key string) *Node {
	if n == nil || n.Kind != Map {
		return nil
	}
	for i, k := range n.Keys {
		if k.Text == key {
			return n.Vals[i]
		}
	}
	return nil
}

// KeyNode returns the key node of key in a mapping, or nil.
func (n *Node) KeyNode(key string) *Node {
	if n == nil || n.Kind != Map {
		return nil
	}
	for _, k := range n.Keys {
		if k.Text == key {
			return k
		}
	}
	return nil
}

// Plain converts n to plain Go values (for recording configs as JSON).
func (n *Node) Plain() any {
	if n == nil {
		return nil
	}
	switch n.Kind {
	case Bool:
		return n.B
	case Int:
		return n.I
	case Float:
		if math.IsInf(n.F, 0) || math.IsNaN(n.F) {
			return n.Text
		}
		return n.F
	case String:
		return n.Text
	case Map:
		m := make(map[string]any, len(n.Keys))
		for i, k := range n.Keys {
			m[k.Text] = n.Vals[i].Plain()
		}
		return m
	case Seq:
		l := make([]any, len(n.Seq))
		for i, e := range n.Seq {
			l[i] = e.Plain()
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
	anchors map[string]*Node
	sizes   map[*Node]int
	total   int
	// bytes counts the scalar text of the tree, aliases expanded, against
	// maxBytes; textBytes memoizes it per aliased node.
	bytes, maxBytes int
	textBytes       map[*Node]int
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

// Parse parses src, the text of file, into a node tree. Its errors are
// *Error, at their position. It does not bound the text's size or nesting
// before parsing: yamlscan.Check does.
func Parse(file string, src []byte) (root *Node, err error) {
	defer func() {
		if r := recover(); r != nil {
			root, err = nil, &Error{File: file, Line: 1, Col: 1, Msg: fmt.Sprintf("invalid YAML: the parser failed (%v)", r)}
		}
	}()
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
	c := &converter{file: file, anchors: map[string]*Node{}, sizes: map[*Node]int{}, lines: strings.Split(string(src), "\n"),
		maxBytes: aliasBytesBase + aliasBytesPerByte*len(src), textBytes: map[*Node]int{}}
	return c.convert(bodies[0], 0)
}

func (c *converter) convert(an ast.Node, depth int) (*Node, error) {
	if an == nil {
		return &Node{Kind: Null, Line: 1, Col: 1}, nil
	}
	tk := an.GetToken()
	if depth > maxDepth {
		return nil, c.errAt(tk, "the YAML is nested more than %d levels deep", maxDepth)
	}
	c.total++
	if c.total > maxNodes {
		return nil, c.errAt(tk, "the YAML has more than %d values", maxNodes)
	}
	n := &Node{Line: 1, Col: 1}
	if tk != nil && tk.Position != nil {
		n.Line, n.Col = tk.Position.Line, tk.Position.Column
	}
	switch x := an.(type) {
	case *ast.NullNode:
		n.Kind = Null
	case *ast.BoolNode:
		n.Kind, n.B, n.Text = Bool, x.Value, x.Token.Value
	case *ast.IntegerNode:
		n.Kind, n.Text = Int, x.Token.Value
		switch v := x.Value.(type) {
		case int64:
			n.I = v
		case uint64:
			if v > math.MaxInt64 {
				return nil, c.errAt(tk, "integer %s is too large", x.Token.Value)
			}
			n.I = int64(v)
		default:
			return nil, c.errAt(tk, "integer %s cannot be read", x.Token.Value)
		}
	case *ast.FloatNode:
		n.Kind, n.F, n.Text = Float, x.Value, x.Token.Value
	case *ast.InfinityNode:
		n.Kind, n.F, n.Text = Float, x.Value, x.Token.Value
	case *ast.NanNode:
		n.Kind, n.F, n.Text = Float, math.NaN(), x.Token.Value
	case *ast.StringNode:
		n.Kind, n.Text = String, x.Value
		n.Quoted = x.Token != nil && (x.Token.Type == token.DoubleQuoteType || x.Token.Type == token.SingleQuoteType)
	case *ast.LiteralNode:
		n.Kind = String
		if x.Value != nil {
			n.Text = x.Value.Value
		}
		n.Block, n.BodyLine, n.BodyCol = true, n.Line+1, n.Col
		// The body starts on the first non-blank line after the indicator,
		// at that line's indentation.
		for i := n.Line; i < len(c.lines); i++ {
			if ln := c.lines[i]; strings.TrimSpace(ln) != "" {
				n.BodyLine, n.BodyCol = i+1, len(ln)-len(strings.TrimLeft(ln, " "))+1
				break
			}
		}
		n.Text = strings.TrimRight(n.Text, "\n")
	case *ast.MappingNode:
		n.Kind = Map
		for _, mv := range x.Values {
			if err := c.addPair(n, mv, depth); err != nil {
				return nil, err
			}
		}
		if !x.IsFlowStyle && len(n.Keys) > 0 {
			// A block mapping is where its first key is.
			n.Line, n.Col = n.Keys[0].Line, n.Keys[0].Col
		}
	case *ast.MappingValueNode:
		n.Kind = Map
		if err := c.addPair(n, x, depth); err != nil {
			return nil, err
		}
		n.Line, n.Col = n.Keys[0].Line, n.Keys[0].Col
	case *ast.SequenceNode:
		n.Kind = Seq
		for _, v := range x.Values {
			e, err := c.convert(v, depth+1)
			if err != nil {
				return nil, err
			}
			n.Seq = append(n.Seq, e)
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
			e.Err = ErrAliasBudget
			return nil, e
		}
		return v, nil
	case *ast.TagNode:
		v, err := c.convert(x.Value, depth)
		if err != nil {
			return nil, err
		}
		if x.Start != nil && (x.Start.Value == "!!str" || x.Start.Value == "!str") && v.Kind != Map && v.Kind != Seq {
			cp := *v
			cp.Kind = String
			return &cp, nil
		}
		return v, nil
	default:
		return nil, c.errAt(tk, "unsupported YAML construct (%s)", an.Type())
	}
	c.bytes += len(n.Text)
	return n, nil
}

// text is the scalar text of the tree n: the bytes it stands for when
// an alias repeats it.
func (c *converter) text(n *Node) int {
	if s, ok := c.textBytes[n]; ok {
		return s
	}
	s := len(n.Text)
	for _, k := range n.Keys {
		s += len(k.Text)
	}
	for _, v := range n.Vals {
		s += c.text(v)
	}
	for _, v := range n.Seq {
		s += c.text(v)
	}
	c.textBytes[n] = s
	return s
}

func (c *converter) size(n *Node) int {
	if s, ok := c.sizes[n]; ok {
		return s
	}
	s := 1
	for _, v := range n.Vals {
		s += c.size(v)
	}
	for _, v := range n.Seq {
		s += c.size(v)
	}
	if s > maxNodes {
		s = maxNodes + 1
	}
	c.sizes[n] = s
	return s
}

func (c *converter) addPair(m *Node, mv *ast.MappingValueNode, depth int) error {
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
	if k.Kind == Map || k.Kind == Seq {
		return c.errAt(mv.Key.GetToken(), "a mapping key must be a scalar, not %s", k.Kind)
	}
	if k.Kind == Null {
		k.Text = "null"
	}
	for _, prev := range m.Keys {
		if prev.Text == k.Text {
			return &Error{File: c.file, Line: k.Line, Col: k.Col, Msg: fmt.Sprintf("duplicate key %q (first at line %d)", k.Text, prev.Line)}
		}
	}
	v, err := c.convert(mv.Value, depth+1)
	if err != nil {
		return err
	}
	if mv.Value == nil || v.Kind == Null && v.Line == 1 && v.Col == 1 {
		v = &Node{Kind: Null, Line: k.Line, Col: k.Col}
	}
	m.Keys = append(m.Keys, k)
	m.Vals = append(m.Vals, v)
	return nil
}

func (n *Node) tokenless() *token.Token {
	return &token.Token{Position: &token.Position{Line: n.Line, Column: n.Col}}
}
