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

// renamedSchema is totalsSchema with total renamed to amount_total.
var renamedSchema = row.MustSchema(
	row.Field{Name: "region", Type: row.Of(row.KindString)},
	row.Field{Name: "amount_total", Type: row.Of(row.KindInt)},
	row.Field{Name: "window_start", Type: row.Of(row.KindTimestamp)},
	row.Field{Name: "window_end", Type: row.Of(row.KindTimestamp)},
	row.Field{Name: "pane", Type: row.RowOf(row.PaneSchema())},
)

func renamedTotal(region string, cents int64, w window.Window, p window.PaneInfo) contract.Element {
	e := total(region, cents, w, p)
	r := e.Value.(*row.Row)
	e.Value = &row.Row{Schema: renamedSchema, Values: r.Values}
	return e
}

// TestRenamedColumn renames a value column of a plain table in place: the
// rows written before keep their values under the new name, the next
// generation's revisions update them, and a second Prepare (a restart)
// finds the rename done.
func TestRenamedColumn(t *testing.T) {
	forEachDriver(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		s1 := e.sink(e.config("", "region"), totalsSchema)
		commit(t, s1, 1, total("NORTH", 425, w0, onTime0), total("SOUTH", 100, w0, onTime0))
		s1.Close(ctx)

		cfg := e.config("", "region")
		cfg.Generation = 2
		cfg.SinkID = e.table + "/Write2"
		cfg.RenamedColumns = map[string]string{"amount_total": "total"}
		s2 := e.sink(cfg, renamedSchema)
		commit(t, s2, 1, renamedTotal("NORTH", 475, w0, late1))
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
// refused with a message naming it; a table with both columns and a
// façade table refuse the declared rename.
func TestRenamedColumnRefused(t *testing.T) {
	forEachDriver(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		s1 := e.sink(e.config("", "region"), totalsSchema)
		commit(t, s1, 1, total("NORTH", 425, w0, onTime0))
		s1.Close(ctx)

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
		if err := prepare(facade); !errors.Is(err, ErrSchemaChange) || !strings.Contains(err.Error(), "façade") {
			t.Errorf("façade rename: %v, want ErrSchemaChange naming the façade", err)
		}
	})
}
