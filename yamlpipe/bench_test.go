package yamlpipe

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/yamlpipe/celexpr"
	"github.com/weir-dev/weir/yamlpipe/genrows"
)

// BenchmarkPipeline runs testdata/bench_pipeline.yaml (1M generated
// events) and reports events per second and per CPU-second.
func BenchmarkPipeline(b *testing.B) {
	src, err := os.ReadFile(filepath.Join("testdata", "bench_pipeline.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	const events = 1000000
	for i := 0; i < b.N; i++ {
		p, err := Load("bench_pipeline.yaml", src, Options{})
		if err != nil {
			b.Fatal(err)
		}
		start, cpu0 := time.Now(), cpuTime()
		if _, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: 1}); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(events/time.Since(start).Seconds(), "events/s")
		b.ReportMetric(events/(cpuTime()-cpu0).Seconds(), "events/cpu-s")
	}
}

// BenchmarkCELFilter measures one Filter evaluation over a schema'd row.
func BenchmarkCELFilter(b *testing.B) {
	schema := genrows.Schema()
	sc, err := newCELScope(schema, nil)
	if err != nil {
		b.Fatal(err)
	}
	prg, _, err := sc.Compile("amount > 10 && key != 'key-3'")
	if err != nil {
		b.Fatal(err)
	}
	slow := prg.WithoutFastPath()
	b.Run("native", func(b *testing.B) { benchFilter(b, sc, prg) })
	b.Run("cel", func(b *testing.B) { benchFilter(b, sc, slow) })
}

func benchFilter(b *testing.B, sc *celexpr.Scope, prg *celexpr.Program) {
	f := &filterFn{prg: prg, act: celexpr.NewActivation(sc)}
	r := genrows.New(genrows.Config{Keys: 10, MaxAmount: 50, Spacing: 1}).NewRowMaker()(1)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := f.keep(r, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// cpuTime returns the CPU time (user + system) used by this process.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
