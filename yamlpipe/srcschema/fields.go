package srcschema

import (
	"slices"
	"strings"

	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// A source's schema (ReadFromPubSub's, ReadFromJson's, ...) is written in
// one of two forms:
//
//   - weir's own, a mapping of field: type ({key: string, amount: int});
//   - Beam YAML's, a JSON Schema of an object ({type: object, properties:
//     {key: {type: string}}, required: [key]}), as a mapping or as a string
//     holding its JSON, as Beam's ReadFromPubSub takes it with format JSON.

// Read reads a source's schema in either form and returns it with the
// fields a JSON Schema requires (nil for weir's form).
func Read(file string, n *yamlnode.Node) (*row.Schema, []string, error) {
	n, err := fromString(file, n)
	if err != nil {
		return nil, nil, err
	}
	if isJSONSchema(n) {
		return reader{file}.object(n, true)
	}
	s, err := reader{file}.fields(n)
	return s, nil, err
}

// wrapf returns a positioned error at n wrapping err.
func (r reader) wrapf(n *yamlnode.Node, err error, what string) error {
	e := r.errf(n, "%s: %v", what, err).(*yamlnode.Error)
	e.Err = err
	return e
}

// fields reads weir's form of a schema, {field: type} (nested mappings
// are rows, in either form; [type] lists).
func (r reader) fields(n *yamlnode.Node) (*row.Schema, error) {
	if n.Kind != yamlnode.Map || len(n.Keys) == 0 {
		return nil, r.errf(n, "schema must be a non-empty mapping of field: type")
	}
	fields := make([]row.Field, 0, len(n.Keys))
	for i, k := range n.Keys {
		t, err := r.typeOf(n.Vals[i])
		if err != nil {
			return nil, err
		}
		fields = append(fields, row.Field{Name: k.Text, Type: t})
	}
	s, err := row.NewSchema(fields...)
	if err != nil {
		return nil, r.wrapf(n, err, "bad schema")
	}
	return s, nil
}

// typeOf reads a field's type in weir's form.
func (r reader) typeOf(n *yamlnode.Node) (row.Type, error) {
	switch n.Kind {
	case yamlnode.Map:
		if isJSONSchema(n) {
			s, _, err := r.object(n, false)
			if err != nil {
				return row.Type{}, err
			}
			return row.RowOf(s), nil
		}
		s, err := r.fields(n)
		if err != nil {
			return row.Type{}, err
		}
		return row.RowOf(s), nil
	case yamlnode.Seq:
		if len(n.Seq) != 1 {
			return row.Type{}, r.errf(n, "a list type is written [type]")
		}
		e, err := r.typeOf(n.Seq[0])
		if err != nil {
			return row.Type{}, err
		}
		return row.ListOf(e), nil
	case yamlnode.String:
		t, err := row.ParseType(n.Text)
		if err != nil {
			return row.Type{}, r.wrapf(n, err, "bad field type")
		}
		return t, nil
	}
	return row.Type{}, r.errf(n, "a field type must be a name (int, float, bool, string, timestamp, any), not %s", n.Kind)
}

// SameFields checks that a sink's schema at n (fields) names exactly the
// fields it is given (payload): every field of the schema from the rows,
// every field of the rows into the messages, nothing left out unsaid.
// what names the sink, for messages.
func SameFields(file string, n *yamlnode.Node, what string, fields *row.Schema, payload []row.Field) error {
	r := reader{file}
	for _, f := range fields.Fields {
		if !slices.ContainsFunc(payload, func(p row.Field) bool { return p.Name == f.Name }) {
			names := make([]string, len(payload))
			for i, p := range payload {
				names[i] = p.Name + ":" + p.Type.String()
			}
			return r.errf(n, "%s schema: field %q is not a payload field of the input (%s)", what, f.Name, strings.Join(names, ", "))
		}
	}
	for _, p := range payload {
		if fields.Index(p.Name) < 0 {
			return r.errf(n, "%s schema: the input's field %q is not in the schema, so the messages would leave it out: add it to the schema, or drop it before this step", what, p.Name)
		}
	}
	return nil
}
