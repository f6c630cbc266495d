package sqlsink

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// defaultPostgresDSN is the CI database; WEIR_TEST_POSTGRES_DSN overrides it.
const defaultPostgresDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

var tableSeq atomic.Int64

// env is one test database: a driver, a DSN, a unique table name and a way
// to read back what the sink wrote.
type env struct {
	t      testing.TB
	driver string
	dsn    string
	table  string
	query  func(q string, args ...any) [][]any
	exec   func(q string) error
}

// forEachDriver runs f once per driver, as subtests named sqlite and
// postgres. The postgres subtest is skipped, with the reason, when the
// database cannot be reached.
func forEachDriver(t *testing.T, f func(t *testing.T, e *env)) {
	t.Helper()
	for _, d := range []string{DriverSQLite, DriverPostgres} {
		t.Run(d, func(t *testing.T) { f(t, newEnv(t, d)) })
	}
}

func newEnv(t testing.TB, driver string) *env {
	t.Helper()
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, strings.ToLower(t.Name()))
	if len(name) > 30 {
		name = name[len(name)-30:]
	}
	e := &env{t: t, driver: driver,
		table: fmt.Sprintf("t%d_%d_%s", os.Getpid()%100000, tableSeq.Add(1), strings.Trim(name, "_"))}
	ctx := context.Background()
	switch driver {
	case DriverSQLite:
		e.dsn = filepath.Join(t.TempDir(), "sink.sqlite")
		db, err := sql.Open("sqlite", "file:"+e.dsn+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		e.query = func(q string, args ...any) [][]any {
			t.Helper()
			rows, err := db.Query(q, args...)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			defer rows.Close()
			cols, _ := rows.Columns()
			var out [][]any
			for rows.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					t.Fatal(err)
				}
				out = append(out, vals)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			return out
		}
		e.exec = func(q string) error { _, err := db.Exec(q); return err }
	case DriverPostgres:
		e.dsn = os.Getenv("WEIR_TEST_POSTGRES_DSN")
		if e.dsn == "" {
			e.dsn = defaultPostgresDSN
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(cctx, e.dsn)
		if err != nil {
			t.Skipf("PostgreSQL is not reachable at %s (set WEIR_TEST_POSTGRES_DSN): %v", e.dsn, err)
		}
		t.Cleanup(func() {
			conn.Exec(ctx, "DROP TABLE IF EXISTS "+quoteIdent(e.table))
			conn.Exec(ctx, "DELETE FROM "+ProgressTable+" WHERE sink_id LIKE $1", e.table+"%")
			conn.Close(ctx)
		})
		run := func(q string, args ...any) ([][]any, error) {
			rows, err := conn.Query(ctx, q, args...)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			var out [][]any
			for rows.Next() {
				vals, err := rows.Values()
				if err != nil {
					return nil, err
				}
				out = append(out, vals)
			}
			return out, rows.Err()
		}
		e.query = func(q string, args ...any) [][]any {
			t.Helper()
			out, err := run(q, args...)
			if err != nil && strings.Contains(err.Error(), "cached plan must not change result type") {
				// A column changed type under the query pgx prepared
				// before (a conversion): told once, pgx prepares it again,
				// as any client does.
				out, err = run(q, args...)
			}
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			return out
		}
		e.exec = func(q string) error { _, err := conn.Exec(ctx, q); return err }
	}
	return e
}

// config returns a sink configuration for the env's table.
func (e *env) config(mode string, key ...string) Config {
	return Config{Driver: e.driver, DSN: e.dsn, Table: e.table, Key: key, Mode: mode,
		SinkID: e.table + "/Write", JobID: "job-1", Generation: 1}
}

// sink builds and prepares a sink, closing it at the end of the test.
func (e *env) sink(cfg Config, s *row.Schema) *Sink {
	e.t.Helper()
	sk, err := New(cfg, s)
	if err != nil {
		e.t.Fatalf("New: %v", err)
	}
	if err := sk.Prepare(context.Background()); err != nil {
		e.t.Fatalf("Prepare: %v", err)
	}
	e.t.Cleanup(func() { sk.Close(context.Background()) })
	return sk
}

// q is a placeholder for the env's dialect: q(1) is ?1 or $1.
func (e *env) q(n int) string {
	if e.driver == DriverPostgres {
		return fmt.Sprintf("$%d", n)
	}
	return "?"
}

// count returns the number of rows of the env's table.
func (e *env) count() int64 {
	e.t.Helper()
	return e.query("SELECT COUNT(*) FROM " + quoteTable(e.table))[0][0].(int64)
}

// progress returns the stored epoch of sinkID, or -2 when there is none.
func (e *env) progress(sinkID string) int64 {
	e.t.Helper()
	rows := e.query("SELECT epoch FROM "+ProgressTable+" WHERE sink_id = "+e.q(1), sinkID)
	if len(rows) == 0 {
		return -2
	}
	return rows[0][0].(int64)
}

// asTime reads a timestamp column: time.Time (PostgreSQL) or RFC 3339 text
// (SQLite); nil stays nil.
func asTime(t *testing.T, v any) any {
	t.Helper()
	switch x := v.(type) {
	case nil:
		return nil
	case time.Time:
		return mtime.FromTime(x)
	case string:
		ts, err := mtime.Parse(x)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	t.Fatalf("not a timestamp: %T %v", v, v)
	return nil
}

// asBool reads a bool column: bool (PostgreSQL) or 0/1 (SQLite).
func asBool(t *testing.T, v any) any {
	t.Helper()
	switch x := v.(type) {
	case nil:
		return nil
	case bool:
		return x
	case int64:
		return x != 0
	}
	t.Fatalf("not a bool: %T %v", v, v)
	return nil
}

// Schemas and rows of the reference fixture (docs/ARCHITECTURE.md).
var (
	totalsSchema = row.MustSchema(
		row.Field{Name: "region", Type: row.Of(row.KindString)},
		row.Field{Name: "total", Type: row.Of(row.KindInt)},
		row.Field{Name: "window_start", Type: row.Of(row.KindTimestamp)},
		row.Field{Name: "window_end", Type: row.Of(row.KindTimestamp)},
		row.Field{Name: "pane", Type: row.RowOf(row.PaneSchema())},
	)
	t0 = mtime.FromTime(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	w0 = window.Window{Start: t0, End: t0.Add(5 * mtime.Minute)}
	w1 = window.Window{Start: t0.Add(5 * mtime.Minute), End: t0.Add(10 * mtime.Minute)}
)

// total returns a windowed total as a Combine step emits it.
func total(region string, cents int64, w window.Window, p window.PaneInfo) contract.Element {
	r := &row.Row{Schema: totalsSchema, Values: []any{region, cents, nil, nil, row.PaneRow(p)}}
	if !w.IsGlobal() {
		r.Values[2], r.Values[3] = w.Start, w.End
	}
	return contract.Element{Value: r, Time: w.MaxTimestamp(), Window: w, Pane: p}
}

var (
	onTime0 = window.PaneInfo{Index: 0, Timing: window.OnTime, IsFirst: true}
	late1   = window.PaneInfo{Index: 1, Timing: window.Late}
)

// commit writes elems on worker 0 and commits them as epoch.
func commit(t *testing.T, s *Sink, epoch uint64, elems ...contract.Element) []byte {
	t.Helper()
	ctx := context.Background()
	if err := s.Write(ctx, 0, elems); err != nil {
		t.Fatalf("Write: %v", err)
	}
	p, err := s.PreCommit(ctx, 0, epoch)
	if err != nil {
		t.Fatalf("PreCommit: %v", err)
	}
	if err := s.Commit(ctx, epoch, [][]byte{p}); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	return p
}
