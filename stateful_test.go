package weir_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
)

// TestStatefulParDo exercises value, bag and map state with event- and
// processing-time timers: a per-key buffer that flushes when the watermark
// passes 00:10, a running count, and a processing-time heartbeat.
func TestStatefulParDo(t *testing.T) {
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("w%d", workers), func(t *testing.T) {
			p := weir.NewPipeline()
			s := p.Root()
			in := weir.TestStream(s, "Events", []weir.TestEvent[kvi]{
				weir.AddElements(kv("a", 1, "00:01:00"), kv("a", 2, "00:02:00"), kv("b", 5, "00:03:00")),
				weir.AdvanceProcessingTime[kvi](2 * mtime.Minute),
				weir.AdvanceWatermark[kvi](at("00:11:00")),
				weir.AddElements(kv("a", 3, "00:12:00")),
			})
			count := weir.ValueState[int64]{ID: "count"}
			buf := weir.BagState[int64]{ID: "buffer"}
			seen := weir.MapState[int64, bool]{ID: "seen"}
			flush := weir.EventTimer("flush")
			beat := weir.ProcessingTimer("heartbeat")
			out := weir.StatefulParDo(s, "Buffer", in, weir.StatefulFn[string, int64, string]{
				State:  []weir.StateDecl{count, buf, seen},
				Timers: []weir.TimerSpec{flush, beat},
				Process: func(c *weir.StateContext[string, string], v int64) error {
					n, _ := count.Read(c)
					count.Write(c, n+1)
					buf.Add(c, v)
					seen.Put(c, v, true)
					flush.Set(c, at("00:10:00"))
					if n == 0 {
						beat.Set(c, c.Now().Add(mtime.Minute))
					}
					return nil
				},
				OnTimer: func(c *weir.StateContext[string, string], tm contract.Timer) error {
					n, _ := count.Read(c)
					switch tm.ID {
					case "flush":
						c.Output(fmt.Sprintf("%s flush %v count=%d seen=%d at=%s", c.Key(), buf.Read(c), n, len(seen.Entries(c)), c.Timestamp().ToTime().Format("15:04")))
						buf.Clear(c)
					case "heartbeat":
						c.Output(fmt.Sprintf("%s heartbeat count=%d", c.Key(), n))
					}
					return nil
				},
			})
			got := weir.Collect(s, "Out", out)
			if _, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: workers}); err != nil {
				t.Fatal(err)
			}
			vals := got.Values()
			sort.Strings(vals)
			want := []string{
				"a flush [1 2] count=2 seen=2 at=00:10",
				"a flush [3] count=3 seen=3 at=00:10",
				"a heartbeat count=2",
				"b flush [5] count=1 seen=1 at=00:10",
				"b heartbeat count=1",
			}
			if strings.Join(vals, "\n") != strings.Join(want, "\n") {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(vals, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// TestLoopingProcessingTimerEndsAtEndOfInput: a processing-time timer that
// re-arms itself forever must not hold the end of a bounded run.
func TestLoopingProcessingTimerEndsAtEndOfInput(t *testing.T) {
	p := weir.NewPipeline()
	s := p.Root()
	in := weir.CreateTimestamped(s, "Events", []weir.TimestampedValue[kvi]{kv("a", 1, "00:01:00")})
	tick := weir.ProcessingTimer("tick")
	out := weir.StatefulParDo(s, "Loop", in, weir.StatefulFn[string, int64, int64]{
		Timers: []weir.TimerSpec{tick},
		Process: func(c *weir.StateContext[string, int64], v int64) error {
			tick.Set(c, c.Now().Add(mtime.Hour))
			return nil
		},
		OnTimer: func(c *weir.StateContext[string, int64], _ contract.Timer) error {
			c.Output(1)
			tick.Set(c, c.Now().Add(mtime.Hour))
			return nil
		},
	})
	got := weir.Collect(s, "Out", out)
	if _, err := weir.Run(context.Background(), p, weir.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := len(got.Values()); n != 1 {
		t.Errorf("timer fired %d times at end of input, want exactly once", n)
	}
}

// TestSideInputsPerWindow: a windowed side input is read per window, and
// main elements wait until the side input's window is complete.
func TestSideInputsPerWindow(t *testing.T) {
	for _, workers := range []int{1, 2} {
		p := weir.NewPipeline()
		s := p.Root()
		main := weir.WindowInto(s, "MainWindow", weir.TestStream(s, "Main", []weir.TestEvent[kvi]{
			weir.AddElements(kv("x", 1, "00:01:00"), kv("x", 2, "00:06:00")),
		}), weir.FixedWindows(5*mtime.Minute))
		side := weir.WindowInto(s, "SideWindow", weir.CreateTimestamped(s, "Rates", []weir.TimestampedValue[kvi]{
			kv("x", 10, "00:00:30"), kv("x", 100, "00:05:30"),
		}), weir.FixedWindows(5*mtime.Minute))
		rates := weir.AsMap("rates", side)
		all := weir.AsList("all", side)
		out := weir.ParDo(s, "Scale", main, func(c *weir.Context, v kvi, emit func(string)) error {
			emit(fmt.Sprintf("%d*%d (list %d)", v.Value, rates.Get(c)[v.Key], len(all.Get(c))))
			return nil
		}, weir.WithSideInputs(rates, all))
		got := weir.Collect(s, "Out", out)
		if _, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: workers}); err != nil {
			t.Fatal(err)
		}
		vals := got.Values()
		sort.Strings(vals)
		if want := "1*10 (list 1),2*100 (list 1)"; strings.Join(vals, ",") != want {
			t.Errorf("w%d: got %v, want %s", workers, vals, want)
		}
	}
}

// TestProcessingTimeCrossesSideInputStep: the processing-time ticks of a
// TestStream reach a keyed step behind a step with side inputs with their
// time, so its processing-time timers see processing time move.
func TestProcessingTimeCrossesSideInputStep(t *testing.T) {
	p := weir.NewPipeline()
	s := p.Root()
	main := weir.TestStream(s, "Main", []weir.TestEvent[kvi]{
		weir.AddElements(kv("a", 1, "00:01:00")),
		weir.AdvanceProcessingTime[kvi](mtime.Minute),
		weir.AdvanceProcessingTime[kvi](mtime.Minute),
	})
	known := weir.AsList("known", weir.Create(s, "Known", []string{"a"}))
	passed := weir.ParDo(s, "Pass", main, func(c *weir.Context, v kvi, emit func(kvi)) error {
		if len(known.Get(c)) == 1 {
			emit(v)
		}
		return nil
	}, weir.WithSideInputs(known))
	tick := weir.ProcessingTimer("tick")
	out := weir.StatefulParDo(s, "Wait", passed, weir.StatefulFn[string, int64, int64]{
		Timers: []weir.TimerSpec{tick},
		Process: func(c *weir.StateContext[string, int64], v int64) error {
			tick.Set(c, c.Now().Add(30*mtime.Second))
			return nil
		},
		OnTimer: func(c *weir.StateContext[string, int64], _ contract.Timer) error {
			c.Output(int64(c.Now() - weir.TestClockStart))
			return nil
		},
	})
	got := weir.Collect(s, "Out", out)
	if _, err := weir.Run(context.Background(), p, weir.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	// The timer fires at the first tick (+1 min) or, when the element waited
	// for the side input until after the ticks, at the end (+2 min).
	if vals := got.Values(); len(vals) != 1 || vals[0] < int64(mtime.Minute) {
		t.Errorf("the timer fired at processing time start + %v ms, want at least a minute later", vals)
	}
}

// TestTimerSetInOnTimerFiresAtEndOfInput: an event-time timer armed by
// another timer's callback while a bounded input ends (a flush that arms a
// cleanup) fires too, as in Beam where the watermark reaches +∞; a timer
// that re-arms itself forever fails the run with a message naming it
// instead of holding it.
func TestTimerSetInOnTimerFiresAtEndOfInput(t *testing.T) {
	tests := []struct {
		name    string
		forever bool
		want    []string
		wantErr string
	}{
		{name: "chain", want: []string{"a cleanup at=00:20", "a flush at=00:10"}},
		{name: "forever", forever: true, wantErr: `timer "cleanup" keeps setting event-time timers`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := weir.NewPipeline()
			s := p.Root()
			in := weir.CreateTimestamped(s, "Events", []weir.TimestampedValue[kvi]{kv("a", 1, "00:01:00")})
			flush := weir.EventTimer("flush")
			cleanup := weir.EventTimer("cleanup")
			out := weir.StatefulParDo(s, "Chain", in, weir.StatefulFn[string, int64, string]{
				Timers: []weir.TimerSpec{flush, cleanup},
				Process: func(c *weir.StateContext[string, string], v int64) error {
					flush.Set(c, at("00:10:00"))
					return nil
				},
				OnTimer: func(c *weir.StateContext[string, string], tm contract.Timer) error {
					c.Output(fmt.Sprintf("%s %s at=%s", c.Key(), tm.ID, c.Timestamp().ToTime().Format("15:04")))
					switch {
					case tm.ID == "flush":
						cleanup.Set(c, at("00:20:00"))
					case tc.forever:
						cleanup.Set(c, tm.Time.Add(mtime.Second))
					}
					return nil
				},
			})
			got := weir.Collect(s, "Out", out)
			_, err := weir.Run(context.Background(), p, weir.RunOptions{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			vals := got.Values()
			sort.Strings(vals)
			if strings.Join(vals, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got %q, want %q", vals, tc.want)
			}
		})
	}
}
