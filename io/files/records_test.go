package files

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestRecords reads JSON lines and CSV files without a declared schema, as
// weir diff does, and names the file and line of what does not parse.
func TestRecords(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name    string
		path    string
		format  Format
		want    []map[string]any
		wantErr string
	}{
		{
			name: "JSON lines keep every field, numbers as text", format: JSONLines,
			path: write("a.jsonl", `{"region":"NORTH","total":425.0,"extra":{"x":1}}`+"\n\n"+`{"region":"WEST","total":100}`),
			want: []map[string]any{
				{"region": "NORTH", "total": json.Number("425.0"), "extra": map[string]any{"x": json.Number("1")}},
				{"region": "WEST", "total": json.Number("100")},
			},
		},
		{
			name: "CSV columns typed as ReadFromCsv types them", format: CSV,
			path: write("a.csv", "region,total,share\nNORTH,425,0.5\nWEST,100,\n"),
			want: []map[string]any{
				{"region": "NORTH", "total": json.Number("425"), "share": json.Number("0.5")},
				{"region": "WEST", "total": json.Number("100"), "share": nil},
			},
		},
		{
			name: "a glob reads every file", format: JSONLines, path: filepath.Join(dir, "g-*.jsonl"),
			want: []map[string]any{{"n": json.Number("1")}, {"n": json.Number("2")}},
		},
		{name: "a line that is not JSON", format: JSONLines, path: write("bad.jsonl", "{\"a\":1}\n{oops\n"), wantErr: "bad.jsonl:2: not one JSON object"},
		{name: "a CSV record with too many fields", format: CSV, path: write("bad.csv", "a,b\n1,2\n1,2,3\n"), wantErr: "bad.csv:"},
		{name: "a missing file", format: CSV, path: filepath.Join(dir, "none.csv"), wantErr: "none.csv"},
	}
	write("g-1.jsonl", `{"n":1}`+"\n")
	write("g-2.jsonl", `{"n":2}`+"\n")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []map[string]any
			err := Records(context.Background(), tt.path, tt.format, func(rec map[string]any) error {
				got = append(got, rec)
				return nil
			})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v\nwant %v", got, tt.want)
			}
		})
	}
}
