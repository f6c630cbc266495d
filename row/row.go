// Package row owns schema'd rows: the dynamic records that YAML pipelines
// carry. A Schema lists named, typed fields; a Row holds one value per field
// in schema order, so that field positions are resolved when a pipeline is
// built and per-element access is an index. The package also converts rows
// to and from JSON and CSV text, turns runner rejects into rows, and derives
// the row coder identities recorded in the pipeline graph.
//
// Value representation, by field kind: int is int64, float is float64, bool
// is bool, string is string, timestamp is mtime.Time, row is *Row, list is
// []any, and any is one of those (or map[string]any). A nil value is null.
//
// It may import graph, window, mtime, runner/contract (for the Reject type
// only), internal/jsonscan and the standard library. It must not import runner (the executor),
// not even indirectly.
package row

import (
	"fmt"
	"strings"

	"github.com/weir-dev/weir/graph"
)

// Kind is the kind of a field's type.
type Kind uint8

// Field kinds.
const (
	// KindAny holds any value; its type is only known at run time.
	KindAny Kind = iota
	KindInt
	KindFloat
	KindBool
	KindString
	KindTimestamp
	KindRow
	KindList
)

var kindNames = [...]string{"any", "int", "float", "bool", "string", "timestamp", "row", "list"}

// String returns the kind's name as written in pipeline files.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Type is the type of a field: a kind, plus the schema of a nested row or
// the element type of a list.
type Type struct {
	Kind Kind
	// Row is the schema of a KindRow field.
	Row *Schema
	// Elem is the element type of a KindList field.
	Elem *Type
}

// Of returns the scalar type of kind k.
func Of(k Kind) Type { return Type{Kind: k} }

// RowOf returns the type of a nested row with schema s.
func RowOf(s *Schema) Type { return Type{Kind: KindRow, Row: s} }

// ListOf returns the type of a list of elem.
func ListOf(elem Type) Type { return Type{Kind: KindList, Elem: &elem} }

// String renders t canonically: int, float, bool, string, timestamp, any,
// row{a:int,b:string} or list<int>. Two types are equal when their strings are.
func (t Type) String() string {
	switch t.Kind {
	case KindRow:
		if t.Row == nil {
			return "row{}"
		}
		return "row" + t.Row.String()
	case KindList:
		if t.Elem == nil {
			return "list<any>"
		}
		return "list<" + t.Elem.String() + ">"
	}
	return t.Kind.String()
}

// Equal reports whether t and u are the same type.
func (t Type) Equal(u Type) bool {
	if t.Kind != u.Kind {
		return false
	}
	switch t.Kind {
	case KindRow, KindList:
		return t.String() == u.String()
	}
	return true
}

// IsNumeric reports whether t is int or float.
func (t Type) IsNumeric() bool { return t.Kind == KindInt || t.Kind == KindFloat }

// ParseType reads a scalar type name as written in a schema: int (integer,
// int64, long), float (double, number), bool (boolean), string (str),
// timestamp (time), any (json).
func ParseType(s string) (Type, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "int", "integer", "int64", "long":
		return Of(KindInt), nil
	case "float", "double", "number", "float64":
		return Of(KindFloat), nil
	case "bool", "boolean":
		return Of(KindBool), nil
	case "string", "str":
		return Of(KindString), nil
	case "timestamp", "time", "datetime":
		return Of(KindTimestamp), nil
	case "any", "json":
		return Of(KindAny), nil
	}
	return Type{}, fmt.Errorf("unknown type %q (want int, float, bool, string, timestamp or any)", s)
}

// Field is one named, typed field of a schema.
type Field struct {
	Name string
	Type Type
}

// Schema is the ordered list of a row's fields. A schema is immutable once
// built: share it freely, never modify it.
type Schema struct {
	Fields []Field
	index  map[string]int
}

// NewSchema returns a schema of the given fields, refusing empty or
// duplicate names.
func NewSchema(fields ...Field) (*Schema, error) {
	s := &Schema{Fields: fields, index: make(map[string]int, len(fields))}
	for i, f := range fields {
		if f.Name == "" {
			return nil, fmt.Errorf("field %d has an empty name", i)
		}
		if _, dup := s.index[f.Name]; dup {
			return nil, fmt.Errorf("field %q appears twice", f.Name)
		}
		s.index[f.Name] = i
	}
	return s, nil
}

// MustSchema is NewSchema for fixed field lists known to be valid; it
// panics on a duplicate name, so never call it with user input.
func MustSchema(fields ...Field) *Schema {
	s, err := NewSchema(fields...)
	if err != nil {
		panic(err)
	}
	return s
}

// Len returns the number of fields.
func (s *Schema) Len() int { return len(s.Fields) }

// Index returns the position of the named field, or -1.
func (s *Schema) Index(name string) int {
	if i, ok := s.index[name]; ok {
		return i
	}
	return -1
}

// MissingRequired returns, for the first of the fields at positions
// required whose value in r is null (a JSON field absent or null), the
// message a source's reject of r gives; "" when none is.
func (r *Row) MissingRequired(required []int) string {
	for _, i := range required {
		if r.Values[i] == nil {
			return fmt.Sprintf("field %s is required by the schema but is missing or null", r.Schema.Fields[i].Name)
		}
	}
	return ""
}

// Names returns the field names in order.
func (s *Schema) Names() []string {
	out := make([]string, len(s.Fields))
	for i, f := range s.Fields {
		out[i] = f.Name
	}
	return out
}

// String renders the schema as {a:int,b:string}.
func (s *Schema) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, f := range s.Fields {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(f.Name)
		b.WriteByte(':')
		b.WriteString(f.Type.String())
	}
	b.WriteByte('}')
	return b.String()
}

// Equal reports whether two schemas have the same fields in the same order.
func (s *Schema) Equal(o *Schema) bool { return s.String() == o.String() }

// CoderURN is the URN of row coders.
const CoderURN = "weir:coder:row"

// Coder returns the identity of the row coder for s: its field names and
// types, in order.
func (s *Schema) Coder() graph.Coder {
	return FieldsCoder(s.Fields)
}

// FieldsCoder returns the row coder identity of the given fields.
func FieldsCoder(fields []Field) graph.Coder {
	c := graph.Coder{URN: CoderURN, Version: 1, Fields: make([]graph.Field, len(fields))}
	for i, f := range fields {
		c.Fields[i] = graph.Field{Name: f.Name, Type: f.Type.String()}
	}
	return c
}

// Row is one record: a value per field of its schema, in schema order.
// Rows are immutable once emitted into a pipeline; derive new rows instead
// of changing one.
type Row struct {
	Schema *Schema
	Values []any
}

// New returns a row of schema s with every value null.
func New(s *Schema) *Row {
	return &Row{Schema: s, Values: make([]any, len(s.Fields))}
}

// Get returns the value of the named field and whether the field exists.
func (r *Row) Get(name string) (any, bool) {
	i := r.Schema.Index(name)
	if i < 0 {
		return nil, false
	}
	return r.Values[i], true
}

// MarshalJSON encodes r as a JSON object with fields in schema order.
func (r *Row) MarshalJSON() ([]byte, error) { return AppendJSON(nil, r), nil }

// String renders r as JSON.
func (r *Row) String() string { return string(AppendJSON(nil, r)) }
