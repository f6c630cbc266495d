package weir_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/window"
)

type kvi = weir.KV[string, int64]

func kv(k string, v int64, ts string) weir.TimestampedValue[kvi] {
	return weir.TimestampedValue[kvi]{Value: kvi{Key: k, Value: v}, Time: at(ts)}
}

// panesOf runs a TestStream through WindowInto and a per-key sum and
// renders every pane as "key [start,end) value timing idx first/last",
// sorted by key, window and index.
func panesOf(t *testing.T, workers int, w weir.Windowing, events []weir.TestEvent[kvi]) ([]string, int64) {
	t.Helper()
	p := weir.NewPipeline()
	s := p.Root()
	in := weir.TestStream(s, "Events", events)
	win := weir.WindowInto(s, "Window", in, w)
	sums := weir.CombinePerKey(s, "Sum", win, weir.Sum[int64]())
	got := weir.Collect(s, "Out", sums)
	res, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: workers})
	if err != nil {
		t.Fatal(err)
	}
	es := got.Elements()
	sort.Slice(es, func(i, j int) bool {
		a, b := es[i], es[j]
		if a.Value.Key != b.Value.Key {
			return a.Value.Key < b.Value.Key
		}
		if a.Window.Start != b.Window.Start {
			return a.Window.Start < b.Window.Start
		}
		return a.Pane.Index < b.Pane.Index
	})
	var out []string
	for _, e := range es {
		win := "global"
		if !e.Window.IsGlobal() {
			win = e.Window.Start.ToTime().Format("15:04:05") + "-" + e.Window.End.ToTime().Format("15:04:05")
		}
		fl := ""
		if e.Pane.IsFirst {
			fl += "F"
		}
		if e.Pane.IsLast {
			fl += "L"
		}
		out = append(out, fmt.Sprintf("%s %s %d %s %d %s", e.Value.Key, win, e.Value.Value, e.Pane.Timing, e.Pane.Index, fl))
	}
	return out, res.Step("Sum").DroppedLateElements
}

func TestWindowsAndTriggers(t *testing.T) {
	early := window.AfterCount(2)
	late := window.AfterCount(1)
	tests := []struct {
		name    string
		w       func() weir.Windowing
		events  []weir.TestEvent[kvi]
		want    []string
		dropped int64
	}{{
		name: "fixed default trigger fires once per window at the watermark",
		w:    func() weir.Windowing { return weir.FixedWindows(5 * mtime.Minute) },
		events: []weir.TestEvent[kvi]{
			weir.AddElements(kv("a", 1, "00:01:00"), kv("a", 2, "00:04:59"), kv("a", 4, "00:05:00"), kv("b", 8, "00:02:00")),
			weir.AdvanceWatermark[kvi](at("00:05:00")),
			weir.AddElements(kv("a", 16, "00:03:00")), // late, no allowed lateness: dropped
		},
		want: []string{
			"a 00:00:00-00:05:00 3 ON_TIME 0 FL",
			"a 00:05:00-00:10:00 4 ON_TIME 0 FL",
			"b 00:00:00-00:05:00 8 ON_TIME 0 FL",
		},
		dropped: 1,
	}, {
		name: "sliding windows: each element in size/period windows",
		w:    func() weir.Windowing { return weir.SlidingWindows(10*mtime.Minute, 5*mtime.Minute) },
		events: []weir.TestEvent[kvi]{
			weir.AddElements(kv("a", 1, "00:01:00"), kv("a", 2, "00:06:00")),
		},
		want: []string{
			"a 23:55:00-00:05:00 1 ON_TIME 0 FL",
			"a 00:00:00-00:10:00 3 ON_TIME 0 FL",
			"a 00:05:00-00:15:00 2 ON_TIME 0 FL",
		},
	}, {
		name: "sessions merge across a bundle and across bundles",
		w:    func() weir.Windowing { return weir.Sessions(10 * mtime.Minute) },
		events: []weir.TestEvent[kvi]{
			weir.AddElements(kv("a", 1, "00:00:00"), kv("a", 2, "00:25:00")),
			weir.AddElements(kv("a", 4, "00:12:00")), // bridges [00:00,00:10) and [00:25,00:35)? no: [00:12,00:22) overlaps neither
			weir.AddElements(kv("a", 8, "00:08:00")), // [00:08,00:18) merges [00:00,00:10) and [00:12,00:22)
			weir.AddElements(kv("b", 16, "00:00:00")),
		},
		want: []string{
			"a 00:00:00-00:22:00 13 ON_TIME 0 FL",
			"a 00:25:00-00:35:00 2 ON_TIME 0 FL",
			"b 00:00:00-00:10:00 16 ON_TIME 0 FL",
		},
	}, {
		name: "early and late firings, accumulating",
		w: func() weir.Windowing {
			w := weir.FixedWindows(5 * mtime.Minute)
			w.Trigger = window.AfterWatermark(&early, &late)
			w.Accumulation = window.Accumulating
			w.AllowedLateness = 10 * mtime.Minute
			return w
		},
		events: []weir.TestEvent[kvi]{
			weir.AddElements(kv("a", 1, "00:01:00")),
			weir.AddElements(kv("a", 2, "00:02:00")), // count 2: EARLY 3
			weir.AddElements(kv("a", 4, "00:03:00")),
			weir.AdvanceWatermark[kvi](at("00:06:00")), // ON_TIME 7 (FIRE_ALWAYS)
			weir.AddElements(kv("a", 8, "00:04:00")),   // LATE 15
			weir.AdvanceWatermark[kvi](at("01:00:00")), // expiry, nothing new: no pane
		},
		want: []string{
			"a 00:00:00-00:05:00 3 EARLY 0 F",
			"a 00:00:00-00:05:00 7 ON_TIME 1 ",
			"a 00:00:00-00:05:00 15 LATE 2 ",
		},
	}, {
		name: "early and late firings, discarding",
		w: func() weir.Windowing {
			w := weir.FixedWindows(5 * mtime.Minute)
			w.Trigger = window.AfterWatermark(&early, &late)
			w.Accumulation = window.Discarding
			w.AllowedLateness = 10 * mtime.Minute
			return w
		},
		events: []weir.TestEvent[kvi]{
			weir.AddElements(kv("a", 1, "00:01:00")),
			weir.AddElements(kv("a", 2, "00:02:00")),
			weir.AdvanceWatermark[kvi](at("00:06:00")), // on-time pane fires although empty
			weir.AddElements(kv("a", 8, "00:04:00")),
		},
		want: []string{
			"a 00:00:00-00:05:00 3 EARLY 0 F",
			"a 00:00:00-00:05:00 0 ON_TIME 1 ",
			"a 00:00:00-00:05:00 8 LATE 2 ",
		},
	}, {
		name: "after_count without repeat fires once and closes the window",
		w: func() weir.Windowing {
			w := weir.GlobalWindows()
			w.Trigger = window.AfterCount(2)
			return w
		},
		events: []weir.TestEvent[kvi]{
			weir.AddElements(kv("a", 1, "00:01:00"), kv("a", 2, "00:02:00"), kv("a", 4, "00:03:00")),
			weir.AddElements(kv("a", 8, "00:04:00")),
		},
		want:    []string{"a global 7 EARLY 0 FL"},
		dropped: 1,
	}, {
		name: "repeatedly after_count in the global window, discarding, final pane at end of input",
		w: func() weir.Windowing {
			w := weir.GlobalWindows()
			w.Trigger = window.Repeatedly(window.AfterCount(2))
			return w
		},
		events: []weir.TestEvent[kvi]{
			weir.AddElements(kv("a", 1, "00:01:00")),
			weir.AddElements(kv("a", 2, "00:02:00")),
			weir.AddElements(kv("a", 4, "00:03:00")),
		},
		want: []string{"a global 3 EARLY 0 F", "a global 4 ON_TIME 1 L"},
	}, {
		name: "after_processing_time with a manual clock",
		w: func() weir.Windowing {
			w := weir.GlobalWindows()
			w.Trigger = window.Repeatedly(window.AfterProcessingTime(mtime.Minute))
			w.Accumulation = window.Accumulating
			return w
		},
		events: []weir.TestEvent[kvi]{
			weir.AddElements(kv("a", 1, "00:01:00")),
			weir.AdvanceProcessingTime[kvi](30 * mtime.Second),
			weir.AddElements(kv("a", 2, "00:02:00")),
			weir.AdvanceProcessingTime[kvi](30 * mtime.Second), // a minute after the first element
			weir.AddElements(kv("a", 4, "00:03:00")),
			weir.AdvanceProcessingTime[kvi](2 * mtime.Minute),
		},
		want: []string{"a global 3 EARLY 0 F", "a global 7 EARLY 1 "},
	}, {
		name: "after_any and after_all",
		w: func() weir.Windowing {
			w := weir.FixedWindows(5 * mtime.Minute)
			w.Trigger = window.Repeatedly(window.AfterAny(window.AfterCount(3), window.AfterAll(window.AfterCount(1), window.AfterProcessingTime(mtime.Minute))))
			return w
		},
		events: []weir.TestEvent[kvi]{
			weir.AddElements(kv("a", 1, "00:01:00")),
			weir.AdvanceProcessingTime[kvi](2 * mtime.Minute),                                        // after_all: 1 element and a minute
			weir.AddElements(kv("a", 2, "00:01:00"), kv("a", 4, "00:01:00"), kv("a", 8, "00:01:00")), // after_count 3
			weir.AddElements(kv("a", 16, "00:01:00")),
		},
		want: []string{
			"a 00:00:00-00:05:00 1 EARLY 0 F",
			"a 00:00:00-00:05:00 14 EARLY 1 ",
			"a 00:00:00-00:05:00 16 ON_TIME 2 L",
		},
	}}
	for _, tc := range tests {
		for _, workers := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/w%d", tc.name, workers), func(t *testing.T) {
				got, dropped := panesOf(t, workers, tc.w(), tc.events)
				if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
					t.Errorf("panes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
				}
				if dropped != tc.dropped {
					t.Errorf("dropped = %d, want %d", dropped, tc.dropped)
				}
			})
		}
	}
}
