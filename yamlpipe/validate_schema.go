package yamlpipe

import (
	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/yamlpipe/schemacheck"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// Beam YAML's ValidateWithSchema: every element is checked against a JSON
// Schema (config.schema, any draft the schema's $schema names, 2020-12 by
// default, as Python's jsonschema does); an element that does not match is
// a reject with reason schema_mismatch whose message says where and why,
// on the transform's error output (without one it fails the run, as every
// reject does). The schema is compiled at load time: a schema that is not
// one is a load error at its line. A $ref may only point inside the
// schema: nothing is fetched from files or the network.

func buildValidateWithSchema(l *loader, t *transformSpec, ins []*coll) (*coll, error) {
	in := ins[0]
	sn := t.config.Get("schema")
	if sn == nil || sn.Kind != yamlnode.Map {
		at := sn
		if at == nil {
			at = t.typNode
		}
		return nil, l.errf(at, "ValidateWithSchema needs config.schema, a JSON Schema mapping ({type: object, properties: {...}, required: [...]})")
	}
	doc, err := schemacheck.Document(sn.Plain())
	if err != nil {
		return nil, l.wrapf(sn, err, "schema")
	}
	fn, err := schemacheck.Compile(doc)
	if err != nil {
		return nil, l.wrapf(sn, err, "schema is not a JSON Schema")
	}
	res := parDo(l.root, t.name, in, fn, stepOpts(t, append(errorOpt(t), weir.WithCoder(in.schema.Coder()))...)...)
	l.registerErrors(t, res)
	return rowsColl(in.schema, res), nil
}
