// Package wininfo is the element metadata YAML pipelines read as values:
// an element's event time, its window and the pane that produced it, with
// Beam's names (Info), their row types and values, and ExtractFn, the DoFn
// of Beam's ExtractWindowingInfo, which appends them to each row. The
// expression languages read window_start, window_end and pane through it
// too. Package yamlpipe reads ExtractWindowingInfo's config.
//
// It may import mtime, row, runner/contract and the standard library.
package wininfo
