package weir

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/internal/box"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

func (s Scope) source(name string, src contract.Source, bounded bool, coder graph.Coder, sc stepConfig) string {
	step := &graph.Step{Name: name, Kind: graph.KindSource}
	if sc.source == nil {
		sc.source = &graph.IOIdentity{Kind: "custom", Identity: s.fullName(name), Bounded: bounded}
	}
	return s.addStep(step, src, sc, bounded, window.DefaultStrategy(), []string{graph.MainTag}, []graph.Coder{coder})[0]
}

// Read adds a source step reading src, the public connector API that the
// built-in sources use too. bounded says whether src ends.
func Read[T any](s Scope, name string, src contract.Source, bounded bool, opts ...StepOption) PCollection[T] {
	return collectionOf[T](s.p, s.source(name, src, bounded, CoderOf[T](), buildConfig(opts)))
}

// Write adds a sink step writing every element of in to sink.
func Write[T any](s Scope, name string, in PCollection[T], sink contract.Sink, opts ...StepOption) {
	write(s, name, in, sink, opts)
}

// WriteWithErrors adds a sink step as Write does and returns its error
// output, which opts must declare with WithErrorOutput: the elements a
// contract.RejectingSink could not store arrive there as contract.Reject
// values (a sink without an error output sends them to the dead-letter hook
// or fails the run). Without WithErrorOutput the result is invalid and the
// pipeline has a construction error.
func WriteWithErrors[T any](s Scope, name string, in PCollection[T], sink contract.Sink, opts ...StepOption) PCollection[contract.Reject] {
	ids := write(s, name, in, sink, opts)
	if buildConfig(opts).errorOutput == "" {
		s.p.addErr(fmt.Errorf("step %q declares no error output (WriteWithErrors needs WithErrorOutput)", s.fullName(name)))
		return PCollection[contract.Reject]{}
	}
	if len(ids) == 0 {
		return PCollection[contract.Reject]{}
	}
	return collectionOf[contract.Reject](s.p, ids[0])
}

func write[T any](s Scope, name string, in PCollection[T], sink contract.Sink, opts []StepOption) []string {
	col := inputCol(s, name, in)
	if col == nil {
		return nil
	}
	sc := buildConfig(opts)
	if sc.sink == nil {
		sc.sink = &graph.IOIdentity{Kind: "custom", Identity: s.fullName(name)}
	}
	step := &graph.Step{Name: name, Kind: graph.KindSink, Inputs: map[string]string{graph.MainTag: col.ID}}
	return s.addStep(step, sink, sc, col.Bounded, col.Windowing, nil, nil)
}

// ---- Create ----

type sliceSource struct {
	elems []contract.Element
	step  string
}

func (c *sliceSource) Split(_ context.Context, n int) ([]contract.SourceSplit, error) {
	if n < 1 {
		n = 1
	}
	splits := make([]contract.SourceSplit, n)
	for i := range splits {
		lo, hi := len(c.elems)*i/n, len(c.elems)*(i+1)/n
		splits[i] = &sliceSplit{elems: c.elems[lo:hi]}
	}
	return splits, nil
}

type sliceSplit struct {
	elems []contract.Element
	pos   int
}

func (s *sliceSplit) Read(_ context.Context, buf []contract.Element) (contract.ReadResult, error) {
	n := copy(buf, s.elems[s.pos:])
	s.pos += n
	if s.pos >= len(s.elems) {
		return contract.ReadResult{N: n, Watermark: mtime.MaxTimestamp, Done: true}, nil
	}
	return contract.ReadResult{N: n, Watermark: mtime.MinTimestamp}, nil
}

func (s *sliceSplit) Close() error { return nil }

// Position returns the index of the next element of the split.
func (s *sliceSplit) Position() ([]byte, error) {
	return binary.BigEndian.AppendUint64(nil, uint64(s.pos)), nil
}

// Ack does nothing: created elements need no acknowledgement.
func (s *sliceSplit) Ack(context.Context, []byte) error { return nil }

// Resume re-splits the elements as Split did (one split per position) and
// continues each split from its checkpointed index, so a restarted job
// reads each created element once.
func (c *sliceSource) Resume(_ context.Context, positions [][]byte) ([]contract.SourceSplit, error) {
	n := len(positions)
	if n == 0 {
		n = 1
	}
	splits := make([]contract.SourceSplit, n)
	for i := range splits {
		lo, hi := len(c.elems)*i/n, len(c.elems)*(i+1)/n
		sp := &sliceSplit{elems: c.elems[lo:hi]}
		if i < len(positions) && len(positions[i]) == 8 {
			sp.pos = min(int(binary.BigEndian.Uint64(positions[i])), len(sp.elems))
		}
		splits[i] = sp
	}
	return splits, nil
}

func toElement[T any](step string, tv TimestampedValue[T]) contract.Element {
	e := contract.Element{Value: tv.Value, Time: tv.Time, Window: window.Global, Pane: window.NoFiring, Source: tv.Source}
	if tv.Err != nil {
		e.Value = contract.Reject{Element: tv.Value, Step: step, Reason: tv.Err.Reason, Message: tv.Err.Message, Source: tv.Source}
	}
	return e
}

// Create adds a bounded source of the given values, at the minimum timestamp
// in the global window (as Beam's Create).
func Create[T any](s Scope, name string, values []T, opts ...StepOption) PCollection[T] {
	tvs := make([]TimestampedValue[T], len(values))
	for i, v := range values {
		tvs[i] = TimestampedValue[T]{Value: v, Time: mtime.MinTimestamp}
	}
	return CreateTimestamped(s, name, tvs, opts...)
}

// CreateTimestamped adds a bounded source of values with event times.
func CreateTimestamped[T any](s Scope, name string, values []TimestampedValue[T], opts ...StepOption) PCollection[T] {
	full := s.fullName(name)
	src := &sliceSource{step: full}
	for _, tv := range values {
		src.elems = append(src.elems, toElement(full, tv))
	}
	sc := buildConfig(opts)
	if sc.urn == "" {
		sc.urn = "weir:source:create"
	}
	if sc.source == nil {
		sc.source = &graph.IOIdentity{Kind: "create", Identity: full, Bounded: true}
	}
	return collectionOf[T](s.p, s.source(name, src, true, CoderOf[T](), sc))
}

// ---- TestStream ----

// TestEvent is one scripted event of a TestStream: exactly one of Add,
// AdvanceWatermark, AdvanceProcessingTime or ToInfinity is set.
type TestEvent[T any] struct {
	Add                   []TimestampedValue[T]
	AdvanceWatermark      mtime.Time
	AdvanceProcessingTime mtime.Duration
	ToInfinity            bool
}

// AddElements is a TestStream event adding elements.
func AddElements[T any](vs ...TimestampedValue[T]) TestEvent[T] { return TestEvent[T]{Add: vs} }

// AdvanceWatermark is a TestStream event moving the watermark to t.
func AdvanceWatermark[T any](t mtime.Time) TestEvent[T] { return TestEvent[T]{AdvanceWatermark: t} }

// AdvanceProcessingTime is a TestStream event moving processing time by d.
func AdvanceProcessingTime[T any](d mtime.Duration) TestEvent[T] {
	return TestEvent[T]{AdvanceProcessingTime: d}
}

// AdvanceWatermarkToInfinity is a TestStream event ending the stream.
func AdvanceWatermarkToInfinity[T any]() TestEvent[T] { return TestEvent[T]{ToInfinity: true} }

// TestClockStart is where the processing-time clock of a pipeline with a
// TestStream starts: 2026-01-01T00:00:00Z.
const TestClockStart mtime.Time = 1767225600000

type testStream[T any] struct {
	step   string
	events []TestEvent[T]
	clock  *mtime.ManualClock
}

func (t *testStream[T]) Split(context.Context, int) ([]contract.SourceSplit, error) {
	return []contract.SourceSplit{&testStreamSplit[T]{ts: t, wm: mtime.MinTimestamp}}, nil
}

type testStreamSplit[T any] struct {
	ts  *testStream[T]
	i   int
	off int
	wm  mtime.Time
}

func (r *testStreamSplit[T]) Read(_ context.Context, buf []contract.Element) (contract.ReadResult, error) {
	for r.i < len(r.ts.events) {
		ev := r.ts.events[r.i]
		switch {
		case len(ev.Add) > 0:
			n := 0
			for r.off < len(ev.Add) && n < len(buf) {
				buf[n] = toElement(r.ts.step, ev.Add[r.off])
				n++
				r.off++
			}
			if r.off >= len(ev.Add) {
				r.i++
				r.off = 0
			}
			return contract.ReadResult{N: n, Watermark: r.wm}, nil
		case ev.ToInfinity:
			r.i = len(r.ts.events)
		case ev.AdvanceProcessingTime != 0:
			r.i++
			r.ts.clock.Advance(ev.AdvanceProcessingTime)
			return contract.ReadResult{Watermark: r.wm, ProcessingTimeAdvanced: true}, nil
		default:
			r.i++
			if ev.AdvanceWatermark > r.wm {
				r.wm = ev.AdvanceWatermark
			}
			return contract.ReadResult{Watermark: r.wm}, nil
		}
	}
	return contract.ReadResult{Watermark: mtime.MaxTimestamp, Done: true}, nil
}

func (r *testStreamSplit[T]) Close() error { return nil }

// TestStream adds a scripted source: elements, watermark moves and
// processing-time moves in a fixed order, for deterministic tests of
// triggers and late data. The pipeline's processing-time clock becomes a
// manual clock (see Pipeline.TestClock) that only TestStream events move.
// The stream ends at +∞ after its last event.
func TestStream[T any](s Scope, name string, events []TestEvent[T], opts ...StepOption) PCollection[T] {
	if s.p.clock == nil {
		s.p.clock = mtime.NewManualClock(TestClockStart)
	}
	src := &testStream[T]{step: s.fullName(name), events: events, clock: s.p.clock}
	sc := buildConfig(opts)
	if sc.urn == "" {
		sc.urn = "weir:source:test_stream"
	}
	if sc.source == nil {
		sc.source = &graph.IOIdentity{Kind: "test_stream", Identity: s.fullName(name), Bounded: true}
	}
	return collectionOf[T](s.p, s.source(name, src, true, CoderOf[T](), sc))
}

// ---- Generate ----

// GenerateConfig configures a synthetic source.
type GenerateConfig struct {
	// Count is how many elements to generate; 0 means unbounded.
	Count int64
	// Rate limits generation to this many elements per second overall; 0
	// means as fast as possible.
	Rate float64
	// Start is the event time of element 0.
	Start mtime.Time
	// Spacing is the event time between consecutive elements (default 1ms).
	Spacing mtime.Duration
}

type generator[T any] struct {
	cfg GenerateConfig
	// newFn returns the element function of one split (GenerateEach);
	// every split of Generate shares one function.
	newFn func() func(i int64) T
}

func (g *generator[T]) Split(_ context.Context, n int) ([]contract.SourceSplit, error) {
	if n < 1 {
		n = 1
	}
	splits := make([]contract.SourceSplit, n)
	for i := range splits {
		splits[i] = &generatorSplit[T]{g: g, fn: g.newFn(), next: int64(i), stride: int64(n), start: time.Now(), box: box.New[T]()}
	}
	return splits, nil
}

// Resume continues every split from the index its checkpointed position
// names (the stride is the number of positions), so a restarted job
// generates each element once.
func (g *generator[T]) Resume(_ context.Context, positions [][]byte) ([]contract.SourceSplit, error) {
	splits := make([]contract.SourceSplit, len(positions))
	for i, p := range positions {
		next := int64(i)
		if len(p) == 8 {
			next = int64(binary.BigEndian.Uint64(p))
		} else if p != nil {
			return nil, fmt.Errorf("generate: checkpointed position of split %d is %d bytes, want 8", i, len(p))
		}
		sp := &generatorSplit[T]{g: g, fn: g.newFn(), next: next, stride: int64(len(positions)), start: time.Now(), box: box.New[T]()}
		// Rate limiting continues from here, not from element 0.
		sp.emitted = 0
		splits[i] = sp
	}
	return splits, nil
}

type generatorSplit[T any] struct {
	g       *generator[T]
	fn      func(i int64) T
	box     *box.Boxer[T]
	next    int64
	stride  int64
	emitted int64
	start   time.Time
}

func (s *generatorSplit[T]) Read(ctx context.Context, buf []contract.Element) (contract.ReadResult, error) {
	cfg := s.g.cfg
	if cfg.Rate > 0 {
		// Each split produces its share of the rate.
		due := time.Duration(float64(s.emitted) / (cfg.Rate / float64(s.stride)) * float64(time.Second))
		if wait := time.Until(s.start.Add(due)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return contract.ReadResult{}, ctx.Err()
			case <-t.C:
			}
		}
		if limit := int(cfg.Rate/float64(s.stride)/100) + 1; len(buf) > limit {
			buf = buf[:limit]
		}
	}
	n := 0
	var ts mtime.Time
	for n < len(buf) && (cfg.Count == 0 || s.next < cfg.Count) {
		ts = cfg.Start + mtime.Time(s.next)*mtime.Time(cfg.Spacing)
		// Field by field: assigning a whole Element copies it with a bulk
		// GC write barrier while the collector marks, one per element.
		e := &buf[n]
		e.Value = s.box.Box(s.fn(s.next))
		e.Time, e.Window, e.Pane = ts, window.Global, window.NoFiring
		if e.Source != nil {
			e.Source = nil
		}
		n++
		s.next += s.stride
	}
	s.emitted += int64(n)
	if cfg.Count != 0 && s.next >= cfg.Count {
		return contract.ReadResult{N: n, Watermark: mtime.MaxTimestamp, Done: true}, nil
	}
	if n == 0 {
		return contract.ReadResult{Watermark: mtime.MinTimestamp}, nil
	}
	return contract.ReadResult{N: n, Watermark: ts}, nil
}

func (s *generatorSplit[T]) Close() error { return nil }

// Position returns the index of the next element, 8 bytes big-endian.
func (s *generatorSplit[T]) Position() ([]byte, error) {
	return binary.BigEndian.AppendUint64(nil, uint64(s.next)), nil
}

// Ack does nothing: generated elements need no acknowledgement.
func (s *generatorSplit[T]) Ack(context.Context, []byte) error { return nil }

// Generate adds a synthetic source: element i is fn(i) at event time
// Start + i*Spacing, in order. Workers generate interleaved shares, so event
// time advances evenly across them. For demos and benchmarks.
func Generate[T any](s Scope, name string, cfg GenerateConfig, fn func(i int64) T, opts ...StepOption) PCollection[T] {
	return GenerateEach(s, name, cfg, func() func(i int64) T { return fn }, opts...)
}

// GenerateEach is Generate for an element function with state of its own:
// each split (one per worker) calls newFn once and then calls only the
// function it returned, from one goroutine, so that function may keep
// unsynchronised state — a slab to allocate its elements from, a reused
// buffer.
func GenerateEach[T any](s Scope, name string, cfg GenerateConfig, newFn func() func(i int64) T, opts ...StepOption) PCollection[T] {
	if cfg.Spacing == 0 {
		cfg.Spacing = mtime.Millisecond
	}
	if cfg.Count < 0 || cfg.Rate < 0 {
		s.p.addErr(fmt.Errorf("step %q: count and rate must not be negative", s.fullName(name)))
		return PCollection[T]{}
	}
	sc := buildConfig(opts)
	if sc.urn == "" {
		sc.urn = "weir:source:generate"
	}
	bounded := cfg.Count > 0
	if sc.source == nil {
		sc.source = &graph.IOIdentity{Kind: "generate", Identity: s.fullName(name), Bounded: bounded}
	}
	return collectionOf[T](s.p, s.source(name, &generator[T]{cfg: cfg, newFn: newFn}, bounded, CoderOf[T](), sc))
}

// ---- Collect (tests and tools) ----

// Collected is one element gathered by Collect, with its metadata.
type Collected[T any] struct {
	Value  T
	Time   mtime.Time
	Window window.Window
	Pane   window.PaneInfo
}

// Collector gathers the elements written to a Collect sink.
type Collector[T any] struct {
	mu    sync.Mutex
	elems []Collected[T]
}

// Elements returns what was collected, in arrival order per worker.
func (c *Collector[T]) Elements() []Collected[T] {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Collected[T](nil), c.elems...)
}

// Values returns the collected values.
func (c *Collector[T]) Values() []T {
	es := c.Elements()
	out := make([]T, len(es))
	for i, e := range es {
		out[i] = e.Value
	}
	return out
}

// Sorted returns the collected elements ordered by less.
func (c *Collector[T]) Sorted(less func(a, b Collected[T]) bool) []Collected[T] {
	es := c.Elements()
	sort.SliceStable(es, func(i, j int) bool { return less(es[i], es[j]) })
	return es
}

func (c *Collector[T]) Write(_ context.Context, _ int, elems []contract.Element) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range elems {
		v, ok := e.Value.(T)
		if !ok {
			return fmt.Errorf("collect sink: got %T", e.Value)
		}
		c.elems = append(c.elems, Collected[T]{Value: v, Time: e.Time, Window: e.Window, Pane: e.Pane})
	}
	return nil
}

// Close implements contract.Sink.
func (c *Collector[T]) Close(context.Context) error { return nil }

// Collect adds a sink that keeps every element of in in memory.
func Collect[T any](s Scope, name string, in PCollection[T]) *Collector[T] {
	c := &Collector[T]{}
	Write(s, name, in, c, WithSinkIdentity("collect", s.fullName(name)))
	return c
}
