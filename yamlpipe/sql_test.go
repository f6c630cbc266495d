package yamlpipe

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/weir-dev/weir"
)

// TestStreamingFixtureIntoSQL: the DESIGN.md §4 panes through an upserting
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
