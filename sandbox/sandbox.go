// Package sandbox runs a YAML pipeline in isolation over a recorded
// stretch of input (a Trace: elements and watermark moves), for a
// rehearsal of an update and for pipeline tests. Every source the trace
// covers is replaced by one that replays the trace, with its watermark
// moves exactly where they were recorded; every sink is replaced by one
// that captures the rows it receives (as diff rows, sorted on disk beyond
// memory); the rejects that would go to a job's dead-letter topic are
// captured as the "dead-letter" output. Nothing is acknowledged, no
// production sink is written and no job is touched: the pipeline is built
// with no broker connection and no database connection (yamlpipe's
// GraphOnly) and run in this process.
//
// It may import diff, graph, internal/jsonscan (the scan of a message's
// top-level numbers), io/files (the byte sizes of a trace's memory
// budget), io/pubsub (the typed nil broker a pipeline with
// Pub/Sub steps is built with, and its sources' decoding of recorded
// messages), mtime, row, runner, runner/contract, weir, window, yamlpipe,
// github.com/goccy/go-yaml (the tests: section of a pipeline file,
// tests.go) and the standard library. It must
// not import service, api or server: a job service, a CLI and a test
// harness use it alike.
package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/diff"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
	"github.com/weir-dev/weir/yamlpipe"
)

// DeadLetterOutput names the output that captures the rejects a job would
// send to its dead-letter topic (rejects of steps without an error output,
// late elements of keyed steps without one).
const DeadLetterOutput = "dead-letter"

// Options configure a sandboxed run. The zero value is usable.
type Options struct {
	// BaseDir resolves relative paths in the pipeline (default: the
	// current directory).
	BaseDir string
	// JinjaVariables render the pipeline when it is a Jinja template.
	JinjaVariables map[string]any
	// NameMapping maps the old pipeline's step names to this pipeline's
	// (--transform-name-mapping): the trace's sources and the captured
	// outputs are named in the old pipeline's names, so that renamed
	// steps compare with their old selves.
	NameMapping map[string]string
	// Workers is the number of workers (default 1).
	Workers int
	// TempDir holds the captured rows beyond MemoryRows (default
	// os.TempDir()).
	TempDir string
	// MemoryRows is how many captured rows stay in memory before sorted
	// runs go to disk (default diff.DefaultMemoryRows).
	MemoryRows int
	// Logger receives the run's logs (default: discarded).
	Logger *slog.Logger
	// State, when set, is the keyed state the run starts from (a job
	// snapshot's): StateSteps maps each of this pipeline's steps to the
	// State's step whose state it takes; steps not in StateSteps start
	// empty. The run then restores as a job created from the snapshot
	// would, with the runner's default key groups (a job's).
	State      *State
	StateSteps map[string]string
}

// Result is what one sandboxed run wrote. Close it to remove its files.
type Result struct {
	// Rows holds every captured row; Rows.Reader reads them sorted.
	Rows *diff.Sorter
	// Outputs describes each output (by its old name).
	Outputs map[string]diff.OutputInfo
	// Input counts the elements the trace fed; Rejected the rejects
	// captured (error outputs that reach a sink, and the dead-letter
	// output).
	Input    int64
	Rejected int64
	// InputSums and RejectedSums add each numeric top-level field of the
	// elements fed and of the rejected elements: with the outputs'
	// consumer-visible sums they check conservation of a quantity (input
	// amount = accepted total + rejected amount).
	InputSums    map[string]float64
	RejectedSums map[string]float64
	// Metrics are the run's step counters.
	Metrics *runner.Result
	// Duplicates counts the recorded messages the run's sources dropped
	// as duplicates of an ID seen within their dedupe window (id_attribute
	// or id_field), as the job's sources drop them; they are not in Input
	// or InputSums.
	Duplicates int64

	dropped *duplicates
}

// duplicates gathers what a run's sources dropped as duplicates: their
// count and the numeric fields' sums, taken out of the run's input. The
// sources' splits read concurrently: mu guards it.
type duplicates struct {
	mu   sync.Mutex
	n    int64
	sums map[string]float64
	flat flatSums
}

func (d *duplicates) add(data []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.n++
	d.flat.addMessageNumbers(d.sums, data)
}

// Side returns the result as one side of a comparison; Rows.Reader may be
// called once.
func (r *Result) Side() (diff.Side, error) {
	rd, err := r.Rows.Reader()
	if err != nil {
		return diff.Side{}, err
	}
	return diff.Side{Rows: rd, Outputs: r.Outputs}, nil
}

// Close removes the captured rows' files.
func (r *Result) Close() error {
	if r == nil || r.Rows == nil {
		return nil
	}
	return r.Rows.Close()
}

// ErrNoRecordedInput marks a pipeline the trace cannot feed: a Pub/Sub
// source the recorded stretch does not cover, a trace event for a source
// the pipeline does not have.
var ErrNoRecordedInput = errors.New("the recorded input does not match the pipeline's sources")

// Load builds a pipeline file for a sandboxed run: no broker, no database
// connection, outputs and rejects checked as a job's would be. Errors name
// file:line:column.
func Load(path string, src []byte, opts Options) (*weir.Pipeline, error) {
	return load(path, src, opts, nil)
}

// load is Load with a test case's taps (nil: none).
func load(path string, src []byte, opts Options, taps *yamlpipe.TestTaps) (*weir.Pipeline, error) {
	scratch, err := os.MkdirTemp(opts.TempDir, "weir-sandbox-")
	if err != nil {
		return nil, fmt.Errorf("creating a scratch directory: %w", err)
	}
	defer os.RemoveAll(scratch)
	job := &yamlpipe.JobEnv{Name: "rehearsal", ID: "rehearsal", Generation: 1, DataDir: scratch, Broker: (*pubsub.Broker)(nil)}
	return yamlpipe.Load(path, src, yamlpipe.Options{BaseDir: opts.BaseDir, Job: job, GraphOnly: true,
		JinjaVariables: opts.JinjaVariables, RenderJinja: true, LogOutput: io.Discard, TestTaps: taps})
}

// Run loads the pipeline in src (named path in errors) and runs it over
// trace, capturing every output. See the package documentation for what
// the sandbox replaces.
func Run(ctx context.Context, path string, src []byte, trace *Trace, opts Options) (*Result, error) {
	p, err := Load(path, src, opts)
	if err != nil {
		return nil, err
	}
	return RunPipeline(ctx, p, trace, opts)
}

// RunSpec is one run of RunAll: a pipeline file's text, its name in
// errors, and the run's options.
type RunSpec struct {
	Path string
	Src  []byte
	Opts Options
}

// RunAll runs every spec over trace at once (the runs share only the
// trace, which none changes) and returns their results in spec order. When
// a run fails, the others' results are closed and the first failure in
// spec order is returned, naming the run by its index.
func RunAll(ctx context.Context, trace *Trace, specs ...RunSpec) ([]*Result, error) {
	results, errs := make([]*Result, len(specs)), make([]error, len(specs))
	var wg sync.WaitGroup
	for i, sp := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = Run(ctx, sp.Path, sp.Src, trace, sp.Opts)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			for _, r := range results {
				r.Close()
			}
			return nil, &RunError{Index: i, Err: err}
		}
	}
	return results, nil
}

// RunError is a failed run of RunAll: its index among the specs.
type RunError struct {
	Index int
	Err   error
}

// Error names the run's error.
func (e *RunError) Error() string { return e.Err.Error() }

// Unwrap returns the run's error.
func (e *RunError) Unwrap() error { return e.Err }

// RunPipeline runs a pipeline built by Load over trace. It replaces the
// code of p's sources and sinks, so p is used once.
func RunPipeline(ctx context.Context, p *weir.Pipeline, trace *Trace, opts Options) (*Result, error) {
	prog := p.Program()
	g := prog.Graph
	oldName := map[string]string{}
	for o, n := range opts.NameMapping {
		oldName[n] = o
	}
	nameOf := func(step string) string {
		if o, ok := oldName[step]; ok {
			return o
		}
		return step
	}
	res := &Result{Rows: diff.NewSorter(opts.TempDir, opts.MemoryRows), Outputs: map[string]diff.OutputInfo{},
		InputSums: map[string]float64{}, RejectedSums: map[string]float64{}}
	ok := false
	defer func() {
		if !ok {
			res.Close()
		}
	}()
	if err := replaceSources(g, prog.Code, trace, opts.NameMapping, res); err != nil {
		return nil, err
	}
	cap := &capture{res: res, nameOf: nameOf}
	for _, s := range g.Steps {
		if s.Kind != graph.KindSink {
			continue
		}
		sk, err := newCaptureSink(g, s, nameOf(s.Name), cap)
		if err != nil {
			return nil, err
		}
		prog.Code[s.Name] = sk
		res.Outputs[sk.output] = sk.info
	}
	res.Outputs[DeadLetterOutput] = diff.OutputInfo{Mode: diff.ModeAppend}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ro := weir.RunOptions{NumWorkers: opts.Workers, Logger: logger, DeadLetter: func(_ context.Context, rj contract.Reject) error {
		r, err := cap.rejectRow(DeadLetterOutput, row.FromReject(rj))
		if err != nil {
			return err
		}
		return cap.add(r, true)
	}}
	if opts.State != nil {
		// Checkpoints makes the keyed steps read Restore.State; no
		// checkpoint is ever taken, and the capture sinks commit as they
		// write.
		ro.Checkpoints = true
		ro.Restore = &contract.Restore{State: stateView{s: opts.State, steps: opts.StateSteps}}
	}
	m, err := weir.Run(ctx, p, ro)
	if err != nil {
		return nil, fmt.Errorf("running the pipeline in the sandbox: %w", err)
	}
	res.Metrics = m
	if cap.err != nil {
		return nil, cap.err
	}
	// Every element of the trace was this run's input (one for a source
	// the pipeline lacks was refused when the sources were bound): the
	// sums are the trace's, computed once, after the run, so that runs
	// sharing the trace (RunAll) do not wait for them before starting.
	maps.Copy(res.InputSums, trace.inputSums())
	if d := res.dropped; d != nil && d.n > 0 {
		res.Duplicates = d.n
		res.Input -= d.n
		for k, v := range d.sums {
			res.InputSums[k] -= v
		}
	}
	ok = true
	return res, nil
}

// replaceSources binds the trace's elements and watermark moves to the
// source steps they were recorded for.
func replaceSources(g *graph.Pipeline, code map[string]any, trace *Trace, mapping map[string]string, res *Result) error {
	byName := map[string]*graph.Step{}
	var pubsubSources, candidates []string
	for _, s := range g.Steps {
		if s.Kind != graph.KindSource {
			continue
		}
		byName[s.Name] = s
		kind := ""
		if s.Source != nil {
			kind = s.Source.Kind
		}
		if kind == "pubsub" {
			pubsubSources = append(pubsubSources, s.Name)
		}
		if kind != "create" && kind != "test_stream" && kind != "generate" {
			candidates = append(candidates, s.Name)
		}
	}
	def := ""
	switch {
	case len(pubsubSources) == 1:
		def = pubsubSources[0]
	case len(pubsubSources) == 0 && len(candidates) == 1:
		def = candidates[0]
	}
	srcs := map[string]*traceSource{}
	dropped := &duplicates{sums: map[string]float64{}}
	res.dropped = dropped
	// The trace is read from here on: no event is appended any more.
	trace.log.seal()
	var buf []byte
	for i := range trace.Len() {
		e, hasMessage, b, err := trace.log.head(i, buf)
		if err != nil {
			return err
		}
		buf = b
		ev := &e
		name := ev.Source
		if name == "" {
			if def == "" {
				return fmt.Errorf("%w: %s:%d names no source, and the pipeline has %d sources that could read it (%s): give each event a \"source\"",
					ErrNoRecordedInput, ev.Origin, ev.Offset, len(candidates), strings.Join(candidates, ", "))
			}
			name = def
		} else if n, ok := mapping[name]; ok {
			name = n
		}
		s := byName[name]
		if s == nil {
			return fmt.Errorf("%w: %s:%d is for source %q, which the pipeline does not have (its sources: %s)",
				ErrNoRecordedInput, ev.Origin, ev.Offset, name, strings.Join(sortedKeys(byName), ", "))
		}
		ts := srcs[name]
		if ts == nil && hasMessage {
			ps, ok := code[name].(*pubsub.Source)
			if !ok {
				return fmt.Errorf("%w: %s:%d is a Pub/Sub message for step %q, which does not read Pub/Sub", ErrNoRecordedInput, ev.Origin, ev.Offset, name)
			}
			ts = &traceSource{step: name, pubsub: ps, trace: trace, dropped: dropped}
			srcs[name] = ts
		}
		if ts == nil {
			sch, err := sourceSchema(g, s)
			if err != nil {
				return err
			}
			ts = &traceSource{step: name, schema: sch, trace: trace}
			srcs[name] = ts
		}
		if i > math.MaxInt32 {
			return fmt.Errorf("%w: the recorded stretch has more than %d events", ErrNoRecordedInput, math.MaxInt32)
		}
		ts.events = append(ts.events, int32(i))
		ts.watermark = append(ts.watermark, ev.IsWatermark)
		if !ev.IsWatermark && !ev.SeenOnly {
			res.Input++
		}
	}
	for _, name := range pubsubSources {
		if srcs[name] == nil {
			return fmt.Errorf("%w: source %q reads Pub/Sub, and the recorded stretch has nothing for it", ErrNoRecordedInput, name)
		}
	}
	for name, ts := range srcs {
		code[name] = ts
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// sourceSchema returns the row schema of a source step's main output.
func sourceSchema(g *graph.Pipeline, s *graph.Step) (*row.Schema, error) {
	c := g.Collection(s.Outputs[graph.MainTag])
	if c == nil {
		return nil, fmt.Errorf("source %q has no main output", s.Name)
	}
	sch, err := row.SchemaFromCoder(c.Coder)
	if err != nil {
		return nil, fmt.Errorf("source %q: its elements are not rows the sandbox can build: %w", s.Name, err)
	}
	return sch, nil
}

// traceSource replays one source's part of a trace: one split, its
// elements in recorded order, its watermark moved where it was recorded.
// An element is decoded when the split reads it, not before: the runs of
// a rehearsal share the trace, and none holds the decoded stretch.
type traceSource struct {
	step   string
	schema *row.Schema
	// pubsub, for recorded Pub/Sub messages, is the pipeline's own source,
	// which decodes them.
	pubsub *pubsub.Source
	// trace is the shared, read-only trace; events index its events that
	// are this source's, in order.
	trace  *Trace
	events []int32
	// watermark marks the events of events that move the watermark, so
	// that a read stops before one without decoding it.
	watermark []bool
	// dropped takes the run's dropped duplicates (Pub/Sub sources with
	// message IDs).
	dropped *duplicates
}

// element builds the element of a recorded value: a row of the source's
// schema, or a schema_mismatch reject (as the source would have rejected
// it) when the value does not fit.
func (t *traceSource) element(ev *Event) contract.Element {
	if ev.Message != nil && t.pubsub != nil {
		return t.pubsub.DecodeRecorded(*ev.Message)
	}
	pos := &contract.SourcePos{Source: ev.Origin, Offset: ev.Offset}
	r := row.New(t.schema)
	for i, f := range t.schema.Fields {
		v, err := row.FromJSON(ev.Value[f.Name], f.Type)
		if err != nil {
			rj := contract.Reject{Element: ev.Value, Step: t.step, Reason: "schema_mismatch",
				Message: fmt.Sprintf("field %s: %v", f.Name, err), Source: pos}
			return contract.Element{Value: rj, Time: ev.Time, Window: window.Global, Pane: window.NoFiring, Source: pos}
		}
		r.Values[i] = v
	}
	return contract.Element{Value: r, Time: ev.Time, Window: window.Global, Pane: window.NoFiring, Source: pos}
}

// Split implements contract.Source: a trace is one split, so its order
// (and its watermark moves between elements) is kept.
func (t *traceSource) Split(context.Context, int) ([]contract.SourceSplit, error) {
	sp := &traceSplit{t: t, wm: mtime.MinTimestamp}
	if t.pubsub != nil {
		sp.dd = t.pubsub.NewDeduper()
	}
	return []contract.SourceSplit{sp}, nil
}

type traceSplit struct {
	t  *traceSource
	i  int
	wm mtime.Time
	// dd drops duplicate messages as the pipeline's source would (nil:
	// it has no message IDs).
	dd *pubsub.Deduper
	// buf is scratch space for events read back from disk; msg holds the
	// message of the event being read.
	buf []byte
	msg pubsub.Message
}

// event decodes the split's event j (its message into s.msg).
func (s *traceSplit) event(j int) (Event, error) {
	ev, buf, err := s.t.trace.log.eventInto(int(s.t.events[j]), s.buf, &s.msg)
	s.buf = buf
	return ev, err
}

// Read returns the elements up to the next watermark move, or the move.
func (s *traceSplit) Read(ctx context.Context, buf []contract.Element) (contract.ReadResult, error) {
	if err := ctx.Err(); err != nil {
		return contract.ReadResult{}, err
	}
	idx := s.t.events
	if s.i < len(idx) && s.t.watermark[s.i] {
		ev, err := s.event(s.i)
		if err != nil {
			return contract.ReadResult{}, err
		}
		if w := ev.Watermark; w > s.wm {
			s.wm = w
		}
		s.i++
		return contract.ReadResult{Watermark: s.wm}, nil
	}
	n := 0
	for s.i < len(idx) && n < len(buf) && !s.t.watermark[s.i] {
		ev, err := s.event(s.i)
		if err != nil {
			return contract.ReadResult{}, err
		}
		s.i++
		if ev.Message != nil {
			switch {
			case ev.SeenOnly:
				if s.dd != nil {
					s.dd.Remember(ev.Message)
				}
				continue
			case s.dd != nil && s.dd.Duplicate(ev.Message):
				s.t.dropped.add(ev.Message.Data)
				continue
			}
		}
		buf[n] = s.t.element(&ev)
		n++
	}
	if n == 0 {
		if s.i < len(idx) {
			// Only skipped messages so far, a watermark move next.
			return s.Read(ctx, buf)
		}
		return contract.ReadResult{Watermark: mtime.MaxTimestamp, Done: true}, nil
	}
	return contract.ReadResult{N: n, Watermark: s.wm}, nil
}

// Close implements contract.SourceSplit.
func (s *traceSplit) Close() error { return nil }

// capture collects every captured row of one run. Sinks write from several
// workers: mu guards the sorter, the reject count and the first error.
type capture struct {
	res    *Result
	nameOf func(string) string
	mu     sync.Mutex
	err    error
}

func (c *capture) add(r diff.Row, reject bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if reject {
		c.res.Rejected++
	}
	if err := c.res.Rows.Add(r); err != nil {
		if c.err == nil {
			c.err = err
		}
		return err
	}
	return nil
}

// decodeObject returns a message's JSON object payload data (nil when it
// is not one), numbers as json.Number.
func decodeObject(data []byte) map[string]any {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		return nil
	}
	return v
}

// addNumbers adds the numeric fields of v to sums.
func addNumbers(sums map[string]float64, v map[string]any) {
	for k, x := range v {
		if n, ok := x.(json.Number); ok {
			if f, err := n.Float64(); err == nil {
				sums[k] += f
			}
		}
	}
}

// rowMap returns a row as a JSON object decoded with UseNumber.
func rowMap(r *row.Row) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(row.AppendJSON(nil, r)))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("capturing a row: %w", err)
	}
	return m, nil
}

// rejectRow converts an error-output row ({element, error, source}) into
// a diff row keyed by where the element came from.
func (c *capture) rejectRow(output string, r *row.Row) (diff.Row, error) {
	m, err := rowMap(r)
	if err != nil {
		return diff.Row{}, err
	}
	if el, ok := m["element"].(map[string]any); ok {
		c.mu.Lock()
		addNumbers(c.res.RejectedSums, el)
		c.mu.Unlock()
	}
	errs, _ := m["error"].(map[string]any)
	reason, _ := errs["reason"].(string)
	step, _ := errs["step"].(string)
	if reason == "" {
		reason = "unknown"
	}
	keySrc := m["source"]
	if keySrc == nil {
		keySrc = m["element"]
	}
	key, err := diff.CanonicalJSON(keySrc)
	if err != nil {
		return diff.Row{}, err
	}
	val, err := diff.CanonicalJSON(map[string]any{"element": m["element"], "step": c.nameOf(step), "message": errs["message"]})
	if err != nil {
		return diff.Row{}, err
	}
	return diff.Row{Output: output, Key: key, Window: "global", Timing: diff.TimingUnknown, Value: val, Reject: reason}, nil
}

// captureSink captures one sink step's rows.
type captureSink struct {
	output  string
	info    diff.OutputInfo
	keys    []string
	strip   map[string]bool
	rejects bool
	cap     *capture
}

// newCaptureSink describes how sink step s is consumed: its mode (a SQL
// sink's upsert by key, otherwise append), its key (the SQL sink's key,
// else the key of the keyed step feeding it, else the whole row) and
// whether its panes accumulate.
func newCaptureSink(g *graph.Pipeline, s *graph.Step, output string, cap *capture) (*captureSink, error) {
	var in *graph.Collection
	for _, id := range s.Inputs {
		in = g.Collection(id)
	}
	if in == nil {
		return nil, fmt.Errorf("sink %q has no input", s.Name)
	}
	sk := &captureSink{output: output, cap: cap, info: diff.OutputInfo{Mode: diff.ModeAppend,
		Accumulating: in.Windowing.Accumulation == window.Accumulating}}
	if sch, err := row.SchemaFromCoder(in.Coder); err == nil && sch.Equal(row.RejectSchema()) {
		sk.rejects = true
		return sk, nil
	}
	if s.Fn != nil && s.Fn.URN == "weir:yaml:WriteToSql" && len(s.Fn.Config) > 0 {
		var cfg struct {
			Key  any    `json:"key"`
			Mode string `json:"mode"`
		}
		if err := json.Unmarshal(s.Fn.Config, &cfg); err != nil {
			return nil, fmt.Errorf("sink %q: reading its config: %w", s.Name, err)
		}
		switch k := cfg.Key.(type) {
		case string:
			sk.keys = []string{k}
		case []any:
			for _, x := range k {
				sk.keys = append(sk.keys, fmt.Sprint(x))
			}
		}
		if len(sk.keys) > 0 && !strings.EqualFold(cfg.Mode, string(diff.ModeAppend)) {
			sk.info.Mode = diff.ModeUpsert
		}
	}
	if prod := g.Step(in.Producer); prod != nil && (prod.Kind == graph.KindCombinePerKey || prod.Kind == graph.KindGroupByKey) {
		if len(sk.keys) == 0 && prod.KeyCoder != nil {
			for _, f := range prod.KeyCoder.Fields {
				sk.keys = append(sk.keys, f.Name)
			}
		}
		// A windowed combine's rows repeat their window and pane, which
		// the captured row carries as its own.
		sk.strip = map[string]bool{"window_start": true, "window_end": true, "pane": true}
	}
	return sk, nil
}

// Write implements contract.Sink.
func (k *captureSink) Write(_ context.Context, _ int, elems []contract.Element) error {
	for i := range elems {
		r, err := k.row(&elems[i])
		if err != nil {
			return fmt.Errorf("sink %q: %w", k.output, err)
		}
		if err := k.cap.add(r, k.rejects); err != nil {
			return err
		}
	}
	return nil
}

// Close implements contract.Sink.
func (k *captureSink) Close(context.Context) error { return nil }

func (k *captureSink) row(e *contract.Element) (diff.Row, error) {
	rw, ok := row.AsRow(e.Value)
	if !ok {
		return diff.Row{}, fmt.Errorf("an element of type %T is not a row", e.Value)
	}
	if k.rejects {
		return k.cap.rejectRow(k.output, rw)
	}
	m, err := rowMap(rw)
	if err != nil {
		return diff.Row{}, err
	}
	var keyv any = m
	val := map[string]any{}
	if len(k.keys) > 0 {
		km := map[string]any{}
		for _, f := range k.keys {
			km[f] = m[f]
		}
		for f, v := range m {
			if _, isKey := km[f]; !isKey && !k.strip[f] {
				val[f] = v
			}
		}
		keyv = km
	} else {
		for f := range k.strip {
			delete(m, f)
		}
	}
	key, err := diff.CanonicalJSON(keyv)
	if err != nil {
		return diff.Row{}, err
	}
	value, err := diff.CanonicalJSON(val)
	if err != nil {
		return diff.Row{}, err
	}
	return diff.Row{Output: k.output, Key: key, Window: FormatWindow(e.Window), PaneIndex: e.Pane.Index,
		Timing: e.Pane.Timing.String(), Value: value}, nil
}

// FormatWindow renders a window as diff rows carry it: start/end in RFC
// 3339 (sorting by time), or "global".
func FormatWindow(w window.Window) string {
	if w.IsGlobal() {
		return "global"
	}
	return w.Start.Format() + "/" + w.End.Format()
}
