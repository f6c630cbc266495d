package weir_test

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
)

type countSink struct{ n, sum atomic.Int64 }

func (c *countSink) Write(_ context.Context, _ int, es []contract.Element) error {
	var s int64
	for _, e := range es {
		s += e.Value.(weir.KV[int64, int64]).Value
	}
	c.n.Add(int64(len(es)))
	c.sum.Add(s)
	return nil
}
func (c *countSink) Close(context.Context) error { return nil }

func runWindowedSum(b *testing.B, events int64, workers int) {
	p := weir.NewPipeline()
	s := p.Root()
	gen := weir.Generate(s, "Gen", weir.GenerateConfig{Count: events}, func(i int64) weir.KV[int64, int64] {
		return weir.KV[int64, int64]{Key: i % 1000, Value: i & 0xff}
	})
	w := weir.WindowInto(s, "Window", gen, weir.FixedWindows(5*mtime.Minute))
	sums := weir.CombinePerKey(s, "Sum", w, weir.Sum[int64]())
	cs := &countSink{}
	weir.Write(s, "Out", sums, contract.Sink(cs))
	if _, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: workers}); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkWindowedSumW1(b *testing.B) {
	for i := 0; i < b.N; i++ {
		runWindowedSum(b, 2_000_000, 1)
	}
	b.ReportMetric(float64(2_000_000*b.N)/b.Elapsed().Seconds(), "events/s")
}

func BenchmarkWindowedSumW2(b *testing.B) {
	for i := 0; i < b.N; i++ {
		runWindowedSum(b, 2_000_000, 2)
	}
	b.ReportMetric(float64(2_000_000*b.N)/b.Elapsed().Seconds(), "events/s")
}

func BenchmarkBaselineLoop(b *testing.B) {
	for i := 0; i < b.N; i++ {
		type k struct{ w, key int64 }
		m := map[k]int64{}
		var total int64
		for j := int64(0); j < 2_000_000; j++ {
			win := j / 300000
			m[k{win, j % 1000}] += j & 0xff
			if j%300000 == 299999 {
				for kk, v := range m {
					total += v
					delete(m, kk)
				}
			}
		}
		_ = total
	}
	b.ReportMetric(float64(2_000_000*b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkFixedWindowKeyHeap reports the live heap per key of a
// CombinePerKey in fixed windows once every key's previous window closed
// while its next one was open (the steady state of a long-running
// windowed job: the next window opens before the watermark closes the
// last one), after one more element per key. 200,000 keys; the probe
// reads the heap after two collections, before the first element and
// after the last, in a step upstream of the Combine.
//
//	go test -run '^$' -bench FixedWindowKeyHeap -benchtime 3x .
func BenchmarkFixedWindowKeyHeap(b *testing.B) {
	const keys = 200_000
	type E = weir.KV[string, int64]
	batch := func(sec int64) weir.TestEvent[E] {
		vs := make([]weir.TimestampedValue[E], keys)
		for i := range vs {
			vs[i] = weir.TimestampedValue[E]{Value: E{Key: "key-" + strconv.Itoa(i), Value: 1}, Time: mtime.Time(sec * 1000)}
		}
		return weir.AddElements(vs...)
	}
	marker := func(key string, sec int64) weir.TestEvent[E] {
		return weir.AddElements(weir.TimestampedValue[E]{Value: E{Key: key}, Time: mtime.Time(sec * 1000)})
	}
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	var perKey float64
	for b.Loop() {
		var before, after uint64
		p := weir.NewPipeline()
		s := p.Root()
		in := weir.TestStream(s, "In", []weir.TestEvent[E]{
			marker("start", 0),
			batch(1), batch(11), // every key in windows [0s, 10s) and [10s, 20s)
			weir.AdvanceWatermark[E](mtime.Time(10_500)), // the first closes
			batch(12),
			marker("stop", 13),
			weir.AdvanceWatermarkToInfinity[E](),
		})
		probed := weir.Map(s, "Probe", in, func(e E) E {
			switch e.Key {
			case "start":
				before = heap()
			case "stop":
				after = heap()
			}
			return e
		})
		w := weir.WindowInto(s, "Window", probed, weir.FixedWindows(10*mtime.Second))
		sums := weir.CombinePerKey(s, "Sum", w, weir.Sum[int64]())
		weir.Write(s, "Out", sums, contract.Sink(discard{}))
		if _, err := weir.Run(context.Background(), p, weir.RunOptions{}); err != nil {
			b.Fatal(err)
		}
		perKey = float64(int64(after)-int64(before)) / keys
	}
	b.ReportMetric(perKey, "heap-B/key")
}

type discard struct{}

func (discard) Write(context.Context, int, []contract.Element) error { return nil }
func (discard) Close(context.Context) error                          { return nil }
