package iceberg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/weir-dev/weir/row"
)

// hadoopTarget is a hadoop catalog in a fresh warehouse directory.
func hadoopTarget(t *testing.T) Target {
	t.Helper()
	tg, err := Catalog{Name: "some_catalog", BaseDir: t.TempDir(), Properties: map[string]string{
		"type": "hadoop", "warehouse": "dir",
	}}.Parse()
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// TestHadoopCatalog: a hadoop catalog is the warehouse directory: a write
// creates the table's metadata under NAMESPACE/TABLE/metadata (with
// version-hint.text, as Java's HadoopCatalog does), a read finds it there,
// and a commit repeated for an epoch appends nothing.
func TestHadoopCatalog(t *testing.T) {
	tg := hadoopTarget(t)
	if !tg.Hadoop || tg.DBPath != "" || tg.Host != "" || !strings.HasSuffix(tg.Warehouse, "/dir") {
		t.Fatalf("target %+v, want a hadoop catalog in .../dir", tg)
	}
	in := testRows(5)
	writeTable(t, SinkConfig{Target: tg, Table: "db.events"}, in)
	if _, err := os.Stat(filepath.Join(tg.Warehouse, "db", "events", "metadata", "version-hint.text")); err != nil {
		t.Errorf("the warehouse has no version hint for db.events: %v", err)
	}
	s, rows := readAll(t, ReadConfig{Target: tg, Table: "db.events"})
	if !s.Equal(testSchema) {
		t.Fatalf("schema %s, want %s", s, testSchema)
	}
	sameRows(t, rows, in)

	sink, err := NewSink(SinkConfig{Target: tg, Table: "db.events", SinkID: "job-1/write"}, testSchema)
	if err != nil {
		t.Fatal(err)
	}
	commitTwice(t, sink, testRows(2), 7)
	if _, rows := readAll(t, ReadConfig{Target: tg, Table: "db.events"}); len(rows) != 7 {
		t.Errorf("after an epoch of 2 rows committed twice: %d rows, want 7", len(rows))
	}
	_, err = Describe(context.Background(), ReadConfig{Target: tg, Table: "db.missing"})
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "table db.missing is not in catalog some_catalog") {
		t.Errorf("reading a missing table: %v", err)
	}
}

// TestReadFilter: Beam's SQL-like filter keeps exactly the rows it holds
// for — on any column, kept or not — on a SQL and a hadoop catalog.
func TestReadFilter(t *testing.T) {
	// testRows(8): id 0..7, score id/2, name "n"+letter (row 1's null),
	// ok for even ids, at 1_700_000_000_000+id.
	for _, cat := range []struct {
		name string
		tg   func(*testing.T) Target
	}{{"sql", testTarget}, {"hadoop", hadoopTarget}} {
		t.Run(cat.name, func(t *testing.T) {
			tg := cat.tg(t)
			writeTable(t, SinkConfig{Target: tg, Table: "db.t"}, testRows(8))
			for _, tc := range []struct {
				filter string
				keep   []string
				want   string // the ids read
			}{
				{"id > 5", nil, "6 7"},
				{"5 < id", nil, "6 7"},
				{"ok = true", []string{"id"}, "0 2 4 6"},
				{"ok = TRUE AND id >= 4", []string{"id", "name"}, "4 6"},
				{"NOT ok OR id = 0", nil, "0 1 3 5 7"},
				{"ok AND id > 3", nil, "4 6"},
				{"id <> 3 AND id != 4 AND id < 6", nil, "0 1 2 5"},
				{"score >= 2.5", nil, "5 6 7"},
				{"score > 2", nil, "5 6 7"},
				{"name = 'nc'", []string{"id"}, "2"},
				{"name IS NULL", nil, "1"},
				// A comparison with a null is not true (SQL's rule): row 1's
				// null name passes neither = nor <>.
				{"name <> 'nc' AND id < 4", nil, "0 3"},
				{"NOT (name = 'nc') AND id < 4", nil, "0 3"},
				{"name IS NOT NULL AND id < 3", nil, "0 2"},
				{"id IN (1, 3, 9)", nil, "1 3"},
				{"id NOT IN (0, 1, 2, 3, 4, 5)", nil, "6 7"},
				{"id BETWEEN 2 AND 4", nil, "2 3 4"},
				{"id NOT BETWEEN 2 AND 6", nil, "0 1 7"},
				{"(id < 2 OR id > 5) AND NOT (id = 7)", nil, "0 1 6"},
				{`"id" = 4`, nil, "4"},
			} {
				cfg := ReadConfig{Target: tg, Table: "db.t", Filter: tc.filter, Keep: tc.keep}
				s, rows := readAll(t, cfg)
				if tc.keep != nil && s.Len() != len(tc.keep) {
					t.Errorf("%s keep %v: schema %s", tc.filter, tc.keep, s)
				}
				if got := idsOf(s, rows); got != tc.want {
					t.Errorf("filter %q: ids %q, want %q", tc.filter, got, tc.want)
				}
			}
		})
	}
}

// idsOf lists the id field of rows, space-separated.
func idsOf(s *row.Schema, rows []*row.Row) string {
	idx := s.Index("id")
	var b strings.Builder
	for i, r := range rows {
		if i > 0 {
			b.WriteByte(' ')
		}
		if idx < 0 {
			b.WriteString("?")
			continue
		}
		fmt.Fprint(&b, r.Values[idx])
	}
	return b.String()
}

// TestReadFilterRefused: a filter that does not parse, or names a column
// the table lacks, or compares a column with a literal its type cannot
// take, is a configuration error naming what is wrong.
func TestReadFilterRefused(t *testing.T) {
	tg := testTarget(t)
	writeTable(t, SinkConfig{Target: tg, Table: "db.t"}, testRows(2))
	for _, tc := range []struct{ filter, want string }{
		{"id >", "at character 5: want a literal"},
		{"id = NULL", "at character 6: a comparison with NULL is never true: use IS NULL"},
		{"id + 1 > 2", "at character 4: unexpected character '+'"},
		{"name = 'x", "at character 8: the string is not closed"},
		{"id > 1 id", `at character 8: unexpected "id"`},
		{"upper(name) = 'X'", `at character 6: want a comparison`},
		{"id IN (1 2)", `want ',' or ')'`},
		{"nope = 1", `filter "nope = 1" on table db.t`},
		{"ok = 'maybe'", `filter "ok = 'maybe'" on table db.t`},
		{"  ", ""},
	} {
		_, err := Describe(context.Background(), ReadConfig{Target: tg, Table: "db.t", Filter: tc.filter})
		if tc.want == "" {
			if err != nil {
				t.Errorf("filter %q: %v, want no filter", tc.filter, err)
			}
			continue
		}
		var fe *FilterError
		if !errors.Is(err, ErrConfig) || !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("filter %q: %v, want a FilterError containing %q", tc.filter, err, tc.want)
		}
	}
}

// FuzzParseFilter: any text parses or is refused with an error; it never
// panics, and what parses binds or is refused against a table's schema.
func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{"id > 5 AND name = 'x'", "NOT (ok) OR id IN (1, 2)", "id BETWEEN -1.5e3 AND +2",
		`"a b" IS NOT NULL`, "x = 'it''s'", "((", "id <> ", "'", "`", "!", "1 = id", "- 1", ".5 < score"} {
		f.Add(s)
	}
	sc := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64},
		iceberg.NestedField{ID: 2, Name: "name", Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: 3, Name: "ok", Type: iceberg.PrimitiveTypes.Bool},
		iceberg.NestedField{ID: 4, Name: "score", Type: iceberg.PrimitiveTypes.Float64})
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseFilter(s)
		if err != nil {
			if e != nil {
				t.Fatalf("%q: an expression beside the error %v", s, err)
			}
			return
		}
		_, _ = iceberg.BindExpr(sc, e, true)
	})
}
