package weir

import (
	"fmt"
	"log/slog"
	"reflect"
	"sync/atomic"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/runner/contract"
)

// stateMigration is a StatefulParDo's declared migration of one state
// cell's stored values (MigrateState).
type stateMigration struct {
	// id is the state cell migrated.
	id string
	// from is the identity of the type the values were stored in.
	from graph.Coder
	// to is the type fn returns, which must be the cell's.
	to reflect.Type
	// convert decodes a stored value of the old type and migrates it.
	convert func(b []byte) (any, error)
	// failed counts the stored values that did not migrate.
	failed *atomic.Int64
}

// stateMigrationFailed is the reject reason of a stored state value that
// did not migrate.
const stateMigrationFailed = contract.ReasonStateMigrationFailed

// MigrateState declares, on a StatefulParDo, how it reads the values an
// earlier version of the step stored in its state cell id in another
// type: fn turns each stored Old value into the cell's New one when the
// job restores its state (after an update, a restart or from a
// snapshot). It applies to a ValueState (its value), a BagState (each
// element) of type New and a MapState whose values are New (each entry's
// value; the map's key type stays). The compatibility check then accepts
// an update whose stored Old values would otherwise be unreadable
// (STATE_CODER_CHANGED), with the warning STATE_MIGRATED. A stored value
// fn refuses is left out — the value cell starts unset, the bag goes on
// without the element, the map without the entry — counted as the step's
// rejects (reason state_migration_failed), the first of them logged, and
// sent to a server job's dead-letter topic naming its key: it never fails
// the job that restores it.
//
// The declaration may stay on later versions: what this version stored
// is marked and read as New. A restore decodes with several goroutines, so
// fn may be called from several at once: it must not change shared state.
func MigrateState[Old, New any](id string, fn func(Old) (New, error)) StepOption {
	from := CoderOf[Old]()
	return func(sc *stepConfig) {
		sc.stateMigrations = append(sc.stateMigrations, &stateMigration{id: id, from: from, to: reflect.TypeFor[New](),
			failed: new(atomic.Int64),
			convert: func(b []byte) (any, error) {
				old, err := decodeJSON[Old](b)
				if err != nil {
					return nil, fmt.Errorf("reading the stored value as %s: %w", reflect.TypeFor[Old](), err)
				}
				return fn(old)
			}})
	}
}

// applyStateMigrations checks the step's declared migrations against its
// state cells (each names a value or bag cell of the function's type) and
// wraps those cells' codecs: what the step stores is marked
// (migratedAccumulator's byte) and read as the cell's type; an unmarked
// value is one the earlier version stored, read through the migration.
func applyStateMigrations(step *graph.Step, cellTypes map[string]reflect.Type, cells map[string]cellCodec, ms []*stateMigration) error {
	seen := map[string]bool{}
	for _, m := range ms {
		if seen[m.id] {
			return fmt.Errorf("state %q: two migrations declared (weir.MigrateState)", m.id)
		}
		seen[m.id] = true
		i := -1
		for j, sp := range step.State {
			if sp.ID == m.id {
				i = j
			}
		}
		if i < 0 {
			var ids []string
			for _, sp := range step.State {
				ids = append(ids, sp.ID)
			}
			return fmt.Errorf("weir.MigrateState names state %q, which the step does not declare (its state: %v)", m.id, ids)
		}
		sp := &step.State[i]
		if t := cellTypes[m.id]; t != m.to {
			what := "the cell holds"
			if sp.Kind == graph.StateMap {
				what = "the map's values are"
			}
			return fmt.Errorf("weir.MigrateState on state %q returns %s, but %s %s", m.id, m.to, what, t)
		}
		from := m.from
		cell := m.id
		switch sp.Kind {
		case graph.StateValue, graph.StateBag:
		case graph.StateMap:
			// The map's entries keep their keys: the stored map's coder is
			// the cell's with the old value coder.
			if len(sp.Coder.Components) != 2 {
				return fmt.Errorf("weir.MigrateState on state %q: the map cell's coder %s has no key and value coders", m.id, sp.Coder.String())
			}
			from = graph.Coder{URN: sp.Coder.URN, Version: sp.Coder.Version, Components: []graph.Coder{sp.Coder.Components[0], m.from}}
			cell = m.id + "#value"
		default:
			return fmt.Errorf("weir.MigrateState on state %q, a %s cell: it migrates value, bag and map cells", m.id, sp.Kind)
		}
		sp.MigratedFrom = &from
		cells[cell] = migratingCodec(step.Name, cells[cell], m)
	}
	return nil
}

// migratingCodec wraps codec c of a migrated cell.
func migratingCodec(step string, c cellCodec, m *stateMigration) cellCodec {
	return cellCodec{
		enc: func(v any) ([]byte, error) {
			b, err := c.enc(v)
			if err != nil {
				return nil, err
			}
			return append([]byte{migratedAccumulator}, b...), nil
		},
		dec: func(b []byte) (any, error) {
			if len(b) > 0 && b[0] == migratedAccumulator {
				return c.dec(b) // the codec strips the mark
			}
			v, err := m.convert(b)
			if err == nil {
				return v, nil
			}
			if m.failed.Add(1) == 1 { // the first is logged; all are counted
				slog.Warn("a stored state value did not migrate; it is left out (counted as the step's rejects, reason state_migration_failed)",
					"step", step, "state", m.id, "stored", string(b), "err", err)
			}
			return nil, fmt.Errorf("state %q: %w: %w", m.id, contract.ErrStateDropped, err)
		},
	}
}

// StateRejects implements contract.StateRejecter: the stored state values
// that did not migrate.
func (a *statefulAdapter[K, V, Out]) StateRejects() map[string]int64 {
	var n int64
	for _, m := range a.migrations {
		n += m.failed.Load()
	}
	if n == 0 {
		return nil
	}
	return map[string]int64{stateMigrationFailed: n}
}
