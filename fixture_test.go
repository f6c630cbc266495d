package weir_test

import (
	"context"
	"strings"
	"testing"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

func at(s string) mtime.Time {
	t, err := mtime.Parse("2026-03-01T" + s + "Z")
	if err != nil {
		panic(err)
	}
	return t
}

type txn struct {
	Region string
	Cents  int64
}

func tv(region string, cents int64, ts string) weir.TimestampedValue[txn] {
	return weir.TimestampedValue[txn]{Value: txn{region, cents}, Time: at(ts)}
}

// TestReferenceFixtureStreaming is the reference fixture (docs/ARCHITECTURE.md) through the Go SDK.
func TestReferenceFixtureStreaming(t *testing.T) {
	for _, workers := range []int{1, 2, 3} {
		p := weir.NewPipeline()
		s := p.Root()
		events := []weir.TestEvent[txn]{
			weir.AddElements(tv("NORTH", 250, "00:01:00"), tv("NORTH", 175, "00:03:00")),
			weir.AdvanceWatermark[txn](at("00:05:00")),
			weir.AdvanceWatermark[txn](at("00:05:20")),
			weir.AddElements(tv("NORTH", 50, "00:04:00")),
			weir.AddElements(tv("NORTH", 30, "00:05:00")),
			weir.AdvanceWatermark[txn](at("00:06:01")),
			weir.AddElements(tv("NORTH", 100, "00:02:00")),
		}
		in := weir.TestStream(s, "Events", events)
		late := window.AfterCount(1)
		w := weir.FixedWindows(5 * mtime.Minute)
		w.Trigger = window.AfterWatermark(nil, &late)
		w.Accumulation = window.Accumulating
		w.AllowedLateness = mtime.Minute
		windowed := weir.WindowInto(s, "Window", in, w)
		kvs := weir.Map(s, "Key", windowed, func(t txn) weir.KV[string, int64] { return weir.KV[string, int64]{Key: t.Region, Value: t.Cents} })
		sums := weir.CombinePerKey(s, "Sum", kvs, weir.Sum[int64]())
		got := weir.Collect(s, "Out", sums)
		res, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: workers})
		if err != nil {
			t.Fatal(err)
		}
		type pane struct {
			start       string
			total       int64
			idx         int64
			timing      window.Timing
			first, last bool
		}
		var panes []pane
		for _, e := range got.Sorted(func(a, b weir.Collected[weir.KV[string, int64]]) bool {
			if a.Window.Start != b.Window.Start {
				return a.Window.Start < b.Window.Start
			}
			return a.Pane.Index < b.Pane.Index
		}) {
			panes = append(panes, pane{e.Window.Start.Format(), e.Value.Value, e.Pane.Index, e.Pane.Timing, e.Pane.IsFirst, e.Pane.IsLast})
		}
		want := []pane{
			{"2026-03-01T00:00:00.000Z", 425, 0, window.OnTime, true, false},
			{"2026-03-01T00:00:00.000Z", 475, 1, window.Late, false, false},
			// The 00:05 event opens [00:05, 00:10); it fires when input ends.
			{"2026-03-01T00:05:00.000Z", 30, 0, window.OnTime, true, true},
		}
		if len(panes) != len(want) {
			t.Fatalf("workers=%d: got panes %+v, want %+v", workers, panes, want)
		}
		for i := range want {
			if panes[i] != want[i] {
				t.Errorf("workers=%d: pane %d = %+v, want %+v", workers, i, panes[i], want[i])
			}
		}
		if d := res.Step("Sum").DroppedLateElements; d != 1 {
			t.Errorf("workers=%d: dropped_late_elements = %d, want 1", workers, d)
		}
	}
}

// TestReferenceFixtureBatch is the batch half of the reference fixture (docs/ARCHITECTURE.md): rejects are data.
func TestReferenceFixtureBatch(t *testing.T) {
	p := weir.NewPipeline()
	s := p.Root()
	in := weir.Create(s, "Txns", []txn{{"NORTH", 250}, {"NORTH", 175}, {"WEST", 100}, {"UNKNOWN", 50}})
	regions := weir.Create(s, "Regions", []string{"NORTH", "WEST"})
	known := weir.AsList("regions", regions)
	valid := weir.ParDo(s, "Validate", in, func(c *weir.Context, t txn, emit func(txn)) error {
		for _, r := range known.Get(c) {
			if r == t.Region {
				emit(t)
				return nil
			}
		}
		return weir.Fail("unknown_region", "region %q is not known", t.Region)
	}, weir.WithSideInputs(known), weir.WithErrorOutput("errors"))
	rejects := weir.Collect(s, "Rejects", weir.ErrorOutput(valid))
	kvs := weir.Map(s, "Key", valid, func(t txn) weir.KV[string, int64] { return weir.KV[string, int64]{Key: t.Region, Value: t.Cents} })
	totals := weir.Collect(s, "Out", weir.CombinePerKey(s, "Sum", kvs, weir.Sum[int64]()))
	if _, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: 2}); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	var accepted int64
	for _, kv := range totals.Values() {
		got[kv.Key] = kv.Value
		accepted += kv.Value
	}
	if got["NORTH"] != 425 || got["WEST"] != 100 || len(got) != 2 {
		t.Errorf("totals = %v, want NORTH 425 WEST 100", got)
	}
	rj := rejects.Values()
	if len(rj) != 1 || rj[0].Reason != "unknown_region" || rj[0].Element.(txn).Cents != 50 {
		t.Fatalf("rejects = %+v", rj)
	}
	if rejected := rj[0].Element.(txn).Cents; accepted+rejected != 575 || accepted != 525 {
		t.Errorf("input 575 != accepted %d + rejected %d", accepted, rejected)
	}
}

// TestUnhandledRejectFailsRun: without an error output, a failing element
// fails a bounded run, naming the step and the reason.
func TestUnhandledRejectFailsRun(t *testing.T) {
	p := weir.NewPipeline()
	s := p.Root()
	in := weir.CreateTimestamped(s, "Txns", []weir.TimestampedValue[txn]{{Value: txn{"X", 1}, Source: &contract.SourcePos{Source: "txns.jsonl", Offset: 7}}})
	out := weir.ParDo(s, "Validate", in, func(c *weir.Context, t txn, emit func(txn)) error {
		return weir.Fail("unknown_region", "region %q is not known", t.Region)
	})
	weir.Collect(s, "Out", out)
	_, err := weir.Run(context.Background(), p, weir.RunOptions{})
	if err == nil {
		t.Fatal("run succeeded, want failure")
	}
	for _, want := range []string{`"Validate"`, "unknown_region", "txns.jsonl:7"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}
