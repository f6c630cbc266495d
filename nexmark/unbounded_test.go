package nexmark

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/runner/contract"
)

// cancelAfter counts bids and cancels the run once it has seen n.
type cancelAfter struct {
	n      int64
	seen   atomic.Int64
	cancel context.CancelFunc
}

func (c *cancelAfter) Write(_ context.Context, _ int, elems []contract.Element) error {
	if c.seen.Add(int64(len(elems))) >= c.n {
		c.cancel()
	}
	return nil
}

func (c *cancelAfter) Close(context.Context) error { return nil }

// TestUnboundedSource: without numEvents the source does not end; a
// windowed query over it produces results until the run is cancelled.
func TestUnboundedSource(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := weir.NewPipeline()
	s := p.Root()
	events, err := Read(s, "Events", Config{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Graph().Collection(events.ID()).Bounded {
		t.Fatal("a source without numEvents is bounded")
	}
	// q7 over 1 s windows: one result (or a few tied) per window, so the
	// sink sees results only as the watermark passes windows.
	sink := &cancelAfter{n: 20, cancel: cancel}
	weir.Write(s, "Out", Query7(s, events, Config{WindowSizeSec: 1, WindowPeriodSec: 1}), sink)
	_, err = weir.Run(ctx, p, weir.RunOptions{NumWorkers: 2})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("run ended with %v, want it cancelled", err)
	}
	if got := sink.seen.Load(); got < 20 {
		t.Errorf("saw %d results before the cancel, want at least 20", got)
	}
}
