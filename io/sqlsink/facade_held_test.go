package sqlsink

import (
	"context"
	"fmt"
	"testing"

	"time"
)

// TestFacadeHeld: a generation set up held writes its table, but the view
// serves the older generation alone until RevealFacadeGeneration; its rows
// are readable for a comparison (FacadeGenerationRows) meanwhile; a sink
// of the generation prepared again after the reveal does not hold it back
// again; a held generation dropped leaves the older one serving.
func TestFacadeHeld(t *testing.T) {
	forEachFacadeDriver(t, func(t *testing.T, e *facadeEnv) {
		ctx := context.Background()
		t.Cleanup(func() {
			_ = withFacade(ctx, e.target(nil), func(fx facadeExec, _ time.Time) error {
				if k, _ := fxKind(ctx, fx, FacadeHeldTable); k != "" {
					return fx.exec(ctx, `DELETE FROM `+FacadeHeldTable+` WHERE facade = `+ph(fx, 1), e.table)
				}
				return nil
			})
		})
		newJob := func(gen int64, facade, held bool) *totalsJob {
			cfg := e.config(ModeUpsert, "region")
			cfg.SinkID, cfg.Generation, cfg.JobID, cfg.Facade, cfg.FacadeHeld = e.table+"/WriteTotals", gen, fmt.Sprintf("job-%d", gen), facade, held
			return &totalsJob{sink: e.sink(cfg, totalsSchema), total: map[cell]int64{}, panes: map[cell]int64{}}
		}
		view := func() map[cell]int64 {
			t.Helper()
			c := &consumer{e: e}
			c.check(ctx)
			if len(c.errs) > 0 {
				t.Fatal(c.errs)
			}
			return c.seen
		}
		old := newJob(1, false, false)
		must(t, old.step(ctx, []fact{{"NORTH", 0, 10}, {"SOUTH", 0, 20}}))
		// The new generation computes other totals (a wrong pipeline).
		wrong := newJob(2, true, true)
		must(t, wrong.step(ctx, []fact{{"NORTH", 0, 999}, {"SOUTH", 0, 20}, {"EAST", 0, 5}}))
		must(t, old.step(ctx, []fact{{"EAST", 0, 5}}))
		if got, want := view(), map[cell]int64{{"NORTH", 0}: 10, {"SOUTH", 0}: 20, {"EAST", 0}: 5}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("the view with generation 2 held serves %v, want generation 1's %v", got, want)
		}
		rows, ok, err := FacadeGenerationRows(ctx, e.target(nil), 2)
		must(t, err)
		if !ok || len(rows) != 3 {
			t.Fatalf("generation 2's rows: ok %v, %d rows, want 3", ok, len(rows))
		}
		for _, r := range rows {
			if r.Key["region"] == "NORTH" && fmt.Sprint(r.Values["total"]) != "999" || r.WindowEnd.IsZero() || len(r.Values) != 1 {
				t.Errorf("generation 2's row %+v: want its key, window and total alone", r)
			}
		}
		must(t, RevealFacadeGeneration(ctx, e.target(nil), 2))
		if got := view()[cell{"NORTH", 0}]; got != 999 {
			t.Fatalf("after the reveal the view serves NORTH %d, want generation 2's 999", got)
		}
		// Prepared again held (a restarted job loaded before the reveal):
		// the generation stays served.
		must(t, wrong.sink.Close(ctx))
		again := newJob(2, true, true)
		again.epoch = wrong.epoch // its progress record is per generation
		must(t, again.step(ctx, []fact{{"WEST", 0, 7}}))
		if got := view(); got[cell{"NORTH", 0}] != 999 || got[cell{"WEST", 0}] != 7 {
			t.Fatalf("after the sink prepared again the view serves %v, want generation 2's rows", got)
		}
		// A third generation held, then dropped: generation 2 serves on.
		third := newJob(3, true, true)
		must(t, third.step(ctx, []fact{{"NORTH", 0, 1}}))
		must(t, third.sink.Close(ctx))
		must(t, DropFacadeGeneration(ctx, e.target(nil), 3))
		if got := view()[cell{"NORTH", 0}]; got != 999 {
			t.Fatalf("after dropping held generation 3 the view serves NORTH %d, want 999", got)
		}
	})
}
