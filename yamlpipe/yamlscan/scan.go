package yamlscan

import (
	"bytes"
	"fmt"
)

// Limits of Check, checked on the text before the parser builds its
// tree: the parser's memory grew far faster than the text with nesting (a
// 100 KB file nested 50,000 levels drove it past 5 GiB before the
// converter's depth check ran).
const (
	// MaxSourceBytes is the largest pipeline text accepted (the API's
	// request limit).
	MaxSourceBytes = 8 << 20
	// MaxDepth is the nesting the loader's converter allows, which it
	// enforces exactly on the parsed tree.
	MaxDepth = 64
	// maxScanDepth bounds the estimated nesting: well above MaxDepth, which
	// the converter enforces exactly, so that an estimate a little high
	// never refuses a file the converter accepts.
	maxScanDepth = 4 * MaxDepth
	// maxScanNodes bounds the nodes the text spells out (mapping pairs,
	// sequence entries, flow items and collections, quoted scalars): the
	// parser allocates about 1.5 KB a node, so this bounds it near 150 MB.
	// (maxNodes bounds the converted tree, aliases expanded.)
	maxScanNodes = 100_000
)

// Error is a refusal of Check, at a 1-based line and column of the text.
type Error struct {
	Line, Col int
	Msg       string
}

// Error implements error.
func (e *Error) Error() string { return fmt.Sprintf("%d:%d: %s", e.Line, e.Col, e.Msg) }

// Check refuses a text too large, too deeply nested or with too many
// nodes, in one pass over its bytes with no allocation proportional to it.
// It tracks what YAML nesting is made of: block indentation, compact
// sequence entries ("- - -"), complex keys ("? ? ?") and flow collections
// ("[[[", "{{{"), skipping comments, quoted scalars and block scalars, whose
// text opens nothing. Its depth is an estimate (continuation lines of a
// plain scalar count as a level); the converter checks the exact one.
func Check(src []byte) error {
	if len(src) > MaxSourceBytes {
		return &Error{Line: 1, Col: 1, Msg: fmt.Sprintf("the file is %d bytes, more than the %d a pipeline may have", len(src), MaxSourceBytes)}
	}
	s := scan{blockScalar: -1}
	for start, lineNo := 0, 1; start <= len(src); lineNo++ {
		end := bytes.IndexByte(src[start:], '\n')
		if end < 0 {
			end = len(src)
		} else {
			end += start
		}
		if err := s.line(src[start:end], lineNo); err != nil {
			return err
		}
		start = end + 1
	}
	return nil
}

// scan is Check's state between lines.
type scan struct {
	// indents is the block indentation stack; its length is the block depth.
	// Its capacity is bounded by maxScanDepth (Check fails past it).
	indents []int
	flow    int  // flow collection depth
	quote   byte // 0, or the quote of the scalar being read ('\'' or '"')
	// ps is the last significant character: an indicator after which a
	// scalar or collection may start (':', '-', '?', ',', '[', '{'), 0 at
	// the start of a block line, 'x' after anything else.
	ps byte
	// blockScalar is the indentation of the line that opened a block scalar
	// (| or >), whose more indented lines are text; -1: none.
	blockScalar int
	nodes       int
}

func (s *scan) errAt(line, col int, format string, args ...any) error {
	return &Error{Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' }

// scalarStart says whether a scalar or a collection may start here.
func (s *scan) scalarStart() bool {
	switch s.ps {
	case 0, ':', '-', '?', ',', '[', '{':
		return true
	}
	return false
}

func (s *scan) line(line []byte, lineNo int) error {
	ind := 0
	for ind < len(line) && line[ind] == ' ' {
		ind++
	}
	rest := bytes.TrimRight(line[ind:], " \t\r")
	if s.blockScalar >= 0 {
		if len(rest) == 0 || ind > s.blockScalar {
			return nil // the block scalar's text
		}
		s.blockScalar = -1
	}
	j := 0
	dashes := 0
	if s.quote == 0 && s.flow == 0 {
		if len(rest) == 0 || rest[0] == '#' {
			return nil
		}
		if bytes.HasPrefix(rest, []byte("---")) || bytes.HasPrefix(rest, []byte("...")) {
			if len(rest) == 3 || isSpace(rest[3]) {
				j = 3 // a document marker, possibly followed by content
			}
		}
		for len(s.indents) > 0 && s.indents[len(s.indents)-1] >= ind {
			s.indents = s.indents[:len(s.indents)-1]
		}
		s.indents = append(s.indents, ind)
		s.ps = 0
		if d := len(s.indents); d > maxScanDepth {
			return s.errAt(lineNo, ind+1, "the YAML is nested more than %d levels deep", maxScanDepth)
		}
	}
	for ; j < len(rest); j++ {
		c := rest[j]
		col := ind + j + 1
		switch s.quote {
		case '\'':
			if c == '\'' {
				if j+1 < len(rest) && rest[j+1] == '\'' {
					j++
				} else {
					s.quote, s.ps = 0, 'x'
				}
			}
			continue
		case '"':
			if c == '\\' {
				j++
			} else if c == '"' {
				s.quote, s.ps = 0, 'x'
			}
			continue
		}
		if isSpace(c) {
			continue
		}
		next := byte(' ')
		if j+1 < len(rest) {
			next = rest[j+1]
		}
		if c == '#' && (j == 0 || isSpace(rest[j-1])) {
			return nil // a comment
		}
		start := s.scalarStart()
		switch {
		case (c == '\'' || c == '"') && start:
			s.quote = c
			s.nodes++
		case (c == '&' || c == '!') && start:
			// An anchor or a tag: transparent, the node follows it.
			for j+1 < len(rest) && !isSpace(rest[j+1]) && bytes.IndexByte([]byte("[]{},"), rest[j+1]) < 0 {
				j++
			}
		case (c == '[' || c == '{') && (start || s.flow > 0):
			s.flow++
			s.ps = c
			s.nodes++
			if d := len(s.indents) + dashes + s.flow; d > maxScanDepth {
				return s.errAt(lineNo, col, "the YAML is nested more than %d levels deep", maxScanDepth)
			}
		case (c == ']' || c == '}') && s.flow > 0:
			s.flow--
			s.ps = 'x'
		case c == ',' && s.flow > 0:
			s.ps = c
			s.nodes++
		case (c == '-' || c == '?') && start && isSpace(next):
			// Counted in flow context too, where they nest nothing: a flow
			// depth the parser does not see must not hide block nesting.
			dashes++
			s.ps = c
			s.nodes++
			if d := len(s.indents) + dashes + s.flow; d > maxScanDepth {
				return s.errAt(lineNo, col, "the YAML is nested more than %d levels deep", maxScanDepth)
			}
		case c == ':' && (isSpace(next) || s.flow > 0):
			s.ps = c
			s.nodes++
		case (c == '|' || c == '>') && start && s.flow == 0:
			s.blockScalar = ind
			return s.count(lineNo, col)
		default:
			s.ps = 'x'
		}
		if err := s.count(lineNo, col); err != nil {
			return err
		}
	}
	if s.flow == 0 && s.quote == 0 {
		s.ps = 0
	}
	return nil
}

func (s *scan) count(line, col int) error {
	if s.nodes > maxScanNodes {
		return s.errAt(line, col, "the YAML has more than %d nodes", maxScanNodes)
	}
	return nil
}
