package sqlsink

import (
	"context"
	"fmt"
	"testing"

	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// benchRows is the size of one benchmark epoch (one transaction).
const benchRows = 1000

// BenchmarkCommit measures the whole path of one epoch of benchRows window
// results (Write, PreCommit, Commit) and reports rows/s:
//
//	insert: every row a new key (INSERT of new rows)
//	update: the same keys again with a newer pane (ON CONFLICT DO UPDATE)
//	append: new elements into an append table
//
//	go test -run '^$' -bench Commit -benchtime 20x ./io/sqlsink/
func BenchmarkCommit(b *testing.B) {
	for _, driver := range []string{DriverSQLite, DriverPostgres} {
		for _, kind := range []string{"insert", "update", "append"} {
			b.Run(driver+"/"+kind, func(b *testing.B) {
				e := newEnv(b, driver)
				ctx := context.Background()
				mode, key := ModeUpsert, []string{"region"}
				if kind == "append" {
					mode, key = ModeAppend, nil
				}
				s, err := New(e.config(mode, key...), totalsSchema)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close(ctx)
				if err := s.Prepare(ctx); err != nil {
					b.Fatal(err)
				}
				elems := make([]contract.Element, benchRows)
				fill := func(iter int) {
					for j := range elems {
						k := j
						if kind != "update" {
							k = iter*benchRows + j
						}
						p := window.PaneInfo{Index: int64(iter), Timing: window.Late, IsFirst: iter == 0}
						elems[j] = total(fmt.Sprintf("region-%08d", k), int64(iter*7+j), w0, p)
						if kind == "append" {
							elems[j].Source = &contract.SourcePos{Source: "bench", Offset: int64(k)}
						}
					}
				}
				b.ResetTimer()
				for i := range b.N {
					b.StopTimer()
					fill(i)
					b.StartTimer()
					if err := s.Write(ctx, 0, elems); err != nil {
						b.Fatal(err)
					}
					p, err := s.PreCommit(ctx, 0, uint64(i+1))
					if err != nil {
						b.Fatal(err)
					}
					if err := s.Commit(ctx, uint64(i+1), [][]byte{p}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*benchRows)/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
}

// BenchmarkEncode measures Write plus PreCommit (conversion and encoding,
// no I/O) per row.
func BenchmarkEncode(b *testing.B) {
	s, err := New(Config{DSN: b.TempDir() + "/x.db", Table: "t", Key: []string{"region"}, SinkID: "j/s"}, totalsSchema)
	if err != nil {
		b.Fatal(err)
	}
	elems := make([]contract.Element, benchRows)
	for j := range elems {
		elems[j] = total(fmt.Sprintf("region-%08d", j), int64(j), w0, onTime0)
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		if err := s.Write(ctx, 0, elems); err != nil {
			b.Fatal(err)
		}
		if _, err := s.PreCommit(ctx, 0, uint64(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*benchRows)/b.Elapsed().Seconds(), "rows/s")
}
