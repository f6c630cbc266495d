package yamlpipe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2/ocf"
)

// TestAvroFiles: WriteToAvro writes an Avro object container file a
// standard Avro reader reads (schema from the rows, every field nullable);
// ReadFromAvro reads such a file — and one written by another program,
// with ints, nullable unions, a timestamp-millis and an array — taking its
// schema from the file, as Beam's ReadFromAvro does.
func TestAvroFiles(t *testing.T) {
	dir := t.TempDir()
	// A file written by another program.
	const schema = `{"type": "record", "name": "Order", "fields": [
		{"name": "region", "type": "string"},
		{"name": "amount", "type": "int"},
		{"name": "note", "type": ["null", "string"], "default": null},
		{"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
		{"name": "tags", "type": {"type": "array", "items": "string"}}]}`
	f, err := os.Create(filepath.Join(dir, "orders.avro"))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := ocf.NewEncoder(schema, f)
	if err != nil {
		t.Fatal(err)
	}
	type order struct {
		Region string    `avro:"region"`
		Amount int       `avro:"amount"`
		Note   *string   `avro:"note"`
		TS     time.Time `avro:"ts"`
		Tags   []string  `avro:"tags"`
	}
	late := "late"
	base := time.Date(2026, 12, 1, 7, 21, 0, 0, time.UTC)
	for _, o := range []order{
		{Region: "NORTH", Amount: 250, TS: base, Tags: []string{"a"}},
		{Region: "NORTH", Amount: 175, Note: &late, TS: base.Add(time.Minute), Tags: []string{}},
		{Region: "WEST", Amount: 100, TS: base.Add(2 * time.Minute), Tags: []string{"b", "c"}},
	} {
		if err := enc.Encode(o); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()

	// Read it, sum per region into an Avro file, and read that back.
	src := `pipeline:
  transforms:
    - type: ReadFromAvro
      config: {path: orders.avro, timestamp_field: ts}
    - type: LogForTesting
      input: ReadFromAvro
    - type: Combine
      input: ReadFromAvro
      config:
        group_by: [region]
        combine: {total: {value: amount, fn: sum}, n: {value: amount, fn: count}}
    - type: WriteToAvro
      input: Combine
      config: {path: totals.avro}
`
	lines, err := runCSVLogged(t, dir, src)
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, lines,
		`{"region": "NORTH", "amount": 175, "note": "late", "ts": "2026-12-01T07:22:00.000Z", "tags": []}`,
		`{"region": "NORTH", "amount": 250, "note": null, "ts": "2026-12-01T07:21:00.000Z", "tags": ["a"]}`,
		`{"region": "WEST", "amount": 100, "note": null, "ts": "2026-12-01T07:23:00.000Z", "tags": ["b", "c"]}`)

	// A standard reader reads what weir wrote.
	out, err := os.Open(filepath.Join(dir, "totals.avro"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	dec, err := ocf.NewDecoder(out)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]int64{}
	for dec.HasNext() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		got[m["region"].(string)] = [2]int64{m["total"].(int64), m["n"].(int64)}
	}
	if err := dec.Error(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["NORTH"] != [2]int64{425, 2} || got["WEST"] != [2]int64{100, 1} {
		t.Fatalf("totals.avro holds %v, want NORTH 425/2 and WEST 100/1", got)
	}

	// And weir reads it back.
	lines, err = runCSVLogged(t, dir, "pipeline:\n  type: chain\n  transforms:\n    - {type: ReadFromAvro, config: {path: totals.avro}}\n    - {type: LogForTesting}\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 2 {
		t.Fatalf("reading totals.avro back: %q", lines)
	}

	// Not an Avro file: a load error naming it.
	if err := os.WriteFile(filepath.Join(dir, "bad.avro"), []byte("nope"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = runCSVLogged(t, dir, "pipeline:\n  type: chain\n  transforms:\n    - {type: ReadFromAvro, config: {path: bad.avro}}\n    - {type: LogForTesting}\n")
	if err == nil || !contains(err.Error(), "p.yaml:4:43", "bad.avro: not an Avro object container file: no magic bytes") {
		t.Fatalf("a file that is not Avro: %v", err)
	}
}

func contains(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
