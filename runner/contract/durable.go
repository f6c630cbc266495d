package contract

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
)

// This file declares what sources, sinks and stateful code implement so that
// an execution can take consistent checkpoints and resume from them with
// exactly-once results, and what a checkpoint holds. A checkpoint is an
// aligned cut: every source records its position and injects a barrier for
// epoch E in order with its data; keyed steps snapshot their state (per key
// group) when the barrier arrived from all their inputs; sinks hand over what
// they buffered before the barrier. The checkpoint (state, positions and
// pre-committed sink data) is then written atomically; only after that are
// sinks told to commit epoch E and sources to acknowledge what E covers.

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

// BufferingSink is a TransactionalSink that holds what it is written in
// memory until a checkpoint takes it (PreCommit). A checkpointed execution
// reads no source while its buffering sinks hold more than
// Options.MaxSinkBuffer bytes in all, until the next checkpoint empties
// them: a sink whose commits are slower than the input then slows the
// input down, instead of holding ever more of it.
type BufferingSink interface {
	// BufferedBytes returns about how many bytes the sink holds that no
	// PreCommit took yet. It is called from worker goroutines, often:
	// keep it to an atomic load.
	BufferedBytes() int64
}

// FinalPreCommitter is a TransactionalSink that wants to know which
// pre-commit is a worker's final share (everything it will ever get has
// arrived: a bounded input's end, a drain): the executor calls
// PreCommitFinal instead of PreCommit there, so that a sink that keeps a
// file open across checkpoints (a rolling part) closes it in that share.
type FinalPreCommitter interface {
	PreCommitFinal(ctx context.Context, worker int, epoch uint64) ([]byte, error)
}

// ReleasingSink is a TransactionalSink whose execution may stop without a
// final share — cancelled, failed, or handed over to another execution
// (an update, a rescale) after its last commit — and that holds rows a
// committed checkpoint covers where readers cannot see them yet (a part
// kept open across checkpoints). Release, called once the execution has
// stopped, makes visible exactly what the sink's commits covered and
// drops the rest, then closes the sink.
type ReleasingSink interface {
	Release(ctx context.Context) error
}

// AbortingSink is a sink that must know whether its input ended or its
// execution stopped short (failed or cancelled): a sink that publishes
// what it staged only when the whole input arrived (a partition run's
// staged file sink). The executor calls Abort instead of Close when an
// execution without checkpoints ends with an error or is cancelled;
// Abort leaves what was staged where it is, unpublished, and closes the
// sink. A checkpointed execution closes its transactional sinks only
// after its final commit (Execution.CloseSinks), so it never aborts them.
type AbortingSink interface {
	Abort(ctx context.Context) error
}

// ErrStateDropped is returned (wrapped or not) by StateCoder.DecodeState
// for a stored state value the step's code refuses to carry over (a
// declared migration that failed for it): the restore leaves the value
// out — a value cell unset, a bag without the element, a map without the
// entry — instead of failing. The code counts it (StateRejecter); the
// runner sends it to the run's dead-letter hook as a reject with reason
// ReasonStateMigrationFailed naming the key, and the key's next
// checkpoint stores it without the value.
var ErrStateDropped = errors.New("the stored state value is dropped")

// PartialStateError is returned by StateCoder.DecodeState together with a
// value the runner keeps, when part of a stored state did not carry over (a
// declared migration's initial value that did not evaluate for one output:
// that output starts empty). The runner reports it as it does a dropped
// value — a reject with Reason, naming the key and the window, to the
// run's dead-letter hook — and the key's next checkpoint stores the value
// as decoded. The code counts it (StateRejecter).
type PartialStateError struct {
	// Reason is the reject reason; Message says what did not carry over.
	Reason, Message string
}

// Error implements error.
func (e *PartialStateError) Error() string { return e.Message }

// StateRejecter is implemented by a keyed step's code that can refuse to
// carry a stored state over, as a declared migration that fails for one
// key: the runner counts what it refused as the step's rejects, by
// reason, beside the elements its steps reject.
type StateRejecter interface {
	// StateRejects returns, by reason, how many stored states the code
	// refused to carry over since it was built; nil when none.
	StateRejects() map[string]int64
}

// AdoptedStateRejecter is implemented by an Aggregator that carries the
// accumulators it adopts in memory from the execution it replaces (an
// update in place) over lazily, when it first touches each, instead of at
// a restore — so that the update's pause migrates nothing. What such a
// carry-over keeps only in part is reported as a restore's is: the
// executor, which knows the key and the window, sends it to the run's
// dead-letter hook. PendingStateRejects reports whether any failure is
// waiting to be taken (a cheap check, made after each use of an adopted
// accumulator); TakeStateRejects returns and forgets acc's. The code
// counts them (StateRejecter).
type AdoptedStateRejecter interface {
	PendingStateRejects() bool
	TakeStateRejects(acc any) []*PartialStateError
}

// Rekeyer is what the Aggregator of a keyed step whose key changed
// implements to carry the state stored under the earlier key over (a
// declared re-key migration): every key of the earlier version moves to
// the key Rekey computes, and the accumulators of keys that land on the
// same new key are merged with MergeAccumulators, window by window — at a
// restore and at an in-place update.
type Rekeyer interface {
	// RekeysState reports whether the step declares a re-key.
	RekeysState() bool
	// CurrentKey reports whether kb, a key as a StateCoder stored it,
	// was stored by a version with the current key, so it stays where it
	// is.
	CurrentKey(kb []byte) bool
	// Rekey appends to dst the encoding (as AppendKey writes it) of the
	// key to which an earlier version's key moves — kb is that key as the
	// earlier StateCoder stored it, enc as its AppendKey encoded it — and
	// returns the new key (nil for an EncodedKeyer that keeps only
	// encodings) and, with an error, the earlier one, for the report (it
	// may be nil on success). An error says why this key cannot move: its
	// state becomes a reject of the migration (reason RekeyFailed), never
	// a half-migrated job.
	Rekey(dst, kb []byte, enc string) (moved []byte, key, old any, err error)
}

// RekeyMerger is implemented by a Rekeyer aggregator whose re-key
// declares how the accumulators of earlier keys that land on one new key
// merge, when that is not MergeAccumulators (say the larger of two
// totals instead of their sum). The runner then merges moved windows with
// MergeRekeyed.
type RekeyMerger interface {
	// MergeRekeyed folds b, the accumulator of an earlier key's window,
	// into a, that of another earlier key moved to the same new key and
	// window, and returns the result.
	MergeRekeyed(a, b any) any
}

// RekeyFailed is the reject reason of a key whose declared re-key did not
// evaluate: its state is left out of the new version's.
const RekeyFailed = "rekey_failed"

// rekeyMark starts the stored key encoding (StateCoder.EncodeKey) of a
// step that declares a re-key, followed by a 32-bit fingerprint of its key
// (RekeyMark): a byte that starts none of the key encodings weir's
// StateCoders write without it (JSON, the int64 and string fast paths, a
// uvarint count of group values below 128).
const rekeyMark = 0xfe

// rekeyMarkLen is the length of a re-key mark: the byte and the
// fingerprint.
const rekeyMarkLen = 5

// RekeyMark returns the mark that starts every key a step stores when it
// declares a re-key, for a key described by layout (its coder or its
// fields): a restore tells the keys this version stored (Rekeyer.CurrentKey:
// they start with its mark) from those of an earlier version (unmarked, or
// marked for another key).
func RekeyMark(layout string) []byte {
	h := fnv.New32a()
	h.Write([]byte(layout))
	return binary.BigEndian.AppendUint32([]byte{rekeyMark}, h.Sum32())
}

// StripRekeyMark returns kb, a stored key encoding, without the re-key mark
// it may start with: every StateCoder reads past it, so a version that
// drops the declaration still reads what a re-keying version stored.
func StripRekeyMark(kb []byte) []byte {
	if len(kb) >= rekeyMarkLen && kb[0] == rekeyMark {
		return kb[rekeyMarkLen:]
	}
	return kb
}

// StateCoder encodes the keys and the state of a keyed step so that
// checkpoints can persist them. Aggregators and StatefulDoFns implement it to
// be checkpointable. cell names what is encoded: AccumulatorCell for an
// aggregation's accumulator; for a stateful step the state id of a value
// cell or bag element, and "<id>#key" / "<id>#value" for map entries.
// Encodings must be deterministic and stable across releases of the user's
// program: they are what an update inherits. A restore decodes with several
// goroutines at once: DecodeKey and DecodeState must be safe for concurrent
// use, and must not keep the slice they are given.
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

// EncodedKeyer is what an Aggregator that is also a StateCoder may
// implement when its key is a function of its Keyer.AppendKey encoding
// (and KeysFromEncoding reports true): the runner then keeps only that
// encoding per key, not the key, and asks for the key only when it needs
// it. A million keys are then millions of objects fewer for the garbage
// collector to mark.
type EncodedKeyer interface {
	// KeysFromEncoding reports whether the runner may keep only keys'
	// encodings (a step may decide by its key's types).
	KeysFromEncoding() bool
	// KeyFromEncoding returns the key of the elements whose AppendKey
	// encoding is enc (what Key returns for them, or its decoded form, as
	// DecodeKey returns it). The key may share enc's memory.
	KeyFromEncoding(enc string) (any, error)
	// AppendEncodedKeyFrom appends EncodeKey of that key to dst.
	AppendEncodedKeyFrom(dst []byte, enc string) ([]byte, error)
	// AppendEncodedStateFor appends EncodeState(cell, v) of the state v of
	// that key to dst: an accumulator need not keep its key to encode it.
	AppendEncodedStateFor(dst []byte, enc, cell string, v any) ([]byte, error)
}

// AccumulatorCell is the cell name of an aggregation's accumulator.
const AccumulatorCell = "acc"

// ErrNotCheckpointable is returned when a step cannot take part in
// checkpoints (its code has no StateCoder, or a source cannot report positions).
var ErrNotCheckpointable = errors.New("pipeline cannot be checkpointed")

// Checkpoint is one consistent cut of an execution: the state that changed
// since the previous checkpoint, where every source split stood, and what
// transactional sinks buffered before the cut. It is not durable until the
// caller has written it; then the executor's Commit lets sinks commit and
// sources acknowledge.
type Checkpoint struct {
	Epoch uint64
	// Positions holds, per source step, the position of every split in the
	// order the source's Split (or Resume) returned them.
	Positions map[string][][]byte
	// State holds the keyed state entries written or deleted since the
	// previous checkpoint.
	State []StateEntry
	// SinkParts holds, per transactional sink step, what each worker
	// pre-committed for this epoch.
	SinkParts map[string][][]byte
	// Pending holds keyed state the executor is still encoding (a Pause's
	// snapshots, encoded after the cut); Complete moves it into State. It is
	// empty in a checkpoint read back from a store.
	Pending []PendingState
}

// PendingState is keyed state of a checkpoint still being encoded by the
// executor.
type PendingState interface {
	// Await returns the entries once every key is encoded, encoding what
	// nobody else is encoding on the calling goroutine. It returns ctx's
	// error when ctx is done first. It hands the entries out once: a later
	// call returns none (they are in the checkpoint already), so that the
	// executor keeps no reference to them after the checkpoint.
	Await(ctx context.Context) ([]StateEntry, error)
}

// Complete waits until the keyed state of cp is encoded and puts it in
// cp.State, sorted (SortStateEntries). A checkpoint taken by the executor's
// Checkpoint is complete when returned; one taken by Pause completes when an
// execution that adopted the paused one's state has encoded it, or here on
// the caller's goroutine when nothing adopted it. Call it before writing cp.
func (cp *Checkpoint) Complete(ctx context.Context) error {
	if len(cp.Pending) == 0 {
		return nil
	}
	var errs []error
	parts := make([][]StateEntry, 0, 1+len(cp.Pending))
	if len(cp.State) > 0 {
		parts = append(parts, cp.State)
	}
	for _, p := range cp.Pending {
		entries, err := p.Await(ctx)
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
				return fmt.Errorf("completing checkpoint %d: %w", cp.Epoch, err)
			}
			errs = append(errs, err)
			continue
		}
		if len(entries) > 0 {
			parts = append(parts, entries)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("checkpoint %d: %w", cp.Epoch, errs[0])
	}
	cp.Pending = nil
	if len(parts) == 1 {
		// One step's state of one worker: it is the state, sorted in
		// place (a full checkpoint's copy of millions of entries into
		// fresh memory took a tenth of its time).
		cp.State = parts[0]
		SortStateEntries(cp.State)
		return nil
	}
	// Several parts go into one slice as they are sorted, not copied into
	// one first.
	cp.State = SortedStateEntries(parts)
	return nil
}

// Incomplete reports whether cp still waits for Complete.
func (cp *Checkpoint) Incomplete() bool { return len(cp.Pending) > 0 }

// StateEntry is the state of one key of one keyed step. A nil Value means
// the key has no state any more.
type StateEntry struct {
	Step     string
	KeyGroup uint16
	Key      []byte
	Value    []byte
}

// StateReader gives a restoring execution the state of a keyed step.
type StateReader interface {
	// Scan calls fn for every key of step in the given key groups. The
	// key and value slices are valid only during the call (a store lends
	// its own buffers): fn copies whatever it keeps. A restore calls Scan
	// from several goroutines at once, each for other key groups.
	Scan(ctx context.Context, step string, keyGroups []int, fn func(kg uint16, key, value []byte) error) error
}

// Restore is where a new execution resumes from: the last durable
// checkpoint's positions and state.
type Restore struct {
	Epoch     uint64
	Positions map[string][][]byte
	State     StateReader
}
