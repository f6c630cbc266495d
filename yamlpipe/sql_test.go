package yamlpipe

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/io/sqlsink"
)

// TestStreamingFixtureIntoSQL: the reference fixture (docs/ARCHITECTURE.md) panes through an upserting
// SQLite sink leave 475 for NORTH [00:00, 00:05) — never the 900 an append
// of both panes would show — with the pane bookkeeping columns.
func TestStreamingFixtureIntoSQL(t *testing.T) {
	src, err := os.ReadFile("testdata/streaming_fixture.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "totals.sqlite")
	yaml := strings.Replace(string(src), `    - type: WriteToJson
      name: WritePanes
      input: RegionTotals
      config:
        path: out/panes.jsonl`, `    - type: WriteToSql
      name: WriteTotals
      input: RegionTotals
      config:
        driver: sqlite
        dsn: `+db+`
        table: region_totals
        key: [region]
        mode: upsert`, 1)
	if !strings.Contains(yaml, "WriteToSql") {
		t.Fatal("fixture changed: could not swap in the SQL sink")
	}
	for run := 0; run < 2; run++ { // a rerun of the same job writes nothing new
		p, err := Load("fixture.yaml", []byte(yaml), Options{BaseDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: 2}); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(`SELECT region, total, pane_index, pane_timing, pane_is_first, pane_is_last FROM region_totals ORDER BY window_start`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var region, timing string
		var total, idx int64
		var first, last bool
		if err := rows.Scan(&region, &total, &idx, &timing, &first, &last); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %d %d %s %t %t", region, total, idx, timing, first, last))
	}
	want := []string{"NORTH 475 1 LATE false false", "NORTH 30 0 ON_TIME true true"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("table rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestWriteToSqlTypeConflictAtLoad: a table whose column cannot hold a field
// is refused when the pipeline is loaded, naming the file position, the
// table and the column.
func TestWriteToSqlTypeConflictAtLoad(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "t.sqlite")
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(`CREATE TABLE totals (region TEXT, total TEXT)`); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	yaml := `pipeline:
  transforms:
    - type: Create
      config:
        elements: [{region: NORTH, total: 1}]
    - type: WriteToSql
      input: Create
      config:
        dsn: ` + db + `
        table: totals
        mode: append
`
	_, err = Load("p.yaml", []byte(yaml), Options{BaseDir: dir})
	if err == nil {
		t.Fatal("a column type conflict was accepted")
	}
	for _, want := range []string{"p.yaml:6:", "totals", "total"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// TestWriteToSqlFacadeJob: a job the service runs in façade mode writes its
// generation's table behind a view of the configured name.
func TestWriteToSqlFacadeJob(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "t.sqlite")
	yaml := `pipeline:
  transforms:
    - type: Create
      config:
        elements: [{region: NORTH, total: 1}, {region: SOUTH, total: 2}]
    - type: WriteToSql
      input: Create
      config:
        dsn: ` + db + `
        table: totals
        mode: append
`
	job := &JobEnv{Name: "totals-job", ID: "job-7", Generation: 7, DataDir: dir, SQLFacade: true}
	p, err := Load("p.yaml", []byte(yaml), Options{BaseDir: dir, Job: job})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: 1}); err != nil {
		t.Fatal(err)
	}
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []struct {
		sql  string
		want string
	}{
		{`SELECT type FROM sqlite_master WHERE name = 'totals'`, "view"},
		{`SELECT type FROM sqlite_master WHERE name = 'totals__g7'`, "table"},
		{`SELECT group_concat(region, ',') FROM (SELECT region FROM totals ORDER BY region)`, "NORTH,SOUTH"},
	} {
		var got string
		if err := conn.QueryRow(q.sql).Scan(&got); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
		if got != q.want {
			t.Errorf("%s = %q, want %q", q.sql, got, q.want)
		}
	}
}

// TestWriteToSqlIdentifierTooLongAtLoad: a PostgreSQL table whose façade
// table name would pass PostgreSQL's 63 bytes is refused at load, at the
// transform's position, with the limit, and the cause kept for its code.
func TestWriteToSqlIdentifierTooLongAtLoad(t *testing.T) {
	table := "t" + strings.Repeat("x", 58) // 59 bytes: totals__g10 is 64
	yaml := `pipeline:
  transforms:
    - type: Create
      config:
        elements: [{region: NORTH, total: 1}]
    - type: WriteToSql
      input: Create
      config:
        driver: postgres
        dsn: postgres://127.0.0.1:1/none
        table: ` + table + `
        mode: append
`
	job := &JobEnv{Name: "j", ID: "job-1", Generation: 10, DataDir: t.TempDir(), SQLFacade: true}
	_, err := Load("p.yaml", []byte(yaml), Options{BaseDir: t.TempDir(), Job: job})
	if !errors.Is(err, sqlsink.ErrIdentifierTooLong) {
		t.Fatalf("Load: %v, want sqlsink.ErrIdentifierTooLong", err)
	}
	for _, want := range []string{"p.yaml:6:", "63 bytes", "at most 58 bytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// A windowed Combine written for Beam (with language) has Beam's rows, and
// an upserting WriteToSql stores its window and pane from the element
// metadata: the table has the same window_start, window_end and pane
// columns as for weir's Combine, with the same values.
func TestBeamCombineWindowColumnsFromMetadata(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "t.sqlite")
	src := `pipeline:
  type: chain
  transforms:
    - type: Create
      config:
        timestamp_field: ts
        elements:
          - {k: a, v: 1, ts: '2026-03-01T00:00:01Z'}
          - {k: a, v: 2, ts: '2026-03-01T00:00:02Z'}
          - {k: a, v: 4, ts: '2026-03-01T00:01:02Z'}
    - type: Combine
      windowing: {type: fixed, size: 60s}
      config:
        %s
        group_by: k
        combine: {v: sum}
    - type: WriteToSql
      config: {driver: sqlite, dsn: ` + db + `, table: %s, key: [k]}
`
	read := func(table string) string {
		conn, err := sql.Open("sqlite", db)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		rows, err := conn.Query(`SELECT k, v, window_start, window_end, pane_index, pane_timing FROM ` + table + ` ORDER BY window_start`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var got []string
		for rows.Next() {
			var k, ws, we, timing string
			var v, idx int64
			if err := rows.Scan(&k, &v, &ws, &we, &idx, &timing); err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%s %d %s %s %d %s", k, v, ws, we, idx, timing))
		}
		return strings.Join(got, "\n")
	}
	for _, tc := range []struct{ table, lang string }{{"beam_shape", "language: python"}, {"native_shape", "# weir's Combine"}} {
		p, err := Load("p.yaml", []byte(fmt.Sprintf(src, tc.lang, tc.table)), Options{BaseDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: 2}); err != nil {
			t.Fatal(err)
		}
	}
	want := "a 3 2026-03-01T00:00:00.000Z 2026-03-01T00:01:00.000Z 0 ON_TIME\na 4 2026-03-01T00:01:00.000Z 2026-03-01T00:02:00.000Z 0 ON_TIME"
	for _, table := range []string{"beam_shape", "native_shape"} {
		if got := read(table); got != want {
			t.Errorf("%s:\n%s\nwant:\n%s", table, got, want)
		}
	}
}

// TestWriteToSqlConvertRefusedAtLoad: a WriteToSql convert that cannot
// apply is refused at load with its file position and the fix.
func TestWriteToSqlConvertRefusedAtLoad(t *testing.T) {
	const tmpl = `pipeline:
  transforms:
    - type: Create
      config:
        elements: [{region: NORTH, total: 1}]
    - type: WriteToSql
      input: Create
      config:
        table: totals
        key: [region]
        %s
`
	cases := []struct {
		name, config string
		want         []string
	}{
		{"plain layout", "convert: [total]", []string{"p.yaml:12:18", "layout: staged"}},
		{"not a field", "{layout: staged, convert: [amount]}", []string{"p.yaml:12:", `"amount"`, "not a field"}},
		{"a key field", "{layout: staged, convert: [region]}", []string{"p.yaml:12:", "key field", "new table"}},
		{"twice", "{layout: staged, convert: [total, total]}", []string{"p.yaml:12:", "twice"}},
		{"not a list or map", "{layout: staged, convert: total}", []string{"p.yaml:12:", "convert must be [FIELD, ...]"}},
		{"lossy not a bool", "{layout: staged, convert: {total: {allow_lossy: maybe}}}", []string{"p.yaml:12:", "allow_lossy must be true or false"}},
		{"unknown option", "{layout: staged, convert: {total: {lossy: true}}}", []string{"p.yaml:12:", "lossy"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := c.config
			if !strings.HasPrefix(cfg, "{") {
				cfg = "layout: table\n        " + cfg
			} else {
				cfg = strings.TrimSuffix(strings.TrimPrefix(cfg, "{"), "}")
				cfg = strings.ReplaceAll(cfg, ", convert", "\n        convert")
			}
			yaml := fmt.Sprintf(tmpl, cfg)
			_, err := Load("p.yaml", []byte(yaml), Options{BaseDir: dir})
			if err == nil {
				t.Fatalf("accepted:\n%s", yaml)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	// Declared on a staged table, a conversion loads.
	yaml := fmt.Sprintf(tmpl, "layout: staged\n        convert: {total: {allow_lossy: true}}")
	if _, err := Load("p.yaml", []byte(yaml), Options{BaseDir: t.TempDir()}); err != nil {
		t.Fatalf("a declared conversion was refused: %v", err)
	}
}
