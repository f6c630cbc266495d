package jdbc

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// The test databases: the CI's PostgreSQL and MariaDB (.ci/run starts
// both and creates the MariaDB user); WEIR_TEST_POSTGRES_JDBC_URL and
// WEIR_TEST_MYSQL_JDBC_URL override them.
var testURLs = map[string]string{
	Postgres: "jdbc:postgresql://127.0.0.1:5432/test?user=postgres&sslmode=disable",
	MySQL:    "jdbc:mysql://weir:weir@127.0.0.1:3306/test",
}

var tableSeq atomic.Int64

// forEachDatabase runs f against each database, skipping (with the
// reason) one that cannot be reached.
func forEachDatabase(t *testing.T, f func(t *testing.T, target Target, db *sql.DB, table string)) {
	for _, typ := range []string{Postgres, MySQL} {
		t.Run(typ, func(t *testing.T) {
			u := testURLs[typ]
			if v := os.Getenv("WEIR_TEST_" + strings.ToUpper(typ) + "_JDBC_URL"); v != "" {
				u = v
			}
			target, err := Conn{URL: u}.Parse()
			if err != nil {
				t.Fatal(err)
			}
			db, err := open(target, nil)
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err = db.PingContext(ctx)
				cancel()
			}
			if err != nil {
				t.Skipf("%s is not reachable at %s: %v", typ, redact(u), err)
			}
			t.Cleanup(func() { db.Close() })
			table := fmt.Sprintf("jdbc_t%d_%d", os.Getpid()%100000, tableSeq.Add(1))
			t.Cleanup(func() {
				db.Exec("DROP TABLE IF EXISTS " + quote(target.Type, table))
				db.Exec("DELETE FROM " + ProgressTable + " WHERE sink_id LIKE '" + table + "%'")
			})
			f(t, target, db, table)
		})
	}
}

var testSchema = row.MustSchema(
	row.Field{Name: "region", Type: row.Of(row.KindString)},
	row.Field{Name: "amount", Type: row.Of(row.KindInt)},
	row.Field{Name: "ratio", Type: row.Of(row.KindFloat)},
	row.Field{Name: "ok", Type: row.Of(row.KindBool)},
	row.Field{Name: "ts", Type: row.Of(row.KindTimestamp)},
)

func testRow(region string, amount int64) contract.Element {
	r := row.New(testSchema)
	r.Values = []any{region, amount, float64(amount) / 4, amount%2 == 0, mtime.FromTime(time.Date(2026, 3, 1, 10, 0, int(amount%60), 0, time.UTC))}
	return contract.Element{Value: r, Time: mtime.MinTimestamp, Window: window.Global, Pane: window.NoFiring}
}

// readAll reads table back through a Source, sorted.
func readAll(t *testing.T, target Target, table string) []string {
	t.Helper()
	ctx := context.Background()
	q := Query(target.Type, table, "")
	s, err := Describe(ctx, target, nil, q)
	if err != nil {
		t.Fatal(err)
	}
	splits, _ := NewSource(target, nil, q, s).Split(ctx, 1)
	defer splits[0].Close()
	var out []string
	buf := make([]contract.Element, 3)
	for {
		res, err := splits[0].Read(ctx, buf)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range buf[:res.N] {
			r := e.Value.(*row.Row)
			var parts []string
			for i, f := range r.Schema.Fields {
				parts = append(parts, fmt.Sprintf("%s=%v", f.Name, r.Values[i]))
			}
			out = append(out, strings.Join(parts, " "))
		}
		if res.Done {
			break
		}
	}
	sort.Strings(out)
	return out
}

// TestSinkCommitsOnce: rows wait for their checkpoint; a commit repeated
// after a restart (a new sink, the same parts) inserts nothing twice; rows
// written after the last pre-commit of a checkpointed run are left to its
// next execution; the table is created with the rows' types and read back
// typed.
func TestSinkCommitsOnce(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, target Target, db *sql.DB, table string) {
		ctx := context.Background()
		cfg := SinkConfig{Target: target, Table: table, SinkID: table + "/job/Write"}
		s, err := NewSink(cfg, testSchema)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Write(ctx, 0, []contract.Element{testRow("NORTH", 4), testRow("WEST", 7)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Write(ctx, 1, []contract.Element{testRow("SOUTH", 10)}); err != nil {
			t.Fatal(err)
		}
		p0, _ := s.PreCommit(ctx, 0, 1)
		p1, _ := s.PreCommit(ctx, 1, 1)
		if err := s.Commit(ctx, 1, [][]byte{p0, p1}); err != nil {
			t.Fatal(err)
		}
		s.Write(ctx, 0, []contract.Element{testRow("EAST", 3)}) // never pre-committed
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		again, _ := NewSink(cfg, testSchema)
		if err := again.Commit(ctx, 1, [][]byte{p0, p1}); err != nil {
			t.Fatal(err)
		}
		again.Close(ctx)
		want := []string{
			"region=NORTH amount=4 ratio=1 ok=true ts=2026-03-01T10:00:04.000Z",
			"region=SOUTH amount=10 ratio=2.5 ok=true ts=2026-03-01T10:00:10.000Z",
			"region=WEST amount=7 ratio=1.75 ok=false ts=2026-03-01T10:00:07.000Z",
		}
		if target.Type == MySQL {
			// MySQL's BOOLEAN is TINYINT(1): it reads back as 0 or 1.
			for i := range want {
				want[i] = strings.NewReplacer("ok=true", "ok=1", "ok=false", "ok=0").Replace(want[i])
			}
		}
		if got := readAll(t, target, table); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("the table holds:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// TestSinkWithoutCheckpoints inserts at Close, and refuses a table that
// lacks a field's column before writing anything.
func TestSinkWithoutCheckpoints(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, target Target, db *sql.DB, table string) {
		ctx := context.Background()
		s, _ := NewSink(SinkConfig{Target: target, Table: table}, testSchema)
		s.Write(ctx, 0, []contract.Element{testRow("NORTH", 4)})
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, target, table); len(got) != 1 {
			t.Errorf("after Close: %v, want one row", got)
		}
		other := row.MustSchema(row.Field{Name: "region", Type: row.Of(row.KindString)}, row.Field{Name: "missing", Type: row.Of(row.KindInt)})
		s2, _ := NewSink(SinkConfig{Target: target, Table: table}, other)
		if err := s2.Validate(ctx); err == nil || !strings.Contains(err.Error(), "has no column missing") {
			t.Errorf("Validate of a table without the field's column: %v", err)
		}
	})
}

func TestParseURL(t *testing.T) {
	tests := []struct {
		conn     Conn
		driver   string
		dsn      string
		wantErr  string
		wantHost string
	}{
		{conn: Conn{URL: "jdbc:postgresql://db.example:5433/shop?sslmode=disable", Username: "u", Password: "p w"}, driver: "pgx",
			dsn: "postgres://u:p%20w@db.example:5433/shop?sslmode=disable", wantHost: "db.example"},
		{conn: Conn{URL: "jdbc:mysql://10.0.0.5/shop", Username: "u", Password: "p", ConnectionProperties: "charset=utf8mb4"}, driver: "mysql",
			dsn: "u:p@tcp(10.0.0.5:3306)/shop?parseTime=true&charset=utf8mb4", wantHost: "10.0.0.5"},
		{conn: Conn{URL: "postgresql://x/y"}, wantErr: "not a JDBC URL"},
		{conn: Conn{URL: "jdbc:oracle:thin:@x:1521:y"}, wantErr: "weir reads and writes jdbc:postgresql"},
		{conn: Conn{Type: MySQL, URL: "jdbc:postgresql://x/y"}, wantErr: "does not match"},
		{conn: Conn{URL: "jdbc:mysql://x/y", ConnectionProperties: "novalue"}, wantErr: "k1=v1;k2=v2"},
	}
	for _, tt := range tests {
		got, err := tt.conn.Parse()
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%+v: err %v, want %q", tt.conn, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got.Driver != tt.driver || got.DSN != tt.dsn || got.Host != tt.wantHost {
			t.Errorf("%+v: %+v %v, want %s %s", tt.conn, got, err, tt.driver, tt.dsn)
		}
	}
}

// TestInitSQLOnEveryConnection: connection_init_sql runs on every
// connection the pool opens, so a reconnect keeps its settings.
func TestInitSQLOnEveryConnection(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, target Target, _ *sql.DB, _ string) {
		init, query := []string{"SET application_name = 'weir-init'"}, "SELECT current_setting('application_name')"
		if target.Type == MySQL {
			init, query = []string{"SET @weir_init = 'weir-init'"}, "SELECT @weir_init"
		}
		db, err := open(target, init)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		db.SetMaxIdleConns(0) // every query on a new connection
		for i := range 3 {
			var got string
			if err := db.QueryRow(query).Scan(&got); err != nil || got != "weir-init" {
				t.Fatalf("query %d on a new connection: %q, %v; want the init statement's setting", i, got, err)
			}
		}
	})
}

// TestSinkBufferedBytes: the sink says how much it holds uncommitted
// (contract.BufferingSink) from Write to the worker's PreCommit. It needs
// no database: rows wait in memory until a commit.
func TestSinkBufferedBytes(t *testing.T) {
	ctx := context.Background()
	s, err := NewSink(SinkConfig{Target: Target{Type: Postgres, Driver: "pgx", DSN: "postgres://nowhere.invalid/db", Host: "nowhere.invalid"}, Table: "t", SinkID: "t/job/Write"}, testSchema)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.BufferedBytes(); n != 0 {
		t.Fatalf("a new sink holds %d bytes, want 0", n)
	}
	if err := s.Write(ctx, 0, []contract.Element{testRow("NORTH", 4), testRow("WEST", 7)}); err != nil {
		t.Fatal(err)
	}
	w0 := s.BufferedBytes()
	if err := s.Write(ctx, 1, []contract.Element{testRow("SOUTH", 10)}); err != nil {
		t.Fatal(err)
	}
	if both := s.BufferedBytes(); w0 <= 0 || both != w0+w0/2 {
		t.Fatalf("two rows held in %d bytes, three in %d: want a positive size per row", w0, both)
	}
	if _, err := s.PreCommit(ctx, 0, 1); err != nil {
		t.Fatal(err)
	}
	if n := s.BufferedBytes(); n != w0/2 {
		t.Errorf("after worker 0's pre-commit the sink holds %d bytes, want worker 1's %d", n, w0/2)
	}
}
