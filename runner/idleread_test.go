package runner_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/runner/contract"
)

// idleSource is an unbounded source that never has input. Its split's
// ReadIdle waits until its ctx is done: only the worker cutting the wait
// short ends it.
type idleSource struct {
	idleReads, interrupted atomic.Int64
}

func (s *idleSource) Split(context.Context, int) ([]contract.SourceSplit, error) {
	return []contract.SourceSplit{&idleSplit{src: s}}, nil
}

type idleSplit struct{ src *idleSource }

func (s *idleSplit) Read(context.Context, []contract.Element) (contract.ReadResult, error) {
	return contract.ReadResult{}, nil
}

func (s *idleSplit) ReadIdle(ctx context.Context, _ []contract.Element) (contract.ReadResult, error) {
	s.src.idleReads.Add(1)
	<-ctx.Done()
	s.src.interrupted.Add(1)
	return contract.ReadResult{}, ctx.Err()
}

func (s *idleSplit) Close() error { return nil }

// TestIdleReadCutShortByWork: a worker whose only split is idle lets it
// wait (contract.IdleReader) and cuts the wait short when it has work —
// a checkpoint and a drain complete although the split never returns by
// itself.
func TestIdleReadCutShortByWork(t *testing.T) {
	src := &idleSource{}
	p := weir.NewPipeline()
	s := p.Root()
	in := weir.Read[int64](s, "Idle", src, false)
	weir.Collect(s, "Out", in)
	x, err := runner.Start(context.Background(), p.Program(), runner.Options{NumWorkers: 1, Checkpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { x.Cancel(); <-x.Done() }()
	if !await.Until(20*time.Second, 5*time.Millisecond, func() bool { return src.idleReads.Load() > 0 }) {
		t.Fatal("the idle split was never read with ReadIdle")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 3 {
		if _, err := x.Checkpoint(ctx); err != nil {
			t.Fatalf("checkpoint %d while the split waits: %v", i+1, err)
		}
	}
	if src.interrupted.Load() == 0 {
		t.Error("no idle read was cut short")
	}
	x.Drain()
	select {
	case <-x.Done():
	case <-ctx.Done():
		t.Fatal("the drain did not end the execution while its split waited")
	}
	if _, err := x.Wait(); err != nil {
		t.Fatal(err)
	}
}
