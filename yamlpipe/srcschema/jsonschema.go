// Package srcschema reads the schemas pipelines give sources and sinks
// into row schemas: weir's own form, {field: type}, and Beam YAML's — a
// JSON Schema of an object (ReadFromPubSub with format JSON, ReadFromJson,
// ReadFromCsv) and an Avro record schema's text (format AVRO) — and checks
// that a sink's schema names exactly the fields it writes.
//
// It may import row, yamlpipe/yamlnode and the standard library.
package srcschema

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// From a JSON Schema weir takes what Beam's conversion to a Beam schema
// takes (json_utils): the properties' types — integer, number, string,
// boolean, array (of its items), object (a nested row of its properties,
// or, with additionalProperties only, a map, held as a value of type any)
// — and the top-level required fields, which every element must have,
// not null (one that does not is a schema_mismatch reject of the source).
// A keyword that would constrain the values further (minimum, enum,
// pattern, ...) is refused with a pointer to ValidateWithSchema rather
// than ignored: the source would let through what the schema's author
// meant to keep out.

// jsonSchemaKeys are the keywords of a JSON Schema object a source's
// schema takes; annotation keywords are accepted and carry no check.
var jsonSchemaKeys = []string{"type", "properties", "required", "additionalProperties", "description", "title", "$schema", "$id", "$comment"}

// jsonSchemaPropertyKeys are the keywords a property's schema may use.
var jsonSchemaPropertyKeys = []string{"type", "items", "properties", "required", "additionalProperties", "description", "title", "format", "$comment"}

// reader reads one schema of a pipeline file, for positioned errors.
type reader struct{ file string }

func (r reader) errf(n *yamlnode.Node, format string, args ...any) error {
	line, col := 1, 1
	if n != nil {
		line, col = n.Line, n.Col
	}
	return &yamlnode.Error{File: r.file, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

// fromString returns n itself, or, when n is a string holding a JSON
// object (Beam's configs take a schema as JSON text), that object parsed,
// every node of it placed at n's position (errors inside the string point
// at the string).
func fromString(file string, n *yamlnode.Node) (*yamlnode.Node, error) {
	if n == nil || n.Kind != yamlnode.String || !strings.HasPrefix(strings.TrimSpace(n.Text), "{") {
		return n, nil
	}
	parsed, err := yamlnode.Parse(file, []byte(n.Text))
	if err != nil {
		msg := err.Error()
		if ye := (*yamlnode.Error)(nil); errors.As(err, &ye) {
			msg = ye.Msg // its position is inside the string
		}
		return nil, reader{file}.errf(n, "schema is a string but not a JSON object: %s", msg)
	}
	placeAt(parsed, n.Line, n.Col)
	return parsed, nil
}

// placeAt gives n and every node under it the position line:col.
func placeAt(n *yamlnode.Node, line, col int) {
	if n == nil {
		return
	}
	n.Line, n.Col = line, col
	for _, k := range n.Keys {
		placeAt(k, line, col)
	}
	for _, v := range n.Vals {
		placeAt(v, line, col)
	}
	for _, v := range n.Seq {
		placeAt(v, line, col)
	}
}

// isJSONSchema reports whether n is a JSON Schema of an object ("object"
// is not one of weir's own types, so the two forms cannot be confused).
func isJSONSchema(n *yamlnode.Node) bool {
	if n == nil || n.Kind != yamlnode.Map {
		return false
	}
	t := n.Get("type")
	return t != nil && t.Kind == yamlnode.String && t.Text == "object"
}

// checkKeys refuses a keyword of n not among allowed, saying where to
// check it instead.
func (r reader) checkKeys(n *yamlnode.Node, what string, allowed []string) error {
	for _, k := range n.Keys {
		if !slices.Contains(allowed, k.Text) {
			return r.errf(k, "%s: JSON Schema keyword %q is not checked by a source's schema, which reads the fields' types and the required fields (allowed here: %s); check it with a ValidateWithSchema step after the source", what, k.Text, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// object reads a JSON Schema of an object (type: object) into a row
// schema, with its required fields when top is set. Below the top level a
// required list is refused: the sources check the top level only.
func (r reader) object(n *yamlnode.Node, top bool) (*row.Schema, []string, error) {
	what := "schema"
	allowed := jsonSchemaKeys
	if !top {
		what = "a nested object's schema"
		allowed = jsonSchemaPropertyKeys
	}
	if err := r.checkKeys(n, what, allowed); err != nil {
		return nil, nil, err
	}
	if ap := n.Get("additionalProperties"); top && ap != nil && !(ap.Kind == yamlnode.Bool && ap.Text == "true") {
		return nil, nil, r.errf(ap, "schema: additionalProperties is not checked by a source's schema (fields the schema does not name are left out of the rows); check it with a ValidateWithSchema step after the source")
	}
	pn := n.Get("properties")
	if pn == nil {
		return nil, nil, r.errf(n, "%s: a JSON Schema of type object needs properties, the fields of the rows", what)
	}
	if pn.Kind != yamlnode.Map || len(pn.Keys) == 0 {
		return nil, nil, r.errf(pn, "%s: properties must be a non-empty mapping of field: {type: ...}", what)
	}
	fields := make([]row.Field, 0, len(pn.Keys))
	for i, k := range pn.Keys {
		t, err := r.fieldType(pn.Vals[i], k.Text)
		if err != nil {
			return nil, nil, err
		}
		fields = append(fields, row.Field{Name: k.Text, Type: t})
	}
	s, err := row.NewSchema(fields...)
	if err != nil {
		return nil, nil, r.wrapf(pn, err, "bad schema")
	}
	rn := n.Get("required")
	if rn == nil {
		return s, nil, nil
	}
	if !top {
		return nil, nil, r.errf(rn, "%s: required is checked at the schema's top level only; check nested fields with a ValidateWithSchema step after the source", what)
	}
	if rn.Kind != yamlnode.Seq {
		return nil, nil, r.errf(rn, "schema: required must be a list of field names, not %s", rn.Kind)
	}
	var required []string
	for _, e := range rn.Seq {
		switch e.Kind {
		case yamlnode.String, yamlnode.Int, yamlnode.Float, yamlnode.Bool:
		default:
			return nil, nil, r.errf(e, "a required field must be a string, not %s", e.Kind)
		}
		if s.Index(e.Text) < 0 {
			return nil, nil, r.errf(e, "schema: required names %q, which properties does not declare", e.Text)
		}
		required = append(required, e.Text)
	}
	return s, required, nil
}

// fieldType reads the schema of property name into a field type.
func (r reader) fieldType(n *yamlnode.Node, name string) (row.Type, error) {
	if n == nil || n.Kind != yamlnode.Map {
		return row.Type{}, r.errf(n, "schema property %q must be a mapping with a type ({type: string}), as Beam's JSON Schema conversion wants", name)
	}
	if err := r.checkKeys(n, "schema property "+`"`+name+`"`, jsonSchemaPropertyKeys); err != nil {
		return row.Type{}, err
	}
	tn := n.Get("type")
	if tn == nil {
		return row.Type{}, r.errf(n, "schema property %q has no type", name)
	}
	if tn.Kind != yamlnode.String {
		return row.Type{}, r.errf(tn, "schema property %q: type must be one JSON Schema type name (integer, number, string, boolean, array, object), not %s", name, tn.Kind)
	}
	switch tn.Text {
	case "integer":
		return row.Of(row.KindInt), nil
	case "number":
		return row.Of(row.KindFloat), nil
	case "string":
		return row.Of(row.KindString), nil
	case "boolean":
		return row.Of(row.KindBool), nil
	case "array":
		in := n.Get("items")
		if in == nil {
			return row.Type{}, r.errf(n, "schema property %q: an array needs items, the schema of its elements", name)
		}
		e, err := r.fieldType(in, name+"[]")
		if err != nil {
			return row.Type{}, err
		}
		return row.ListOf(e), nil
	case "object":
		if n.Get("properties") != nil {
			s, _, err := r.object(n, false)
			if err != nil {
				return row.Type{}, err
			}
			return row.RowOf(s), nil
		}
		if ap := n.Get("additionalProperties"); ap != nil && ap.Kind == yamlnode.Map {
			if _, err := r.fieldType(ap, name+"{}"); err != nil {
				return row.Type{}, err
			}
			// A map of string to values of one type: weir's rows have no
			// map type, so the object is held whole, as a value of type
			// any (what a field of type any holds for a JSON object).
			return row.Of(row.KindAny), nil
		}
		return row.Type{}, r.errf(n, "schema property %q: an object needs properties (a nested row) or additionalProperties (a map)", name)
	}
	return row.Type{}, r.errf(tn, "schema property %q: unsupported JSON Schema type %q (want integer, number, string, boolean, array or object)", name, tn.Text)
}
