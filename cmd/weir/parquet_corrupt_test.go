package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// corruptParquetYAML reads every Parquet file of a directory.
const corruptParquetYAML = `pipeline:
  transforms:
    - type: ReadFromParquet
      name: Read
      config: {path: "in/*.parquet"}
    - type: WriteToJson
      name: Write
      input: Read
      config: {path: out/rows.jsonl}
`

// TestCLIServerCorruptParquet: a Parquet file whose footer states four
// gigabytes, read by a job on a running server after a valid file, fails
// that job with an error naming the file — it does not take the server
// (and every other job) down for want of memory — and the server runs the
// next job as before.
func TestCLIServerCorruptParquet(t *testing.T) {
	t.Parallel()
	p := startServer(t, t.TempDir())
	type order struct {
		Region string `parquet:"region"`
		Amount int64  `parquet:"amount"`
	}
	write := func(dir string, corrupt bool) {
		t.Helper()
		in := filepath.Join(dir, "in")
		if err := os.MkdirAll(in, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := parquet.WriteFile(filepath.Join(in, "a.parquet"), []order{{"NORTH", 250}, {"WEST", 100}}); err != nil {
			t.Fatal(err)
		}
		if corrupt {
			b, err := os.ReadFile(filepath.Join(in, "a.parquet"))
			if err != nil {
				t.Fatal(err)
			}
			binary.LittleEndian.PutUint32(b[len(b)-8:], 0xfffffff0) // the footer's length
			if err := os.WriteFile(filepath.Join(in, "b.parquet"), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(corruptParquetYAML), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bad := t.TempDir()
	write(bad, true)
	r := p.cli(bad, "run", "p.yaml", "--job-name", "corrupt", "--wait")
	if r.code != ExitFailure || !strings.Contains(r.stderr, "b.parquet is not a Parquet file") || !strings.Contains(r.stderr, "footer states") {
		t.Fatalf("a corrupt file: exit %d, stderr %q; want 1 naming b.parquet's footer\nserver log:\n%s", r.code, r.stderr, p.log())
	}
	if m := p.describe("corrupt"); m["state"] != "FAILED" {
		t.Errorf("the job is %v, want FAILED", m["state"])
	}
	good := t.TempDir()
	write(good, false)
	r = p.cli(good, "run", "p.yaml", "--job-name", "valid", "--wait")
	if r.code != ExitOK {
		t.Fatalf("the next job: exit %d, stderr %q\nserver log:\n%s", r.code, r.stderr, p.log())
	}
	out, err := os.ReadFile(filepath.Join(good, "out", "rows.jsonl"))
	if err != nil || strings.Count(string(out), "\n") != 2 {
		t.Errorf("the next job wrote %q, %v; want 2 rows", out, err)
	}
}
