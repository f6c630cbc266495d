// Package assertcheck is the check of Beam YAML's AssertEqual: the
// canonical form of an element, the same text for a YAML literal of
// config.elements (AppendNode) and for a row or a reject the pipeline
// produced (AppendRow, AppendValue) when Beam would call them equal (a
// missing field equals a null one, an int a float of the same value, a
// timestamp its seconds since the epoch), and Check, which compares the
// grouped input with the expected elements as multisets and words the
// failure. Package yamlpipe builds the steps around it.
//
// It may import mtime, row, runner/contract, yamlpipe/yamlnode and the
// standard library.
package assertcheck
