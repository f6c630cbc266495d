package weir

import (
	"fmt"
	"log/slog"
	"reflect"
	"sync/atomic"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/runner/contract"
)

// migratedAccumulator starts the stored encoding of an accumulator of a
// combine that declares a migration: a byte that starts no JSON and no
// encoding of the int64 and string fast paths, so a restore tells the
// accumulators this version stored from those of the version it migrates
// from. Every combine strips it when reading, so a later version that
// drops the declaration still reads them.
const migratedAccumulator = 0x01

// accMigration is a combine's declared accumulator migration.
type accMigration struct {
	// from is the identity of the accumulator type migrated from.
	from graph.Coder
	// to is the type fn returns, which must be the combine's accumulator.
	to reflect.Type
	// convert decodes a stored accumulator of the old type and migrates
	// it, returning a pointer to the new one.
	convert func(b []byte) (any, error)
	// failed counts the accumulators that did not migrate.
	failed atomic.Int64
}

// accumulatorMigrationFailed is the reject reason of a stored accumulator
// that did not migrate.
const accumulatorMigrationFailed = "accumulator_migration_failed"

// StateRejects implements contract.StateRejecter: the stored accumulators
// that did not migrate (their keys started afresh in their windows) and
// the stored keys that did not move (RekeyFrom).
func (c *combineAgg[K, V, A, O]) StateRejects() map[string]int64 {
	var out map[string]int64
	if c.migrate != nil {
		if n := c.migrate.failed.Load(); n > 0 {
			out = map[string]int64{accumulatorMigrationFailed: n}
		}
	}
	return c.rekeyRejects(out)
}

// read migrates one stored accumulator of step. One that does not migrate
// (it does not decode as the old type, or the function fails) starts
// afresh from fresh, counted as the step's reject (StateRejects) and, the
// first of them, logged; the returned contract.PartialStateError makes the
// runner send it to the dead-letter topic with its key and window. A
// key's bad accumulator never fails the job that restores it.
func (m *accMigration) read(step string, b []byte, fresh func() any) (any, error) {
	v, err := m.convert(b)
	if err == nil {
		return v, nil
	}
	if m.failed.Add(1) == 1 { // the first is logged; all are counted
		slog.Warn("an accumulator did not migrate; the key starts afresh in that window (counted as the step's rejects, reason accumulator_migration_failed)",
			"step", step, "stored", string(b), "err", err)
	}
	return fresh(), &contract.PartialStateError{Reason: accumulatorMigrationFailed,
		Message: fmt.Sprintf("the stored accumulator %s did not migrate (%v): the key starts afresh in the window", b, err)}
}

// MigrateAccumulator declares, on a CombinePerKey, how it reads the
// accumulators an earlier version of the step stored in another type:
// fn turns each stored Old accumulator into the step's New one when the
// job restores its state (after an update, a restart or from a snapshot).
// The compatibility check then accepts an update whose stored Old
// accumulators would otherwise be unreadable (STATE_CODER_CHANGED), with
// the warning ACCUMULATOR_MIGRATED. New must be the combine's accumulator
// type. A key whose Old accumulator fn refuses starts afresh in its
// window; the refusal is counted as the step's rejects (reason
// accumulator_migration_failed), the first logged, and sent to a server
// job's dead-letter topic with the key, the window and the stored value.
//
// The declaration may stay on later versions: what this version stored is
// marked and read as New. A restore decodes with several goroutines, so
// fn may be called from several at once: it must not change shared state.
func MigrateAccumulator[Old, New any](fn func(Old) (New, error)) StepOption {
	from := CoderOf[Old]()
	return func(sc *stepConfig) {
		sc.migrate = &accMigration{from: from, to: reflect.TypeFor[New](),
			convert: func(b []byte) (any, error) {
				old, err := decodeJSON[Old](b)
				if err != nil {
					return nil, fmt.Errorf("reading the stored accumulator as %s: %w", reflect.TypeFor[Old](), err)
				}
				n, err := fn(old)
				if err != nil {
					return nil, err
				}
				return &n, nil
			}}
	}
}
