// Package join holds the run time of the YAML Join: the aggregation
// that collects a window's rows per input (Aggregator, with its checkpoint state and its
// state migration), the step that tags each input's rows (TagFn) and the
// one that expands a pane into the joined rows (EmitFn). Package yamlpipe
// reads the Join's config and fills an Aggregator; the encoding of one key
// value is Combine's, which it passes in (Aggregator.AppendKeyValue).
//
// Beam YAML's Join (apache_beam.yaml.yaml_join) joins two or more named
// inputs on equalities of their fields, as SQL's SELECT ... FROM a JOIN b
// ON ... does, with the join type inner, left, right or outer (or {outer:
// [inputs]}) and the output fields chosen per input. As in Beam, the join
// happens within windows: rows meet when they have the same key and the
// same window, and a window's joined rows are emitted when its pane fires.
//
// Each equality maps two or more inputs to a field of each; the joined
// rows are those of SQL's a JOIN b ON a.f = b.g JOIN c ON ..., the inputs
// taken in the order given (an input that no equality links to the inputs
// before it waits until one does), every pair of inputs an equality names
// being one condition. When every equality names every input (the
// `equalities: field` shorthand does) the inputs share one key and rows are
// grouped by it; otherwise (different keys per pair of inputs) a window's
// rows are grouped together and joined by hash lookups per condition.
//
// Steps: each input is tagged into a union row ({tag, in0, in1, ...}), the
// tagged rows are flattened, an aggregation keyed by the join key collects
// each window's rows per input, and the pane's output is expanded into the
// joined rows.
//
// It may import row, runner/contract, window and the standard library.
package join
