package runner

import "github.com/weir-dev/weir/runner/contract"

// The durable-source and checkpoint contract is declared in package
// contract; these aliases keep it usable from package runner.

// PositionedSplit is contract.PositionedSplit: a split whose position a
// checkpoint records.
type PositionedSplit = contract.PositionedSplit

// ResumableSource is contract.ResumableSource: a source re-split from
// checkpointed positions.
type ResumableSource = contract.ResumableSource

// TransactionalSink is contract.TransactionalSink: a sink that commits per
// checkpoint epoch.
type TransactionalSink = contract.TransactionalSink

// StateCoder is contract.StateCoder: encodes a keyed step's keys and state.
type StateCoder = contract.StateCoder

// StateAppender is contract.StateAppender: a StateCoder appending to a buffer.
type StateAppender = contract.StateAppender

// EncodedKeyer is contract.EncodedKeyer: an aggregation whose keys the
// runner keeps as their encodings only.
type EncodedKeyer = contract.EncodedKeyer

// AccumulatorCell is contract.AccumulatorCell: the cell name of an
// aggregation's accumulator.
const AccumulatorCell = contract.AccumulatorCell

// ErrNotCheckpointable is contract.ErrNotCheckpointable: a step cannot take
// part in checkpoints.
var ErrNotCheckpointable = contract.ErrNotCheckpointable

// Checkpoint is contract.Checkpoint: one consistent cut of an execution.
type Checkpoint = contract.Checkpoint

// StateEntry is contract.StateEntry: the state of one key of one keyed step.
type StateEntry = contract.StateEntry

// StateReader is contract.StateReader: the state of a keyed step for a
// restoring execution.
type StateReader = contract.StateReader

// Restore is contract.Restore: where a new execution resumes from.
type Restore = contract.Restore
