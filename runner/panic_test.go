package runner_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// panickySum is a sum whose AddInput panics on one input.
type panickySum struct{ on int64 }

func (panickySum) CreateAccumulator() int64 { return 0 }
func (f panickySum) AddInput(acc, in int64) int64 {
	if in == f.on {
		var none []int64
		return none[in] // an index out of range: a runtime panic
	}
	return acc + in
}
func (panickySum) MergeAccumulators(a, b int64) int64 { return a + b }
func (panickySum) ExtractOutput(acc int64) int64      { return acc }

// TestPanicFailsTheExecution: code that panics in a step — a stateless
// step on the source's worker, or a keyed step's accumulator on another
// worker — fails its execution with a PanicError that names the step and
// the function that panicked, and aborts the sinks; the process (with
// every other execution it runs) goes on.
func TestPanicFailsTheExecution(t *testing.T) {
	for _, tc := range []struct {
		name      string
		workers   int
		build     func(s weir.Scope, in weir.PCollection[int64]) weir.PCollection[int64]
		wantStep  string
		wantWhere string
	}{
		{
			name: "a ParDo", workers: 1, wantStep: "Check", wantWhere: "TestPanicFailsTheExecution",
			build: func(s weir.Scope, in weir.PCollection[int64]) weir.PCollection[int64] {
				return weir.ParDo(s, "Check", in, func(c *weir.Context, v int64, emit func(int64)) error {
					if v == 700 {
						panic(fmt.Sprintf("element %d", v))
					}
					emit(v)
					return nil
				})
			},
		},
		{
			name: "a Combine on several workers", workers: 2, wantStep: "Sum", wantWhere: "panickySum.AddInput",
			build: func(s weir.Scope, in weir.PCollection[int64]) weir.PCollection[int64] {
				kv := weir.Map(s, "Key", in, func(v int64) weir.KV[int64, int64] { return weir.KV[int64, int64]{Key: v % 7, Value: v} })
				sums := weir.CombinePerKey(s, "Sum", kv, weir.CombineFn[int64, int64, int64](panickySum{on: 900}))
				return weir.Map(s, "Value", sums, func(kv weir.KV[int64, int64]) int64 { return kv.Value })
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := weir.NewPipeline()
			s := p.Root()
			vals := make([]int64, 1000)
			for i := range vals {
				vals[i] = int64(i)
			}
			sink := &abortingSink{}
			weir.Write(s, "Out", tc.build(s, weir.Create(s, "In", vals)), contract.Sink(sink))
			_, err := runner.Run(context.Background(), p.Program(), runner.Options{NumWorkers: tc.workers})
			var pe *runner.PanicError
			if !errors.As(err, &pe) {
				t.Fatalf("run: %v, want a PanicError", err)
			}
			if pe.Step != tc.wantStep || !strings.Contains(pe.Where, tc.wantWhere) {
				t.Errorf("panic in step %q at %q, want step %q at %q", pe.Step, pe.Where, tc.wantStep, tc.wantWhere)
			}
			if msg := err.Error(); !strings.Contains(msg, "panicked") || !strings.Contains(msg, tc.wantStep) {
				t.Errorf("message %q names neither the panic nor the step", msg)
			}
			if len(pe.Stack) == 0 {
				t.Error("no stack")
			}
			if sink.closes.Load() != 0 || sink.aborts.Load() != 1 {
				t.Errorf("sink closed %d and aborted %d times, want 0 and 1", sink.closes.Load(), sink.aborts.Load())
			}
		})
	}
}

// panickyCommit is a transactional sink whose Commit panics.
type panickyCommit struct{ *txSink }

func (panickyCommit) Commit(context.Context, uint64, [][]byte) error { panic("commit broke") }

// TestPanicInCommit: a transactional sink whose Commit panics — called
// from the job service's goroutine, not a worker's — makes Commit return
// a PanicError naming the sink, and the process goes on.
func TestPanicInCommit(t *testing.T) {
	src := &seqSource{n: 100, splits: 1}
	src.gate.open()
	p := weir.NewPipeline()
	s := p.Root()
	in := weir.Read[kv](s, "Seq", src, true)
	weir.Write(s, "Out", in, contract.Sink(panickyCommit{newTxSink()}))
	x, err := runner.Start(context.Background(), p.Program(), runner.Options{Checkpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { x.Cancel(); x.Wait() }()
	cp, err := x.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	err = x.Commit(context.Background(), cp)
	var pe *runner.PanicError
	if !errors.As(err, &pe) || pe.Step != "Out" || !strings.Contains(err.Error(), "commit broke") {
		t.Fatalf("commit: %v, want a PanicError of step Out", err)
	}
}

// oneThenIdle is an unbounded source with one element, then none (the
// run goes on until cancelled).
type oneThenIdle struct{}

func (oneThenIdle) Split(context.Context, int) ([]contract.SourceSplit, error) {
	return []contract.SourceSplit{&oneThenIdleSplit{}}, nil
}

type oneThenIdleSplit struct{ sent bool }

func (s *oneThenIdleSplit) Read(_ context.Context, buf []contract.Element) (contract.ReadResult, error) {
	if s.sent {
		return contract.ReadResult{}, nil
	}
	s.sent = true
	buf[0] = contract.Element{Value: kv{Key: "a", Value: 1}, Window: window.Global}
	return contract.ReadResult{N: 1}, nil
}

func (s *oneThenIdleSplit) Close() error { return nil }

// TestPanicInProcessingTimer: a processing-time timer's code, which the
// worker runs when the wall clock passes the timer (not as part of an
// element's processing), panics: the execution fails with a PanicError
// naming the timer's step.
func TestPanicInProcessingTimer(t *testing.T) {
	p := weir.NewPipeline()
	s := p.Root()
	in := weir.Read[kv](s, "In", oneThenIdle{}, false)
	tick := weir.ProcessingTimer("tick")
	out := weir.StatefulParDo(s, "Tick", in, weir.StatefulFn[string, int64, int64]{
		Timers: []weir.TimerSpec{tick},
		Process: func(c *weir.StateContext[string, int64], v int64) error {
			tick.Set(c, c.Now().Add(5*mtime.Millisecond))
			return nil
		},
		OnTimer: func(*weir.StateContext[string, int64], contract.Timer) error {
			panic("the timer broke")
		},
	})
	weir.Collect(s, "Out", out)
	x, err := runner.Start(context.Background(), p.Program(), runner.Options{NumWorkers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Cancel()
	_, err = x.Wait()
	var pe *runner.PanicError
	if !errors.As(err, &pe) || pe.Step != "Tick" {
		t.Fatalf("run: %v, want a PanicError of step Tick", err)
	}
}
