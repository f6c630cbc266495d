package yamlpipe

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/weir-dev/weir"
)

// TestReadFromCsvLikeBeam: without a schema, ReadFromCsv types its columns
// as Beam's (pandas) does — integers int, numbers (or integers with an
// empty cell) float, true/false bool, the rest string — and takes Beam's
// delimiter and comment; WriteToCsv takes delimiter. Wrong dialects are
// load errors with file:line:column.
func TestReadFromCsvLikeBeam(t *testing.T) {
	const products = "transaction_id;product_name;category;price;qty;gift;note\n" +
		"# exported 2026-12-01\n" +
		"T0012;Headphones;Electronics;59.99;2;true;\n" +
		"T0013;Mug;Kitchen;5;;false;chipped\n" +
		"T0302;Monitor;Electronics;249.99;1;False;\n"
	tests := []struct {
		name, config string
		schema       string // the output's header and rows
		want         []string
		loadErr      string
	}{
		{name: "inferred types, semicolons and comments",
			config: `{path: in.csv, delimiter: ";", comment: "#"}`,
			want: []string{
				`{"transaction_id": "T0012", "product_name": "Headphones", "category": "Electronics", "price": 59.99, "qty": 2.0, "gift": true, "note": ""}`,
				`{"transaction_id": "T0013", "product_name": "Mug", "category": "Kitchen", "price": 5.0, "qty": null, "gift": false, "note": "chipped"}`,
				`{"transaction_id": "T0302", "product_name": "Monitor", "category": "Electronics", "price": 249.99, "qty": 1.0, "gift": false, "note": ""}`,
			}},
		{name: "a declared type wins over the inferred one",
			config: `{path: in.csv, delimiter: ";", comment: "#", schema: {price: string}}`,
			want: []string{
				`{"transaction_id": "T0012", "product_name": "Headphones", "category": "Electronics", "price": "59.99", "qty": 2.0, "gift": true, "note": ""}`,
				`{"transaction_id": "T0013", "product_name": "Mug", "category": "Kitchen", "price": "5", "qty": null, "gift": false, "note": "chipped"}`,
				`{"transaction_id": "T0302", "product_name": "Monitor", "category": "Electronics", "price": "249.99", "qty": 1.0, "gift": false, "note": ""}`,
			}},
		{name: "a delimiter of two characters", config: `{path: in.csv, delimiter: ";;"}`,
			loadErr: `p.yaml:4:61: ReadFromCsv delimiter must be one character other than a quote or a line break, not ";;"`},
		{name: "a comment that is the delimiter", config: `{path: in.csv, delimiter: ";", comment: ";"}`,
			loadErr: `ReadFromCsv comment and delimiter are both ";"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "in.csv"), []byte(products), 0o644); err != nil {
				t.Fatal(err)
			}
			src := "pipeline:\n  type: chain\n  transforms:\n    - {type: ReadFromCsv, config: " + tc.config + "}\n" +
				"    - {type: LogForTesting}\n"
			got, err := runCSVLogged(t, dir, src)
			if tc.loadErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.loadErr) {
					t.Fatalf("load error %v, want %q", err, tc.loadErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("rows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}

	// Tab-separated out, and back in.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in.csv"), []byte(products), 0o644); err != nil {
		t.Fatal(err)
	}
	src := "pipeline:\n  type: chain\n  transforms:\n    - {type: ReadFromCsv, config: {path: in.csv, delimiter: ';', comment: '#'}}\n" +
		"    - {type: WriteToCsv, config: {path: out.tsv, delimiter: \"\\t\"}}\n"
	if err := runSrc(t, dir, src, 1); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "out.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	sort.Strings(lines[1:])
	want := []string{"transaction_id\tproduct_name\tcategory\tprice\tqty\tgift\tnote",
		"T0012\tHeadphones\tElectronics\t59.99\t2\ttrue\t", "T0013\tMug\tKitchen\t5\t\tfalse\tchipped", "T0302\tMonitor\tElectronics\t249.99\t1\tfalse\t"}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("tab-separated output\n%q\nwant\n%q", lines, want)
	}
}

// runCSVLogged loads src with its files in dir and runs it, returning its
// LogForTesting lines sorted, or the load error.
func runCSVLogged(t *testing.T, dir, src string) ([]string, error) {
	t.Helper()
	var buf bytes.Buffer
	p, err := Load("p.yaml", []byte(src), Options{BaseDir: dir, LogOutput: &buf})
	if err != nil {
		return nil, err
	}
	if _, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: 1}); err != nil {
		t.Fatalf("run: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	sort.Strings(lines)
	return lines, nil
}
