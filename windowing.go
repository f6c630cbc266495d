package weir

import (
	"fmt"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/window"
)

// Windowing is a windowing strategy: window function, trigger, accumulation
// mode and allowed lateness. Unset fields take Beam's defaults.
type Windowing = window.Strategy

// FixedWindows returns a strategy of fixed windows of the given size.
func FixedWindows(size mtime.Duration) Windowing {
	return Windowing{Fn: window.FixedFn(size)}
}

// SlidingWindows returns a strategy of windows of size starting every period.
func SlidingWindows(size, period mtime.Duration) Windowing {
	return Windowing{Fn: window.SlidingFn(size, period)}
}

// Sessions returns a strategy of session windows closed by gap.
func Sessions(gap mtime.Duration) Windowing { return Windowing{Fn: window.SessionsFn(gap)} }

// GlobalWindows returns the global windowing strategy.
func GlobalWindows() Windowing { return Windowing{Fn: window.GlobalFn()} }

// WindowInto assigns each element of in to windows per w and sets w as the
// windowing strategy of the output, which keyed steps downstream follow.
func WindowInto[T any](s Scope, name string, in PCollection[T], w Windowing, opts ...StepOption) PCollection[T] {
	col := inputCol(s, name, in)
	if col == nil {
		return PCollection[T]{}
	}
	w.EnsureDefaults()
	if err := w.Validate(); err != nil {
		s.p.addErr(fmt.Errorf("step %q: %w", s.fullName(name), err))
		return PCollection[T]{}
	}
	if w.TimestampCombiner != window.EndOfWindow {
		s.p.addErr(fmt.Errorf("step %q: timestamp combiner %q is not supported yet (only end_of_window)", s.fullName(name), w.TimestampCombiner))
		return PCollection[T]{}
	}
	step := &graph.Step{Name: name, Kind: graph.KindWindowInto, Inputs: map[string]string{graph.MainTag: col.ID}, Windowing: &w}
	ids := s.addStep(step, nil, buildConfig(opts), col.Bounded, w, []string{graph.MainTag}, []graph.Coder{col.Coder})
	return collectionOf[T](s.p, ids[0])
}

// Flatten merges collections of the same type into one. All inputs must
// share a windowing strategy.
func Flatten[T any](s Scope, name string, ins []PCollection[T], opts ...StepOption) PCollection[T] {
	if len(ins) == 0 {
		s.p.addErr(fmt.Errorf("step %q: Flatten needs at least one input", s.fullName(name)))
		return PCollection[T]{}
	}
	step := &graph.Step{Name: name, Kind: graph.KindFlatten, Inputs: map[string]string{}}
	bounded := true
	var first *graph.Collection
	for i, in := range ins {
		col := inputCol(s, name, in)
		if col == nil {
			return PCollection[T]{}
		}
		if first == nil {
			first = col
		} else if !sameWindowFn(first.Windowing, col.Windowing) {
			s.p.addErr(fmt.Errorf("step %q: inputs %q and %q have different windowing; window them alike before Flatten", s.fullName(name), first.ID, col.ID))
			return PCollection[T]{}
		}
		step.Inputs[fmt.Sprintf("in%d", i)] = col.ID
		bounded = bounded && col.Bounded
	}
	ids := s.addStep(step, nil, buildConfig(opts), bounded, first.Windowing, []string{graph.MainTag}, []graph.Coder{first.Coder})
	return collectionOf[T](s.p, ids[0])
}

func sameWindowFn(a, b window.Strategy) bool {
	return a.Fn == b.Fn && a.Accumulation == b.Accumulation && a.AllowedLateness == b.AllowedLateness
}
