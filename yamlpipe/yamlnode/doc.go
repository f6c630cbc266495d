// Package yamlnode is the YAML tree of pipeline files: Parse turns a
// file's text into Nodes, each a value with its line and column, so that
// the loader (package yamlpipe) reads configs and places every error at
// file:line:column without depending on the YAML library's AST. Parse
// keeps hostile files cheap: it bounds nesting, the number of values and
// the text aliases expand to (yamlscan.Check bounds the text before it).
//
// It may import yamlpipe/yamlscan, github.com/goccy/go-yaml and the
// standard library.
package yamlnode
