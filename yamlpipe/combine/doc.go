// Package combine holds the run time of the YAML Combine: the aggregation
// (Aggregator, a contract.Aggregator) that folds each group's rows into
// one slot per output (Op: sum, count, min, max, mean, latest, all, any,
// group, concat, top), its checkpoint state and the keys it keeps only as
// their encodings (contract.StateCoder, contract.EncodedKeyer), and the
// two state migrations a Combine may declare: outputs appended with an
// init expression, renamed or narrowed (Migrations), and a re-key that
// moves every stored key to a new one (KeyMigration, a contract.Rekeyer).
// Package yamlpipe reads the Combine's config and its migrations:, and
// fills an Aggregator; this package never sees YAML.
//
// An accumulator's stored layout is positional (one slot per output, in
// the order of the outputs) and must stay readable by later versions:
// state_golden_test.go holds bytes written by earlier layouts.
//
// It may import mtime, row, runner/contract, window, yamlpipe/keyenc (a
// group's key encoding), yamlpipe/celexpr (the migrations' expressions)
// and the standard library.
package combine
