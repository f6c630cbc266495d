package sqlsink

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/weir-dev/weir/row"
)

// stringSchema is totalsSchema with the total written as a string.
var stringSchema = totalsAs("total", row.KindString)

// TestServedAsConverts runs the view's conversion terms on each backend:
// what a reader of a staged table's view gets for an older member's value
// whose column was converted (convert), lossless and lossy.
func TestServedAsConverts(t *testing.T) {
	type conv struct {
		lit  string // the older member's value, as a SQL literal
		from string // its column's kind
		to   string // the view's
		want any    // nil: null
	}
	cases := []conv{
		{"12", "int", "text", "12"},
		{"-7", "int", "text", "-7"},
		{"1.5", "float", "text", "1.5"},
		{"'12'", "text", "int", int64(12)},
		{"' -3 '", "text", "int", int64(-3)},
		{"'0'", "text", "int", int64(0)},
		{"'abc'", "text", "int", nil},
		{"'1.5'", "text", "int", nil},
		{"''", "text", "int", nil},
		{"'007'", "text", "int", nil},
		{"'12abc'", "text", "int", nil},
		{"'99999999999999999999'", "text", "int", nil},
		{"'1.5'", "text", "float", 1.5},
		{"'-2e3'", "text", "float", -2000.0},
		{"'12'", "text", "float", 12.0},
		{"'abc'", "text", "float", nil},
		{"'1.2.3'", "text", "float", nil},
		{"'NaN'", "text", "float", nil},
		{"'1e999'", "text", "float", nil},
		{"'true'", "text", "float", nil},
		{"2.75", "float", "int", int64(2)},
		{"-2.75", "float", "int", int64(-2)},
	}
	decls := map[string]map[string]string{
		DriverSQLite:   {"int": "INTEGER", "float": "REAL", "text": "TEXT"},
		DriverPostgres: {"int": "bigint", "float": "double precision", "text": "text", "time": "timestamp with time zone"},
	}
	for _, d := range []string{DriverSQLite, DriverPostgres} {
		t.Run(d, func(t *testing.T) {
			e := newFacadeEnv(t, d, false)
			pg := d == DriverPostgres
			cs := cases
			if pg {
				cs = append(cs,
					conv{"TIMESTAMPTZ '2026-03-01 00:05:00+00'", "time", "text", "2026-03-01T00:05:00Z"},
					conv{"TIMESTAMPTZ '2026-03-01 01:05:00.25+01'", "time", "text", "2026-03-01T00:05:00.25Z"},
				)
			}
			for _, c := range cs {
				from, to := decls[d][c.from], decls[d][c.to]
				lit := c.lit
				if pg {
					lit = "CAST(" + lit + " AS " + from + ")"
				}
				term := servedAs("x", from, to, pg)
				rows, err := e.read(context.Background(), "SELECT "+term+" FROM (SELECT "+lit+" AS x) AS m")
				if err != nil {
					t.Fatalf("%s %s → %s: %v", c.lit, c.from, c.to, err)
				}
				got := rows[0][0]
				if f, ok := got.(float64); ok && c.to == "int" {
					t.Errorf("%s %s → %s reads the float %v, want an integer", c.lit, c.from, c.to, f)
					continue
				}
				if got != c.want {
					t.Errorf("%s %s → %s reads %v (%T), want %v (%T)", c.lit, c.from, c.to, got, got, c.want, c.want)
				}
			}
		})
	}
}

// TestStagedConvertsToString: an int value column that the rows write as a
// string from generation 2 on (declared convert) writes a new staging
// table of strings; the view serves every total as its text, the older
// staging table's and the principal's ints converted, before and after a
// merge (which converts the PostgreSQL principal's column), with a reader
// polling it throughout. Undeclared, the same sink is refused before
// anything changes.
func TestStagedConvertsToString(t *testing.T) {
	forEachStagedDriver(t, func(t *testing.T, e *facadeEnv) {
		convertAcross(t, e, totalsSchema, stringSchema, []map[string]bool{nil}, "convert: [total]", map[string]bool{"total": false},
			func(when string, total map[cell]int64) { e.checkStringTotals(t, when, total) })
		// The description says how the view serves each member's column.
		info, err := DescribeStaged(context.Background(), StagedTarget{Driver: e.driver, DSN: e.dsn, Table: e.table})
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(info.Members); e.driver == DriverSQLite && !strings.Contains(got, "total INTEGER (served as TEXT)") {
			t.Errorf("the description's members %s do not say the principal's total is served as TEXT", got)
		}
		if e.driver == DriverPostgres {
			typ := e.query(`SELECT data_type::text FROM information_schema.columns WHERE table_name = $1 AND column_name = 'total'`,
				PrincipalTableName(e.table))
			if len(typ) != 1 || typ[0][0] != "text" {
				t.Errorf("the principal's total is %v, want text", typ)
			}
		}
	})
}

// TestStagedConvertsFromString: a string value column that the rows write
// as an int from generation 2 on, a lossy conversion: refused without
// allow_lossy, served as ints with it (the older members' strings parsed),
// before and after a merge, with a reader polling the view throughout;
// the principal keeps its strings.
func TestStagedConvertsFromString(t *testing.T) {
	forEachStagedDriver(t, func(t *testing.T, e *facadeEnv) {
		convertAcross(t, e, stringSchema, totalsSchema, []map[string]bool{nil, {"total": false}}, "allow_lossy: true", map[string]bool{"total": true},
			func(when string, total map[cell]int64) { e.checkIntTotals(t, when, total) })
	})
}

// convertAcross writes rounds 0 to 2 through a staged sink of rows in
// schema from (merging after round 1); checks that a sink of generation 2
// writing rows in schema to is refused (ErrSchemaChange, naming
// wantRefusal) with each of refused as its Convert, the rows unchanged;
// then writes rounds 3 and 4 with conv declared while a reader polls the
// view, and calls check before and after a merge. The reader must see
// no anomaly.
func convertAcross(t *testing.T, e *facadeEnv, from, to *row.Schema, refused []map[string]bool, wantRefusal string, conv map[string]bool,
	check func(when string, total map[cell]int64)) {
	t.Helper()
	ctx := context.Background()
	cfg := e.config("", "region")
	cfg.Layout, cfg.MergeInterval = LayoutStaged, -1
	total, panes := map[cell]int64{}, map[cell]int64{}
	j := e.schemaJob(cfg, from, total, panes)
	for r := range 3 {
		if err := j.step(ctx, round(r)); err != nil {
			t.Fatal(err)
		}
		if r == 1 {
			if _, err := j.sink.Merge(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	j.sink.Close(ctx)
	cfg2 := cfg
	cfg2.Generation, cfg2.SinkID = 2, cfg.SinkID+"-2"
	before := stagedSnapshot(t, e)
	for _, c := range refused {
		cfg2.Convert = c
		if err := prepareErr(ctx, cfg2, to); !errors.Is(err, ErrSchemaChange) || !strings.Contains(err.Error(), wantRefusal) {
			t.Fatalf("convert %v: got %v, want ErrSchemaChange naming %s", c, err, wantRefusal)
		}
	}
	if got := stagedSnapshot(t, e); !maps.Equal(got, before) {
		t.Fatalf("the refused conversion altered the rows")
	}
	cfg2.Convert = conv
	j = e.schemaJob(cfg2, to, total, panes)
	c := &consumer{e: e}
	rd := startPoller(ctx, c)
	for r := 3; r < 5; r++ {
		if err := j.step(ctx, round(r)); err != nil {
			t.Fatal(err)
		}
	}
	check("before the merge", total)
	if _, err := j.sink.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	rd.end()
	check("after the merge", total)
	if f := readerFailures(c); len(f) > 0 {
		t.Fatalf("the reader saw %d anomalies in %d reads, first: %v", len(f), c.reads, f[:min(5, len(f))])
	}
	j.sink.Close(ctx)
}

// prepareErr prepares a sink of cfg writing schema and closes it: the
// error of its Prepare.
func prepareErr(ctx context.Context, cfg Config, schema *row.Schema) error {
	s, err := New(cfg, schema)
	if err != nil {
		return err
	}
	defer s.Close(ctx)
	return s.Prepare(ctx)
}

// readerFailures is c's anomalies, but for a PostgreSQL reader told once
// to prepare its query again after the view's column changed type.
func readerFailures(c *consumer) []string {
	f := c.failures()
	replanned := 0
	out := f[:0]
	for _, s := range f {
		if strings.Contains(s, "cached plan must not change result type") && replanned == 0 {
			replanned++
			continue
		}
		out = append(out, s)
	}
	return out
}

// checkStringTotals fails the test unless the view serves every total as
// a string, and the totals of want; when says at which point.
func (e *facadeEnv) checkStringTotals(t *testing.T, when string, want map[cell]int64) {
	t.Helper()
	for _, r := range e.query("SELECT region, total FROM " + quoteTable(e.table)) {
		if _, ok := r[1].(string); !ok {
			t.Fatalf("%s the view serves %v's total as %v (%T), want a string", when, r[0], r[1], r[1])
		}
	}
	if got := viewTotals(t, e, "total"); !maps.Equal(got, want) {
		t.Errorf("%s the view serves %v, want %v", when, got, want)
	}
}

// TestAdoptedPlainTableConverts: a plain table that a staged sink adopts
// as its principal (an update to layout: staged) is checked as a member:
// a column whose type changes is refused undeclared, before anything
// changes, and served converted when declared (convert).
func TestAdoptedPlainTableConverts(t *testing.T) {
	forEachStagedDriver(t, func(t *testing.T, e *facadeEnv) {
		ctx := context.Background()
		cfg := e.config("", "region")
		total, panes := map[cell]int64{}, map[cell]int64{}
		j := e.schemaJob(cfg, totalsSchema, total, panes) // a plain table of ints
		for r := range 2 {
			if err := j.step(ctx, round(r)); err != nil {
				t.Fatal(err)
			}
		}
		j.sink.Close(ctx)
		before := e.query("SELECT COUNT(*) FROM " + quoteTable(e.table))
		cfg2 := cfg
		cfg2.Generation, cfg2.SinkID = 2, cfg.SinkID+"-2"
		cfg2.Layout, cfg2.MergeInterval = LayoutStaged, -1
		if err := prepareErr(ctx, cfg2, stringSchema); !errors.Is(err, ErrSchemaChange) || !strings.Contains(err.Error(), "convert: [total]") {
			t.Fatalf("undeclared: got %v, want ErrSchemaChange naming convert: [total]", err)
		}
		if after := e.query("SELECT COUNT(*) FROM " + quoteTable(e.table)); fmt.Sprint(after) != fmt.Sprint(before) || viewColumns(t, e, e.table) == nil {
			t.Fatalf("the refusal changed the plain table: %v rows, then %v", before, after)
		}
		if e.exists(PrincipalTableName(e.table)) {
			t.Fatalf("the refusal made the principal table")
		}
		cfg2.Convert = map[string]bool{"total": false}
		j = e.schemaJob(cfg2, stringSchema, total, panes)
		if err := j.step(ctx, round(2)); err != nil {
			t.Fatal(err)
		}
		e.checkStringTotals(t, "after the adoption", total)
		j.sink.Close(ctx)
	})
}

// TestValidateWhileAnotherGenerationSetsUp: the job before an update sets
// its staged sink up at its first commit: its staging table is created,
// then registered behind the view. An update's (or a rollback's)
// validation in between found that table unregistered, took it for its
// own staging table and refused the update when its types differed — a
// declared conversion included. The validation checks the sink against
// the registered members only; the setup itself still refuses to write
// into an unregistered table of other types.
func TestValidateWhileAnotherGenerationSetsUp(t *testing.T) {
	forEachStagedDriver(t, func(t *testing.T, e *facadeEnv) {
		ctx := context.Background()
		// Generation 1's staging table, created and not registered yet.
		half := e.config("", "region")
		half.Table = StagingTableName(e.table, 1)
		e.sink(half, totalsSchema).Close(ctx)
		if e.driver == DriverPostgres {
			t.Cleanup(func() { e.exec("DROP TABLE IF EXISTS " + quoteTable(half.Table)) })
		}

		cfg := e.config("", "region")
		cfg.Layout, cfg.MergeInterval = LayoutStaged, -1
		cfg.Generation, cfg.SinkID = 2, cfg.SinkID+"-2"
		cfg.Convert = map[string]bool{"total": false}
		s, err := New(cfg, stringSchema)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		if err := s.Validate(ctx); err != nil {
			t.Fatalf("validating generation 2 while generation 1 sets up: %v", err)
		}
		if err := prepareErr(ctx, cfg, stringSchema); !errors.Is(err, ErrColumnType) {
			t.Fatalf("setting up into the unregistered table of other types: %v, want ErrColumnType", err)
		}
	})
}
