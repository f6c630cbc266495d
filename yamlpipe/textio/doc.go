// Package textio is the run time of Beam YAML's ReadFromText and
// MatchAll. ReadFromText's rows hold one string field named line, one per
// line of text; Source reads the lines of a file, a glob of files or a
// manifest's files, one split per file. Matcher expands each row's file
// pattern into rows of the files it matches (MatchAll).
// WriteToText writes through io/files' text format (package yamlpipe).
// Package yamlpipe reads the transforms' config and checks their paths.
//
// It may import internal/fileglob, io/files, manifest, mtime, row,
// runner/contract, window
// and the standard library.
package textio
