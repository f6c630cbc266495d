package row

import (
	"fmt"
	"strings"

	"github.com/weir-dev/weir/graph"
)

// SchemaFromCoder returns the schema whose Coder is c: the inverse of
// Schema.Coder, for code that meets a collection in a graph and must build
// rows of its schema (a sandbox feeding recorded elements to a source
// step).
func SchemaFromCoder(c graph.Coder) (*Schema, error) {
	if c.URN != CoderURN {
		return nil, fmt.Errorf("coder %s is not a row coder", c.URN)
	}
	fields := make([]Field, len(c.Fields))
	for i, f := range c.Fields {
		t, err := parseTypeString(f.Type)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", f.Name, err)
		}
		fields[i] = Field{Name: f.Name, Type: t}
	}
	return NewSchema(fields...)
}

// parseTypeString reads a type as Type.String renders it: a scalar name,
// list<T> or row{a:T,b:U}.
func parseTypeString(s string) (Type, error) {
	switch {
	case strings.HasPrefix(s, "list<") && strings.HasSuffix(s, ">"):
		elem, err := parseTypeString(s[len("list<") : len(s)-1])
		if err != nil {
			return Type{}, err
		}
		return ListOf(elem), nil
	case strings.HasPrefix(s, "row{") && strings.HasSuffix(s, "}"):
		body := s[len("row{") : len(s)-1]
		var fields []Field
		for _, part := range splitTop(body) {
			name, typ, ok := strings.Cut(part, ":")
			if !ok {
				return Type{}, fmt.Errorf("row type %q: field %q has no type", s, part)
			}
			t, err := parseTypeString(typ)
			if err != nil {
				return Type{}, err
			}
			fields = append(fields, Field{Name: name, Type: t})
		}
		sch, err := NewSchema(fields...)
		if err != nil {
			return Type{}, fmt.Errorf("row type %q: %w", s, err)
		}
		return RowOf(sch), nil
	}
	return ParseType(s)
}

// splitTop splits s at the commas outside brackets.
func splitTop(s string) []string {
	if s == "" {
		return nil
	}
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{', '<':
			depth++
		case '}', '>':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}
