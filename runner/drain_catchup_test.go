package runner_test

import (
	"context"
	"testing"
	"time"

	"github.com/weir-dev/weir/runner/contract"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/window"
)

// catchUpSource is one split re-reading n elements (one per Read, key "k",
// value i+1, event time i seconds) that an earlier job had read: it is
// catching up (runner.CatchingUpSplit) until it has read them, its
// watermark −∞ meanwhile, then it waits for more that never come. The Read
// after the first `gate` elements waits until gate is closed.
type catchUpSource struct {
	n, at int
	gate  <-chan struct{}
	read  int
}

func (c *catchUpSource) Split(context.Context, int) ([]contract.SourceSplit, error) {
	return []contract.SourceSplit{c}, nil
}

func (c *catchUpSource) CatchingUp() bool { return c.read < c.n }

func (c *catchUpSource) Read(ctx context.Context, buf []contract.Element) (contract.ReadResult, error) {
	if c.read == c.at {
		select {
		case <-c.gate:
		case <-ctx.Done():
			return contract.ReadResult{Watermark: mtime.MinTimestamp}, ctx.Err()
		}
	}
	if c.read >= c.n {
		select {
		case <-time.After(time.Millisecond): // nothing new: an unbounded source waits
		case <-ctx.Done():
			return contract.ReadResult{}, ctx.Err()
		}
		return contract.ReadResult{Watermark: mtime.Time(int64(c.n) * 1000)}, nil
	}
	buf[0] = contract.Element{Value: kv{Key: "k", Value: int64(c.read + 1)}, Time: mtime.Time(int64(c.read) * 1000), Window: window.Global, Pane: window.NoFiring}
	c.read++
	wm := mtime.MinTimestamp
	if c.read >= c.n {
		wm = mtime.Time(int64(c.n) * 1000)
	}
	return contract.ReadResult{N: 1, Watermark: wm}, nil
}

func (c *catchUpSource) Close() error { return nil }

// TestDrainFinishesCatchUp: a drain requested while a split is catching
// up (it re-reads what an earlier job had read, runner.CatchingUpSplit)
// reads the split on to the end of its catch-up before it moves the
// watermark to +∞: the drained window's one pane carries every re-read
// element, not the part read when the drain was asked for (the earlier
// job's total, which a partial pane would replace in a sink).
func TestDrainFinishesCatchUp(t *testing.T) {
	const n, at = 50, 10
	gate := make(chan struct{})
	p := weir.NewPipeline()
	s := p.Root()
	src := weir.Read[kv](s, "Events", &catchUpSource{n: n, at: at, gate: gate}, false)
	w := weir.WindowInto(s, "Window", src, weir.FixedWindows(mtime.Hour))
	out := weir.Collect(s, "Out", weir.CombinePerKey(s, "Sum", w, weir.Sum[int64]()))
	x, err := runner.Start(context.Background(), p.Program(), runner.Options{HoldPanesAtMinWatermark: true})
	if err != nil {
		t.Fatal(err)
	}
	x.Drain() // while the split waits after `at` elements
	close(gate)
	select {
	case <-x.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the drain did not end the execution")
	}
	if _, err := x.Wait(); err != nil {
		t.Fatalf("drain: %v", err)
	}
	var panes []int64
	for _, e := range out.Elements() {
		panes = append(panes, e.Value.Value)
		if !e.Pane.IsLast {
			t.Errorf("pane %+v of the drained window is not last", e.Pane)
		}
	}
	if want := int64(n * (n + 1) / 2); len(panes) != 1 || panes[0] != want {
		t.Fatalf("panes %v, want one pane of %d (every re-read element)", panes, want)
	}
}
