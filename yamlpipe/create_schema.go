package yamlpipe

import (
	"fmt"
	"strings"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
)

// Create's output_schema, as Beam YAML's Create has it: a JSON Schema
// (type: object, properties: {field: {type: ...}}) every element must
// match. An element that does not is a reject with reason schema_mismatch,
// on the error output named by output_schema.error_handling (where Beam
// puts it) or the transform's error_handling; without one it fails the run.

// reasonSchemaMismatch is the reject reason of an element that does not
// match Create's output_schema.
const reasonSchemaMismatch = "schema_mismatch"

// outputSchema is the part of a JSON Schema weir checks: the JSON type of
// each property.
type outputSchema struct {
	props map[string]string
}

var jsonSchemaTypes = []string{"string", "integer", "number", "boolean", "array", "object", "null"}

// parseOutputSchema reads Create's output_schema.
func (l *loader) parseOutputSchema(n *node) (*outputSchema, error) {
	if n.kind != kMap {
		return nil, l.errf(n, "output_schema must be a JSON Schema mapping (type: object, properties: {...}), not %s", n.kind)
	}
	if err := l.checkKeys(n, "output_schema", "type", "properties", "error_handling"); err != nil {
		return nil, err
	}
	if tn := n.get("type"); tn != nil && (tn.kind != kString || tn.text != "object") {
		return nil, l.errf(tn, "output_schema type must be object (elements are rows)")
	}
	os := &outputSchema{props: map[string]string{}}
	pn := n.get("properties")
	if pn == nil {
		return os, nil
	}
	if pn.kind != kMap {
		return nil, l.errf(pn, "output_schema properties must be a mapping of field: {type: ...}")
	}
	for i, k := range pn.keys {
		v := pn.vals[i]
		if v.kind != kMap {
			return nil, l.errf(v, "output_schema property %q must be a mapping with a type", k.text)
		}
		if err := l.checkKeys(v, "output_schema property", "type"); err != nil {
			return nil, err
		}
		tn := v.get("type")
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
			return nil, l.errf(tn, "output_schema property %q: unknown JSON Schema type %q (want %s)", k.text, typ, strings.Join(jsonSchemaTypes, ", "))
		}
		os.props[k.text] = typ
	}
	return os, nil
}

// mismatch says how element e (a mapping) fails the schema, or "".
func (s *outputSchema) mismatch(e *node) string {
	for i, k := range e.keys {
		want, ok := s.props[k.text]
		v := e.vals[i]
		if !ok || v.kind == kNull {
			continue
		}
		var got string
		switch v.kind {
		case kString:
			got = "string"
		case kInt:
			got = "integer"
			if want == "number" {
				continue
			}
		case kFloat:
			got = "number"
		case kBool:
			got = "boolean"
		case kSeq:
			got = "array"
		case kMap:
			got = "object"
		}
		if got != want {
			return fmt.Sprintf("field %s is %s %s, output_schema wants %s", k.text, got, shortNode(v), want)
		}
	}
	return ""
}

func shortNode(n *node) string {
	if n.kind == kString {
		return fmt.Sprintf("%q", n.text)
	}
	return n.text
}

// splitBySchema separates the elements that match s from the others,
// which it returns as rejects of the Create step (each a row of its own
// literal types).
func (l *loader) splitBySchema(s *outputSchema, elems []*node) (valid []*node, rejects []weir.TimestampedValue[*rowT], err error) {
	for _, e := range elems {
		m := e
		if e.kind != kMap {
			m = &node{kind: kMap, line: e.line, col: e.col, keys: []*node{{kind: kString, text: "element", line: e.line, col: e.col}}, vals: []*node{e}}
		}
		msg := s.mismatch(m)
		if msg == "" {
			valid = append(valid, e)
			continue
		}
		lit, err := l.literalRows([]*node{m}, "")
		if err != nil {
			return nil, nil, err
		}
		rejects = append(rejects, weir.TimestampedValue[*rowT]{Value: lit.rows[0], Time: mtime.MinTimestamp,
			Source: &contract.SourcePos{Source: l.file, Offset: int64(e.line)},
			Err:    &contract.ElementError{Reason: reasonSchemaMismatch, Message: msg}})
	}
	return valid, rejects, nil
}
