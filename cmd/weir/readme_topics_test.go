package main

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"
)

// TestCLIReadmeTopicExample runs the README's topic example as written, in
// a copy of examples/: create the topic and subscription, publish
// orders.jsonl (twice: the --id-field makes the second publish store
// nothing), run orders-to-sql.yaml as a job, check v2 against it, update
// to v2 in place, drain, and read the table: each region's 5-minute totals
// equal the file's.
func TestCLIReadmeTopicExample(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a server")
	}
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "examples"), os.DirFS(filepath.Join("..", "..", "examples"))); err != nil {
		t.Fatalf("copying examples: %v", err)
	}
	ex := filepath.Join(dir, "examples")
	p := startServer(t, filepath.Join(dir, "data"))
	steps := [][]string{
		{"topics", "create", "orders"},
		{"subscriptions", "create", "orders-sink", "--topic", "orders", "--from-beginning"},
		{"topics", "publish", "orders", "--file", "orders.jsonl", "--attribute", "source=import", "--id-field", "order_id"},
		{"topics", "publish", "orders", "--file", "orders.jsonl", "--attribute", "source=import", "--id-field", "order_id"},
		{"run", "orders-to-sql.yaml", "--job-name", "orders-sink"},
		{"check", "orders-sink", "orders-to-sql-v2.yaml"},
		{"run", "orders-to-sql-v2.yaml", "--job-name", "orders-sink", "--update"},
	}
	for _, args := range steps {
		if r := p.cli(ex, args...); r.code != ExitOK {
			t.Fatalf("weir %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	// A drain stops reading: messages still in the subscription stay
	// there. So drain once the job has read them all.
	waitCaughtUp(t, p, "orders-sink")
	if r := p.cli(ex, "jobs", "drain", "orders-sink", "--wait"); r.code != ExitOK {
		t.Fatalf("drain: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	db, err := sql.Open("sqlite", filepath.Join(ex, "orders.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT region, window_start, total, orders FROM region_totals ORDER BY region, window_start`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string][2]int64{}
	for rows.Next() {
		var region, start string
		var total, n int64
		if err := rows.Scan(&region, &start, &total, &n); err != nil {
			t.Fatal(err)
		}
		got[region+" "+start] = [2]int64{total, n}
	}
	// orders.jsonl, summed per region and 5-minute window by hand.
	want := map[string][2]int64{
		"EAST 2026-03-01T10:05:00.000Z":  {60, 1},
		"EAST 2026-03-01T10:10:00.000Z":  {90, 1},
		"NORTH 2026-03-01T10:00:00.000Z": {425, 2},
		"NORTH 2026-03-01T10:05:00.000Z": {40, 1},
		"NORTH 2026-03-01T10:10:00.000Z": {55, 1},
		"SOUTH 2026-03-01T10:00:00.000Z": {80, 1},
		"SOUTH 2026-03-01T10:10:00.000Z": {120, 1},
		"WEST 2026-03-01T10:00:00.000Z":  {100, 1},
		"WEST 2026-03-01T10:05:00.000Z":  {300, 1},
	}
	if len(got) != len(want) {
		t.Errorf("the table has %d rows, want %d: %v", len(got), len(want), got)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: total and count %v, want %v (table %v)", k, got[k], w, got)
		}
	}
}
