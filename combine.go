package weir

import (
	"cmp"
	"fmt"
	"reflect"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// CombineFn combines the values of a key in a window through an
// accumulator: create one, add inputs, merge accumulators built in
// parallel (or from merged session windows), extract the output.
type CombineFn[I, A, O any] interface {
	CreateAccumulator() A
	AddInput(acc A, in I) A
	MergeAccumulators(a, b A) A
	ExtractOutput(acc A) O
}

// Number is the set of types Sum, Min, Max and Mean work on.
type Number interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

type sumFn[N Number] struct{}

func (sumFn[N]) CreateAccumulator() N       { return 0 }
func (sumFn[N]) AddInput(a, in N) N         { return a + in }
func (sumFn[N]) MergeAccumulators(a, b N) N { return a + b }
func (sumFn[N]) ExtractOutput(a N) N        { return a }
func (sumFn[N]) combineName() string        { return "sum" }

// Sum adds values.
func Sum[N Number]() CombineFn[N, N, N] { return sumFn[N]{} }

type countFn[T any] struct{}

func (countFn[T]) CreateAccumulator() int64           { return 0 }
func (countFn[T]) AddInput(a int64, _ T) int64        { return a + 1 }
func (countFn[T]) MergeAccumulators(a, b int64) int64 { return a + b }
func (countFn[T]) ExtractOutput(a int64) int64        { return a }

// Count counts elements.
func Count[T any]() CombineFn[T, int64, int64] { return countFn[T]{} }

// MinMaxAcc is the accumulator of Min and Max: a value and whether any was seen.
type MinMaxAcc[N cmp.Ordered] struct {
	Value N
	Set   bool
}

type minFn[N cmp.Ordered] struct{ max bool }

func (minFn[N]) CreateAccumulator() MinMaxAcc[N] { return MinMaxAcc[N]{} }
func (f minFn[N]) AddInput(a MinMaxAcc[N], in N) MinMaxAcc[N] {
	if !a.Set || (!f.max && in < a.Value) || (f.max && in > a.Value) {
		return MinMaxAcc[N]{Value: in, Set: true}
	}
	return a
}
func (f minFn[N]) MergeAccumulators(a, b MinMaxAcc[N]) MinMaxAcc[N] {
	if !b.Set {
		return a
	}
	return f.AddInput(a, b.Value)
}
func (minFn[N]) ExtractOutput(a MinMaxAcc[N]) N { return a.Value }
func (f minFn[N]) combineName() string {
	if f.max {
		return "max"
	}
	return "min"
}

// Min keeps the smallest value (the zero value for an empty pane).
func Min[N cmp.Ordered]() CombineFn[N, MinMaxAcc[N], N] { return minFn[N]{} }

// Max keeps the largest value (the zero value for an empty pane).
func Max[N cmp.Ordered]() CombineFn[N, MinMaxAcc[N], N] { return minFn[N]{max: true} }

// MeanAcc is the accumulator of Mean.
type MeanAcc struct {
	Sum   float64
	Count int64
}

type meanFn[N Number] struct{}

func (meanFn[N]) CreateAccumulator() MeanAcc { return MeanAcc{} }
func (meanFn[N]) AddInput(a MeanAcc, in N) MeanAcc {
	return MeanAcc{Sum: a.Sum + float64(in), Count: a.Count + 1}
}
func (meanFn[N]) MergeAccumulators(a, b MeanAcc) MeanAcc {
	return MeanAcc{Sum: a.Sum + b.Sum, Count: a.Count + b.Count}
}
func (meanFn[N]) ExtractOutput(a MeanAcc) float64 {
	if a.Count == 0 {
		return 0
	}
	return a.Sum / float64(a.Count)
}

func (meanFn[N]) combineName() string { return "mean" }

// Mean averages values as float64 (0 for an empty pane).
func Mean[N Number]() CombineFn[N, MeanAcc, float64] { return meanFn[N]{} }

// combineAgg adapts a typed CombineFn to contract.Aggregator. Accumulators
// are kept behind a pointer so that adding an input does not allocate.
type combineAgg[K comparable, V, A, O any] struct {
	kvKeyer[K, V]
	fn CombineFn[V, A, O]
	// accJSON reads a stored accumulator without encoding/json when A is
	// a flat struct (nil otherwise): see DecodeState.
	accJSON *flatJSON
	// step is the step's full name, for messages.
	step string
	// migrate reads the accumulators an earlier version stored in another
	// type (MigrateAccumulator); nil when the step declares none.
	migrate *accMigration
	// rekeyer moves the keys an earlier version stored under another key
	// (RekeyFrom), when the step declares it.
	rekeyer[K]
	// readKey reads a key back from its AppendKey encoding (keyReader);
	// nil when K's does not read back (see KeysFromEncoding).
	readKey func(enc string) (K, error)
}

func (c *combineAgg[K, V, A, O]) NewAccumulator() any {
	a := c.fn.CreateAccumulator()
	return &a
}

func (c *combineAgg[K, V, A, O]) AddInput(acc any, e *contract.Element) any {
	p := acc.(*A)
	*p = c.fn.AddInput(*p, e.Value.(KV[K, V]).Value)
	return p
}

func (c *combineAgg[K, V, A, O]) MergeAccumulators(a, b any) any {
	p := a.(*A)
	*p = c.fn.MergeAccumulators(*p, *b.(*A))
	return p
}

func (c *combineAgg[K, V, A, O]) Output(key any, acc any, _ window.Window, _ window.PaneInfo) any {
	return KV[K, O]{Key: key.(K), Value: c.fn.ExtractOutput(*acc.(*A))}
}

func (s Scope) keyed(kind graph.Kind, name string, in *graph.Collection, code any, sc stepConfig, keyCoder, stored, out graph.Coder) string {
	step := &graph.Step{Name: name, Kind: kind, Inputs: map[string]string{graph.MainTag: in.ID}, KeyCoder: &keyCoder, StoredCoder: &stored}
	if sc.migrate != nil {
		from := sc.migrate.from
		step.AccumulatorFrom = &from
	}
	if sc.rekey != nil {
		from := sc.rekey.from
		step.KeyFrom = &from
	}
	if in.Windowing.Fn.IsMerging() && kind == graph.KindStatefulParDo {
		s.p.addErr(fmt.Errorf("step %q: stateful ParDo over merging (session) windows is not supported", s.fullName(name)))
		return ""
	}
	if err := in.Windowing.Validate(); err != nil {
		s.p.addErr(fmt.Errorf("step %q: %w", s.fullName(name), err))
		return ""
	}
	return s.addStep(step, code, sc, in.Bounded, in.Windowing, []string{graph.MainTag}, []graph.Coder{out})[0]
}

// combineName names a CombineFn for the graph: built-ins by their name,
// others by their Go type. It is part of the step's stored coder, because
// the same accumulator type can mean different things (a sum and a count
// both store an int64).
func combineName(fn any) string {
	if n, ok := fn.(interface{ combineName() string }); ok {
		return n.combineName()
	}
	return "go:" + reflect.TypeOf(fn).String()
}

// CombinePerKey combines the values of each key in each window with fn.
// The key coder and the accumulator coder become the step's stored identity.
func CombinePerKey[K comparable, V, A, O any](s Scope, name string, in PCollection[KV[K, V]], fn CombineFn[V, A, O], opts ...StepOption) PCollection[KV[K, O]] {
	col := inputCol(s, name, in)
	if col == nil {
		return PCollection[KV[K, O]]{}
	}
	app, err := keyAppender[K]()
	if err != nil {
		s.p.addErr(fmt.Errorf("step %q: %w", s.fullName(name), err))
		return PCollection[KV[K, O]]{}
	}
	sc := buildConfig(opts)
	fnName := combineName(fn)
	if sc.urn == "" {
		sc.urn = "weir:combine:" + fnName
	}
	agg := &combineAgg[K, V, A, O]{kvKeyer: kvKeyer[K, V]{appendKey: app}, fn: fn, accJSON: newFlatJSON[A](), step: s.fullName(name), readKey: keyReader[K]()}
	if m := sc.migrate; m != nil {
		if want := reflect.TypeFor[A](); m.to != want {
			s.p.addErr(fmt.Errorf("step %q: MigrateAccumulator gives a %s, but the combine's accumulator is a %s", s.fullName(name), m.to, want))
			return PCollection[KV[K, O]]{}
		}
		agg.migrate = m
	}
	if err := agg.declareRekey(sc.rekey, app, &agg.kvKeyer.mark, "combine"); err != nil {
		s.p.addErr(fmt.Errorf("step %q: %w", s.fullName(name), err))
		return PCollection[KV[K, O]]{}
	}
	stored := CoderOf[A]()
	stored.Params = map[string]string{"combine_fn": fnName}
	id := s.keyed(graph.KindCombinePerKey, name, col, agg, sc, CoderOf[K](), stored, CoderOf[KV[K, O]]())
	return collectionOf[KV[K, O]](s.p, id)
}

// gbkAgg buffers values: a GroupByKey is a combine whose accumulator is the list.
type gbkAgg[K comparable, V any] struct {
	kvKeyer[K, V]
	// rekeyer moves the keys an earlier version stored under another key
	// (RekeyFrom), when the step declares it.
	rekeyer[K]
}

func (gbkAgg[K, V]) NewAccumulator() any { return &[]V{} }

func (gbkAgg[K, V]) AddInput(acc any, e *contract.Element) any {
	p := acc.(*[]V)
	*p = append(*p, e.Value.(KV[K, V]).Value)
	return p
}

func (gbkAgg[K, V]) MergeAccumulators(a, b any) any {
	p := a.(*[]V)
	*p = append(*p, *b.(*[]V)...)
	return p
}

func (gbkAgg[K, V]) Output(key any, acc any, _ window.Window, _ window.PaneInfo) any {
	vs := *acc.(*[]V)
	return KV[K, []V]{Key: key.(K), Value: append([]V(nil), vs...)}
}

// GroupByKey collects the values of each key in each window; a pane carries
// the values per the windowing's trigger and accumulation mode.
func GroupByKey[K comparable, V any](s Scope, name string, in PCollection[KV[K, V]], opts ...StepOption) PCollection[KV[K, []V]] {
	col := inputCol(s, name, in)
	if col == nil {
		return PCollection[KV[K, []V]]{}
	}
	app, err := keyAppender[K]()
	if err != nil {
		s.p.addErr(fmt.Errorf("step %q: %w", s.fullName(name), err))
		return PCollection[KV[K, []V]]{}
	}
	sc := buildConfig(opts)
	if sc.urn == "" {
		sc.urn = "weir:group_by_key"
	}
	if sc.migrate != nil {
		s.p.addErr(fmt.Errorf("step %q: MigrateAccumulator applies to a CombinePerKey; a GroupByKey keeps the values themselves", s.fullName(name)))
		return PCollection[KV[K, []V]]{}
	}
	agg := &gbkAgg[K, V]{kvKeyer: kvKeyer[K, V]{appendKey: app}}
	if err := agg.declareRekey(sc.rekey, app, &agg.kvKeyer.mark, "GroupByKey"); err != nil {
		s.p.addErr(fmt.Errorf("step %q: %w", s.fullName(name), err))
		return PCollection[KV[K, []V]]{}
	}
	id := s.keyed(graph.KindGroupByKey, name, col, agg, sc, CoderOf[K](), CoderOf[[]V](), CoderOf[KV[K, []V]]())
	return collectionOf[KV[K, []V]](s.p, id)
}

// Aggregate applies a runner-level Aggregator with explicit key and stored
// coder identities, for front ends with dynamic rows (YAML's Combine).
func Aggregate[In, Out any](s Scope, name string, in PCollection[In], agg contract.Aggregator, keyCoder, stored graph.Coder, opts ...StepOption) PCollection[Out] {
	col := inputCol(s, name, in)
	if col == nil {
		return PCollection[Out]{}
	}
	sc := buildConfig(opts)
	if sc.urn == "" {
		sc.urn = "weir:combine"
	}
	id := s.keyed(graph.KindCombinePerKey, name, col, agg, sc, keyCoder, stored, CoderOf[Out]())
	return collectionOf[Out](s.p, id)
}
