package sqlsink

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/window"
)

// cutPane is a pane of a window its job did not see whole (a drain's last
// pane, or a job that started reading mid-window).
func cutPane(i int64) window.PaneInfo {
	return window.PaneInfo{Index: i, Timing: window.OnTime, IsFirst: i == 0, IsLast: true, CutShort: true}
}

// readCut returns total, generation and pane_cut_short of region's row in
// window w (nil if there is none).
func readCut(t *testing.T, e *env, region string, w window.Window) []any {
	t.Helper()
	rows := e.query(`SELECT total, generation, pane_cut_short, window_start FROM `+quoteTable(e.table)+
		` WHERE region = `+e.q(1), region)
	for _, r := range rows {
		if asTime(t, r[3]) == w.Start {
			return []any{r[0], r[1], asBool(t, r[2])}
		}
	}
	return nil
}

// TestCutShortRevisions checks every step of writes of one key and window
// by several generations, some cut short: within a generation the later
// pane wins; across generations a complete revision wins over a cut-short
// one whatever the generations (the reprocessing job's partial first pane
// never overwrites the old job's complete total, the replacement's complete
// pane replaces the old job's drain pane), and otherwise the newer one.
func TestCutShortRevisions(t *testing.T) {
	forEachDriver(t, func(t *testing.T, e *env) {
		sinks := map[int64]*Sink{}
		sinkOf := func(gen int64) *Sink {
			if s := sinks[gen]; s != nil {
				return s
			}
			cfg := e.config(ModeUpsert, "region")
			cfg.Generation, cfg.JobID = gen, fmt.Sprintf("job-gen-%d", gen)
			sinks[gen] = e.sink(cfg, totalsSchema)
			return sinks[gen]
		}
		early := window.PaneInfo{Index: 0, Timing: window.Early, IsFirst: true}
		steps := []struct {
			name          string
			gen           int64
			pane          window.PaneInfo
			value         int64
			want, wantGen int64
			wantCut       bool
		}{
			{"early pane", 1, early, 100, 100, 1, false},
			{"drain pane, same generation", 1, cutPane(1), 529, 529, 1, true},
			{"replacement's complete pane", 2, onTime0, 5648, 5648, 2, false},
			{"older generation's cut pane", 1, cutPane(2), 999, 5648, 2, false},
			{"newer generation's cut pane", 3, cutPane(0), 2656, 5648, 2, false},
			{"newer generation's later cut pane", 3, cutPane(1), 3821, 5648, 2, false},
			{"newer generation's complete pane", 4, onTime0, 6000, 6000, 4, false},
		}
		for i, st := range steps {
			commit(t, sinkOf(st.gen), uint64(i+1), total("EAST", st.value, w0, st.pane))
			got := readCut(t, e, "EAST", w0)
			if got == nil || got[0].(int64) != st.want || got[1].(int64) != st.wantGen || got[2] != st.wantCut {
				t.Fatalf("step %d (%s): got (total, generation, cut short) %v, want %d %d %v", i, st.name, got, st.want, st.wantGen, st.wantCut)
			}
		}
		// A newer generation's cut-short pane first, then an older
		// generation's complete one (a drain committed late): the complete
		// one is kept.
		commit(t, sinkOf(5), 100, total("EAST", 10, w1, cutPane(0)))
		commit(t, sinkOf(4), 101, total("EAST", 20, w1, onTime0)) // one progress record: a new epoch
		if got := readCut(t, e, "EAST", w1); got == nil || got[0].(int64) != 20 || got[2] != false {
			t.Fatalf("window 2: got %v, want generation 4's complete 20", got)
		}
	})
}

// TestCutShortColumnMigration: a table made before pane_cut_short existed
// gains the column at Prepare; its rows (null there) count as complete, so
// a newer generation's cut-short pane does not replace them.
func TestCutShortColumnMigration(t *testing.T) {
	forEachDriver(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		s1 := e.sink(e.config(ModeUpsert, "region"), totalsSchema)
		commit(t, s1, 1, total("EAST", 5648, w0, onTime0))
		must(t, s1.Close(ctx))
		if err := e.exec(`ALTER TABLE ` + quoteTable(e.table) + ` DROP COLUMN pane_cut_short`); err != nil {
			t.Fatal(err)
		}
		cfg := e.config(ModeUpsert, "region")
		cfg.Generation, cfg.JobID, cfg.SinkID = 2, "job-2", e.table+"/Write2"
		s2 := e.sink(cfg, totalsSchema)
		got := readCut(t, e, "EAST", w0)
		if got == nil || got[2] != nil {
			t.Fatalf("after the migration: %v, want the old row with a null pane_cut_short", got)
		}
		commit(t, s2, 1, total("EAST", 2656, w0, cutPane(0)), total("EAST", 3821, w1, cutPane(0)))
		if got := readCut(t, e, "EAST", w0); got[0].(int64) != 5648 {
			t.Errorf("the old complete row was replaced by a cut-short pane: %v", got)
		}
		if got := readCut(t, e, "EAST", w1); got == nil || got[0].(int64) != 3821 || got[2] != true {
			t.Errorf("a new window's cut-short pane: %v, want 3821 marked cut short", got)
		}
	})
}

// TestFacadePrefersComplete: behind a façade view, per key and window, a
// complete row of any generation is served over a cut-short one, else the
// newest generation's; a compaction keeps exactly what the view served.
func TestFacadePrefersComplete(t *testing.T) {
	forEachFacadeDriver(t, func(t *testing.T, e *facadeEnv) {
		ctx := context.Background()
		g1 := e.sink(e.config(ModeUpsert, "region"), totalsSchema)
		// Generation 1: 00:00 complete; 00:05 drained while open.
		commit(t, g1, 1, total("EAST", 5648, w0, onTime0), total("EAST", 529, w1, cutPane(0)),
			total("WEST", 70, w1, cutPane(0)))
		must(t, g1.Close(ctx))
		cfg := e.config(ModeUpsert, "region")
		cfg.SinkID, cfg.Generation, cfg.JobID, cfg.Facade = e.table+"/W2", 2, "job-2", true
		g2 := e.sink(cfg, totalsSchema)
		// Generation 2 started mid-window 00:00 (cut short there) and saw
		// 00:05 whole; WEST 00:05 it also saw only in part.
		commit(t, g2, 1, total("EAST", 2656, w0, cutPane(0)), total("EAST", 6132, w1, onTime0),
			total("WEST", 90, w1, cutPane(0)))
		want := map[string]int64{"EAST/0": 5648, "EAST/1": 6132, "WEST/1": 90}
		check := func(when string) {
			t.Helper()
			got := map[string]int64{}
			for _, r := range e.query(`SELECT region, window_start, total FROM ` + quoteTable(e.table)) {
				w := "0"
				if asTime(t, r[1]) == w1.Start {
					w = "1"
				}
				k := r[0].(string) + "/" + w
				if _, dup := got[k]; dup {
					t.Fatalf("%s: the view serves %s twice", when, k)
				}
				got[k] = r[2].(int64)
			}
			if len(got) != len(want) {
				t.Fatalf("%s: the view serves %v, want %v", when, got, want)
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s: %s = %d, want %d (all: %v)", when, k, got[k], v, got)
				}
			}
		}
		check("the view")
		now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		clock := func() time.Time { return now }
		must(t, EndFacadeGeneration(ctx, e.target(clock), 1))
		now = now.Add(2 * time.Hour)
		rep, err := CompactFacade(ctx, e.target(clock), 2, time.Hour)
		must(t, err)
		if len(rep.Merged) != 1 {
			t.Fatalf("compaction: %+v, want generation 1 merged", rep)
		}
		check("after the compaction")
	})
}

// TestFacadeOlderGenerationWithoutColumn: a generation whose table was made
// before pane_cut_short existed counts as complete behind the view: a newer
// generation's cut-short row does not hide its row, a complete one does.
func TestFacadeOlderGenerationWithoutColumn(t *testing.T) {
	forEachFacadeDriver(t, func(t *testing.T, e *facadeEnv) {
		ctx := context.Background()
		g1 := e.sink(e.config(ModeUpsert, "region"), totalsSchema)
		commit(t, g1, 1, total("EAST", 5648, w0, onTime0), total("EAST", 100, w1, onTime0))
		must(t, g1.Close(ctx))
		if err := e.exec(`ALTER TABLE ` + quoteTable(e.table) + ` DROP COLUMN pane_cut_short`); err != nil {
			t.Fatal(err)
		}
		cfg := e.config(ModeUpsert, "region")
		cfg.SinkID, cfg.Generation, cfg.JobID, cfg.Facade = e.table+"/W2", 2, "job-2", true
		g2 := e.sink(cfg, totalsSchema)
		commit(t, g2, 1, total("EAST", 2656, w0, cutPane(0)), total("EAST", 6132, w1, onTime0))
		got := map[mtime.Time]int64{}
		for _, r := range e.query(`SELECT window_start, total FROM ` + quoteTable(e.table)) {
			got[asTime(t, r[0]).(mtime.Time)] = r[1].(int64)
		}
		if len(got) != 2 || got[w0.Start] != 5648 || got[w1.Start] != 6132 {
			t.Fatalf("the view serves %v, want 00:00 = 5648 (generation 1, no column) and 00:05 = 6132", got)
		}
	})
}
