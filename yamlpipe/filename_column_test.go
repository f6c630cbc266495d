package yamlpipe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFilenameColumn: ReadFromCsv's and ReadFromJson's filename_column
// adds a string field holding each row's file path; a name the rows
// already have is refused at its position.
func TestFilenameColumn(t *testing.T) {
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "in", "b"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "in", "a.csv"), []byte("region,amount\nNORTH,1\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "in", "b", "c.csv"), []byte("region,amount\nWEST,2\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "in", "a.jsonl"), []byte(`{"region": "EAST", "amount": 3}`+"\n"), 0o644))
	lines, err := runCSVLogged(t, dir, "pipeline:\n  type: chain\n  transforms:\n"+
		"    - {type: ReadFromCsv, config: {path: 'in/**.csv', filename_column: source}}\n    - {type: LogForTesting}\n")
	if err != nil {
		t.Fatal(err)
	}
	for i := range lines {
		lines[i] = strings.ReplaceAll(lines[i], dir, "DIR")
	}
	wantLines(t, lines,
		`{"region": "NORTH", "amount": 1, "source": "DIR/in/a.csv"}`,
		`{"region": "WEST", "amount": 2, "source": "DIR/in/b/c.csv"}`)
	lines, err = runCSVLogged(t, dir, "pipeline:\n  type: chain\n  transforms:\n"+
		"    - {type: ReadFromJson, config: {path: in/a.jsonl, filename_column: file}}\n    - {type: LogForTesting}\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 1 || !strings.Contains(lines[0], `"file": "`+filepath.Join(dir, "in", "a.jsonl")+`"`) {
		t.Errorf("ReadFromJson with filename_column: %q", lines)
	}
	_, err = runCSVLogged(t, dir, "pipeline:\n  type: chain\n  transforms:\n"+
		"    - {type: ReadFromCsv, config: {path: in/a.csv, filename_column: region}}\n    - {type: LogForTesting}\n")
	if err == nil || !strings.Contains(err.Error(), `filename_column "region" must name a new field`) {
		t.Errorf("a filename_column the rows have: %v", err)
	}
}
