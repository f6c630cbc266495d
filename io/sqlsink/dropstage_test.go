package sqlsink

import (
	"context"
	"strings"
	"testing"
)

// TestDropStage: DropStage drops a staging table of the target and
// nothing else: another table, the target itself and a view of a staging
// table's name are refused and stay; a table already gone is no error.
func TestDropStage(t *testing.T) {
	forEachDriver(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		tgt := StagedTarget{Driver: e.driver, DSN: e.dsn, Table: e.table}
		stage := StageTable(e.table, "2026-12-01", "job-1")
		viewStage := StageTable(e.table, "2026-12-02", "job-2")
		for _, q := range []string{
			"CREATE TABLE " + quoteTable(e.table) + " (k TEXT)",
			"CREATE TABLE " + quoteTable(stage) + " (k TEXT)",
			"CREATE VIEW " + quoteTable(viewStage) + " AS SELECT k FROM " + quoteTable(e.table),
			"CREATE TABLE " + quoteTable(e.table+"_other") + " (k TEXT)",
		} {
			if err := e.exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		t.Cleanup(func() {
			for _, q := range []string{"DROP VIEW IF EXISTS " + quoteTable(viewStage), "DROP TABLE IF EXISTS " + quoteTable(stage),
				"DROP TABLE IF EXISTS " + quoteTable(e.table+"_other"), "DROP TABLE IF EXISTS " + quoteTable(e.table)} {
				_ = e.exec(q)
			}
		})
		for _, tc := range []struct{ name, want string }{
			{e.table, "not a staging table"},
			{e.table + "_other", "not a staging table"},
			{viewStage, "not a staging table: left as it is"},
		} {
			if err := DropStage(ctx, tgt, tc.name); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("DropStage(%s): %v, want an error saying %q", tc.name, err, tc.want)
			}
		}
		if err := DropStage(ctx, tgt, stage); err != nil {
			t.Fatalf("DropStage(%s): %v", stage, err)
		}
		_, stages, err := PartitionLog(ctx, tgt, "job")
		if err != nil {
			t.Fatal(err)
		}
		if stages[strings.ToLower(stage)] {
			t.Errorf("%s still exists after DropStage", stage)
		}
		if err := DropStage(ctx, tgt, stage); err != nil {
			t.Errorf("DropStage of a table already gone: %v", err)
		}
		for _, name := range []string{e.table, e.table + "_other"} {
			if _, ok, err := TableRows(ctx, StagedTarget{Driver: e.driver, DSN: e.dsn, Table: name}); err != nil || !ok {
				t.Errorf("%s after DropStage: exists %v, %v", name, ok, err)
			}
		}
	})
}
