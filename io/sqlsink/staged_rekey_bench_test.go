package sqlsink

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weir-dev/weir/runner/contract"
)

// BenchmarkStagedRekey measures a staged table's re-key on SQLite and
// PostgreSQL (skipped when it cannot be reached; each round in a schema
// of its own, dropped after): the
// setup that serves the rows written under the earlier keys under their
// new keys (ns/op: reading the distinct keys, mapping each, writing the
// map, building the views; every 10 earlier keys meet at one new key), and
// the merge that folds them into a principal keyed anew (fold-ms/op). The
// table holds one row per earlier key, in one window. The baseline
// (rekey=false) is the same update without a re-key: a new staging table
// behind the view, and a merge of the earlier one.
//
//	go test -run '^$' -bench BenchmarkStagedRekey -benchtime 3x ./io/sqlsink
//
// WEIR_BENCH_STAGED_REKEY_KEYS=1000000 measures other key counts.
func BenchmarkStagedRekey(b *testing.B) {
	for _, driver := range []string{DriverSQLite, DriverPostgres} {
		b.Run(driver, func(b *testing.B) { benchmarkStagedRekey(b, driver) })
	}
}

func benchmarkStagedRekey(b *testing.B, driver string) {
	var pg *pgx.Conn
	if driver == DriverPostgres {
		dsn := cmp.Or(os.Getenv("WEIR_TEST_POSTGRES_DSN"), defaultPostgresDSN)
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		if pg, err = pgx.Connect(cctx, dsn); err != nil {
			b.Skipf("PostgreSQL is not reachable at %s (set WEIR_TEST_POSTGRES_DSN): %v", dsn, err)
		}
		defer pg.Close(context.Background())
	}
	round := 0
	counts := []int{10_000, 100_000}
	if v := os.Getenv("WEIR_BENCH_STAGED_REKEY_KEYS"); v != "" {
		// Other key counts, comma-separated (a million takes minutes).
		counts = counts[:0]
		for f := range strings.SplitSeq(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 10 {
				b.Fatalf("WEIR_BENCH_STAGED_REKEY_KEYS: %q is not a key count of at least 10", f)
			}
			counts = append(counts, n)
		}
	}
	type variant struct {
		keys  int
		rekey bool
	}
	var variants []variant
	for _, n := range counts {
		variants = append(variants, variant{n, false}, variant{n, true})
	}
	for _, c := range variants {
		keys := c.keys
		b.Run(fmt.Sprintf("keys=%d/rekey=%t", keys, c.rekey), func(b *testing.B) {
			ctx := context.Background()
			var fold time.Duration
			for b.Loop() {
				b.StopTimer()
				dir := b.TempDir()
				cfg := Config{Driver: DriverSQLite, DSN: filepath.Join(dir, "t.sqlite"), Table: "totals", Key: []string{"region"},
					Mode: ModeUpsert, Layout: LayoutStaged, MergeInterval: -1, Generation: 1, SinkID: "j/1", DataDir: dir}
				if pg != nil {
					round++
					schema := fmt.Sprintf("bench_rekey_%d_%d", os.Getpid(), round)
					if _, err := pg.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
						b.Fatal(err)
					}
					defer pg.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
					cfg.Driver, cfg.DSN, cfg.Table = DriverPostgres, pg.Config().ConnString(), schema+".totals"
					cfg.SinkID = schema + "/1"
				}
				cfg.EnsureDefaults()
				commit := func(s *Sink, elems []contract.Element) {
					if err := s.Write(ctx, 0, elems); err != nil {
						b.Fatal(err)
					}
					p, err := s.PreCommit(ctx, 0, 1)
					if err != nil {
						b.Fatal(err)
					}
					if err := s.Commit(ctx, 1, [][]byte{p}); err != nil {
						b.Fatal(err)
					}
				}
				s1, err := New(cfg, totalsSchema)
				if err != nil {
					b.Fatal(err)
				}
				elems := make([]contract.Element, keys)
				for i := range elems {
					elems[i] = total(fmt.Sprintf("r%07d", i), int64(i), w0, onTime0)
				}
				commit(s1, elems)
				_ = s1.Close(ctx)
				cfg2 := cfg
				cfg2.Generation, cfg2.SinkID = 2, strings.TrimSuffix(cfg.SinkID, "/1")+"/2"
				want := int64(keys)
				if c.rekey {
					want = int64(keys / 10)
					cfg2.Rekey = &Rekey{From: []string{"region"}, Merge: map[string]string{"total": "sum"}, Step: "Sums",
						Map: func(old []any) ([]any, error) {
							r := old[0].(string)
							return []any{r[:len(r)-1]}, nil // r0000012 and its 9 neighbours meet
						}}
				}
				s2, err := New(cfg2, totalsSchema)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				commit(s2, nil) // the first commit sets the sink up: the re-key
				b.StopTimer()
				if n, _, err := TableRows(ctx, StagedTarget{Driver: cfg.Driver, DSN: cfg.DSN, Table: cfg.Table}); err != nil || n != want {
					b.Fatalf("after the setup the view serves %d rows (%v), want %d", n, err, want)
				}
				start := time.Now()
				if _, err := s2.Merge(ctx); err != nil {
					b.Fatal(err)
				}
				fold += time.Since(start)
				_ = s2.Close(ctx)
				b.StartTimer()
			}
			b.ReportMetric(float64(fold.Milliseconds())/float64(b.N), "fold-ms/op")
		})
	}
}
