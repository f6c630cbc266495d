package iceberg

import (
	"context"
	"testing"

	"github.com/weir-dev/weir/runner/contract"
)

// BenchmarkIcebergRead reads a table of 500,000 rows of five columns in
// one data file, every column or one (the read checks the file's columns
// it takes before iceberg-go reads them).
func BenchmarkIcebergRead(b *testing.B) {
	ctx := context.Background()
	tg := benchTarget(b)
	const n = 500_000
	sink, err := NewSink(SinkConfig{Target: tg, Table: "db.bench"}, testSchema)
	if err != nil {
		b.Fatal(err)
	}
	if err := sink.Write(ctx, 0, testRows(n)); err != nil {
		b.Fatal(err)
	}
	if err := sink.Close(ctx); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		keep []string
	}{{"all", nil}, {"one", []string{"id"}}} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := ReadConfig{Target: tg, Table: "db.bench", Keep: bc.keep}
			s, err := Describe(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]contract.Element, 512)
			b.ResetTimer()
			for range b.N {
				splits, err := NewSource(cfg, s).Split(ctx, 1)
				if err != nil {
					b.Fatal(err)
				}
				got := 0
				for {
					res, err := splits[0].Read(ctx, buf)
					if err != nil {
						b.Fatal(err)
					}
					got += res.N
					if res.Done {
						break
					}
				}
				splits[0].Close()
				if got != n {
					b.Fatalf("read %d rows, want %d", got, n)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
