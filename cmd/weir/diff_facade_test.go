package main

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/weir-dev/weir/diff"
	"github.com/weir-dev/weir/io/sqlsink"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// writeFacadeGeneration writes totals as generation gen of the façade
// region_totals in the SQLite file db, through weir's SQL sink, in the
// fixture's window.
func writeFacadeGeneration(t *testing.T, db string, gen int64, totals map[string]int64) {
	t.Helper()
	ctx := context.Background()
	sch, err := row.NewSchema(row.Field{Name: "region", Type: row.Of(row.KindString)}, row.Field{Name: "total", Type: row.Of(row.KindInt)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := sqlsink.New(sqlsink.Config{DSN: db, Table: "region_totals", Key: []string{"region"}, SinkID: fmt.Sprintf("totals/WriteTotals/g%d", gen),
		JobID: fmt.Sprintf("job-g%d", gen), Generation: gen, Facade: true}, sch)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	w := window.Window{Start: mtime.FromTime(start), End: mtime.FromTime(start.Add(5 * time.Minute))}
	var elems []contract.Element
	for region, total := range totals {
		elems = append(elems, contract.Element{Value: &row.Row{Schema: sch, Values: []any{region, total}}, Window: w,
			Pane: window.PaneInfo{Timing: window.OnTime, IsFirst: true, IsLast: true}})
	}
	if err := s.Write(ctx, 0, elems); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestCLIDiffFacade compares a façade view as its consumers see it: the
// newest generation's row per key and window, the older generation's
// where the newer has none; the key is the one the generations' tables
// declare.
func TestCLIDiffFacade(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "out.db")
	writeFacadeGeneration(t, db, 1, map[string]int64{"NORTH": 425, "WEST": 100})
	// The second generation attributes WEST to NORTH and writes no WEST.
	writeFacadeGeneration(t, db, 2, map[string]int64{"NORTH": 525})
	export := writeDiffFile(t, dir, "export.jsonl", fixtureOld)
	tests := []struct {
		name, table   string
		wantCode      int
		wantKeyTotals []diff.KeyTotal
	}{
		{name: "the first generation's table is the export", table: "region_totals__g1", wantCode: ExitOK},
		{
			name: "the view serves NORTH from generation 2 and WEST from generation 1", table: "region_totals", wantCode: ExitRehearsalDiffers,
			wantKeyTotals: []diff.KeyTotal{{Output: "output", Key: `{"region":"NORTH"}`, Old: map[string]float64{"total": 525}, New: map[string]float64{"total": 425}, Fields: []string{"total"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// No --key: the view's comes from its generations' tables.
			r := runCLI(t, dir, "diff", "sqlite:"+db+"#"+tt.table, export, "--format", "json")
			if r.code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tt.wantCode, r.stdout, r.stderr)
			}
			rep := diffJSON(t, r)
			if !reflect.DeepEqual(rep.Report.KeyTotals, tt.wantKeyTotals) || !reflect.DeepEqual(rep.Key, []string{"region"}) {
				t.Fatalf("key %v, per-key totals %+v\nwant %+v", rep.Key, rep.Report.KeyTotals, tt.wantKeyTotals)
			}
		})
	}
}
