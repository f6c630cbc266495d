// Package schemainfer infers the row schema of a file source read without
// a declared one, at load time: JSON from the first lines of a JSON-lines
// file (ReadFromJson without config.schema, as Beam's tests use it), CSV
// from a header and what its columns hold (ReadFromCsv), declared fields
// taking precedence. Package yamlpipe places its errors in the pipeline
// file.
//
// It may import io/files, row and the standard library.
package schemainfer
