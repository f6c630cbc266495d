package yamlpipe

import (
	"fmt"
	"strings"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/yamlpipe/schemacheck"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// Create's output_schema, as Beam YAML's Create has it: a JSON Schema
// (type: object, properties: {field: {type: ...}}) every element must
// match. An element that does not is a reject with reason schema_mismatch,
// on the error output named by output_schema.error_handling (where Beam
// puts it) or the transform's error_handling; without one it fails the run.

// reasonSchemaMismatch is the reject reason of an element that does not
// match Create's output_schema.
const reasonSchemaMismatch = schemacheck.Reason

// outputSchema is the part of a JSON Schema weir checks: the JSON type of
// each property.
type outputSchema struct {
	props map[string]string
}

var jsonSchemaTypes = []string{"string", "integer", "number", "boolean", "array", "object", "null"}

// parseOutputSchema reads Create's output_schema.
func (l *loader) parseOutputSchema(n *yamlnode.Node) (*outputSchema, error) {
	if n.Kind != yamlnode.Map {
		return nil, l.errf(n, "output_schema must be a JSON Schema mapping (type: object, properties: {...}), not %s", n.Kind)
	}
	if err := l.checkKeys(n, "output_schema", "type", "properties", "error_handling"); err != nil {
		return nil, err
	}
	if tn := n.Get("type"); tn != nil && (tn.Kind != yamlnode.String || tn.Text != "object") {
		return nil, l.errf(tn, "output_schema type must be object (elements are rows)")
	}
	os := &outputSchema{props: map[string]string{}}
	pn := n.Get("properties")
	if pn == nil {
		return os, nil
	}
	if pn.Kind != yamlnode.Map {
		return nil, l.errf(pn, "output_schema properties must be a mapping of field: {type: ...}")
	}
	for i, k := range pn.Keys {
		v := pn.Vals[i]
		if v.Kind != yamlnode.Map {
			return nil, l.errf(v, "output_schema property %q must be a mapping with a type", k.Text)
		}
		if err := l.checkKeys(v, "output_schema property", "type"); err != nil {
			return nil, err
		}
		tn := v.Get("type")
		if tn == nil {
			continue
		}
		typ, err := l.str(tn, "type")
		if err != nil {
			return nil, err
		}
		ok := false
		for _, j := range jsonSchemaTypes {
			ok = ok || j == typ
		}
		if !ok {
			return nil, l.errf(tn, "output_schema property %q: unknown JSON Schema type %q (want %s)", k.Text, typ, strings.Join(jsonSchemaTypes, ", "))
		}
		os.props[k.Text] = typ
	}
	return os, nil
}

// mismatch says how element e (a mapping) fails the schema, or "".
func (s *outputSchema) mismatch(e *yamlnode.Node) string {
	for i, k := range e.Keys {
		want, ok := s.props[k.Text]
		v := e.Vals[i]
		if !ok || v.Kind == yamlnode.Null {
			continue
		}
		var got string
		switch v.Kind {
		case yamlnode.String:
			got = "string"
		case yamlnode.Int:
			got = "integer"
			if want == "number" {
				continue
			}
		case yamlnode.Float:
			got = "number"
		case yamlnode.Bool:
			got = "boolean"
		case yamlnode.Seq:
			got = "array"
		case yamlnode.Map:
			got = "object"
		}
		if got != want {
			return fmt.Sprintf("field %s is %s %s, output_schema wants %s", k.Text, got, shortNode(v), want)
		}
	}
	return ""
}

func shortNode(n *yamlnode.Node) string {
	if n.Kind == yamlnode.String {
		return fmt.Sprintf("%q", n.Text)
	}
	return n.Text
}

// splitBySchema separates the elements that match s from the others,
// which it returns as rejects of the Create step (each a row of its own
// literal types).
func (l *loader) splitBySchema(s *outputSchema, elems []*yamlnode.Node) (valid []*yamlnode.Node, rejects []weir.TimestampedValue[*rowT], err error) {
	for _, e := range elems {
		m := e
		if e.Kind != yamlnode.Map {
			m = &yamlnode.Node{Kind: yamlnode.Map, Line: e.Line, Col: e.Col, Keys: []*yamlnode.Node{{Kind: yamlnode.String, Text: "element", Line: e.Line, Col: e.Col}}, Vals: []*yamlnode.Node{e}}
		}
		msg := s.mismatch(m)
		if msg == "" {
			valid = append(valid, e)
			continue
		}
		lit, err := l.literalRows([]*yamlnode.Node{m}, "")
		if err != nil {
			return nil, nil, err
		}
		rejects = append(rejects, weir.TimestampedValue[*rowT]{Value: lit.rows[0], Time: mtime.MinTimestamp,
			Source: &contract.SourcePos{Source: l.file, Offset: int64(e.Line)},
			Err:    &contract.ElementError{Reason: reasonSchemaMismatch, Message: msg}})
	}
	return valid, rejects, nil
}
