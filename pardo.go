package weir

import (
	"fmt"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// Context is what a DoFn sees of the element being processed besides its
// value: event time, window, pane, processing time and side inputs.
type Context struct {
	pc    *contract.ProcessContext
	sides map[string]int
}

// Timestamp returns the event time of the current element.
func (c *Context) Timestamp() mtime.Time { return c.pc.Current().Time }

// Window returns the window of the current element.
func (c *Context) Window() window.Window { return c.pc.Current().Window }

// Pane returns the pane that produced the current element.
func (c *Context) Pane() window.PaneInfo { return c.pc.Current().Pane }

// Now returns processing time.
func (c *Context) Now() mtime.Time { return c.pc.Now() }

// Source returns where the current element was read, or nil.
func (c *Context) Source() *contract.SourcePos { return c.pc.Current().Source }

func (c *Context) side(name string, build func([]any) any) any {
	i, ok := c.sides[name]
	if !ok {
		return nil
	}
	return c.pc.SideInput(i, build)
}

// Fail returns an element error with a reason and message: returned from a
// DoFn it sends the element to the step's error output.
func Fail(reason, format string, args ...any) error {
	return &contract.ElementError{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

func typeMismatch[T any](step string, v any) error {
	var zero T
	return &contract.ElementError{Reason: "type_mismatch", Message: fmt.Sprintf("step %s expects %T, got %T", step, zero, v)}
}

// ---- side inputs ----

// SideInput is a collection read by a step as a view (see AsList, AsMap,
// AsSingleton).
type SideInput interface {
	spec() sideSpec
}

type sideSpec struct {
	name string
	col  string
	view string
	p    *Pipeline
}

// WithSideInputs makes views readable by the step's function.
func WithSideInputs(views ...SideInput) StepOption {
	return func(sc *stepConfig) {
		for _, v := range views {
			sc.sides = append(sc.sides, v.spec())
		}
	}
}

// ListView reads a side input as a list of its elements in the main
// element's window.
type ListView[T any] struct{ s sideSpec }

// AsList views c as a list under the given side input name.
func AsList[T any](name string, c PCollection[T]) ListView[T] {
	return ListView[T]{s: sideSpec{name: name, col: c.id, view: graph.ViewList, p: c.p}}
}

func (v ListView[T]) spec() sideSpec { return v.s }

// Get returns the side input's elements visible to the current element.
func (v ListView[T]) Get(c *Context) []T {
	r, _ := c.side(v.s.name, func(in []any) any {
		out := make([]T, 0, len(in))
		for _, x := range in {
			if t, ok := x.(T); ok {
				out = append(out, t)
			}
		}
		return out
	}).([]T)
	return r
}

// MapView reads a keyed side input as a map (the last value of a key wins).
type MapView[K comparable, V any] struct{ s sideSpec }

// AsMap views c as a map under the given side input name.
func AsMap[K comparable, V any](name string, c PCollection[KV[K, V]]) MapView[K, V] {
	return MapView[K, V]{s: sideSpec{name: name, col: c.id, view: graph.ViewMap, p: c.p}}
}

func (v MapView[K, V]) spec() sideSpec { return v.s }

// Get returns the side input's map visible to the current element.
func (v MapView[K, V]) Get(c *Context) map[K]V {
	r, _ := c.side(v.s.name, func(in []any) any {
		out := make(map[K]V, len(in))
		for _, x := range in {
			if kv, ok := x.(KV[K, V]); ok {
				out[kv.Key] = kv.Value
			}
		}
		return out
	}).(map[K]V)
	return r
}

// SingletonView reads a side input that holds one element per window.
type SingletonView[T any] struct{ s sideSpec }

// AsSingleton views c as a single value under the given side input name.
func AsSingleton[T any](name string, c PCollection[T]) SingletonView[T] {
	return SingletonView[T]{s: sideSpec{name: name, col: c.id, view: graph.ViewSingleton, p: c.p}}
}

func (v SingletonView[T]) spec() sideSpec { return v.s }

// Get returns the single value and true, or the zero value and false when
// the side input is empty in this window. More than one value is an element
// error the caller can return.
func (v SingletonView[T]) Get(c *Context) (T, bool, error) {
	var zero T
	in, _ := c.side(v.s.name, func(in []any) any { return in }).([]any)
	switch len(in) {
	case 0:
		return zero, false, nil
	case 1:
		t, ok := in[0].(T)
		return t, ok, nil
	}
	return zero, false, Fail("side_input", "singleton side input %q has %d values in window %s", v.s.name, len(in), c.Window())
}

// applySides records side inputs on step and returns the name->index map.
func (s Scope) applySides(step *graph.Step, sc stepConfig) map[string]int {
	idx := map[string]int{}
	for i, sd := range sc.sides {
		if sd.p != s.p || sd.col == "" {
			s.p.addErr(fmt.Errorf("step %q: side input %q is missing or belongs to another pipeline", s.fullName(step.Name), sd.name))
			continue
		}
		if _, dup := idx[sd.name]; dup {
			s.p.addErr(fmt.Errorf("step %q: side input name %q is used twice", s.fullName(step.Name), sd.name))
			continue
		}
		idx[sd.name] = i
		step.SideInputs = append(step.SideInputs, graph.SideInput{Name: sd.name, Collection: sd.col, View: sd.view})
	}
	return idx
}

// ---- ParDo family ----

type doFn[In, Out any] struct {
	step string
	fn   func(*Context, In, func(Out)) error
	ctx  Context
	emit func(Out)
}

func (d *doFn[In, Out]) Clone() any {
	c := &doFn[In, Out]{step: d.step, fn: d.fn, ctx: Context{sides: d.ctx.sides}}
	c.emit = c.output
	return c
}

func (d *doFn[In, Out]) output(v Out) { d.ctx.pc.Output(v) }

func (d *doFn[In, Out]) Process(pc *contract.ProcessContext, e contract.Element) error {
	v, ok := e.Value.(In)
	if !ok {
		return typeMismatch[In](d.step, e.Value)
	}
	d.ctx.pc = pc
	return d.fn(&d.ctx, v, d.emit)
}

func (s Scope) pardo(name string, in *graph.Collection, code any, sc stepConfig, tags []string, coders []graph.Coder) ([]string, map[string]int) {
	step := &graph.Step{Name: name, Kind: graph.KindParDo, Inputs: map[string]string{graph.MainTag: in.ID}}
	if sc.urn == "" {
		sc.urn = "weir:go:pardo"
	}
	sides := s.applySides(step, sc)
	return s.addStep(step, code, sc, in.Bounded, in.Windowing, tags, coders), sides
}

// ParDo applies fn to every element of in; fn emits any number of outputs
// through its emit function and may return an error (see Fail) to reject
// the element.
func ParDo[In, Out any](s Scope, name string, in PCollection[In], fn func(c *Context, v In, emit func(Out)) error, opts ...StepOption) PCollection[Out] {
	col := inputCol(s, name, in)
	if col == nil {
		return PCollection[Out]{}
	}
	d := &doFn[In, Out]{step: s.fullName(name), fn: fn}
	ids, sides := s.pardo(name, col, d, buildConfig(opts), []string{graph.MainTag}, []graph.Coder{CoderOf[Out]()})
	d.ctx.sides = sides
	return collectionOf[Out](s.p, ids[0])
}

type mapFn[In, Out any] struct {
	step string
	fn   func(In) Out
}

func (m *mapFn[In, Out]) Process(pc *contract.ProcessContext, e contract.Element) error {
	v, ok := e.Value.(In)
	if !ok {
		return typeMismatch[In](m.step, e.Value)
	}
	e.Value = m.fn(v)
	pc.Emit(0, e)
	return nil
}

// Map applies fn to every element, one output per input.
func Map[In, Out any](s Scope, name string, in PCollection[In], fn func(In) Out, opts ...StepOption) PCollection[Out] {
	col := inputCol(s, name, in)
	if col == nil {
		return PCollection[Out]{}
	}
	ids, _ := s.pardo(name, col, &mapFn[In, Out]{step: s.fullName(name), fn: fn}, buildConfig(opts), []string{graph.MainTag}, []graph.Coder{CoderOf[Out]()})
	return collectionOf[Out](s.p, ids[0])
}

type filterFn[T any] struct {
	step string
	fn   func(T) bool
}

func (f *filterFn[T]) Process(pc *contract.ProcessContext, e contract.Element) error {
	v, ok := e.Value.(T)
	if !ok {
		return typeMismatch[T](f.step, e.Value)
	}
	if f.fn(v) {
		pc.Emit(0, e)
	}
	return nil
}

// Filter keeps the elements for which keep returns true.
func Filter[T any](s Scope, name string, in PCollection[T], keep func(T) bool, opts ...StepOption) PCollection[T] {
	col := inputCol(s, name, in)
	if col == nil {
		return PCollection[T]{}
	}
	ids, _ := s.pardo(name, col, &filterFn[T]{step: s.fullName(name), fn: keep}, buildConfig(opts), []string{graph.MainTag}, []graph.Coder{col.Coder})
	return collectionOf[T](s.p, ids[0])
}

type flatMapFn[In, Out any] struct {
	step string
	fn   func(In) []Out
}

func (f *flatMapFn[In, Out]) Process(pc *contract.ProcessContext, e contract.Element) error {
	v, ok := e.Value.(In)
	if !ok {
		return typeMismatch[In](f.step, e.Value)
	}
	for _, o := range f.fn(v) {
		e.Value = o
		pc.Emit(0, e)
	}
	return nil
}

// FlatMap applies fn to every element and emits each value it returns.
func FlatMap[In, Out any](s Scope, name string, in PCollection[In], fn func(In) []Out, opts ...StepOption) PCollection[Out] {
	col := inputCol(s, name, in)
	if col == nil {
		return PCollection[Out]{}
	}
	ids, _ := s.pardo(name, col, &flatMapFn[In, Out]{step: s.fullName(name), fn: fn}, buildConfig(opts), []string{graph.MainTag}, []graph.Coder{CoderOf[Out]()})
	return collectionOf[Out](s.p, ids[0])
}

// OutputDecl declares one tagged output of ParDoN with its element type.
type OutputDecl struct {
	tag   string
	coder graph.Coder
}

// Output declares a tagged output carrying elements of type T.
func Output[T any](tag string) OutputDecl { return OutputDecl{tag: tag, coder: CoderOf[T]()} }

// Emitters sends values to the tagged outputs of a ParDoN step.
type Emitters struct {
	pc   *contract.ProcessContext
	tags map[string]int
}

// Emit sends v to the output named tag, with the current element's time,
// window and pane. An undeclared tag is an element error.
func (em *Emitters) Emit(tag string, v any) error {
	i, ok := em.tags[tag]
	if !ok {
		return Fail("unknown_output", "output tag %q was not declared", tag)
	}
	e := *em.pc.Current()
	e.Value = v
	em.pc.Emit(i, e)
	return nil
}

type doFnN[In any] struct {
	step string
	fn   func(*Context, In, *Emitters) error
	ctx  Context
	em   Emitters
}

func (d *doFnN[In]) Clone() any {
	return &doFnN[In]{step: d.step, fn: d.fn, ctx: Context{sides: d.ctx.sides}, em: Emitters{tags: d.em.tags}}
}

func (d *doFnN[In]) Process(pc *contract.ProcessContext, e contract.Element) error {
	v, ok := e.Value.(In)
	if !ok {
		return typeMismatch[In](d.step, e.Value)
	}
	d.ctx.pc, d.em.pc = pc, pc
	return d.fn(&d.ctx, v, &d.em)
}

// Tagged holds the outputs of a ParDoN step by tag.
type Tagged struct {
	p   *Pipeline
	ids map[string]string
}

// TaggedOutput returns the output of t named tag as a typed collection.
func TaggedOutput[T any](t Tagged, tag string) PCollection[T] {
	id, ok := t.ids[tag]
	if !ok {
		if t.p != nil {
			t.p.addErr(fmt.Errorf("no output tagged %q", tag))
		}
		return PCollection[T]{}
	}
	return collectionOf[T](t.p, id)
}

// ParDoN applies fn to every element of in; fn emits to any of the declared
// tagged outputs by tag.
func ParDoN[In any](s Scope, name string, in PCollection[In], fn func(c *Context, v In, out *Emitters) error, outputs []OutputDecl, opts ...StepOption) Tagged {
	col := inputCol(s, name, in)
	if col == nil || len(outputs) == 0 {
		if len(outputs) == 0 {
			s.p.addErr(fmt.Errorf("step %q: ParDoN needs at least one output", s.fullName(name)))
		}
		return Tagged{p: s.p}
	}
	tags := make([]string, len(outputs))
	coders := make([]graph.Coder, len(outputs))
	for i, o := range outputs {
		tags[i], coders[i] = o.tag, o.coder
	}
	d := &doFnN[In]{step: s.fullName(name), fn: fn, em: Emitters{tags: map[string]int{}}}
	ids, sides := s.pardo(name, col, d, buildConfig(opts), tags, coders)
	d.ctx.sides = sides
	if step := s.p.g.Step(s.fullName(name)); step != nil {
		// Output indexes follow the runner's order of tags, not declaration order.
		for i, tag := range contract.OutputTags(step) {
			d.em.tags[tag] = i
		}
	}
	t := Tagged{p: s.p, ids: map[string]string{}}
	for i, tag := range tags {
		if ids[i] != "" {
			t.ids[tag] = ids[i]
		}
	}
	return t
}

// ParDoFn applies a runner-level DoFn, for front ends and connectors that
// work on dynamic values (the built-in YAML transforms use it).
func ParDoFn[In, Out any](s Scope, name string, in PCollection[In], fn contract.DoFn, opts ...StepOption) PCollection[Out] {
	col := inputCol(s, name, in)
	if col == nil {
		return PCollection[Out]{}
	}
	ids, _ := s.pardo(name, col, fn, buildConfig(opts), []string{graph.MainTag}, []graph.Coder{CoderOf[Out]()})
	return collectionOf[Out](s.p, ids[0])
}

// SideInputIndex returns the index of side input name among those declared
// on a step built with WithSideInputs, for runner-level DoFns that call
// contract.ProcessContext.SideInput directly; -1 if absent.
func SideInputIndex(opts []StepOption, name string) int {
	sc := buildConfig(opts)
	for i, sd := range sc.sides {
		if sd.name == name {
			return i
		}
	}
	return -1
}
