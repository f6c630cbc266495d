// Package weir is the Go SDK for weir pipelines: typed, generic constructors
// (Create, ParDo, WindowInto, CombinePerKey, ...) that build the same graph
// as a YAML pipeline, with the code of each step bound by step name.
//
// Every step is named by the user; a name is the step's stable identity
// (state belongs to it), so a duplicate name is an error. Steps added through
// a Scope from Scope.Sub are named Outer/Inner.
//
// It may import graph, window, mtime, internal/box, internal/jsonscan,
// runner/contract (for the code interfaces), runner (only to run pipelines:
// Run, RunOptions) and the standard library; nothing imports it but front
// ends and user programs.
package weir

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// Pipeline is a pipeline under construction: its graph and the code bound
// to each step. Construction errors are collected and reported by Err, so
// constructors can be chained without checking each one.
type Pipeline struct {
	g     *graph.Pipeline
	code  map[string]any
	errs  []error
	clock *mtime.ManualClock
	job   JobInfo
}

// JobInfo is the job a pipeline is built for, when a job service builds it
// (a Go program run with package weirx): connectors read it to name their
// progress records and revisions. Its zero value means "no job" (an
// in-process run, or a build that only computes the graph).
type JobInfo struct {
	// Name is the job name, the identity that survives updates.
	Name string
	// ID is the job ID of this run; empty when the pipeline is built only
	// for its graph.
	ID string
	// Generation is the name's generation counter for this job; part of
	// every sink revision, so a newer job's writes win.
	Generation int64
	// DataDir is the job service's data directory (the default home of
	// embedded SQLite sinks).
	DataDir string
	// Broker is the Pub/Sub broker (an *pubsub.Broker), nil without one.
	Broker any
}

// NewPipeline returns an empty pipeline.
func NewPipeline() *Pipeline {
	return &Pipeline{g: graph.New(), code: map[string]any{}}
}

// NewJobPipeline returns an empty pipeline built for job.
func NewJobPipeline(job JobInfo) *Pipeline {
	p := NewPipeline()
	p.job = job
	return p
}

// Job returns the job p is built for (the zero JobInfo when none).
func (p *Pipeline) Job() JobInfo { return p.job }

// Root returns the top-level scope of p.
func (p *Pipeline) Root() Scope { return Scope{p: p} }

// Err returns every construction error so far, joined, or nil.
func (p *Pipeline) Err() error { return errors.Join(p.errs...) }

// Graph returns the pipeline graph.
func (p *Pipeline) Graph() *graph.Pipeline { return p.g }

// Program returns the graph with its bound code, ready for the runner.
func (p *Pipeline) Program() *contract.Program { return &contract.Program{Graph: p.g, Code: p.code} }

// TestClock returns the manual processing-time clock driven by the
// pipeline's TestStream sources, or nil if it has none.
func (p *Pipeline) TestClock() *mtime.ManualClock { return p.clock }

func (p *Pipeline) addErr(err error) {
	if err != nil {
		p.errs = append(p.errs, err)
	}
}

// Scope is where steps are added: the pipeline's root, or a composite whose
// name prefixes the names of the steps inside it.
type Scope struct {
	p      *Pipeline
	prefix string
}

// Sub returns the scope of a composite step named name inside s.
func (s Scope) Sub(name string) Scope { return Scope{p: s.p, prefix: s.fullName(name)} }

// Pipeline returns the pipeline s belongs to.
func (s Scope) Pipeline() *Pipeline { return s.p }

func (s Scope) fullName(name string) string {
	if s.prefix == "" {
		return name
	}
	return s.prefix + "/" + name
}

// PCollection is a typed collection of elements of type T.
type PCollection[T any] struct {
	p  *Pipeline
	id string
}

// ID returns the collection's identity in the graph ("Step.tag").
func (c PCollection[T]) ID() string { return c.id }

// Valid reports whether c refers to a collection (it does not when the step
// that should have produced it failed to build).
func (c PCollection[T]) Valid() bool { return c.p != nil && c.id != "" }

func (c PCollection[T]) collection() *graph.Collection {
	if !c.Valid() {
		return nil
	}
	return c.p.g.Collection(c.id)
}

// Windowing returns the windowing strategy of c.
func (c PCollection[T]) Windowing() window.Strategy {
	if col := c.collection(); col != nil {
		return col.Windowing
	}
	return window.DefaultStrategy()
}

// KV is a key and a value: the element type of keyed collections.
type KV[K comparable, V any] struct {
	Key   K
	Value V
}

// TimestampedValue is a value with its event time, for sources. Err, when
// set, makes the element a reject (sent to the source's error output, or
// failing a bounded run when none is declared).
type TimestampedValue[T any] struct {
	Value T
	Time  mtime.Time
	Err   *contract.ElementError
	// Source optionally records where the value came from.
	Source *contract.SourcePos
}

// StepOption adjusts how a step is built.
type StepOption func(*stepConfig)

type stepConfig struct {
	coder       *graph.Coder
	config      any
	urn         string
	errorOutput string
	errorCoder  *graph.Coder
	sides       []sideSpec
	source      *graph.IOIdentity
	sink        *graph.IOIdentity
	// migrate is a combine's accumulator migration (MigrateAccumulator).
	migrate *accMigration
	// rekey is a combine's re-key (RekeyFrom).
	rekey *keyMigration
	// stateMigrations are a StatefulParDo's state migrations
	// (MigrateState).
	stateMigrations []*stateMigration
}

// WithCoder sets the coder identity of the step's main output, overriding
// the one derived from the Go type (front ends with dynamic rows use it).
func WithCoder(c graph.Coder) StepOption { return func(sc *stepConfig) { sc.coder = &c } }

// WithConfig records cfg (marshalled to JSON) in the step's function
// reference, so that it is visible to compatibility checks.
func WithConfig(cfg any) StepOption { return func(sc *stepConfig) { sc.config = cfg } }

// WithURN sets the URN of the step's function reference.
func WithURN(urn string) StepOption { return func(sc *stepConfig) { sc.urn = urn } }

// WithErrorOutput declares an error output on tag: elements the step fails
// on go there as contract.Reject values instead of failing the run. Read it
// with ErrorOutput.
func WithErrorOutput(tag string) StepOption {
	return func(sc *stepConfig) { sc.errorOutput = tag }
}

// WithErrorCoder sets the coder identity of the step's error output
// (front ends that turn rejects into rows use it).
func WithErrorCoder(c graph.Coder) StepOption { return func(sc *stepConfig) { sc.errorCoder = &c } }

// WithSourceIdentity records what a source step reads.
func WithSourceIdentity(kind, identity string, bounded bool) StepOption {
	return func(sc *stepConfig) {
		sc.source = &graph.IOIdentity{Kind: kind, Identity: identity, Bounded: bounded}
	}
}

// WithSinkIdentity records what a sink step writes.
func WithSinkIdentity(kind, identity string) StepOption {
	return func(sc *stepConfig) { sc.sink = &graph.IOIdentity{Kind: kind, Identity: identity} }
}

func buildConfig(opts []StepOption) stepConfig {
	var sc stepConfig
	for _, o := range opts {
		o(&sc)
	}
	return sc
}

// CoderOf returns the coder identity weir derives for the Go type T.
func CoderOf[T any]() graph.Coder {
	return coderOfType(reflect.TypeFor[T]())
}

func coderOfType(t reflect.Type) graph.Coder {
	if t == nil {
		return graph.Coder{URN: "weir:coder:any", Version: 1}
	}
	if t.Kind() == reflect.Struct && t.PkgPath() == reflect.TypeFor[KV[int, int]]().PkgPath() && len(t.Name()) > 2 && t.Name()[:3] == "KV[" {
		return graph.Coder{URN: "weir:coder:kv", Version: 1, Components: []graph.Coder{coderOfType(t.Field(0).Type), coderOfType(t.Field(1).Type)}}
	}
	switch t.Kind() {
	case reflect.Slice:
		return graph.Coder{URN: "weir:coder:list", Version: 1, Components: []graph.Coder{coderOfType(t.Elem())}}
	case reflect.Struct:
		c := graph.Coder{URN: "weir:coder:go:" + t.String(), Version: 1}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			c.Fields = append(c.Fields, graph.Field{Name: f.Name, Type: coderOfType(f.Type).String()})
		}
		return c
	}
	return graph.Coder{URN: "weir:coder:go:" + t.String(), Version: 1}
}

// addStep adds a step with its code, producing outputs in order of tags
// with the given coders. It returns the output collection IDs; "" for all
// when the step could not be added.
func (s Scope) addStep(step *graph.Step, code any, sc stepConfig, bounded bool, ws window.Strategy, tags []string, coders []graph.Coder) []string {
	p := s.p
	ids := make([]string, len(tags))
	step.Name = s.fullName(step.Name)
	if sc.urn != "" || sc.config != nil {
		fn := &graph.FnRef{URN: sc.urn}
		if sc.config != nil {
			raw, err := json.Marshal(sc.config)
			if err != nil {
				p.addErr(fmt.Errorf("step %q: recording its config: %w", step.Name, err))
				return ids
			}
			fn.Config = raw
		}
		step.Fn = fn
	}
	if sc.source != nil {
		step.Source = sc.source
	}
	if sc.sink != nil {
		step.Sink = sc.sink
	}
	if err := p.g.AddStep(step); err != nil {
		p.addErr(err)
		return ids
	}
	if code != nil {
		p.code[step.Name] = code
	}
	for i, tag := range tags {
		c := coders[i]
		if i == 0 && sc.coder != nil {
			c = *sc.coder
		}
		ids[i] = p.g.AddOutput(step, tag, c, ws, bounded).ID
	}
	if sc.errorOutput != "" {
		step.ErrorOutput = sc.errorOutput
		ec := CoderOf[contract.Reject]()
		if sc.errorCoder != nil {
			ec = *sc.errorCoder
		}
		ids = append(ids, p.g.AddOutput(step, sc.errorOutput, ec, ws, bounded).ID)
	}
	return ids
}

// inputCol checks that c is usable as an input and returns its graph collection.
func inputCol[T any](s Scope, step string, c PCollection[T]) *graph.Collection {
	col := c.collection()
	if col == nil {
		s.p.addErr(fmt.Errorf("step %q: its input is missing (an earlier step failed to build)", s.fullName(step)))
		return nil
	}
	if c.p != s.p {
		s.p.addErr(fmt.Errorf("step %q: its input belongs to another pipeline", s.fullName(step)))
		return nil
	}
	return col
}

func collectionOf[T any](p *Pipeline, id string) PCollection[T] {
	if id == "" {
		return PCollection[T]{}
	}
	return PCollection[T]{p: p, id: id}
}

// ErrorOutput returns the error output of the step that produced c, declared
// with WithErrorOutput. It is invalid (and a construction error) when the
// step declared none.
func ErrorOutput[T any](c PCollection[T]) PCollection[contract.Reject] {
	col := c.collection()
	if col == nil {
		return PCollection[contract.Reject]{}
	}
	step := c.p.g.Step(col.Producer)
	if step == nil || step.ErrorOutput == "" {
		c.p.addErr(fmt.Errorf("step %q declares no error output", col.Producer))
		return PCollection[contract.Reject]{}
	}
	return collectionOf[contract.Reject](c.p, step.Outputs[step.ErrorOutput])
}

// RunOptions configure Run.
type RunOptions = runner.Options

// Run builds p and runs it to completion in this process. Pipelines whose
// sources are all bounded complete; unbounded ones run until ctx is done.
func Run(ctx context.Context, p *Pipeline, opts RunOptions) (*runner.Result, error) {
	if err := p.Err(); err != nil {
		return nil, fmt.Errorf("building pipeline: %w", err)
	}
	if err := p.g.Validate(); err != nil {
		return nil, fmt.Errorf("validating pipeline: %w", err)
	}
	if opts.Clock == nil && p.clock != nil {
		opts.Clock = p.clock
	}
	return runner.Run(ctx, p.Program(), opts)
}
