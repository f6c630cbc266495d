package weir_test

import (
	"context"
	"fmt"
	"log"
	"sort"
	"strings"
	"time"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/window"
)

// A bounded pipeline built with the SDK and run to completion in this
// process: per-key sums of orders.
func ExampleRun() {
	type order struct {
		Region string
		Amount int64
	}
	p := weir.NewPipeline()
	s := p.Root()
	orders := weir.Create(s, "Orders", []order{{"NORTH", 250}, {"WEST", 100}, {"NORTH", 5}})
	keyed := weir.Map(s, "ByRegion", orders, func(o order) weir.KV[string, int64] {
		return weir.KV[string, int64]{Key: o.Region, Value: o.Amount}
	})
	totals := weir.Collect(s, "Out", weir.CombinePerKey(s, "Totals", keyed, weir.Sum[int64]()))

	if _, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: 2}); err != nil {
		log.Fatal(err)
	}
	var lines []string
	for _, kv := range totals.Values() {
		lines = append(lines, fmt.Sprintf("%s %d", kv.Key, kv.Value))
	}
	sort.Strings(lines)
	fmt.Println(strings.Join(lines, "\n"))
	// Output:
	// NORTH 255
	// WEST 100
}

// Event-time windows: elements carry their event time, WindowInto assigns
// them to one-minute fixed windows, and a per-key count fires once per
// window when the watermark passes its end.
func ExampleWindowInto() {
	base := mtime.FromTime(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	at := func(d mtime.Duration, key string) weir.TimestampedValue[weir.KV[string, int64]] {
		return weir.TimestampedValue[weir.KV[string, int64]]{Value: weir.KV[string, int64]{Key: key, Value: 1}, Time: base + mtime.Time(d)}
	}
	p := weir.NewPipeline()
	s := p.Root()
	clicks := weir.CreateTimestamped(s, "Clicks", []weir.TimestampedValue[weir.KV[string, int64]]{
		at(5*mtime.Second, "home"), at(40*mtime.Second, "home"), at(50*mtime.Second, "cart"),
		at(70*mtime.Second, "home"), at(3*mtime.Minute, "cart"),
	})
	windowed := weir.WindowInto(s, "PerMinute", clicks, weir.FixedWindows(mtime.Minute))
	counts := weir.Collect(s, "Out", weir.CombinePerKey(s, "Count", windowed, weir.Count[int64]()))

	if _, err := weir.Run(context.Background(), p, weir.RunOptions{}); err != nil {
		log.Fatal(err)
	}
	var lines []string
	for _, e := range counts.Elements() {
		lines = append(lines, fmt.Sprintf("%s-%s %s %d",
			e.Window.Start.ToTime().Format("15:04"), e.Window.End.ToTime().Format("15:04"), e.Value.Key, e.Value.Value))
	}
	sort.Strings(lines)
	fmt.Println(strings.Join(lines, "\n"))
	// Output:
	// 12:00-12:01 cart 1
	// 12:00-12:01 home 2
	// 12:01-12:02 home 1
	// 12:03-12:04 cart 1
}

// ParDo runs a function per element; it may emit any number of outputs,
// and an error made with Fail rejects the element with a reason, sent to
// the step's error output when it declares one.
func ExampleParDo() {
	p := weir.NewPipeline()
	s := p.Root()
	lines := weir.Create(s, "Lines", []string{"a=1", "b=2", "oops"})
	pairs := weir.ParDo(s, "Parse", lines, func(_ *weir.Context, line string, emit func(weir.KV[string, string])) error {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return weir.Fail("no_equals", "line %q has no '='", line)
		}
		emit(weir.KV[string, string]{Key: k, Value: v})
		return nil
	}, weir.WithErrorOutput("errors"))
	good := weir.Collect(s, "Good", pairs)
	bad := weir.Collect(s, "Bad", weir.ErrorOutput(pairs))

	if _, err := weir.Run(context.Background(), p, weir.RunOptions{}); err != nil {
		log.Fatal(err)
	}
	var out []string
	for _, kv := range good.Values() {
		out = append(out, kv.Key+"="+kv.Value)
	}
	sort.Strings(out)
	fmt.Println(strings.Join(out, " "))
	for _, r := range bad.Values() {
		fmt.Println("rejected:", r.Reason)
	}
	// Output:
	// a=1 b=2
	// rejected: no_equals
}

// An update that changes what a combine accumulates keeps the state its
// running version built: the new version declares how a stored
// accumulator of the old type becomes one of the new type. Here a sum
// per key becomes a mean, each stored total counting as one value.
func ExampleMigrateAccumulator() {
	build := func(mean bool) *weir.Pipeline {
		p := weir.NewPipeline()
		s := p.Root()
		in := weir.Create(s, "Orders", []weir.KV[string, int64]{{Key: "NORTH", Value: 250}})
		if mean {
			weir.CombinePerKey(s, "Totals", in, weir.Mean[int64](), weir.MigrateAccumulator(func(total int64) (weir.MeanAcc, error) {
				return weir.MeanAcc{Sum: float64(total), Count: 1}, nil
			}))
		} else {
			weir.CombinePerKey(s, "Totals", in, weir.Sum[int64]())
		}
		return p
	}
	report := compat.Check(build(false).Graph(), build(true).Graph(), compat.Options{})
	fmt.Println("compatible:", report.Compatible)
	for _, w := range report.Warnings {
		fmt.Println(w.Step, w.Code)
	}
	// Output:
	// compatible: true
	// Totals ACCUMULATOR_MIGRATED
}

// A StatefulParDo whose state cell changes type declares how the values
// the running version stored become the new type; the compatibility check
// then accepts the update with the warning STATE_MIGRATED, and the new job
// reads each stored value through the function when it restores it.
func ExampleMigrateState() {
	type seen struct {
		Seq   int64
		Count int64
	}
	build := func(next bool) *weir.Pipeline {
		p := weir.NewPipeline()
		s := p.Root()
		in := weir.Create(s, "Readings", []weir.KV[string, int64]{{Key: "d1", Value: 1}})
		if !next {
			last := weir.ValueState[int64]{ID: "last_seq"}
			weir.StatefulParDo(s, "Dedupe", in, weir.StatefulFn[string, int64, int64]{State: []weir.StateDecl{last},
				Process: func(c *weir.StateContext[string, int64], seq int64) error { last.Write(c, seq); return nil }})
			return p
		}
		last := weir.ValueState[seen]{ID: "last_seq"}
		weir.StatefulParDo(s, "Dedupe", in, weir.StatefulFn[string, int64, int64]{State: []weir.StateDecl{last},
			Process: func(c *weir.StateContext[string, int64], seq int64) error {
				v, _ := last.Read(c)
				last.Write(c, seen{Seq: seq, Count: v.Count + 1})
				return nil
			}},
			weir.MigrateState("last_seq", func(seq int64) (seen, error) { return seen{Seq: seq}, nil }))
		return p
	}
	report := compat.Check(build(false).Graph(), build(true).Graph(), compat.Options{})
	fmt.Println("compatible:", report.Compatible)
	for _, w := range report.Warnings {
		fmt.Println(w.Step, w.Code)
	}
	// Output:
	// compatible: true
	// Dedupe STATE_MIGRATED
}

// A stateful ParDo keeps state per key: here the last sequence number seen
// for each device, so that a device's repeated or older readings are
// dropped. Its state cells are checkpointed with the job and carried over
// by an update.
func ExampleStatefulParDo() {
	type reading struct {
		Seq   int64
		Value float64
	}
	p := weir.NewPipeline()
	s := p.Root()
	in := weir.Create(s, "Readings", []weir.KV[string, reading]{
		{Key: "d1", Value: reading{1, 20.5}}, {Key: "d1", Value: reading{2, 21}}, {Key: "d1", Value: reading{2, 21}},
		{Key: "d2", Value: reading{7, 3}}, {Key: "d1", Value: reading{1, 20.5}},
	})
	last := weir.ValueState[int64]{ID: "last_seq"}
	fresh := weir.StatefulParDo(s, "Dedupe", in, weir.StatefulFn[string, reading, string]{
		State: []weir.StateDecl{last},
		Process: func(c *weir.StateContext[string, string], r reading) error {
			if seen, ok := last.Read(c); ok && r.Seq <= seen {
				return nil // a repeat or an older reading
			}
			last.Write(c, r.Seq)
			c.Output(fmt.Sprintf("%s#%d=%g", c.Key(), r.Seq, r.Value))
			return nil
		},
	})
	out := weir.Collect(s, "Out", fresh)

	// One worker: the elements of a key arrive in the order created.
	if _, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: 1}); err != nil {
		log.Fatal(err)
	}
	lines := out.Values()
	sort.Strings(lines)
	fmt.Println(strings.Join(lines, "\n"))
	// Output:
	// d1#1=20.5
	// d1#2=21
	// d2#7=3
}

// A TestStream scripts elements, watermark moves and processing time, so a
// test can pin down what a windowed step emits for on-time and late data:
// here an element that arrives after the watermark passed its window, with
// allowed lateness, fires a LATE pane that accumulates.
func ExampleTestStream() {
	at := func(sec int64) weir.TimestampedValue[weir.KV[string, int64]] {
		return weir.TimestampedValue[weir.KV[string, int64]]{Value: weir.KV[string, int64]{Key: "NORTH", Value: 100 * sec}, Time: mtime.Time(sec * 1000)}
	}
	p := weir.NewPipeline()
	s := p.Root()
	in := weir.TestStream(s, "Orders", []weir.TestEvent[weir.KV[string, int64]]{
		weir.AddElements(at(10), at(20)),
		weir.AdvanceWatermark[weir.KV[string, int64]](mtime.Time(60_000)), // the first minute is complete
		weir.AddElements(at(30)),                                          // late, within the allowed lateness
		weir.AdvanceWatermarkToInfinity[weir.KV[string, int64]](),
	})
	w := weir.FixedWindows(mtime.Minute)
	w.AllowedLateness = 10 * mtime.Minute
	w.Accumulation = window.Accumulating
	sums := weir.Collect(s, "Out", weir.CombinePerKey(s, "Sum", weir.WindowInto(s, "PerMinute", in, w), weir.Sum[int64]()))

	if _, err := weir.Run(context.Background(), p, weir.RunOptions{}); err != nil {
		log.Fatal(err)
	}
	for _, e := range sums.Elements() {
		fmt.Printf("%s %d (%s)\n", e.Value.Key, e.Value.Value, e.Pane.Timing)
	}
	// Output:
	// NORTH 3000 (ON_TIME)
	// NORTH 6000 (LATE)
}
