package weir

import (
	"fmt"
	"reflect"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// StateContext is what a stateful DoFn sees: its key, window, state cells
// (through ValueState, BagState and MapState handles) and timers.
type StateContext[K comparable, Out any] struct {
	sc *contract.StateContext
}

// Key returns the current key.
func (c *StateContext[K, Out]) Key() K { return c.sc.Key().(K) }

// Window returns the current window.
func (c *StateContext[K, Out]) Window() window.Window { return c.sc.Window() }

// Timestamp returns the event time of the current element or timer.
func (c *StateContext[K, Out]) Timestamp() mtime.Time { return c.sc.Timestamp() }

// Now returns processing time.
func (c *StateContext[K, Out]) Now() mtime.Time { return c.sc.Now() }

// Watermark returns the step's input watermark.
func (c *StateContext[K, Out]) Watermark() mtime.Time { return c.sc.Watermark() }

// Output emits v at the current timestamp and window.
func (c *StateContext[K, Out]) Output(v Out) { c.sc.Output(v) }

// ValueState is a handle to a single-value state cell of type T.
type ValueState[T any] struct{ ID string }

// Read returns the cell's value and whether it is set.
func (s ValueState[T]) Read(c interface{ raw() *contract.StateContext }) (T, bool) {
	v, ok := c.raw().ReadValue(s.ID)
	if !ok {
		var zero T
		return zero, false
	}
	return v.(T), true
}

// Write sets the cell.
func (s ValueState[T]) Write(c interface{ raw() *contract.StateContext }, v T) {
	c.raw().WriteValue(s.ID, v)
}

// Clear unsets the cell.
func (s ValueState[T]) Clear(c interface{ raw() *contract.StateContext }) { c.raw().ClearValue(s.ID) }

func (s ValueState[T]) spec() graph.StateSpec {
	return graph.StateSpec{ID: s.ID, Kind: graph.StateValue, Coder: CoderOf[T]()}
}

// BagState is a handle to an append-only bag of T.
type BagState[T any] struct{ ID string }

// Add appends v.
func (s BagState[T]) Add(c interface{ raw() *contract.StateContext }, v T) {
	c.raw().AddToBag(s.ID, v)
}

// Read returns the bag's elements in insertion order.
func (s BagState[T]) Read(c interface{ raw() *contract.StateContext }) []T {
	raw := c.raw().ReadBag(s.ID)
	out := make([]T, len(raw))
	for i, v := range raw {
		out[i] = v.(T)
	}
	return out
}

// Clear empties the bag.
func (s BagState[T]) Clear(c interface{ raw() *contract.StateContext }) { c.raw().ClearBag(s.ID) }

func (s BagState[T]) spec() graph.StateSpec {
	return graph.StateSpec{ID: s.ID, Kind: graph.StateBag, Coder: CoderOf[T]()}
}

// MapState is a handle to a map of K2 to V2.
type MapState[K2 comparable, V2 any] struct{ ID string }

// Get returns the value at k.
func (s MapState[K2, V2]) Get(c interface{ raw() *contract.StateContext }, k K2) (V2, bool) {
	v, ok := c.raw().MapGet(s.ID, k)
	if !ok {
		var zero V2
		return zero, false
	}
	return v.(V2), true
}

// Put sets the value at k.
func (s MapState[K2, V2]) Put(c interface{ raw() *contract.StateContext }, k K2, v V2) {
	c.raw().MapPut(s.ID, k, v)
}

// Delete removes k.
func (s MapState[K2, V2]) Delete(c interface{ raw() *contract.StateContext }, k K2) {
	c.raw().MapDelete(s.ID, k)
}

// Entries returns a copy of the map.
func (s MapState[K2, V2]) Entries(c interface{ raw() *contract.StateContext }) map[K2]V2 {
	raw := c.raw().MapEntries(s.ID)
	out := make(map[K2]V2, len(raw))
	for k, v := range raw {
		out[k.(K2)] = v.(V2)
	}
	return out
}

// Clear empties the map.
func (s MapState[K2, V2]) Clear(c interface{ raw() *contract.StateContext }) { c.raw().ClearMap(s.ID) }

func (s MapState[K2, V2]) spec() graph.StateSpec {
	return graph.StateSpec{ID: s.ID, Kind: graph.StateMap, Coder: graph.Coder{URN: "weir:coder:map", Version: 1, Components: []graph.Coder{CoderOf[K2](), CoderOf[V2]()}}}
}

func (c *StateContext[K, Out]) raw() *contract.StateContext { return c.sc }

// TimerSpec is a handle to a timer family of a stateful DoFn.
type TimerSpec struct {
	ID     string
	Domain graph.TimeDomain
}

// EventTimer declares an event-time timer: it fires when the watermark passes its time.
func EventTimer(id string) TimerSpec { return TimerSpec{ID: id, Domain: graph.EventTime} }

// ProcessingTimer declares a processing-time timer: it fires when the clock reaches its time.
func ProcessingTimer(id string) TimerSpec { return TimerSpec{ID: id, Domain: graph.ProcessingTime} }

// Set sets (or resets) the timer for the current key and window.
func (t TimerSpec) Set(c interface{ raw() *contract.StateContext }, at mtime.Time) {
	c.raw().SetTimer(t.ID, t.Domain, at)
}

// Clear cancels the timer for the current key and window.
func (t TimerSpec) Clear(c interface{ raw() *contract.StateContext }) { c.raw().ClearTimer(t.ID) }

// StateDecl is a declared state cell (ValueState, BagState or MapState).
type StateDecl interface {
	spec() graph.StateSpec
	codecs() map[string]cellCodec
	// valueType is the type of a value or a bag element (a map's values).
	valueType() reflect.Type
}

// StatefulFn is the code of a stateful ParDo over KV[K, V] elements.
type StatefulFn[K comparable, V, Out any] struct {
	// State lists the state cells the function uses (their IDs and coders
	// become part of the graph, for compatibility checks).
	State []StateDecl
	// Timers lists the timer families the function sets.
	Timers []TimerSpec
	// Process is called for every element.
	Process func(c *StateContext[K, Out], v V) error
	// OnTimer is called when a timer fires.
	OnTimer func(c *StateContext[K, Out], t contract.Timer) error
}

type statefulAdapter[K comparable, V, Out any] struct {
	kvKeyer[K, V]
	fn    StatefulFn[K, V, Out]
	c     StateContext[K, Out]
	cells map[string]cellCodec
	// migrations are the step's declared state migrations (MigrateState);
	// their counters are shared by the clones.
	migrations []*stateMigration
}

func (a *statefulAdapter[K, V, Out]) Clone() any {
	return &statefulAdapter[K, V, Out]{kvKeyer: a.kvKeyer, fn: a.fn, cells: a.cells, migrations: a.migrations}
}

func (a *statefulAdapter[K, V, Out]) Process(sc *contract.StateContext, e contract.Element) error {
	kv, ok := e.Value.(KV[K, V])
	if !ok {
		return typeMismatch[KV[K, V]]("stateful", e.Value)
	}
	a.c.sc = sc
	return a.fn.Process(&a.c, kv.Value)
}

func (a *statefulAdapter[K, V, Out]) OnTimer(sc *contract.StateContext, t contract.Timer) error {
	if a.fn.OnTimer == nil {
		return nil
	}
	a.c.sc = sc
	return a.fn.OnTimer(&a.c, t)
}

// StatefulParDo applies a stateful function to each element of in: state
// cells and timers are kept per key and window, and survive (once durable
// state lands) restarts and updates under the step's name.
func StatefulParDo[K comparable, V, Out any](s Scope, name string, in PCollection[KV[K, V]], fn StatefulFn[K, V, Out], opts ...StepOption) PCollection[Out] {
	col := inputCol(s, name, in)
	if col == nil {
		return PCollection[Out]{}
	}
	if fn.Process == nil {
		s.p.addErr(fmt.Errorf("step %q: StatefulFn needs a Process function", s.fullName(name)))
		return PCollection[Out]{}
	}
	app, err := keyAppender[K]()
	if err != nil {
		s.p.addErr(fmt.Errorf("step %q: %w", s.fullName(name), err))
		return PCollection[Out]{}
	}
	sc := buildConfig(opts)
	if sc.urn == "" {
		sc.urn = "weir:go:stateful_pardo"
	}
	switch {
	case sc.rekey != nil:
		// A key's cells and timers have no merge to meet another key's.
		s.p.addErr(fmt.Errorf("step %q: RekeyFrom applies to a CombinePerKey or a GroupByKey, whose state of keys that meet merges; a StatefulParDo's cells and timers do not: write the new key's state in a new step (another name), or keep the key", s.fullName(name)))
		return PCollection[Out]{}
	case sc.migrate != nil:
		s.p.addErr(fmt.Errorf("step %q: MigrateAccumulator applies to a CombinePerKey; a StatefulParDo's cells migrate with MigrateState", s.fullName(name)))
		return PCollection[Out]{}
	}
	step := &graph.Step{Name: name, Kind: graph.KindStatefulParDo, Inputs: map[string]string{graph.MainTag: col.ID}}
	kc := CoderOf[K]()
	step.KeyCoder = &kc
	seen := map[string]bool{}
	for _, d := range fn.State {
		sp := d.spec()
		if seen[sp.ID] {
			s.p.addErr(fmt.Errorf("step %q: state id %q declared twice", s.fullName(name), sp.ID))
			return PCollection[Out]{}
		}
		seen[sp.ID] = true
		step.State = append(step.State, sp)
	}
	for _, t := range fn.Timers {
		step.Timers = append(step.Timers, graph.TimerSpec{ID: t.ID, Domain: t.Domain})
	}
	if in.Windowing().Fn.IsMerging() {
		s.p.addErr(fmt.Errorf("step %q: stateful ParDo over session windows is not supported", s.fullName(name)))
		return PCollection[Out]{}
	}
	cells := map[string]cellCodec{}
	types := map[string]reflect.Type{}
	for _, d := range fn.State {
		for name, c := range d.codecs() {
			cells[name] = c
		}
		types[d.spec().ID] = d.valueType()
	}
	if err := applyStateMigrations(step, types, cells, sc.stateMigrations); err != nil {
		s.p.addErr(fmt.Errorf("step %q: %w", s.fullName(name), err))
		return PCollection[Out]{}
	}
	adapter := &statefulAdapter[K, V, Out]{kvKeyer: kvKeyer[K, V]{appendKey: app}, fn: fn, cells: cells, migrations: sc.stateMigrations}
	ids := s.addStep(step, adapter, sc, col.Bounded, col.Windowing, []string{graph.MainTag}, []graph.Coder{CoderOf[Out]()})
	return collectionOf[Out](s.p, ids[0])
}
