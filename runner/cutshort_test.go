package runner_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner"
)

// hourlySum sums a generated stream (one element a second of event time
// from 00:00) in hourly windows; reached is closed once the source has
// generated after elements. count 0 generates without end.
func hourlySum(count, after int64) (p *weir.Pipeline, out *weir.Collector[kv], reached <-chan struct{}) {
	p = weir.NewPipeline()
	s := p.Root()
	ch := make(chan struct{})
	var generated atomic.Int64
	gen := weir.Generate(s, "Gen", weir.GenerateConfig{Count: count, Rate: 50000, Start: clock("00:00:00"), Spacing: mtime.Second},
		func(i int64) kv {
			if generated.Add(1) == after {
				close(ch)
			}
			return kv{Key: "k", Value: 1}
		})
	w := weir.WindowInto(s, "Window", gen, weir.FixedWindows(mtime.Hour))
	return p, weir.Collect(s, "Out", weir.CombinePerKey(s, "Sum", w, weir.Sum[int64]())), ch
}

// TestDrainMarksOpenWindowsCutShort: a drain's last pane for a window the
// watermark had not passed is marked cut short; a window that fired on time
// before the drain is not, and neither is any pane of a run whose input
// simply ended.
func TestDrainMarksOpenWindowsCutShort(t *testing.T) {
	for _, workers := range []int{1, 2} {
		// 5,000 seconds of event time: the 00:00 window is complete, the
		// 01:00 window open when the drain comes.
		p, out, reached := hourlySum(0, 5000)
		x, err := runner.Start(context.Background(), p.Program(), runner.Options{NumWorkers: workers})
		if err != nil {
			t.Fatal(err)
		}
		<-reached
		x.Drain()
		select {
		case <-x.Done():
		case <-time.After(30 * time.Second):
			t.Fatal("drain did not end the execution")
		}
		if _, err := x.Wait(); err != nil {
			t.Fatalf("drain: %v", err)
		}
		got := map[mtime.Time]bool{}
		for _, e := range out.Elements() {
			got[e.Window.Start] = e.Pane.CutShort
		}
		if cut, ok := got[clock("00:00:00")]; !ok || cut {
			t.Errorf("workers %d: the 00:00 window (complete before the drain): fired %v, cut short %v; want fired, not cut short", workers, ok, cut)
		}
		last := mtime.MinTimestamp
		for start := range got {
			last = mtime.Max(last, start)
		}
		if last < clock("01:00:00") {
			t.Fatalf("workers %d: no window after 00:00 fired: %v", workers, got)
		}
		if !got[last] {
			t.Errorf("workers %d: the drained open window %s is not marked cut short", workers, last)
		}
	}
	p, out, _ := hourlySum(5000, 1)
	if _, err := runner.Run(context.Background(), p.Program(), runner.Options{NumWorkers: 2}); err != nil {
		t.Fatal(err)
	}
	if len(out.Elements()) != 2 {
		t.Fatalf("bounded run fired %d panes, want 2", len(out.Elements()))
	}
	for _, e := range out.Elements() {
		if e.Pane.CutShort {
			t.Errorf("bounded run: window %s marked cut short although its input ended", e.Window)
		}
	}
}

// TestPartialBeforeMarksEarlierWindows: with Options.PartialBefore inside
// the 01:00 window, the panes of the windows that began before it (00:00
// and 01:00) are cut short and later ones are not.
func TestPartialBeforeMarksEarlierWindows(t *testing.T) {
	p, out, _ := hourlySum(3*3600, 1)
	if _, err := runner.Run(context.Background(), p.Program(), runner.Options{NumWorkers: 2, PartialBefore: clock("01:20:00")}); err != nil {
		t.Fatal(err)
	}
	want := map[mtime.Time]bool{clock("00:00:00"): true, clock("01:00:00"): true, clock("02:00:00"): false}
	got := map[mtime.Time]bool{}
	for _, e := range out.Elements() {
		got[e.Window.Start] = e.Pane.CutShort
	}
	for start, cut := range want {
		if c, ok := got[start]; !ok || c != cut {
			t.Errorf("window %s: fired %v, cut short %v; want cut short %v", start, ok, c, cut)
		}
	}
}
