// Package yamlscan is the loader's first look at a pipeline file: one pass
// over its bytes, before the YAML parser builds anything, that refuses a
// text too large, too deeply nested or with too many nodes, so that
// hostile files stay cheap (the parser's memory grows far faster than the
// text with nesting). Its errors carry a line and column; package yamlpipe
// turns them into its file:line:column errors.
//
// It may import only the standard library.
package yamlscan
