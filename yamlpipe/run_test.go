package yamlpipe

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/weir-dev/weir"
)

// runSrc loads src with BaseDir dir and runs it.
func runSrc(t *testing.T, dir, src string, workers int) error {
	t.Helper()
	p, err := Load("p.yaml", []byte(src), Options{BaseDir: dir})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	_, err = weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: workers})
	return err
}

func TestRunErrorNamesStepReasonAndPosition(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"validate without error_handling", createT + "    - type: Validate\n      input: In\n      config:\n        rules: {small: amount < 100}\n    - type: WriteToJson\n      input: Validate\n      config: {path: o.jsonl}\n",
			[]string{"Validate", "small", "p.yaml:7"}},
		{"evaluation error", createT + "    - type: MapToFields\n      input: In\n      config:\n        fields: {n: int(region)}\n    - type: WriteToJson\n      input: MapToFields\n      config: {path: o.jsonl}\n",
			[]string{"MapToFields", "evaluation_error", "p.yaml:7"}},
		{"bad timestamp", "pipeline:\n  transforms:\n    - type: Create\n      config:\n        timestamp_field: ts\n        elements:\n          - {ts: '2026-03-01T00:00:00Z'}\n          - {ts: 'noon'}\n    - type: WriteToJson\n      input: Create\n      config: {path: o.jsonl}\n",
			[]string{"Create", "bad_timestamp", "p.yaml:8"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := runSrc(t, t.TempDir(), tc.src, 1)
			if err == nil {
				t.Fatal("run succeeded; want a failure")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

func TestReadFiles(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "in.csv"), []byte("region,amount,ts\nNORTH,250,2026-03-01T00:01:00Z\nWEST,abc,2026-03-01T00:02:00Z\nEAST,5\nSOUTH,7,1772323320000\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte("{\"region\":\"NORTH\",\"amount\":250}\n{nope\n\n{\"region\":\"WEST\",\"amount\":1.5}\n"), 0o644)
	src := `pipeline:
  transforms:
    - type: ReadFromCsv
      config: {path: in.csv, schema: {amount: int, ts: timestamp}, timestamp_field: ts}
      error_handling: {output: bad}
    - type: ReadFromJson
      config: {path: in.jsonl, schema: {region: string, amount: int}}
      error_handling: {output: bad}
    - type: WriteToCsv
      input: ReadFromCsv
      config: {path: out/csv.csv}
    - type: WriteToJson
      input: ReadFromJson
      config: {path: out/json.jsonl}
    - type: Flatten
      input: [ReadFromCsv.bad, ReadFromJson.bad]
    - type: WriteToJson
      name: WriteBad
      input: Flatten
      config: {path: out/bad.jsonl}
`
	if err := runSrc(t, dir, src, 2); err != nil {
		t.Fatal(err)
	}
	csvOut, _ := os.ReadFile(filepath.Join(dir, "out/csv.csv"))
	lines := strings.Split(strings.TrimSpace(string(csvOut)), "\n")
	sort.Strings(lines[1:])
	want := []string{"region,amount,ts", "NORTH,250,2026-03-01T00:01:00.000Z", "SOUTH,7,2026-03-01T00:02:00.000Z"}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("csv out = %q, want %q", lines, want)
	}
	js := readJSONL(t, filepath.Join(dir, "out/json.jsonl"))
	if len(js) != 1 || js[0]["region"] != "NORTH" {
		t.Errorf("json out = %v", js)
	}
	var reasons []string
	for _, r := range readJSONL(t, filepath.Join(dir, "out/bad.jsonl")) {
		e := r["error"].(map[string]any)
		src := r["source"].(map[string]any)
		reasons = append(reasons, e["step"].(string)+":"+e["reason"].(string)+"@"+filepath.Base(src["source"].(string))+":"+fmtFloat(src["offset"].(float64)))
	}
	sort.Strings(reasons)
	wantR := []string{"ReadFromCsv:malformed_csv@in.csv:4", "ReadFromCsv:schema_mismatch@in.csv:3", "ReadFromJson:malformed_json@in.jsonl:2", "ReadFromJson:schema_mismatch@in.jsonl:4"}
	if !reflect.DeepEqual(reasons, wantR) {
		t.Errorf("rejects = %q\nwant %q", reasons, wantR)
	}
}

func TestGenerateIsDeterministic(t *testing.T) {
	src := `pipeline:
  type: chain
  transforms:
    - type: Generate
      config: {count: 2000, keys: 7, seed: 42, start: "2026-03-01T00:00:00Z", spacing: 10ms}
    - type: MapToFields
      config:
        append: true
        fields: {big: amount > 500}
    - type: WriteToJson
      config: {path: out.jsonl}
`
	read := func(workers int) []string {
		dir := t.TempDir()
		if err := runSrc(t, dir, src, workers); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(dir, "out.jsonl"))
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		sort.Strings(lines)
		return lines
	}
	a, b := read(1), read(3)
	if len(a) != 2000 || !reflect.DeepEqual(a, b) {
		t.Fatalf("1 worker gave %d rows, 3 workers %d; equal=%v", len(a), len(b), reflect.DeepEqual(a, b))
	}
	keys := map[string]bool{}
	for _, l := range a {
		keys[l[strings.Index(l, `"key":`):][:13]] = true
	}
	if len(keys) != 7 {
		t.Errorf("saw %d distinct keys, want 7", len(keys))
	}
	if !strings.Contains(a[0], `"ts":"2026-03-01T00:00:`) {
		t.Errorf("row %s: want event time from start", a[0])
	}
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
