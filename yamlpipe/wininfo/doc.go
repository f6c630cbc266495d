// Package wininfo is the element metadata YAML pipelines read as values:
// an element's event time, its window and the pane that produced it, with
// Beam's names (Info), their row types and values, and ExtractFn, the DoFn
// of Beam's ExtractWindowingInfo, which appends them to each row. The
// expression languages read window_start, window_end and pane through it
// too; EventTime reads an event time from a value as Beam's Timestamp
// does (AssignTimestamps). Package yamlpipe reads the transforms' config.
//
// It may import mtime, row, runner/contract and the standard library.
package wininfo
