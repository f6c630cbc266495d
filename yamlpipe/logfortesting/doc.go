// Package logfortesting is the run time of Beam YAML's LogForTesting: the
// DoFn that prints each element as Beam's Python SDK logs it (one
// json.dumps line, package pyrepr) and passes it on, and Lines, the
// writer every worker of a pipeline prints to, whose mutex keeps their
// lines whole. Package yamlpipe reads the transform's config and chooses
// the writer (Options.LogOutput).
//
// It may import runner/contract, yamlpipe/pyrepr and the standard library.
package logfortesting
