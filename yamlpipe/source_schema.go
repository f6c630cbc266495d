package yamlpipe

import (
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/yamlpipe/srcschema"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// A source's schema (ReadFromPubSub's, ReadFromJson's, ...) is written in
// one of two forms:
//
//   - weir's own, a mapping of field: type ({key: string, amount: int});
//   - Beam YAML's, a JSON Schema of an object ({type: object, properties:
//     {key: {type: string}}, required: [key]}), as a mapping or as a string
//     holding its JSON, as Beam's ReadFromPubSub takes it with format JSON
//     (package srcschema reads it).

// sourceSchema reads a source's schema in either form and returns it with
// the fields a JSON Schema requires (nil for weir's form).
func (l *loader) sourceSchema(n *yamlnode.Node) (*row.Schema, []string, error) {
	n, err := srcschema.FromString(l.file, n)
	if err != nil {
		return nil, nil, positioned(err)
	}
	if srcschema.IsJSONSchema(n) {
		s, required, err := srcschema.JSONSchema(l.file, n)
		return s, required, positioned(err)
	}
	s, err := l.fieldSchema(n)
	return s, nil, err
}
