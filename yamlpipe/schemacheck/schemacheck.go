package schemacheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// Reason is the reject reason of a row that does not match the schema.
const Reason = "schema_mismatch"

// schemaURL is the address the submitted schema is compiled under.
const schemaURL = "weir:///ValidateWithSchema.json"

// noLoader refuses every $ref outside the schema itself.
type noLoader struct{}

// Load implements jsonschema.URLLoader.
func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("$ref %s: a ValidateWithSchema schema may only refer to itself (nothing is loaded from files or the network)", url)
}

// Compile compiles doc (a Document) as a JSON Schema, whose $refs may
// only point inside it, into the DoFn that checks rows against it.
func Compile(doc any) (*Fn, error) {
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, err
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, err
	}
	return &Fn{schema: sch}, nil
}

// Document turns a plain Go value into the JSON value jsonschema
// validates (numbers as json.Number).
func Document(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

// Fn checks each row against the compiled schema. A compiled
// jsonschema.Schema is safe for concurrent use; buf is per worker (Clone).
type Fn struct {
	schema *jsonschema.Schema
	buf    []byte
}

// Clone gives each worker its own encoding buffer.
func (f *Fn) Clone() any { return &Fn{schema: f.schema} }

// Process implements contract.DoFn.
func (f *Fn) Process(pc *contract.ProcessContext, e contract.Element) error {
	in, ok := row.AsRow(e.Value)
	if !ok {
		return notARow(e.Value)
	}
	f.buf = row.AppendJSON(f.buf[:0], in)
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(f.buf))
	if err != nil {
		return &contract.ElementError{Reason: Reason, Message: fmt.Sprintf("the row is not JSON: %v", err)}
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
		return &contract.ElementError{Reason: Reason, Message: "the row does not match the schema: " + msg}
	}
	e.Value = in
	pc.Emit(0, e)
	return nil
}

// notARow is the error of an element that is no row.
func notARow(v any) error {
	return &contract.ElementError{Reason: "type_mismatch", Message: fmt.Sprintf("expected a row, got %T", v)}
}
