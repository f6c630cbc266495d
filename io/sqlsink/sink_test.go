package sqlsink

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// readTotal returns total, pane_index, pane_timing, generation of the row
// for region and window w (nil bounds for the global window).
func readTotal(t *testing.T, e *env, region string, w window.Window) []any {
	t.Helper()
	rows := e.query(`SELECT total, pane_index, pane_timing, generation, window_start, window_end FROM `+quoteIdent(e.table)+
		` WHERE region = `+e.q(1)+` ORDER BY window_start`, region)
	for _, r := range rows {
		ws, we := asTime(t, r[4]), asTime(t, r[5])
		if (w.IsGlobal() && ws == nil && we == nil) || (!w.IsGlobal() && ws == w.Start && we == w.End) {
			return r[:4]
		}
	}
	return nil
}

// TestFixture425Then475 is the reference fixture (docs/ARCHITECTURE.md): an ON_TIME 425 then a LATE 475 for
// the same key and window leave 475 (an append of both panes would sum to
// 900); replaying either pane, in a new epoch or the same one, leaves 475.
func TestFixture425Then475(t *testing.T) {
	forEachDriver(t, func(t *testing.T, e *env) {
		s := e.sink(e.config(ModeUpsert, "region"), totalsSchema)
		ctx := context.Background()
		p425 := total("NORTH", 425, w0, onTime0)
		p475 := total("NORTH", 475, w0, late1)
		var part1 []byte
		steps := []struct {
			name  string
			do    func()
			total int64
			pane  int64
			rows  int64
		}{
			{"on-time pane", func() { part1 = commit(t, s, 1, p425) }, 425, 0, 1},
			{"late pane", func() { commit(t, s, 2, p475) }, 475, 1, 1},
			{"replay epoch 1", func() {
				if err := s.Commit(ctx, 1, [][]byte{part1}); err != nil {
					t.Fatal(err)
				}
			}, 475, 1, 1},
			{"older pane in a new epoch", func() { commit(t, s, 3, p425) }, 475, 1, 1},
			{"equal pane in a new epoch", func() { commit(t, s, 4, total("NORTH", 900, w0, late1)) }, 475, 1, 1},
			{"next window", func() { commit(t, s, 5, total("NORTH", 100, w1, onTime0)) }, 475, 1, 2},
		}
		for _, st := range steps {
			st.do()
			got := readTotal(t, e, "NORTH", w0)
			if got == nil || got[0].(int64) != st.total || got[1].(int64) != st.pane || got[2] != paneTiming(st.pane) {
				t.Fatalf("after %s: got (total, pane_index, pane_timing, generation) %v, want total %d pane %d", st.name, got, st.total, st.pane)
			}
			if n := e.count(); n != st.rows {
				t.Fatalf("after %s: %d rows, want %d", st.name, n, st.rows)
			}
		}
		if got := e.progress(e.table + "/Write"); got != 5 {
			t.Errorf("progress epoch %d, want 5", got)
		}
		if e.driver == DriverSQLite {
			if mode := e.query("PRAGMA journal_mode")[0][0]; mode != "wal" {
				t.Errorf("journal_mode %v, want wal", mode)
			}
		}
	})
}

func paneTiming(i int64) string {
	if i == 0 {
		return "ON_TIME"
	}
	return "LATE"
}

// TestRevisionOrder checks every step of a sequence of writes of one key
// and window by sinks of several generations: a write lands only if its
// (generation, pane_index) is newer than the stored one.
func TestRevisionOrder(t *testing.T) {
	forEachDriver(t, func(t *testing.T, e *env) {
		sinks := map[int64]*Sink{}
		sinkOf := func(gen int64) *Sink {
			if s := sinks[gen]; s != nil {
				return s
			}
			cfg := e.config(ModeUpsert, "region")
			cfg.Generation = gen
			cfg.JobID = fmt.Sprintf("job-gen-%d", gen)
			sinks[gen] = e.sink(cfg, totalsSchema)
			return sinks[gen]
		}
		steps := []struct {
			gen, pane, value int64
			want             int64
			wantGen          int64
		}{
			{1, 0, 425, 425, 1},
			{1, 1, 475, 475, 1},
			{1, 0, 999, 475, 1}, // older pane
			{1, 1, 888, 475, 1}, // equal revision
			{2, 0, 500, 500, 2}, // newer generation beats a higher pane of an older one
			{1, 7, 111, 500, 2}, // older generation, however high its pane
			{2, 0, 222, 500, 2}, // equal
			{2, 1, 600, 600, 2},
			{3, 0, 700, 700, 3},
		}
		for i, st := range steps {
			p := window.PaneInfo{Index: st.pane, Timing: window.Late, IsFirst: st.pane == 0}
			commit(t, sinkOf(st.gen), uint64(i+1), total("NORTH", st.value, w0, p))
			got := readTotal(t, e, "NORTH", w0)
			if got == nil || got[0].(int64) != st.want || got[3].(int64) != st.wantGen {
				t.Fatalf("step %d (gen %d pane %d value %d): got (total, pane, timing, generation) %v, want total %d generation %d",
					i, st.gen, st.pane, st.value, got, st.want, st.wantGen)
			}
		}
	})
}

// TestPanesInOneEpoch: several panes of one key and window in the same
// epoch, in any order and from several workers, leave the newest.
func TestPanesInOneEpoch(t *testing.T) {
	forEachDriver(t, func(t *testing.T, e *env) {
		s := e.sink(e.config(ModeUpsert, "region"), totalsSchema)
		ctx := context.Background()
		must(t, s.Write(ctx, 0, []contract.Element{total("NORTH", 475, w0, late1), total("NORTH", 425, w0, onTime0)}))
		must(t, s.Write(ctx, 1, []contract.Element{total("NORTH", 425, w0, onTime0), total("WEST", 100, w0, onTime0)}))
		p0, err := s.PreCommit(ctx, 0, 1)
		must(t, err)
		p1, err := s.PreCommit(ctx, 1, 1)
		must(t, err)
		must(t, s.Commit(ctx, 1, [][]byte{p1, p0}))
		if got := readTotal(t, e, "NORTH", w0); got == nil || got[0].(int64) != 475 {
			t.Fatalf("NORTH: got %v, want 475", got)
		}
		if got := readTotal(t, e, "WEST", w0); got == nil || got[0].(int64) != 100 {
			t.Fatalf("WEST: got %v, want 100", got)
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestGlobalWindow: rows of the global window have null window bounds and
// still upsert on their key, whether the row carries the window fields (as
// nulls) or the sink takes the window and pane from the element.
func TestGlobalWindow(t *testing.T) {
	bare := row.MustSchema(
		row.Field{Name: "region", Type: row.Of(row.KindString)},
		row.Field{Name: "total", Type: row.Of(row.KindInt)},
	)
	forEachDriver(t, func(t *testing.T, e *env) {
		t.Run("window fields", func(t *testing.T) {
			e := newEnv(t, e.driver)
			s := e.sink(e.config(ModeUpsert, "region"), totalsSchema)
			commit(t, s, 1, total("NORTH", 425, window.Global, onTime0), total("WEST", 1, window.Global, onTime0))
			commit(t, s, 2, total("NORTH", 475, window.Global, late1))
			commit(t, s, 3, total("NORTH", 425, window.Global, onTime0))
			if got := readTotal(t, e, "NORTH", window.Global); got == nil || got[0].(int64) != 475 {
				t.Fatalf("got %v, want 475", got)
			}
			if n := e.count(); n != 2 {
				t.Fatalf("%d rows, want 2", n)
			}
		})
		t.Run("element window and pane", func(t *testing.T) {
			e := newEnv(t, e.driver)
			s := e.sink(e.config(ModeUpsert, "region"), bare)
			el := func(v int64, w window.Window, p window.PaneInfo) contract.Element {
				return contract.Element{Value: &row.Row{Schema: bare, Values: []any{"NORTH", v}}, Window: w, Pane: p}
			}
			commit(t, s, 1, el(425, window.Global, onTime0), el(7, w0, onTime0))
			commit(t, s, 2, el(475, window.Global, late1), el(8, w0, late1))
			if got := readTotal(t, e, "NORTH", window.Global); got == nil || got[0].(int64) != 475 || got[2] != "LATE" {
				t.Fatalf("global: got %v, want 475 LATE", got)
			}
			if got := readTotal(t, e, "NORTH", w0); got == nil || got[0].(int64) != 8 {
				t.Fatalf("window %s: got %v, want 8", w0, got)
			}
			if n := e.count(); n != 2 {
				t.Fatalf("%d rows, want 2", n)
			}
			cols := e.query(`SELECT pane_is_first, pane_is_last FROM ` + quoteIdent(e.table) + ` WHERE window_start IS NULL`)
			if asBool(t, cols[0][0]) != false || asBool(t, cols[0][1]) != false {
				t.Fatalf("pane flags %v, want false false", cols[0])
			}
		})
	})
}

var eventSchema = row.MustSchema(
	row.Field{Name: "user", Type: row.Of(row.KindString)},
	row.Field{Name: "amount", Type: row.Of(row.KindInt)},
)

func event(user string, amount int64, src string, off int64) contract.Element {
	return contract.Element{Value: &row.Row{Schema: eventSchema, Values: []any{user, amount}},
		Window: window.Global, Pane: window.NoFiring, Source: &contract.SourcePos{Source: src, Offset: off}}
}

// TestAppendIdempotent: append mode stores each element once, however often
// it is written: rewritten in a later epoch, rerun by a new sink, or
// delivered twice in one epoch. Identical rows from one source element are
// distinct elements.
func TestAppendIdempotent(t *testing.T) {
	forEachDriver(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		s := e.sink(e.config(ModeAppend), eventSchema)
		batch := []contract.Element{event("ann", 5, "in.csv", 1), event("bob", 7, "in.csv", 2),
			// A FlatMap emitting the same row twice from line 3: two elements.
			event("cid", 1, "in.csv", 3), event("cid", 1, "in.csv", 3)}
		steps := []struct {
			name string
			do   func()
			rows int64
		}{
			{"first write", func() { commit(t, s, 1, batch...) }, 4},
			{"same elements in a later epoch", func() { commit(t, s, 2, batch...) }, 4},
			{"one new element", func() { commit(t, s, 3, event("dan", 2, "in.csv", 4)) }, 5},
			{"rerun by a new sink", func() {
				cfg := e.config(ModeAppend)
				cfg.SinkID += "-rerun"
				s2, err := New(cfg, eventSchema)
				must(t, err)
				must(t, s2.Write(ctx, 0, batch))
				must(t, s2.Close(ctx))
			}, 5},
		}
		for _, st := range steps {
			st.do()
			if n := e.count(); n != st.rows {
				t.Fatalf("after %s: %d rows, want %d", st.name, n, st.rows)
			}
		}
		if sum := e.query(`SELECT CAST(SUM(amount) AS BIGINT) FROM ` + quoteIdent(e.table))[0][0]; sum != int64(16) {
			t.Fatalf("sum %v, want 16", sum)
		}
	})
}

// TestAppendCustomElementID: Config.ElementID decides identity.
func TestAppendCustomElementID(t *testing.T) {
	forEachDriver(t, func(t *testing.T, e *env) {
		cfg := e.config(ModeAppend)
		cfg.ElementID = func(_ *contract.Element, r *row.Row) (string, error) {
			u, _ := r.Get("user")
			return u.(string), nil
		}
		s := e.sink(cfg, eventSchema)
		commit(t, s, 1, event("ann", 5, "a", 1), event("ann", 6, "a", 2), event("bob", 1, "a", 3))
		if n := e.count(); n != 2 {
			t.Fatalf("%d rows, want 2 (one per user)", n)
		}
	})
}

// TestCrashReplay: a process pre-commits and dies before Commit; a new
// process commits the stored parts, and a replay commits them again (in the
// same epoch, then as a later epoch): the table is as if committed once.
func TestCrashReplay(t *testing.T) {
	for _, mode := range []string{ModeUpsert, ModeAppend} {
		t.Run(mode, func(t *testing.T) {
			forEachDriver(t, func(t *testing.T, e *env) {
				ctx := context.Background()
				schema, key := totalsSchema, []string{"region"}
				elems := []contract.Element{total("NORTH", 425, w0, onTime0), total("WEST", 100, w0, onTime0)}
				if mode == ModeAppend {
					key = nil
				}
				first, err := New(e.config(mode, key...), schema)
				must(t, err)
				must(t, first.Prepare(ctx))
				must(t, first.Write(ctx, 0, elems[:1]))
				must(t, first.Write(ctx, 1, elems[1:]))
				p0, err := first.PreCommit(ctx, 0, 7)
				must(t, err)
				p1, err := first.PreCommit(ctx, 1, 7)
				must(t, err)
				must(t, first.db.be.close(ctx)) // the crash: the process dies without Close
				if n := e.count(); n != 0 {
					t.Fatalf("%d rows before any Commit, want 0", n)
				}
				for i, replay := range []func(s *Sink) error{
					func(s *Sink) error { return s.Commit(ctx, 7, [][]byte{p0, p1}) },
					func(s *Sink) error { return s.Commit(ctx, 7, [][]byte{p0, p1}) },
					func(s *Sink) error { return s.Commit(ctx, 8, [][]byte{p1, p0, p1}) },
				} {
					s := e.sink(e.config(mode, key...), schema)
					must(t, replay(s))
					must(t, s.Close(ctx))
					if n := e.count(); n != 2 {
						t.Fatalf("replay %d: %d rows, want 2", i, n)
					}
					if sum := e.query(`SELECT CAST(SUM(total) AS BIGINT) FROM ` + quoteIdent(e.table))[0][0]; sum != int64(525) {
						t.Fatalf("replay %d: sum %v, want 525", i, sum)
					}
				}
				if got := e.progress(e.table + "/Write"); got != 8 {
					t.Fatalf("progress %d, want 8", got)
				}
			})
		})
	}
}

// TestCloseCommitsBuffered: a bounded run without checkpoints writes its
// rows at Close; with checkpoints, Close records the next epoch.
func TestCloseCommitsBuffered(t *testing.T) {
	forEachDriver(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		s, err := New(e.config(ModeUpsert, "region"), totalsSchema)
		must(t, err)
		must(t, s.Write(ctx, 0, []contract.Element{total("NORTH", 425, w0, onTime0)}))
		must(t, s.Write(ctx, 3, []contract.Element{total("WEST", 100, w0, onTime0)}))
		must(t, s.Close(ctx))
		if n := e.count(); n != 2 {
			t.Fatalf("%d rows after Close, want 2", n)
		}
		if got := e.progress(e.table + "/Write"); got != -2 {
			t.Fatalf("progress %d after an uncheckpointed run, want none", got)
		}
		if err := s.Write(ctx, 0, nil); !errors.Is(err, ErrClosed) {
			t.Fatalf("Write after Close: %v, want ErrClosed", err)
		}
		s2 := e.sink(e.config(ModeUpsert, "region"), totalsSchema)
		commit(t, s2, 4, total("NORTH", 475, w0, late1))
		must(t, s2.Write(ctx, 0, []contract.Element{total("SOUTH", 3, w0, onTime0)}))
		must(t, s2.Close(ctx))
		if got := e.progress(e.table + "/Write"); got != 5 {
			t.Fatalf("progress %d after Close of a checkpointed run, want 5", got)
		}
		if n := e.count(); n != 3 {
			t.Fatalf("%d rows, want 3", n)
		}
		// A checkpoint that never completes: its pre-committed rows are not
		// lost at Close.
		s3 := e.sink(e.config(ModeUpsert, "region"), totalsSchema)
		must(t, s3.Write(ctx, 0, []contract.Element{total("EAST", 9, w0, onTime0)}))
		_, err = s3.PreCommit(ctx, 0, 6)
		must(t, err)
		must(t, s3.Close(ctx))
		if got := e.progress(e.table + "/Write"); got != 7 {
			t.Fatalf("progress %d after Close with an uncommitted epoch 6, want 7", got)
		}
		if got := readTotal(t, e, "EAST", w0); got == nil || got[0] != int64(9) {
			t.Fatalf("EAST: %v, want 9", got)
		}
	})
}

// TestFlushEvery: without checkpoints, FlushEvery bounds what Write buffers.
func TestFlushEvery(t *testing.T) {
	forEachDriver(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		cfg := e.config(ModeAppend)
		cfg.FlushEvery = 2
		s := e.sink(cfg, eventSchema)
		must(t, s.Write(ctx, 0, []contract.Element{event("a", 1, "f", 1)}))
		if n := e.count(); n != 0 {
			t.Fatalf("%d rows after 1 write, want 0", n)
		}
		must(t, s.Write(ctx, 0, []contract.Element{event("b", 1, "f", 2), event("c", 1, "f", 3)}))
		if n := e.count(); n != 3 {
			t.Fatalf("%d rows after 3 writes, want 3", n)
		}
		must(t, s.Write(ctx, 0, []contract.Element{event("d", 1, "f", 4)}))
		must(t, s.Close(ctx))
		if n := e.count(); n != 4 {
			t.Fatalf("%d rows after Close, want 4", n)
		}
	})
}

var allTypes = row.MustSchema(
	row.Field{Name: "id", Type: row.Of(row.KindInt)},
	row.Field{Name: "f", Type: row.Of(row.KindFloat)},
	row.Field{Name: "b", Type: row.Of(row.KindBool)},
	row.Field{Name: "s", Type: row.Of(row.KindString)},
	row.Field{Name: "ts", Type: row.Of(row.KindTimestamp)},
	row.Field{Name: "tags", Type: row.ListOf(row.Of(row.KindString))},
	row.Field{Name: "extra", Type: row.Of(row.KindAny)},
	row.Field{Name: "pos", Type: row.RowOf(row.MustSchema(row.Field{Name: "x", Type: row.Of(row.KindInt)}))},
)

// TestTypesRoundTrip writes every field type, nulls included, through
// PreCommit and Commit and reads the table back.
func TestTypesRoundTrip(t *testing.T) {
	ts := t0.Add(1234 * mtime.Millisecond)
	nested := &row.Row{Schema: allTypes.Fields[7].Type.Row, Values: []any{int64(3)}}
	full := []any{int64(-1 << 40), 2.5, true, "naïve \"quoted\"\n", ts, []any{"a", "b"}, map[string]any{"k": int64(1)}, nested}
	null := []any{int64(2), nil, nil, nil, nil, nil, nil, nil}
	forEachDriver(t, func(t *testing.T, e *env) {
		s := e.sink(e.config(ModeUpsert, "id"), allTypes)
		commit(t, s, 1,
			contract.Element{Value: &row.Row{Schema: allTypes, Values: full}, Window: window.Global},
			contract.Element{Value: &row.Row{Schema: allTypes, Values: null}, Window: window.Global})
		got := e.query(`SELECT id, f, b, s, ts, tags, extra, pos FROM ` + quoteIdent(e.table) + ` ORDER BY id`)
		if len(got) != 2 {
			t.Fatalf("%d rows, want 2", len(got))
		}
		a := got[0]
		if a[0] != int64(-1<<40) || a[1] != 2.5 || asBool(t, a[2]) != true || a[3] != full[3] || asTime(t, a[4]) != ts ||
			a[5] != `["a","b"]` || a[6] != `{"k":1}` || a[7] != `{"x":3}` {
			t.Errorf("full row read back as %#v", a)
		}
		for i, v := range got[1][1:] {
			if v != nil {
				t.Errorf("null column %d read back as %#v", i+1, v)
			}
		}
	})
}

// TestPartRoundTrip: the part encoding keeps every value, sentinel times
// and nulls, and maps columns by name.
func TestPartRoundTrip(t *testing.T) {
	cfg := Config{Table: "x", SinkID: "j/s", Key: []string{"id"}, DSN: "x.db"}
	cfg.EnsureDefaults()
	l, err := newLayout(&cfg, allTypes)
	must(t, err)
	recs := []any{}
	for _, v := range [][]any{
		{int64(1), 1.5, true, "s", t0, `["a"]`, `1`, `{}`, mtime.MinTimestamp, mtime.MaxTimestamp, int64(0), "ON_TIME", true, false, false},
		{int64(-5), -0.0, false, "", mtime.Time(-1), nil, nil, nil, nil, nil, int64(1 << 62), "LATE", false, true, true},
	} {
		if len(v) != l.nrec {
			t.Fatalf("test record has %d values, layout %d", len(v), l.nrec)
		}
		recs = append(recs, v...)
	}
	b := l.encodePart(9, "job-x", recs)
	p, err := l.decodePart(b)
	must(t, err)
	if p.generation != 9 || p.jobID != "job-x" || len(p.vals) != len(recs) {
		t.Fatalf("decoded %d %q %d values", p.generation, p.jobID, len(p.vals))
	}
	for i := range recs {
		if p.vals[i] != recs[i] {
			t.Errorf("value %d (%s): got %#v, want %#v", i, l.cols[i%l.nrec].name, p.vals[i], recs[i])
		}
	}
	for n := range len(b) {
		if _, err := l.decodePart(b[:n]); err == nil && n > 0 {
			t.Fatalf("a part truncated to %d of %d bytes decoded without error", n, len(b))
		}
	}
	other := Config{Table: "x", SinkID: "j/s", Mode: ModeAppend, DSN: "x.db"}
	other.EnsureDefaults()
	lo, err := newLayout(&other, eventSchema)
	must(t, err)
	if _, err := lo.decodePart(b); err == nil || !strings.Contains(err.Error(), "no longer writes") {
		t.Fatalf("decoding into another layout: %v, want a column error", err)
	}
}

// TestColumnTypeConflict: an existing table whose column cannot hold a
// field fails Prepare and Validate with a message naming the table, the
// column, the existing and the wanted type, before any data flows.
func TestColumnTypeConflict(t *testing.T) {
	forEachDriver(t, func(t *testing.T, e *env) {
		tbl := quoteIdent(e.table)
		textTotal := "CREATE TABLE " + tbl + " (region TEXT NOT NULL, total TEXT, window_start TEXT, window_end TEXT)"
		if e.driver == DriverPostgres {
			textTotal = "CREATE TABLE " + tbl + " (region TEXT NOT NULL, total BOOLEAN, window_start TIMESTAMPTZ, window_end TIMESTAMPTZ)"
		}
		must(t, e.exec(textTotal))
		s, err := New(e.config(ModeUpsert, "region"), totalsSchema)
		must(t, err)
		defer s.Close(context.Background())
		for _, step := range []struct {
			name string
			f    func(context.Context) error
		}{{"Validate", s.Validate}, {"Prepare", s.Prepare}} {
			err := step.f(context.Background())
			if !errors.Is(err, ErrColumnType) {
				t.Fatalf("%s: %v, want ErrColumnType", step.name, err)
			}
			for _, want := range []string{e.table, "column total", "BIGINT"} {
				if e.driver == DriverSQLite && want == "BIGINT" {
					want = "the table has type TEXT, the sink writes INTEGER"
				}
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s: %q does not mention %q", step.name, err, want)
				}
			}
			if !errors.Is(err, ErrTableShape) || !strings.Contains(err.Error(), "pane_index") {
				t.Errorf("%s: %q should also report the missing pane columns", step.name, err)
			}
			t.Logf("%s: %v", step.name, err)
		}
		if n := e.count(); n != 0 {
			t.Fatalf("rows appeared: %d", n)
		}
	})
}

// TestExistingTable: a table a previous sink created is reused; a value
// field the table lacks is added; a sink with another key is refused.
func TestExistingTable(t *testing.T) {
	forEachDriver(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		s := e.sink(e.config(ModeUpsert, "region"), totalsSchema)
		commit(t, s, 1, total("NORTH", 425, w0, onTime0))
		must(t, s.Close(ctx))

		wider := row.MustSchema(append([]row.Field{{Name: "count", Type: row.Of(row.KindInt)}}, totalsSchema.Fields...)...)
		s2 := e.sink(e.config(ModeUpsert, "region"), wider)
		r := &row.Row{Schema: wider, Values: []any{int64(2), "NORTH", int64(475), w0.Start, w0.End, row.PaneRow(late1)}}
		commit(t, s2, 2, contract.Element{Value: r, Window: w0, Pane: late1})
		got := e.query(`SELECT "count", total FROM ` + quoteIdent(e.table))
		if len(got) != 1 || got[0][0] != int64(2) || got[0][1] != int64(475) {
			t.Fatalf("got %v, want [[2 475]]", got)
		}
		must(t, s2.Close(ctx))

		rekeyed, err := New(e.config(ModeUpsert, "region", "total"), totalsSchema)
		must(t, err)
		defer rekeyed.Close(ctx)
		if err := rekeyed.Prepare(ctx); !errors.Is(err, ErrTableShape) || !strings.Contains(err.Error(), "region, total, window_start, window_end") {
			t.Fatalf("Prepare with another key: %v, want ErrTableShape naming the key", err)
		}
	})
}

// TestWriteErrors: a row that cannot be written names the table and column.
func TestWriteErrors(t *testing.T) {
	cfg := Config{DSN: t.TempDir() + "/x.db", Table: "totals", Key: []string{"region"}, SinkID: "j/s"}
	s, err := New(cfg, totalsSchema)
	must(t, err)
	defer s.Close(context.Background())
	ctx := context.Background()
	for _, c := range []struct {
		name string
		v    any
		want string
	}{
		{"null key", &row.Row{Schema: totalsSchema, Values: []any{nil, int64(1), nil, nil, row.PaneRow(onTime0)}}, "table totals, column region: the value is null"},
		{"wrong type", &row.Row{Schema: totalsSchema, Values: []any{"N", "x", nil, nil, row.PaneRow(onTime0)}}, "table totals, column total: want int, got string"},
		{"not a row", "hello", "WriteToSql writes rows, got string"},
		{"other schema", &row.Row{Schema: eventSchema, Values: []any{"a", int64(1)}}, "reached a sink built for"},
	} {
		err := s.Write(ctx, 0, []contract.Element{{Value: c.v}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if p, err := s.PreCommit(ctx, 0, 1); err != nil || p != nil {
		t.Fatalf("failed rows were buffered: %d bytes, %v", len(p), err)
	}
}

// TestWriteRejecting: a row the table cannot store is reported as a reject
// with its reason and left out; the rows around it are stored.
func TestWriteRejecting(t *testing.T) {
	forEachDriver(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		s := e.sink(e.config(ModeUpsert, "user"), eventSchema)
		bad := "nul\x00text"
		elems := []contract.Element{event("ann", 5, "in", 1),
			{Value: &row.Row{Schema: eventSchema, Values: []any{nil, int64(9)}}, Window: window.Global, Source: &contract.SourcePos{Source: "in", Offset: 2}},
			event("bob", 7, "in", 3)}
		want := []contract.SinkReject{{Index: 1, Err: contract.ElementError{Reason: ReasonNullKey}}}
		if e.driver == DriverPostgres {
			elems = append(elems, event(bad, 1, "in", 4))
			want = append(want, contract.SinkReject{Index: 3, Err: contract.ElementError{Reason: ReasonValueOutOfRange}})
		}
		rejects, err := s.WriteRejecting(ctx, 0, elems, nil)
		must(t, err)
		if len(rejects) != len(want) {
			t.Fatalf("rejects %+v, want %+v", rejects, want)
		}
		for i, r := range rejects {
			if r.Index != want[i].Index || r.Err.Reason != want[i].Err.Reason || !strings.Contains(r.Err.Message, "table "+e.table) {
				t.Errorf("reject %d: %+v, want index %d reason %s naming the table", i, r, want[i].Index, want[i].Err.Reason)
			}
		}
		part, err := s.PreCommit(ctx, 0, 1)
		must(t, err)
		must(t, s.Commit(ctx, 1, [][]byte{part}))
		if n := e.count(); n != 2 {
			t.Fatalf("%d rows stored, want the 2 good ones", n)
		}
		// Write, unlike WriteRejecting, still fails on such a row.
		if err := s.Write(ctx, 0, elems[1:2]); err == nil || !strings.Contains(err.Error(), "the value is null") {
			t.Fatalf("Write of a keyless row: %v", err)
		}
	})
}

// TestConfigErrors: New refuses configurations that cannot work.
func TestConfigErrors(t *testing.T) {
	base := func() Config {
		return Config{DSN: "x.db", Table: "totals", Key: []string{"region"}, SinkID: "j/s"}
	}
	for _, c := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"driver", func(c *Config) { c.Driver = "mysql" }, `driver "mysql" is not supported`},
		{"no dsn", func(c *Config) { c.DSN = "" }, "sqlite needs a dsn"},
		{"postgres dsn", func(c *Config) { c.Driver = "postgres"; c.DSN = "" }, "postgres needs a dsn"},
		{"table", func(c *Config) { c.Table = "a b" }, `table "a b"`},
		{"schema table on sqlite", func(c *Config) { c.Table = "s.t" }, "schema.table for postgres"},
		{"reserved table", func(c *Config) { c.Table = "weir_sink_progress" }, "reserved"},
		{"mode", func(c *Config) { c.Mode = "merge" }, `mode "merge"`},
		{"append with key", func(c *Config) { c.Mode = "append" }, "key is only meaningful in upsert mode"},
		{"sink id", func(c *Config) { c.SinkID = "" }, "sink ID"},
		{"unknown key", func(c *Config) { c.Key = []string{"city"} }, `key field "city" is not a field`},
		{"window key", func(c *Config) { c.Key = []string{"window_start"} }, "the window is always part of an upsert key"},
		{"nested key", func(c *Config) { c.Key = []string{"pane"} }, "keys must be int"},
		{"duplicate key", func(c *Config) { c.Key = []string{"region", "region"} }, "listed twice"},
	} {
		cfg := base()
		c.edit(&cfg)
		_, err := New(cfg, totalsSchema)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrConfig mentioning %q", c.name, err, c.want)
		}
	}
	clash := row.MustSchema(row.Field{Name: "region", Type: row.Of(row.KindString)}, row.Field{Name: "generation", Type: row.Of(row.KindInt)})
	if _, err := New(base(), clash); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `"generation" would appear twice`) {
		t.Errorf("field named generation: %v", err)
	}
	dir := t.TempDir() + "/data/sub"
	s, err := New(Config{DataDir: dir, Table: "t", SinkID: "j/s"}, eventSchema)
	must(t, err)
	must(t, s.Prepare(context.Background()))
	must(t, s.Close(context.Background()))
	if _, err := os.Stat(dir + "/" + DefaultSQLiteFile); err != nil {
		t.Errorf("default SQLite file: %v", err)
	}
	cfg := Config{DataDir: "/data", Table: "t", SinkID: "j/s"}
	cfg.EnsureDefaults()
	if cfg.DSN != "/data/"+DefaultSQLiteFile || cfg.Mode != ModeAppend || cfg.Driver != DriverSQLite {
		t.Errorf("defaults: %+v", cfg)
	}
}

// TestCheckAccumulation: upsert refuses discarding panes when a window can
// fire more than once.
func TestCheckAccumulation(t *testing.T) {
	late := window.AfterCount(1)
	early := window.AfterProcessingTime(mtime.Minute)
	for _, c := range []struct {
		name   string
		mode   string
		s      window.Strategy
		refuse bool
	}{
		{"default strategy", ModeUpsert, window.DefaultStrategy(), false},
		{"fixture, accumulating", ModeUpsert, window.Strategy{Fn: window.FixedFn(5 * mtime.Minute), Trigger: window.AfterWatermark(nil, &late),
			Accumulation: window.Accumulating, AllowedLateness: mtime.Minute}, false},
		{"fixture, discarding", ModeUpsert, window.Strategy{Fn: window.FixedFn(5 * mtime.Minute), Trigger: window.AfterWatermark(nil, &late),
			Accumulation: window.Discarding, AllowedLateness: mtime.Minute}, true},
		{"fixture, discarding, append", ModeAppend, window.Strategy{Trigger: window.AfterWatermark(nil, &late),
			Accumulation: window.Discarding, AllowedLateness: mtime.Minute}, false},
		{"default trigger with lateness", "", window.Strategy{Accumulation: window.Discarding, AllowedLateness: mtime.Minute}, true},
		{"early firings", ModeUpsert, window.Strategy{Trigger: window.AfterWatermark(&early, nil)}, true},
		{"late trigger without lateness", ModeUpsert, window.Strategy{Trigger: window.AfterWatermark(nil, &late)}, false},
		{"repeatedly", ModeUpsert, window.Strategy{Trigger: window.Repeatedly(window.AfterCount(10))}, true},
		{"after count once", ModeUpsert, window.Strategy{Trigger: window.AfterCount(10), AllowedLateness: mtime.Hour}, false},
	} {
		err := CheckAccumulation(c.mode, c.s)
		if c.refuse != (err != nil) {
			t.Errorf("%s: %v, want refused=%v", c.name, err, c.refuse)
		}
		if err != nil && (!errors.Is(err, ErrDiscardingPanes) || !strings.Contains(err.Error(), "each pane would overwrite a total with a delta")) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// TestConcurrentWorkers: workers write concurrently; one epoch commits the
// parts of all of them.
func TestConcurrentWorkers(t *testing.T) {
	forEachDriver(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		s := e.sink(e.config(ModeUpsert, "region"), totalsSchema)
		const workers, perWorker = 4, 500
		errs := make(chan error, workers)
		for w := range workers {
			go func() {
				for i := range perWorker {
					el := total(fmt.Sprintf("r-%d-%d", w, i), int64(i), w0, onTime0)
					if err := s.Write(ctx, w, []contract.Element{el}); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		for range workers {
			must(t, <-errs)
		}
		var parts [][]byte
		for w := range workers {
			p, err := s.PreCommit(ctx, w, 1)
			must(t, err)
			parts = append(parts, p)
		}
		must(t, s.Commit(ctx, 1, parts))
		if n := e.count(); n != workers*perWorker {
			t.Fatalf("%d rows, want %d", n, workers*perWorker)
		}
	})
}

// TestValidateKeepsNoConnection: a validation disconnects before it
// returns, whatever it found, and the sink connects again when it runs. A
// pipeline loaded only to be checked (a validate-only request, weir check,
// a refused update) is never closed: each of its validations kept a
// connection, and for SQLite an open file and a goroutine, for the
// server's lifetime (60 validate-only requests left 120 files open).
func TestValidateKeepsNoConnection(t *testing.T) {
	forEachDriver(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		connected := func(s *Sink) bool {
			s.dbMu.Lock()
			defer s.dbMu.Unlock()
			switch be := s.db.be.(type) {
			case *sqliteDB:
				return be.db != nil && be.db.PingContext(ctx) == nil
			case *pgDB:
				return be.conn != nil && !be.conn.IsClosed()
			}
			t.Fatalf("unknown backend %T", s.db.be)
			return false
		}
		for _, tc := range []struct {
			name    string
			schema  *row.Schema
			wantErr bool
		}{
			{"no table yet", totalsSchema, false},
			{"the table exists", totalsSchema, false},
			{"a refused table", row.MustSchema(
				row.Field{Name: "region", Type: row.Of(row.KindString)},
				row.Field{Name: "total", Type: row.Of(row.KindString)},
				row.Field{Name: "window_start", Type: row.Of(row.KindTimestamp)},
				row.Field{Name: "window_end", Type: row.Of(row.KindTimestamp)},
				row.Field{Name: "pane", Type: row.RowOf(row.PaneSchema())}), true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				s, err := New(e.config(ModeUpsert, "region"), tc.schema)
				must(t, err)
				if err := s.Validate(ctx); (err != nil) != tc.wantErr {
					t.Fatalf("Validate: %v, want an error: %v", err, tc.wantErr)
				}
				if connected(s) {
					t.Fatal("the sink is still connected after its validation")
				}
				if tc.wantErr {
					return
				}
				commit(t, s, 1, total("NORTH", 425, w0, onTime0))
				if got := readTotal(t, e, "NORTH", w0); got == nil || got[0] != int64(425) {
					t.Fatalf("NORTH after a run that followed a validation: %v, want 425", got)
				}
				must(t, s.Close(ctx))
			})
		}
	})
}

// TestBufferedBytes: the sink says how much it holds uncommitted
// (contract.BufferingSink) from Write to the worker's PreCommit, and
// nothing after Close.
func TestBufferedBytes(t *testing.T) {
	e := newEnv(t, "sqlite")
	ctx := context.Background()
	s := e.sink(e.config(ModeAppend), eventSchema)
	if n := s.BufferedBytes(); n != 0 {
		t.Fatalf("a new sink holds %d bytes, want 0", n)
	}
	must(t, s.Write(ctx, 0, []contract.Element{event("ann", 5, "in.csv", 1), event("bob", 7, "in.csv", 2)}))
	w0 := s.BufferedBytes()
	if w0 <= 0 {
		t.Fatalf("two rows held in %d bytes", w0)
	}
	must(t, s.Write(ctx, 1, []contract.Element{event("cid", 1, "in.csv", 3)}))
	both := s.BufferedBytes()
	if both != w0+w0/2 {
		t.Fatalf("worker 1's one row: %d bytes then %d, want half of worker 0's two more", w0, both)
	}
	if _, err := s.PreCommit(ctx, 0, 1); err != nil {
		t.Fatal(err)
	}
	if n := s.BufferedBytes(); n != both-w0 {
		t.Errorf("after worker 0's pre-commit the sink holds %d bytes, want worker 1's %d", n, both-w0)
	}
	must(t, s.Close(ctx))
	if n := s.BufferedBytes(); n != 0 {
		t.Errorf("after Close the sink holds %d bytes, want 0", n)
	}
}
