// Package textio is the run time of Beam YAML's ReadFromText and
// WriteToText: rows of one string field named line, one per line of text.
// Source reads the lines of a file, a glob of files or a manifest's files,
// one split per file; Sink writes each row's sole field as Python's str()
// prints it (Beam writes str(value)), one per line. Package yamlpipe reads
// the transforms' config and checks their paths.
//
// It may import io/files, manifest, mtime, row, runner/contract, window,
// yamlpipe/pyrepr and the standard library.
package textio
