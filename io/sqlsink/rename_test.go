package sqlsink

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// totalsAs is totalsSchema with its total field named name, of kind k.
func totalsAs(name string, k row.Kind) *row.Schema {
	fs := append([]row.Field(nil), totalsSchema.Fields...)
	fs[1] = row.Field{Name: name, Type: row.Of(k)}
	return row.MustSchema(fs...)
}

var (
	// renamedSchema is totalsSchema with total renamed to amount_total,
	// floatSchema with total widened to a float.
	renamedSchema = totalsAs("amount_total", row.KindInt)
	floatSchema   = totalsAs("total", row.KindFloat)
)

// totalIn is total's element with its row in schema s and its total v.
func totalIn(s *row.Schema, region string, v any, w window.Window, p window.PaneInfo) contract.Element {
	e := total(region, 0, w, p)
	vals := append([]any(nil), e.Value.(*row.Row).Values...)
	vals[1] = v
	e.Value = &row.Row{Schema: s, Values: vals}
	return e
}

// writeGeneration1 commits NORTH 425 and SOUTH 100 through a first
// generation's sink of e's table, and returns the configuration of the
// second generation's sink.
func writeGeneration1(t *testing.T, e *env) Config {
	t.Helper()
	s1 := e.sink(e.config("", "region"), totalsSchema)
	commit(t, s1, 1, total("NORTH", 425, w0, onTime0), total("SOUTH", 100, w0, onTime0))
	s1.Close(context.Background())
	cfg := e.config("", "region")
	cfg.Generation, cfg.SinkID = 2, e.table+"/Write2"
	return cfg
}

// TestRenamedColumn renames a value column of a plain table in place: the
// rows written before keep their values under the new name, the next
// generation's revisions update them, and a second Prepare (a restart)
// finds the rename done.
func TestRenamedColumn(t *testing.T) {
	forEachDriver(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		cfg := writeGeneration1(t, e)
		cfg.RenamedColumns = map[string]string{"amount_total": "total"}
		s2 := e.sink(cfg, renamedSchema)
		commit(t, s2, 1, totalIn(renamedSchema, "NORTH", int64(475), w0, late1))
		s2.Close(ctx)
		s3 := e.sink(cfg, renamedSchema) // a restart: nothing to rename
		s3.Close(ctx)

		rows := e.query("SELECT region, amount_total FROM " + quoteTable(e.table) + " ORDER BY region")
		if len(rows) != 2 || rows[0][1].(int64) != 475 || rows[1][1].(int64) != 100 {
			t.Fatalf("after the rename: %v, want NORTH 475 and SOUTH 100", rows)
		}
		if err := e.exec("SELECT total FROM " + quoteTable(e.table)); err == nil {
			t.Errorf("the column total is still there")
		}
	})
}

// TestRenamedColumnRefused: without the declaration the rename is
// refused with a message naming it; a table with both columns refuses the
// declared rename, plain or put behind a façade (whose view would serve
// two columns under one name), and is left as it was.
func TestRenamedColumnRefused(t *testing.T) {
	forEachDriver(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		writeGeneration1(t, e)
		prepare := func(cfg Config) error {
			sk, err := New(cfg, renamedSchema)
			if err != nil {
				return err
			}
			defer sk.Close(ctx)
			return sk.Prepare(ctx)
		}
		cfg := e.config("", "region")
		if err := prepare(cfg); !errors.Is(err, ErrSchemaChange) || !strings.Contains(err.Error(), "renamed_from: total") {
			t.Errorf("undeclared rename: %v, want ErrSchemaChange suggesting renamed_from", err)
		}
		if err := e.exec("ALTER TABLE " + quoteTable(e.table) + " ADD COLUMN amount_total BIGINT"); err != nil {
			t.Fatal(err)
		}
		both := cfg
		both.RenamedColumns = map[string]string{"amount_total": "total"}
		if err := prepare(both); !errors.Is(err, ErrSchemaChange) || !strings.Contains(err.Error(), "has both the column total") {
			t.Errorf("both columns: %v, want ErrSchemaChange", err)
		}
		facade := cfg
		facade.Facade, facade.Generation = true, 2
		facade.RenamedColumns = map[string]string{"amount_total": "total"}
		if err := prepare(facade); !errors.Is(err, ErrSchemaChange) || !strings.Contains(err.Error(), "a column renamed to amount_total") {
			t.Errorf("façade rename over a table with both columns: %v, want ErrSchemaChange naming the collision", err)
		}
		if got := e.query("SELECT region, total, amount_total FROM " + quoteTable(e.table) + " ORDER BY region"); len(got) != 2 {
			t.Errorf("the refused façade rename changed the table: %v", got)
		}
	})
}

// TestWidenedColumn widens an int column to float in place: the rows
// written before keep their values, the next revisions write fractions.
func TestWidenedColumn(t *testing.T) {
	forEachDriver(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		cfg := writeGeneration1(t, e)
		s2 := e.sink(cfg, floatSchema)
		commit(t, s2, 1, totalIn(floatSchema, "NORTH", 475.5, w0, late1))
		s2.Close(ctx)
		e.sink(cfg, floatSchema).Close(ctx) // a restart: nothing more to widen

		rows := e.query("SELECT region, total FROM " + quoteTable(e.table) + " ORDER BY region")
		num := func(v any) float64 {
			switch x := v.(type) {
			case int64:
				return float64(x)
			case float64:
				return x
			}
			t.Fatalf("not a number: %T %v", v, v)
			return 0
		}
		if len(rows) != 2 || num(rows[0][1]) != 475.5 || num(rows[1][1]) != 100 {
			t.Fatalf("after widening: %v, want NORTH 475.5 and SOUTH 100", rows)
		}
	})
}
