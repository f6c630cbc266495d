// Package schemacheck is the run time of Beam YAML's ValidateWithSchema:
// a JSON Schema (any draft its $schema names, 2020-12 by default, as
// Python's jsonschema does) compiled with nothing fetched from files or
// the network, and the DoFn that checks every row against it, a row that
// does not match becoming a reject with reason schema_mismatch whose
// message says where and why. Package yamlpipe reads the transform's
// config and places compile errors at the schema's line.
//
// It may import row, runner/contract, github.com/santhosh-tekuri/jsonschema/v6
// and the standard library.
package schemacheck
