package weir_test

import (
	"context"
	"sync"
	"testing"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// fixtureEvents is the reference fixture's stream (docs/ARCHITECTURE.md): the last +100 (at 00:02) arrives
// when the watermark (00:06:01) has passed [00:00, 00:05) plus its minute of
// allowed lateness.
func fixtureEvents() []weir.TestEvent[txn] {
	return []weir.TestEvent[txn]{
		weir.AddElements(tv("NORTH", 250, "00:01:00"), tv("NORTH", 175, "00:03:00")),
		weir.AdvanceWatermark[txn](at("00:05:00")),
		weir.AdvanceWatermark[txn](at("00:05:20")),
		weir.AddElements(tv("NORTH", 50, "00:04:00")),
		weir.AddElements(tv("NORTH", 30, "00:05:00")),
		weir.AdvanceWatermark[txn](at("00:06:01")),
		weir.AddElements(tv("NORTH", 100, "00:02:00")),
	}
}

func fixtureKVs(s weir.Scope) weir.PCollection[weir.KV[string, int64]] {
	in := weir.TestStream(s, "Events", fixtureEvents())
	late := window.AfterCount(1)
	w := weir.FixedWindows(5 * mtime.Minute)
	w.Trigger = window.AfterWatermark(nil, &late)
	w.Accumulation = window.Accumulating
	w.AllowedLateness = mtime.Minute
	windowed := weir.WindowInto(s, "Window", in, w)
	return weir.Map(s, "Key", windowed, func(t txn) weir.KV[string, int64] { return weir.KV[string, int64]{Key: t.Region, Value: t.Cents} })
}

// checkTooLate checks that rjs is the fixture's late +100 as a too_late
// reject of step, with its window and the watermark it arrived at.
func checkTooLate(t *testing.T, what, step string, rjs []contract.Reject) {
	t.Helper()
	if len(rjs) != 1 {
		t.Fatalf("%s: %d late rejects %+v, want 1", what, len(rjs), rjs)
	}
	rj := rjs[0]
	if rj.Step != step || rj.Reason != contract.ReasonTooLate || rj.Element.(weir.KV[string, int64]).Value != 100 {
		t.Errorf("%s: reject %+v, want the +100 as too_late of %s", what, rj, step)
	}
	if rj.Late == nil || rj.Late.Window != (window.Window{Start: at("00:00:00"), End: at("00:05:00")}) || rj.Late.Watermark != at("00:06:01") {
		t.Errorf("%s: lateness %+v, want window [00:00, 00:05) at watermark 00:06:01", what, rj.Late)
	}
}

// TestLateElementsAreData: the fixture's late +100 is dropped from the
// aggregation (the committed total stays 475) and counted; with an error
// output it arrives there as a too_late reject with its window and the
// watermark; without one, it goes to the dead-letter hook when one is set;
// with neither it is only counted, and the run succeeds.
func TestLateElementsAreData(t *testing.T) {
	totals := func(c *weir.Collector[weir.KV[string, int64]]) []int64 {
		var out []int64
		for _, e := range c.Sorted(func(a, b weir.Collected[weir.KV[string, int64]]) bool {
			if a.Window.Start != b.Window.Start {
				return a.Window.Start < b.Window.Start
			}
			return a.Pane.Index < b.Pane.Index
		}) {
			out = append(out, e.Value.Value)
		}
		return out
	}
	for _, workers := range []int{1, 2} {
		// Error output.
		p := weir.NewPipeline()
		s := p.Root()
		sums := weir.CombinePerKey(s, "Sum", fixtureKVs(s), weir.Sum[int64](), weir.WithErrorOutput("late"))
		got := weir.Collect(s, "Out", sums)
		late := weir.Collect(s, "Late", weir.ErrorOutput(sums))
		res, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: workers})
		if err != nil {
			t.Fatal(err)
		}
		if tt := totals(got); len(tt) != 3 || tt[0] != 425 || tt[1] != 475 || tt[2] != 30 {
			t.Errorf("workers=%d: panes %v, want 425 475 30", workers, tt)
		}
		checkTooLate(t, "error output", "Sum", late.Values())
		if m := res.Step("Sum"); m.DroppedLateElements != 1 {
			t.Errorf("workers=%d: dropped_late_elements %d, want 1", workers, m.DroppedLateElements)
		}

		// Dead-letter hook.
		p = weir.NewPipeline()
		s = p.Root()
		got = weir.Collect(s, "Out", weir.CombinePerKey(s, "Sum", fixtureKVs(s), weir.Sum[int64]()))
		var mu sync.Mutex
		var dead []contract.Reject
		res, err = weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: workers, DeadLetter: func(_ context.Context, r contract.Reject) error {
			mu.Lock()
			defer mu.Unlock()
			dead = append(dead, r)
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		checkTooLate(t, "dead letter", "Sum", dead)
		if tt := totals(got); len(tt) != 3 || tt[1] != 475 {
			t.Errorf("workers=%d: panes %v, want 425 475 30", workers, tt)
		}
		if m := res.Step("Sum"); m.DroppedLateElements != 1 || m.Rejects != 0 {
			t.Errorf("workers=%d: dropped_late_elements %d rejects %d, want 1 and 0", workers, m.DroppedLateElements, m.Rejects)
		}
	}
}

// TestLateElementsOfStatefulStep: a stateful step routes the elements that
// arrive after their window expired the same way.
func TestLateElementsOfStatefulStep(t *testing.T) {
	p := weir.NewPipeline()
	s := p.Root()
	sum := weir.ValueState[int64]{ID: "sum"}
	out := weir.StatefulParDo(s, "Running", fixtureKVs(s), weir.StatefulFn[string, int64, int64]{
		State: []weir.StateDecl{sum},
		Process: func(c *weir.StateContext[string, int64], v int64) error {
			n, _ := sum.Read(c)
			sum.Write(c, n+v)
			c.Output(n + v)
			return nil
		},
	}, weir.WithErrorOutput("late"))
	got := weir.Collect(s, "Out", out)
	late := weir.Collect(s, "Late", weir.ErrorOutput(out))
	res, err := weir.Run(context.Background(), p, weir.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkTooLate(t, "stateful", "Running", late.Values())
	if n := len(got.Values()); n != 4 {
		t.Errorf("%d outputs, want the 4 elements on time", n)
	}
	if m := res.Step("Running"); m.DroppedLateElements != 1 {
		t.Errorf("dropped_late_elements %d, want 1", m.DroppedLateElements)
	}
}
