package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIServerCrashIcebergExactlyOnce: a streaming job's WriteToIceberg
// appends every generated event exactly once through two kill -9 of the
// server and a drain: a checkpoint's rows become one table snapshot
// recording the sink's epoch, and a commit repeated after a restart
// appends nothing. The table is then read back by a batch job through
// ReadFromIceberg. On a SQL catalog and on a hadoop catalog.
func TestCLIServerCrashIcebergExactlyOnce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a server")
	}
	for _, tc := range []struct{ name, catalog string }{
		{"sql", `catalog_name: local, catalog_properties: {type: sql, uri: "sqlite:///%[1]s/catalog.db", warehouse: "file://%[1]s/warehouse"}`},
		// A hadoop catalog is the warehouse directory; the read back
		// filters on the column it keeps.
		{"hadoop", `catalog_name: local, catalog_properties: {type: hadoop, warehouse: "%[1]s/warehouse"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			crashIcebergExactlyOnce(t, tc.catalog)
		})
	}
}

// crashIcebergExactlyOnce is TestCLIServerCrashIcebergExactlyOnce on the
// catalog catalogFmt gives (%[1]s: the work directory).
func crashIcebergExactlyOnce(t *testing.T, catalogFmt string) {
	dir, work := t.TempDir(), t.TempDir()
	catalog := fmt.Sprintf(catalogFmt, work)
	pipeline := filepath.Join(work, "events.yaml")
	if err := os.WriteFile(pipeline, []byte(idsPipeline("WriteToIceberg", "{table: crash.ids, "+catalog+"}")), 0o644); err != nil {
		t.Fatal(err)
	}
	srv, _ := runThroughKills(t, dir, work, pipeline, 2)
	read := filepath.Join(work, "read.yaml")
	if err := os.WriteFile(read, []byte(fmt.Sprintf(`pipeline:
  transforms:
    - type: ReadFromIceberg
      name: Table
      config: {table: crash.ids, %s, keep: [id], filter: "id >= 0"}
    - type: WriteToJson
      input: Table
      config: {path: out/ids.jsonl}
`, catalog)), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := srv.cli(work, "run", read, "--job-name", "read-ids", "--wait"); r.code != ExitOK {
		t.Fatalf("reading the table back: %d %s", r.code, r.stderr)
	}
	b, err := os.ReadFile(filepath.Join(work, "out", "ids.jsonl"))
	if err != nil {
		ents, _ := os.ReadDir(filepath.Join(work, "out"))
		t.Fatalf("%v (out holds %v)", err, ents)
	}
	seen := map[int64]int{}
	lo, hi := int64(-1), int64(-1)
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r struct{ ID int64 }
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		seen[r.ID]++
		if lo < 0 || r.ID < lo {
			lo = r.ID
		}
		hi = max(hi, r.ID)
	}
	n := int64(len(seen))
	for id, c := range seen {
		if c != 1 {
			t.Errorf("id %d appended %d times", id, c)
		}
	}
	if n < 100 || hi-lo+1 != n {
		t.Fatalf("%d distinct ids %d..%d: want every id once, with no gap", n, lo, hi)
	}
	t.Logf("%d events appended exactly once across two kill -9 (ids %d..%d)", n, lo, hi)
}
