package runner

import "context"

// This file declares what sources, sinks and stateful code implement so that
// an execution can take consistent checkpoints and resume from them with
// exactly-once results. A checkpoint is an aligned cut: every source records
// its position and injects a barrier for epoch E in order with its data;
// keyed steps snapshot their state (per key group) when the barrier arrived
// from all their inputs; sinks hand over what they buffered before the
// barrier. The checkpoint (state, positions and pre-committed sink data) is
// then written atomically; only after that are sinks told to commit epoch E
// and sources to acknowledge what E covers.

// PositionedSplit is a source split whose reading position can be recorded
// in a checkpoint and acknowledged once the checkpoint is durable.
type PositionedSplit interface {
	SourceSplit
	// Position returns an opaque encoding of the split's position after the
	// last element Read returned. It is called between Read calls.
	Position() ([]byte, error)
	// Ack is called, from any goroutine, once a checkpoint that covers pos
	// is durable: the split may acknowledge to its broker everything up to
	// and including pos. Messages not acknowledged are redelivered after a
	// crash or cancel. Ack must not block for long, and must work after
	// Close too: a Pause closes its splits before the checkpoint commits.
	Ack(ctx context.Context, pos []byte) error
}

// ResumableSource is a source that can be re-split from the positions a
// checkpoint recorded, one per split in the order Split returned them.
type ResumableSource interface {
	Source
	Resume(ctx context.Context, positions [][]byte) ([]SourceSplit, error)
}

// TransactionalSink is a sink that commits per checkpoint epoch. Write
// buffers (or stages) elements; at each barrier PreCommit hands the runner
// everything a worker wrote since the previous barrier, and the runner stores
// it in the checkpoint; once the checkpoint is durable Commit applies the
// epoch. Commit must be atomic together with a progress record of the epoch
// and idempotent: a replay after a crash calls it again for an epoch that
// may already be committed, which must then change nothing.
type TransactionalSink interface {
	Sink
	PreCommit(ctx context.Context, worker int, epoch uint64) ([]byte, error)
	Commit(ctx context.Context, epoch uint64, parts [][]byte) error
}

// StateCoder encodes the keys and the state of a keyed step so that
// checkpoints can persist them. Aggregators and StatefulDoFns implement it to
// be checkpointable. cell names what is encoded: AccumulatorCell for an
// aggregation's accumulator; for a stateful step the state id of a value
// cell or bag element, and "<id>#key" / "<id>#value" for map entries.
// Encodings must be deterministic and stable across releases of the user's
// program: they are what an update inherits.
type StateCoder interface {
	EncodeKey(key any) ([]byte, error)
	DecodeKey(b []byte) (any, error)
	EncodeState(cell string, v any) ([]byte, error)
	DecodeState(cell string, b []byte) (any, error)
}

// StateAppender is what a StateCoder may also implement to append its
// encodings to a buffer instead of returning new ones: checkpoints of many
// keys then allocate nothing per key. The encodings must equal EncodeKey's
// and EncodeState's.
type StateAppender interface {
	AppendEncodedKey(dst []byte, key any) ([]byte, error)
	AppendEncodedState(dst []byte, cell string, v any) ([]byte, error)
}

// AccumulatorCell is the cell name of an aggregation's accumulator.
const AccumulatorCell = "acc"
