package sqlsink

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestFacadeRenamesBehindTheView renames a value column in a parallel
// replacement: generation 1 writes the plain table; generation 2 joins it
// behind a façade declaring total renamed to amount_total, re-reads the
// retained input (windows from 2 on) and commits beside generation 1,
// whose table keeps its column total (its inserts go on). The view, the
// parity read of generation 1's rows and the compaction that merges them
// into generation 2's table all read total as amount_total. A reader polls
// the view throughout: no cell twice, none disappearing, no total going
// backwards; at the end every total is the ground truth.
func TestFacadeRenamesBehindTheView(t *testing.T) {
	forEachFacadeDriver(t, func(t *testing.T, e *facadeEnv) {
		ctx := context.Background()
		truth := map[cell]int64{}
		var published []fact
		newJob := func(gen int64, facade bool, from int, renames map[string]string) *schemaJob {
			cfg := e.config(ModeUpsert, "region")
			cfg.SinkID, cfg.Generation, cfg.JobID, cfg.Facade, cfg.RenamedColumns = e.table+"/WriteTotals", gen, "job", facade, renames
			schema := totalsSchema
			if len(renames) > 0 && renames["amount_total"] == "total" {
				schema = renamedSchema
			}
			j := e.schemaJob(cfg, schema, nil, nil)
			j.from = from
			return j
		}
		publish := func(r int) []fact {
			evs := round(r)
			published = append(published, evs...)
			for _, ev := range evs {
				truth[cell{ev.region, ev.window}] += ev.amount
			}
			return evs
		}
		gen1 := newJob(1, false, 0, nil)
		c := &consumer{e: e}
		rd := startPoller(ctx, c)
		for r := range 4 {
			must(t, gen1.step(ctx, publish(r)))
		}
		rd.pause()
		gen2 := newJob(2, true, 2, map[string]string{"amount_total": "total"})
		must(t, gen2.step(ctx, slices.Clone(published)))
		c.col = "amount_total"
		rd.resume()
		if got := viewColumns(t, e, e.table); slices.Contains(got, "total") || !slices.Contains(got, "amount_total") {
			t.Fatalf("the view serves %v, want amount_total and no total", got)
		}
		for r := 4; r < 7; r++ {
			evs := publish(r)
			must(t, gen1.step(ctx, evs))
			must(t, gen2.step(ctx, evs))
		}
		if got := viewColumns(t, e, FacadeTableName(e.table, 1)); !slices.Contains(got, "total") {
			t.Fatalf("generation 1's table has %v: its column total was renamed under the running job", got)
		}
		rows, ok, err := FacadeGenerationRows(ctx, e.target(nil), 1)
		must(t, err)
		if !ok || len(rows) == 0 {
			t.Fatalf("generation 1's rows: ok %v, %d rows", ok, len(rows))
		}
		for _, r := range rows {
			if _, has := r.Values["amount_total"]; !has {
				t.Fatalf("generation 1's row %+v: want its total as amount_total (the parity read compares by name)", r)
			}
		}
		must(t, gen1.sink.Close(ctx))
		now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		clock := func() time.Time { return now }
		must(t, EndFacadeGeneration(ctx, e.target(clock), 1))
		now = now.Add(time.Minute)
		rep, err := CompactFacade(ctx, e.target(clock), 2, 0)
		must(t, err)
		if !slices.Equal(rep.Merged, []int64{1}) || rep.Rows != 8 {
			t.Fatalf("compaction: %+v, want generation 1 merged, 8 rows (windows 0 and 1)", rep)
		}
		rd.end()
		if got := viewTotals(t, e, "amount_total"); !maps.Equal(got, truth) {
			t.Errorf("the view serves %v, want %v", got, truth)
		}
		if f := c.failures(); len(f) > 0 {
			t.Fatalf("the reader saw %d anomalies in %d reads, first: %v", len(f), c.reads, f[:min(5, len(f))])
		}
		must(t, gen2.sink.Close(ctx))
	})
}

// TestFacadeRenameRolledBack: dropping the generation that declared a
// rename (a rollback during the overlap) forgets the rename with it: the
// view serves generation 1's rows under total again.
func TestFacadeRenameRolledBack(t *testing.T) {
	forEachFacadeDriver(t, func(t *testing.T, e *facadeEnv) {
		ctx := context.Background()
		cfg := e.config(ModeUpsert, "region")
		cfg.SinkID, cfg.JobID = e.table+"/WriteTotals", "job"
		gen1 := e.schemaJob(cfg, totalsSchema, nil, nil)
		for r := range 3 {
			must(t, gen1.step(ctx, round(r)))
		}
		cfg2 := cfg
		cfg2.Generation, cfg2.Facade, cfg2.RenamedColumns = 2, true, map[string]string{"amount_total": "total"}
		gen2 := e.schemaJob(cfg2, renamedSchema, nil, nil)
		gen2.from = 2
		must(t, gen2.step(ctx, round(2)))
		must(t, gen2.sink.Close(ctx))
		must(t, DropFacadeGeneration(ctx, e.target(nil), 2))
		if got := viewColumns(t, e, e.table); !slices.Contains(got, "total") || slices.Contains(got, "amount_total") {
			t.Fatalf("after the rollback the view serves %v, want total and no amount_total", got)
		}
		must(t, gen1.step(ctx, round(3)))
		if got := viewTotals(t, e, "total"); !maps.Equal(got, gen1.total) {
			t.Errorf("after the rollback the view serves %v, want generation 1's %v", got, gen1.total)
		}
		must(t, gen1.sink.Close(ctx))
	})
}

// TestFacadeWidensToFloat: a parallel replacement whose int output
// widened to float writes floats to its generation's table beside the
// running job's ints; the view serves both, and the compaction moves the
// ints into the float column.
func TestFacadeWidensToFloat(t *testing.T) {
	forEachFacadeDriver(t, func(t *testing.T, e *facadeEnv) {
		ctx := context.Background()
		cfg := e.config(ModeUpsert, "region")
		cfg.SinkID, cfg.JobID = e.table+"/WriteTotals", "job"
		gen1 := e.schemaJob(cfg, totalsSchema, nil, nil)
		c := &consumer{e: e}
		rd := startPoller(ctx, c)
		var published []fact
		for r := range 3 {
			published = append(published, round(r)...)
			must(t, gen1.step(ctx, round(r)))
		}
		cfg2 := cfg
		cfg2.Generation, cfg2.Facade = 2, true
		gen2 := e.schemaJob(cfg2, floatSchema, nil, nil)
		gen2.from = 1
		must(t, gen2.step(ctx, published))
		for r := 3; r < 5; r++ {
			must(t, gen1.step(ctx, round(r)))
			must(t, gen2.step(ctx, round(r)))
		}
		must(t, gen1.sink.Close(ctx))
		e.endAndCompact(t, 1, 2)
		rd.end()
		if got := viewTotals(t, e, "total"); !maps.Equal(got, gen1.total) {
			t.Errorf("the view serves %v, want %v", got, gen1.total)
		}
		f := slices.DeleteFunc(c.failures(), func(s string) bool { return strings.Contains(s, "cached plan must not change result type") })
		if len(f) > 0 {
			t.Fatalf("the reader saw %d anomalies in %d reads, first: %v", len(f), c.reads, f[:min(5, len(f))])
		}
		must(t, gen2.sink.Close(ctx))
	})
}

// TestFacadeNarrowsToInt: a parallel replacement whose float output
// narrowed to int (declared allow_lossy) writes ints to its generation's
// table beside the running job's floats; the view serves every total as
// an integer — the running job's truncated toward zero, as the state's
// conversion truncates — and the compaction moves them, truncated, into
// the int column.
func TestFacadeNarrowsToInt(t *testing.T) {
	forEachFacadeDriver(t, func(t *testing.T, e *facadeEnv) {
		ctx := context.Background()
		cfg := e.config(ModeUpsert, "region")
		cfg.SinkID, cfg.JobID = e.table+"/WriteTotals", "job"
		total, panes := map[cell]int64{}, map[cell]int64{}
		gen1 := e.schemaJob(cfg, floatSchema, total, panes)
		gen1.plus = 0.75
		for r := range 3 {
			must(t, gen1.step(ctx, round(r)))
		}
		cfg2 := cfg
		cfg2.Generation, cfg2.Facade = 2, true
		gen2 := e.schemaJob(cfg2, totalsSchema, total, panes)
		gen2.from = 1
		must(t, gen2.step(ctx, nil)) // the first commit puts its table behind the view
		c := &consumer{e: e}
		rd := startPoller(ctx, c)
		for r := 3; r < 5; r++ {
			must(t, gen2.step(ctx, round(r)))
		}
		e.checkIntTotals(t, "with both generations behind the view", total)
		must(t, gen1.sink.Close(ctx))
		e.endAndCompact(t, 1, 2)
		rd.end()
		e.checkIntTotals(t, "after the compaction", total)
		f := slices.DeleteFunc(c.failures(), func(s string) bool { return strings.Contains(s, "cached plan must not change result type") })
		if len(f) > 0 {
			t.Fatalf("the reader saw %d anomalies in %d reads, first: %v", len(f), c.reads, f[:min(5, len(f))])
		}
		must(t, gen2.sink.Close(ctx))
	})
}

// endAndCompact ends façade generation end and compacts the table into
// generation keep, a minute later.
func (e *facadeEnv) endAndCompact(t *testing.T, end, keep int64) {
	t.Helper()
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	must(t, EndFacadeGeneration(ctx, e.target(clock), end))
	now = now.Add(time.Minute)
	if _, err := CompactFacade(ctx, e.target(clock), keep, 0); err != nil {
		t.Fatal(err)
	}
}

// checkIntTotals fails the test unless the view serves every total as an
// integer, and the totals of want; when says at which point.
func (e *facadeEnv) checkIntTotals(t *testing.T, when string, want map[cell]int64) {
	t.Helper()
	for _, r := range e.query("SELECT region, total FROM " + quoteTable(e.table)) {
		if _, ok := r[1].(int64); !ok {
			t.Fatalf("%s the view serves %v's total as %v (%T), want an integer", when, r[0], r[1], r[1])
		}
	}
	if got := viewTotals(t, e, "total"); !maps.Equal(got, want) {
		t.Errorf("%s the view serves %v, want %v", when, got, want)
	}
}
