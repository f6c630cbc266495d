package combine

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// Declared state migrations of a Combine (weir's extension; docs/JOBS.md,
// "Migrate state"). An output appended to a running Combine starts empty
// in the windows open at the update (compat's COMBINE_OUTPUTS_CHANGED);
// a migration gives it an initial value computed from the accumulators
// the running version kept:
//
//	- type: Combine
//	  name: Totals
//	  config:
//	    group_by: [region]
//	    combine:
//	      total: {value: amount, fn: sum}
//	      n: {value: amount, fn: count}
//	      n_positive: {value: amount, fn: count}   # appended
//	  migrations:
//	    accumulators:
//	      n_positive: {init: "total > 0 ? n : 0"}
//
// An output renamed in place declares its old name,
//
//	  migrations:
//	    accumulators:
//	      amount_total: {renamed_from: total}
//
// so that its stored accumulator carries on under the new name (it keeps
// the old output's slot, wherever it is declared: yamlpipe's
// combineSlots, verified by the compatibility check) and a
// WriteToSql reading the Combine renames its column in place (old rows
// keep their values, under the new name).
//
// init is a CEL expression over the step's output row as the stored
// accumulators give it (the outputs the running version had; appended
// ones read null, group_by fields null when the runner keeps keys
// encoded), evaluated once per key and window when the new execution
// first touches an accumulator stored by the old one — from memory at an
// in-place update, from the store after a restart or from a snapshot — so
// the way back (rollback) still finds the old state as it was stored. It
// applies to sum, count, min and max outputs.

// Migrations are a Combine's compiled migrations.
type Migrations struct {
	// Init holds, by slot, the output's init (nil: none), as the loader
	// compiled it (a CEL or a Python expression): its value, of the
	// output's type, over the output row the stored accumulators give, or
	// nil for null; safe for concurrent use.
	Init []func(r *row.Row) (any, error)
	// failed counts the inits that did not evaluate (the output then
	// starts empty for that key and window); logged the first time.
	failed atomic.Int64
	// The inits that failed when an adopted accumulator was carried over
	// lazily (conform), by accumulator (its first slot), until the runner
	// takes them (TakeStateRejects) to report them with their key and
	// window; the aggregator is shared by the step's workers. npending
	// counts them, so that the runner's check after each use needs no
	// lock. mu guards pending and forward.
	mu       sync.Mutex
	pending  map[*slot]string
	npending atomic.Int64
	// forward maps a compact accumulator adopted with fewer slots, whose
	// appended slots have inits, to the form it was carried over to
	// (conformSlots): the runner may use the old form again (a pane
	// output, a checkpoint) before it holds the new one. An entry lives
	// as long as the execution: one per adopted key and window used, in
	// an update that appended outputs with inits.
	forward map[*slot]any
	// Renamed maps an output Renamed in place to its old name
	// (renamed_from).
	Renamed map[string]string
	// Lossy names the outputs whose stored float accumulators may be
	// read as ints (allow_lossy: a value field narrowed from float).
	Lossy map[string]bool
}

// initSlots sets the appended slots of ac (from index from on) that have
// an init, from the values of the slots before them. It returns what did
// not evaluate (empty when every init did): those outputs start empty.
func (a *Aggregator) initSlots(ac accumulator, from int) string {
	m := a.Migrations
	if m == nil {
		return ""
	}
	var failed []string
	var r *row.Row
	for k := from; k < len(a.Ops); k++ {
		init := m.Init[k]
		if init == nil {
			continue
		}
		if r == nil {
			r = row.New(a.Out)
			copy(r.Values, ac.group())
			j := len(a.Group)
			for i := range from {
				if p := a.outPos(i); p >= 0 {
					r.Values[j+p] = slotValue(&a.Ops[i], &ac.slots[i])
				}
			}
		}
		op := &a.Ops[k]
		v, err := init(r)
		if err != nil || v == nil {
			if m.failed.Add(1) == 1 {
				slog.Default().Warn("a Combine migration's init did not evaluate for a key and window: its output starts empty there (counted as the step's rejects, reason migration_init_failed)",
					"step", a.Step, "output", op.Out, "key", fmt.Sprint(ac.group()), "error", fmt.Sprint(err))
			}
			why := "it evaluated to null"
			if err != nil {
				why = err.Error()
			}
			failed = append(failed, fmt.Sprintf("the init of output %s did not evaluate (%s): it starts empty", op.Out, why))
			continue
		}
		s := &ac.slots[k]
		switch op.Fn {
		case FnSum:
			switch x := v.(type) {
			case int64:
				s.i = x
			case float64:
				s.setF(x)
			}
			s.markSet()
		case FnCount:
			if x, ok := v.(int64); ok {
				s.i = x
			}
		case FnMin, FnMax:
			s.setV(v)
			s.markSet()
		}
	}
	return strings.Join(failed, "; ")
}

// MigrationInitFailed is the reject reason of a key and window whose
// migration init did not evaluate.
const MigrationInitFailed = "migration_init_failed"

// StateRejects implements contract.StateRejecter: the keys and windows
// whose migration init did not evaluate.
// PendingStateRejects implements contract.AdoptedStateRejecter.
func (a *Aggregator) PendingStateRejects() bool {
	return a.Migrations != nil && a.Migrations.npending.Load() > 0
}

// TakeStateRejects implements contract.AdoptedStateRejecter: the inits
// that did not evaluate when acc, adopted from the execution this one
// replaced, was carried over.
func (a *Aggregator) TakeStateRejects(acc any) []*contract.PartialStateError {
	m := a.Migrations
	if m == nil || m.npending.Load() == 0 {
		return nil
	}
	ac, ok := open(acc)
	if !ok {
		return nil
	}
	m.mu.Lock()
	id := ac.first()
	if fw, ok := m.forward[id]; ok {
		fac, _ := open(fw)
		id = fac.first()
	}
	failed, found := m.pending[id]
	if found {
		delete(m.pending, id)
		m.npending.Add(-1)
	}
	m.mu.Unlock()
	if !found {
		return nil
	}
	return []*contract.PartialStateError{{Reason: MigrationInitFailed, Message: failed}}
}

// adoptedInitFailed records what did not evaluate when an adopted
// accumulator was carried over to the accumulator whose first slot is id,
// for TakeStateRejects.
func (m *Migrations) adoptedInitFailed(id *slot, failed string) {
	m.mu.Lock()
	if m.pending == nil {
		m.pending = map[*slot]string{}
	}
	if _, dup := m.pending[id]; !dup {
		m.npending.Add(1)
	}
	m.pending[id] = failed
	m.mu.Unlock()
}

// initsFrom reports whether any slot from index from on has an init (false
// for a nil m).
func (m *Migrations) initsFrom(from int) bool {
	if m == nil {
		return false
	}
	for k := from; k < len(m.Init); k++ {
		if m.Init[k] != nil {
			return true
		}
	}
	return false
}

// carried returns the form the compact accumulator whose first slot is
// old was carried over to, if it was (forward).
func (m *Migrations) carried(old *slot) (any, bool) {
	m.mu.Lock()
	out, ok := m.forward[old]
	m.mu.Unlock()
	return out, ok
}

// carry records that the compact accumulator whose first slot is old was
// carried over to out (forward).
func (m *Migrations) carry(old *slot, out any) {
	m.mu.Lock()
	if m.forward == nil {
		m.forward = map[*slot]any{}
	}
	m.forward[old] = out
	m.mu.Unlock()
}

func (a *Aggregator) StateRejects() map[string]int64 {
	var out map[string]int64
	if a.Migrations != nil {
		if n := a.Migrations.failed.Load(); n > 0 {
			out = map[string]int64{MigrationInitFailed: n}
		}
	}
	if a.KeyMigration != nil {
		if n := a.KeyMigration.failed.Load(); n > 0 {
			if out == nil {
				out = map[string]int64{}
			}
			out[contract.RekeyFailed] = n
		}
	}
	return out
}
