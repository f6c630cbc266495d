package weir_test

import (
	"context"
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
