package yamlpipe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
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

// schemaURL is the address the submitted schema is compiled under.
const schemaURL = "weir:///ValidateWithSchema.json"

// noLoader refuses every $ref outside the schema itself.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("$ref %s: a ValidateWithSchema schema may only refer to itself (nothing is loaded from files or the network)", url)
}

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
	doc, err := jsonValue(sn.Plain())
	if err != nil {
		return nil, l.wrapf(sn, err, "schema")
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, l.wrapf(sn, err, "schema is not a JSON Schema")
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, l.wrapf(sn, err, "schema is not a JSON Schema")
	}
	fn := &validateSchemaFn{schema: sch}
	res := parDo(l.root, t.name, in, fn, stepOpts(t, append(errorOpt(t), weir.WithCoder(in.schema.Coder()))...)...)
	l.registerErrors(t, res)
	return rowsColl(in.schema, res), nil
}

// jsonValue turns a plain Go value into the JSON value jsonschema
// validates (numbers as json.Number).
func jsonValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

// validateSchemaFn checks each row against the compiled schema. A compiled
// jsonschema.Schema is safe for concurrent use; buf is per worker (Clone).
type validateSchemaFn struct {
	schema *jsonschema.Schema
	buf    []byte
}

// Clone gives each worker its own encoding buffer.
func (f *validateSchemaFn) Clone() any { return &validateSchemaFn{schema: f.schema} }

// Process implements contract.DoFn.
func (f *validateSchemaFn) Process(pc *contract.ProcessContext, e contract.Element) error {
	in, ok := row.AsRow(e.Value)
	if !ok {
		return notARow(e.Value)
	}
	f.buf = row.AppendJSON(f.buf[:0], in)
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(f.buf))
	if err != nil {
		return &contract.ElementError{Reason: reasonSchemaMismatch, Message: fmt.Sprintf("the row is not JSON: %v", err)}
	}
	if err := f.schema.Validate(v); err != nil {
		msg := err.Error()
		// The first line names the schema's address, which says nothing here.
		if _, rest, ok := strings.Cut(msg, "\n"); ok && strings.HasPrefix(msg, "jsonschema validation failed") {
			lines := strings.Split(rest, "\n")
			for i, ln := range lines {
				lines[i] = strings.TrimPrefix(strings.TrimSpace(ln), "- ")
			}
			msg = strings.Join(lines, "; ")
		}
		return &contract.ElementError{Reason: reasonSchemaMismatch, Message: "the row does not match the schema: " + msg}
	}
	e.Value = in
	pc.Emit(0, e)
	return nil
}
