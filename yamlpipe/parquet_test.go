package yamlpipe

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
)

// TestParquetFiles: ReadFromParquet reads a file another program wrote
// (optional columns, a TIMESTAMP in microseconds, a repeated column),
// taking its schema from the file; WriteToParquet writes a file a
// standard Parquet reader reads, and weir reads it back.
func TestParquetFiles(t *testing.T) {
	dir := t.TempDir()
	type order struct {
		Region string    `parquet:"region"`
		Amount int32     `parquet:"amount"`
		Note   *string   `parquet:"note,optional"`
		TS     time.Time `parquet:"ts,timestamp(microsecond)"`
		Tags   []string  `parquet:"tags"`
	}
	late := "late"
	base := time.Date(2026, 12, 1, 7, 21, 0, 0, time.UTC)
	if err := parquet.WriteFile(filepath.Join(dir, "orders.parquet"), []order{
		{Region: "NORTH", Amount: 250, TS: base, Tags: []string{"a"}},
		{Region: "NORTH", Amount: 175, Note: &late, TS: base.Add(time.Minute)},
		{Region: "WEST", Amount: 100, TS: base.Add(2 * time.Minute), Tags: []string{"b", "c"}},
	}); err != nil {
		t.Fatal(err)
	}
	src := `pipeline:
  transforms:
    - type: ReadFromParquet
      config: {path: orders.parquet, timestamp_field: ts}
    - type: LogForTesting
      input: ReadFromParquet
    - type: Combine
      input: ReadFromParquet
      config:
        group_by: [region]
        combine: {total: {value: amount, fn: sum}, n: {value: amount, fn: count}}
    - type: WriteToParquet
      input: Combine
      config: {path: totals.parquet}
`
	lines, err := runCSVLogged(t, dir, src)
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, lines,
		`{"region": "NORTH", "amount": 175, "note": "late", "ts": "2026-12-01T07:22:00.000Z", "tags": []}`,
		`{"region": "NORTH", "amount": 250, "note": null, "ts": "2026-12-01T07:21:00.000Z", "tags": ["a"]}`,
		`{"region": "WEST", "amount": 100, "note": null, "ts": "2026-12-01T07:23:00.000Z", "tags": ["b", "c"]}`)

	type total struct {
		Region string `parquet:"region"`
		Total  int64  `parquet:"total"`
		N      int64  `parquet:"n"`
	}
	got, err := parquet.ReadFile[total](filepath.Join(dir, "totals.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string][2]int64{}
	for _, r := range got {
		sums[r.Region] = [2]int64{r.Total, r.N}
	}
	if len(sums) != 2 || sums["NORTH"] != [2]int64{425, 2} || sums["WEST"] != [2]int64{100, 1} {
		t.Fatalf("totals.parquet holds %v, want NORTH 425/2 and WEST 100/1", sums)
	}
	lines, err = runCSVLogged(t, dir, "pipeline:\n  type: chain\n  transforms:\n    - {type: ReadFromParquet, config: {path: totals.parquet}}\n    - {type: LogForTesting}\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 2 {
		t.Fatalf("reading totals.parquet back: %q", lines)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.parquet"), []byte("nope"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = runCSVLogged(t, dir, "pipeline:\n  type: chain\n  transforms:\n    - {type: ReadFromParquet, config: {path: bad.parquet}}\n    - {type: LogForTesting}\n")
	if err == nil || !contains(err.Error(), "bad.parquet is not a Parquet file") {
		t.Fatalf("a file that is not Parquet: %v", err)
	}
}

// TestParquetZeroValues: WriteToParquet writes a field's zero value (0,
// 0.0, "", false) as that value, not as null, and a null as
// null: read back, each row is what was written.
func TestParquetZeroValues(t *testing.T) {
	dir := t.TempDir()
	src := `pipeline:
  transforms:
    - type: Create
      config:
        elements:
          - {label: "zeros", rank: 0, score: 0.0, note: "", ok: false, tags: []}
          - {label: "values", rank: 7, score: 1.5, note: "x", ok: true, tags: ["a"]}
          - {label: "nulls", rank: null, score: null, note: null, ok: null, tags: null}
    - type: WriteToParquet
      input: Create
      config: {path: out.parquet}
`
	if _, err := runCSVLogged(t, dir, src); err != nil {
		t.Fatal(err)
	}
	lines, err := runCSVLogged(t, dir, "pipeline:\n  type: chain\n  transforms:\n    - {type: ReadFromParquet, config: {path: out.parquet}}\n    - {type: LogForTesting}\n")
	if err != nil {
		t.Fatal(err)
	}
	// Read back in the file's column order (by name).
	wantLines(t, lines,
		`{"label": "nulls", "note": null, "ok": null, "rank": null, "score": null, "tags": []}`,
		`{"label": "values", "note": "x", "ok": true, "rank": 7, "score": 1.5, "tags": ["a"]}`,
		`{"label": "zeros", "note": "", "ok": false, "rank": 0, "score": 0.0, "tags": []}`)
}
