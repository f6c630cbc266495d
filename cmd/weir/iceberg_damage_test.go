package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go/format"

	"github.com/weir-dev/weir/internal/pqdamage"
)

// TestCLIReadDamagedIcebergTable: a job reading an Iceberg table whose
// data file Arrow's reader cannot decode (its first page states an
// encoding Arrow does not implement for the column, on which Arrow
// panics) fails, naming the file; the server, which iceberg-go's reading
// goroutine took down before, stays up and runs the next job.
func TestCLIReadDamagedIcebergTable(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a server")
	}
	dir, work := t.TempDir(), t.TempDir()
	srv := startServer(t, dir)
	catalog := fmt.Sprintf(`catalog_name: local, catalog_properties: {type: sql, uri: "sqlite:///%[1]s/catalog.db", warehouse: "file://%[1]s/warehouse"}`, work)
	write := func(name, text string) string {
		t.Helper()
		p := filepath.Join(work, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	create := write("create.yaml", fmt.Sprintf(`pipeline:
  transforms:
    - type: Create
      name: Rows
      config:
        elements: [{id: 1, name: a}, {id: 2, name: b}, {id: 3, name: c}]
    - type: WriteToIceberg
      input: Rows
      config: {table: shop.t, %s}
`, catalog))
	if r := srv.cli(work, "run", create, "--job-name", "create", "--wait"); r.code != ExitOK {
		t.Fatalf("writing the table: %d %s", r.code, r.stderr)
	}
	datas, err := filepath.Glob(filepath.Join(work, "warehouse", "shop.db", "t", "data", "*.parquet"))
	if err != nil || len(datas) != 1 {
		t.Fatalf("data files %v, %v: want one", datas, err)
	}
	unimplementedEncoding(t, datas[0])
	read := write("read.yaml", fmt.Sprintf(`pipeline:
  transforms:
    - type: ReadFromIceberg
      name: Table
      config: {table: shop.t, %s}
    - type: WriteToJson
      input: Table
      config: {path: out/rows.jsonl}
`, catalog))
	r := srv.cli(work, "run", read, "--job-name", "read", "--wait")
	if r.code == ExitOK || !strings.Contains(r.stderr, "a table file cannot be read") || !strings.Contains(r.stderr, datas[0]) {
		t.Fatalf("reading the damaged table: exit %d, stderr:\n%s\nwant a failure naming %s", r.code, r.stderr, datas[0])
	}
	if r := srv.cli(work, "run", create, "--job-name", "create-again", "--wait"); r.code != ExitOK {
		t.Fatalf("the next job after the damaged read: %d %s\nserver log:\n%s", r.code, r.stderr, srv.log())
	}
}

// unimplementedEncoding rewrites the first data page header of the first
// column of the Parquet file at path to state DELTA_LENGTH_BYTE_ARRAY,
// which Arrow's reader does not implement for integers.
func unimplementedEncoding(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if b, err = pqdamage.SetEncoding(b, 0, format.DeltaLengthByteArray); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
