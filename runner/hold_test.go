package runner_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/window"
)

// TestHoldPanesAtMinWatermark: with Options.HoldPanesAtMinWatermark an
// early count trigger fires nothing while the input watermark is −∞ (a
// re-reading replacement job catching up), keeps what it held, and fires
// its first pane, carrying everything, as soon as the watermark rises;
// afterwards the trigger behaves as without the option. Discarding panes
// lose nothing either: their sum is the window's total in both runs.
func TestHoldPanesAtMinWatermark(t *testing.T) {
	events := []weir.TestEvent[kv]{
		weir.AddElements(weir.TimestampedValue[kv]{Value: kv{Key: "a", Value: 1}, Time: clock("00:00:01")}, weir.TimestampedValue[kv]{Value: kv{Key: "a", Value: 2}, Time: clock("00:00:02")}),
		weir.AddElements(weir.TimestampedValue[kv]{Value: kv{Key: "a", Value: 3}, Time: clock("00:00:03")}, weir.TimestampedValue[kv]{Value: kv{Key: "a", Value: 4}, Time: clock("00:00:04")}),
		weir.AdvanceWatermark[kv](clock("00:05:00")),
		weir.AddElements(weir.TimestampedValue[kv]{Value: kv{Key: "a", Value: 5}, Time: clock("00:05:01")}, weir.TimestampedValue[kv]{Value: kv{Key: "a", Value: 6}, Time: clock("00:05:02")}),
		weir.AdvanceWatermark[kv](clock("00:20:00")),
	}
	early := &window.Trigger{Kind: window.TriggerAfterCount, Count: 2}
	tests := []struct {
		name  string
		hold  bool
		mode  window.AccumulationMode
		panes string
	}{
		{"accumulating", false, window.Accumulating, "3 EARLY 0, 10 EARLY 1, 21 EARLY 2, 21 ON_TIME 3"},
		{"accumulating, held", true, window.Accumulating, "10 EARLY 0, 21 EARLY 1, 21 ON_TIME 2"},
		{"discarding", false, window.Discarding, "3 EARLY 0, 7 EARLY 1, 11 EARLY 2, 0 ON_TIME 3"},
		{"discarding, held", true, window.Discarding, "10 EARLY 0, 11 EARLY 1, 0 ON_TIME 2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := weir.NewPipeline()
			s := p.Root()
			ws := window.Strategy{Fn: window.FixedFn(600_000), Trigger: window.AfterWatermark(early, nil), Accumulation: tc.mode}
			w := weir.WindowInto(s, "Window", weir.TestStream(s, "Events", events), ws)
			got := weir.Collect(s, "Out", weir.CombinePerKey(s, "Sum", w, weir.Sum[int64]()))
			if _, err := weir.Run(context.Background(), p, weir.RunOptions{HoldPanesAtMinWatermark: tc.hold}); err != nil {
				t.Fatal(err)
			}
			var panes []string
			for _, e := range got.Elements() {
				panes = append(panes, fmt.Sprintf("%d %s %d", e.Value.Value, e.Pane.Timing, e.Pane.Index))
			}
			if g := strings.Join(panes, ", "); g != tc.panes {
				t.Fatalf("panes %s, want %s", g, tc.panes)
			}
		})
	}
}
