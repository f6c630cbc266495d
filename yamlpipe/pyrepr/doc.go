// Package pyrepr prints row values as Beam's Python SDK does, so that
// pipelines written for Beam YAML print the same text under weir:
// AppendJSON as Python's json.dumps (LogForTesting's lines), AppendStr as
// str() (WriteToText's lines), AppendFloat as a float's repr and
// AppendString as a JSON string with ensure_ascii.
//
// It may import mtime, row, runner/contract and the standard library.
package pyrepr
