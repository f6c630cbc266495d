package weir_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/window"
)

type winKey struct {
	key   string
	start mtime.Time
}

// TestMetamorphicLastPaneMatchesBatchOracle: with accumulating panes and
// repeating triggers, random arrival orders, bundle sizes, worker counts and
// watermark schedules of the same events give, in the last pane of each
// window, exactly what a batch computation over the elements that were not
// dropped as too late gives. Every fourth seed allows no lateness (a
// window's end and its expiry are then one timer).
func TestMetamorphicLastPaneMatchesBatchOracle(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		lateness := 5 * mtime.Minute
		if seed%4 == 1 {
			lateness = 0
		}
		rng := rand.New(rand.NewPCG(seed, 7))
		fn := window.FixedFn(5 * mtime.Minute)
		if seed%3 == 0 {
			fn = window.SlidingFn(10*mtime.Minute, 5*mtime.Minute)
		}
		n := 20 + rng.IntN(200)
		type ev struct {
			key string
			v   int64
			ts  mtime.Time
		}
		evs := make([]ev, n)
		for i := range evs {
			evs[i] = ev{fmt.Sprintf("k%d", rng.IntN(5)), int64(rng.IntN(1000)), mtime.Time(rng.Int64N(int64(40 * mtime.Minute)))}
		}
		// Arrival order: mostly in event-time order with random disorder.
		rng.Shuffle(len(evs), func(i, j int) {
			if rng.IntN(4) == 0 {
				evs[i], evs[j] = evs[j], evs[i]
			}
		})
		var events []weir.TestEvent[kvi]
		oracle := map[winKey]int64{}
		wm := mtime.MinTimestamp
		for i := 0; i < len(evs); {
			size := 1 + rng.IntN(8)
			var add []weir.TimestampedValue[kvi]
			for ; size > 0 && i < len(evs); size, i = size-1, i+1 {
				e := evs[i]
				add = append(add, weir.TimestampedValue[kvi]{Value: kvi{Key: e.key, Value: e.v}, Time: e.ts})
				for _, w := range fn.Assign(nil, e.ts) {
					if !(wm > w.MaxTimestamp().Add(lateness)) {
						oracle[winKey{e.key, w.Start}] += e.v
					}
				}
			}
			events = append(events, weir.AddElements(add...))
			if rng.IntN(3) == 0 {
				// Advance the watermark to somewhat behind the latest event seen.
				var maxTs mtime.Time
				for _, e := range evs[:i] {
					maxTs = mtime.Max(maxTs, e.ts)
				}
				if next := maxTs - mtime.Time(rng.Int64N(int64(8*mtime.Minute))); next > wm {
					wm = next
					events = append(events, weir.AdvanceWatermark[kvi](wm))
				}
			}
		}
		early := window.AfterCount(int64(1 + rng.IntN(3)))
		late := window.AfterCount(1)
		w := weir.Windowing{Fn: fn, Trigger: window.AfterWatermark(&early, &late), Accumulation: window.Accumulating, AllowedLateness: lateness}
		workers := 1 + rng.IntN(3)
		bundle := []int{1, 3, 1024}[rng.IntN(3)]

		p := weir.NewPipeline()
		s := p.Root()
		sums := weir.CombinePerKey(s, "Sum", weir.WindowInto(s, "Window", weir.TestStream(s, "Events", events), w), weir.Sum[int64]())
		got := weir.Collect(s, "Out", sums)
		if _, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: workers, BundleSize: bundle}); err != nil {
			t.Fatal(err)
		}
		last := map[winKey]weir.Collected[kvi]{}
		for _, e := range got.Elements() {
			k := winKey{e.Value.Key, e.Window.Start}
			if prev, ok := last[k]; !ok || e.Pane.Index > prev.Pane.Index {
				last[k] = e
			}
		}
		lastVals := map[winKey]int64{}
		for k, e := range last {
			lastVals[k] = e.Value.Value
		}
		if !reflect.DeepEqual(lastVals, oracle) {
			t.Fatalf("seed %d (workers %d, bundle %d): last panes %v\nwant oracle %v", seed, workers, bundle, lastVals, oracle)
		}
	}
}

// TestMetamorphicSameOutputAcrossBundlesAndWorkers: a bounded pipeline with
// fixed and session windows, a GroupByKey and a stateful step gives the same
// output whatever the bundle size and worker count.
func TestMetamorphicSameOutputAcrossBundlesAndWorkers(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 42))
	var vals []weir.TimestampedValue[kvi]
	for i := 0; i < 3000; i++ {
		vals = append(vals, weir.TimestampedValue[kvi]{
			Value: kvi{Key: fmt.Sprintf("k%d", rng.IntN(40)), Value: int64(rng.IntN(100))},
			Time:  mtime.Time(rng.Int64N(int64(3 * mtime.Hour))),
		})
	}
	run := func(workers, bundle int) []string {
		p := weir.NewPipeline()
		s := p.Root()
		in := weir.CreateTimestamped(s, "In", vals)
		fixed := weir.CombinePerKey(s, "FixedSum", weir.WindowInto(s, "Fixed", in, weir.FixedWindows(10*mtime.Minute)), weir.Sum[int64]())
		sess := weir.GroupByKey(s, "SessionGroup", weir.WindowInto(s, "Sessions", in, weir.Sessions(3*mtime.Minute)))
		sizes := weir.Map(s, "SessionSize", sess, func(kv weir.KV[string, []int64]) kvi {
			var sum int64
			for _, v := range kv.Value {
				sum += v
			}
			return kvi{Key: kv.Key, Value: sum*1000 + int64(len(kv.Value))}
		})
		count := weir.ValueState[int64]{ID: "n"}
		running := weir.StatefulParDo(s, "Running", fixed, weir.StatefulFn[string, int64, kvi]{
			State: []weir.StateDecl{count},
			Process: func(c *weir.StateContext[string, kvi], v int64) error {
				n, _ := count.Read(c)
				count.Write(c, n+v)
				c.Output(kvi{Key: c.Key(), Value: v})
				return nil
			},
		})
		a := weir.Collect(s, "A", running)
		b := weir.Collect(s, "B", sizes)
		if _, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: workers, BundleSize: bundle}); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range append(a.Elements(), b.Elements()...) {
			out = append(out, fmt.Sprintf("%s %v %d %v", e.Value.Key, e.Window, e.Value.Value, e.Pane))
		}
		sort.Strings(out)
		return out
	}
	want := run(1, 1024)
	if len(want) == 0 {
		t.Fatal("no output")
	}
	for _, cfg := range [][2]int{{1, 1}, {2, 7}, {3, 1024}, {2, 64}} {
		if got := run(cfg[0], cfg[1]); !reflect.DeepEqual(got, want) {
			t.Errorf("workers %d bundle %d: output differs (%d vs %d records)", cfg[0], cfg[1], len(got), len(want))
		}
	}
}
