package yamlpipe

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/weir-dev/weir/yamlpipe/yamlnode"
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
func parseYAML(file string, src []byte) (*yamlnode.Node, error) {
	if err := prescan(file, src); err != nil {
		return nil, err
	}
	root, err := yamlnode.Parse(file, src)
	var ne *yamlnode.Error
	if errors.As(err, &ne) {
		cause := ne.Err
		if errors.Is(cause, yamlnode.ErrAliasBudget) {
			cause = ErrBudgetExceeded
		}
		return nil, &Error{File: ne.File, Line: ne.Line, Col: ne.Col, Msg: ne.Msg, Err: cause}
	} else if err != nil {
		return nil, err
	}
	return root, nil
}

// positioned returns err as an Error when it is a yamlnode.Error (the
// sub-packages' positioned errors), err itself otherwise.
func positioned(err error) error {
	var ne *yamlnode.Error
	if errors.As(err, &ne) {
		return &Error{File: ne.File, Line: ne.Line, Col: ne.Col, Msg: ne.Msg, Err: ne.Err}
	}
	return err
}

// ---- typed accessors: each reports a positioned error ----

// errf returns a positioned error at n.
func (l *loader) errf(n *yamlnode.Node, format string, args ...any) error {
	line, col := 1, 1
	if n != nil {
		line, col = n.Line, n.Col
	}
	return &Error{File: l.file, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

// wrapf returns a positioned error at n wrapping err.
func (l *loader) wrapf(n *yamlnode.Node, err error, format string, args ...any) error {
	e := l.errf(n, format, args...).(*Error)
	e.Msg += ": " + err.Error()
	e.Err = err
	return e
}

// checkKeys reports the first key of mapping n not among allowed.
func (l *loader) checkKeys(n *yamlnode.Node, what string, allowed ...string) error {
	if n == nil {
		return nil
	}
	if n.Kind != yamlnode.Map {
		return l.errf(n, "%s must be a mapping, not %s", what, n.Kind)
	}
	for _, k := range n.Keys {
		ok := false
		for _, a := range allowed {
			if k.Text == a {
				ok = true
				break
			}
		}
		if !ok {
			if len(allowed) == 0 {
				return l.errf(k, "unknown key %q: %s takes no keys", k.Text, what)
			}
			return l.errf(k, "unknown key %q in %s (allowed: %s)", k.Text, what, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// str reads a string scalar (numbers and booleans are taken as written).
func (l *loader) str(n *yamlnode.Node, what string) (string, error) {
	if n == nil {
		return "", nil
	}
	switch n.Kind {
	case yamlnode.String, yamlnode.Int, yamlnode.Float, yamlnode.Bool:
		return n.Text, nil
	}
	return "", l.errf(n, "%s must be a string, not %s", what, n.Kind)
}

// requireStr reads a required, non-empty string at key of m.
func (l *loader) requireStr(m *yamlnode.Node, key, what string) (string, *yamlnode.Node, error) {
	n := m.Get(key)
	if n == nil || n.Kind == yamlnode.Null {
		return "", nil, l.errf(m, "%s needs %q", what, key)
	}
	s, err := l.str(n, what+" "+key)
	if err == nil && strings.TrimSpace(s) == "" {
		err = l.errf(n, "%s %s is empty", what, key)
	}
	return s, n, err
}

func (l *loader) boolean(n *yamlnode.Node, what string) (bool, error) {
	if n == nil || n.Kind == yamlnode.Null {
		return false, nil
	}
	if n.Kind != yamlnode.Bool {
		return false, l.errf(n, "%s must be true or false, not %s", what, n.Kind)
	}
	return n.B, nil
}

func (l *loader) integer(n *yamlnode.Node, what string) (int64, error) {
	if n == nil || n.Kind == yamlnode.Null {
		return 0, nil
	}
	if n.Kind != yamlnode.Int {
		if n.Kind == yamlnode.String {
			if v, err := strconv.ParseInt(n.Text, 10, 64); err == nil {
				return v, nil
			}
		}
		return 0, l.errf(n, "%s must be an integer, not %s", what, n.Kind)
	}
	return n.I, nil
}

func (l *loader) number(n *yamlnode.Node, what string) (float64, error) {
	if n == nil || n.Kind == yamlnode.Null {
		return 0, nil
	}
	switch n.Kind {
	case yamlnode.Int:
		return float64(n.I), nil
	case yamlnode.Float:
		return n.F, nil
	}
	return 0, l.errf(n, "%s must be a number, not %s", what, n.Kind)
}

// strList reads a string or a list of strings.
func (l *loader) strList(n *yamlnode.Node, what string) ([]string, []*yamlnode.Node, error) {
	if n == nil || n.Kind == yamlnode.Null {
		return nil, nil, nil
	}
	if n.Kind != yamlnode.Seq {
		s, err := l.str(n, what)
		return []string{s}, []*yamlnode.Node{n}, err
	}
	out := make([]string, 0, len(n.Seq))
	for _, e := range n.Seq {
		s, err := l.str(e, what+" item")
		if err != nil {
			return nil, nil, err
		}
		out = append(out, s)
	}
	return out, n.Seq, nil
}
