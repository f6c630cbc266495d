package sqlsink

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// notedSchema is totalsSchema with a nullable column added (an additive
// schema change).
var notedSchema = row.MustSchema(
	row.Field{Name: "region", Type: row.Of(row.KindString)},
	row.Field{Name: "total", Type: row.Of(row.KindInt)},
	row.Field{Name: "note", Type: row.Of(row.KindString)},
	row.Field{Name: "window_start", Type: row.Of(row.KindTimestamp)},
	row.Field{Name: "window_end", Type: row.Of(row.KindTimestamp)},
	row.Field{Name: "pane", Type: row.RowOf(row.PaneSchema())},
)

// noted turns totals into rows of notedSchema carrying note.
func noted(elems []contract.Element, note string) []contract.Element {
	out := make([]contract.Element, len(elems))
	for i, e := range elems {
		r := e.Value.(*row.Row)
		v := r.Values
		e.Value = &row.Row{Schema: notedSchema, Values: []any{v[0], v[1], note, v[2], v[3], v[4]}}
		out[i] = e
	}
	return out
}

// stagedEnv is a façade test env whose table uses the staged layout.
func newStagedEnv(t *testing.T, driver string) *facadeEnv {
	e := newFacadeEnv(t, driver, false)
	if driver == DriverPostgres {
		table := e.table
		t.Cleanup(func() {
			e.exec("DROP VIEW IF EXISTS " + quoteTable(table))
			e.exec("DROP TABLE IF EXISTS " + quoteTable(PrincipalTableName(table)))
			for i := range 6 {
				e.exec("DROP TABLE IF EXISTS " + quoteTable(StagingTableName(table, int64(i))))
			}
			e.exec("DELETE FROM " + StagedMembersTable + " WHERE view_name = '" + table + "'")
			e.exec("DELETE FROM " + StagedMergesTable + " WHERE view_name = '" + table + "'")
		})
	}
	return e
}

func forEachStagedDriver(t *testing.T, f func(t *testing.T, e *facadeEnv)) {
	t.Helper()
	for _, d := range []string{DriverSQLite, DriverPostgres} {
		t.Run(d, func(t *testing.T) { f(t, newStagedEnv(t, d)) })
	}
}

// testClock is an injectable clock.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// stagedJob is a totalsJob whose sink may write the noted schema.
type stagedJob struct {
	totalsJob
	note string // non-empty: rows of notedSchema
}

func (j *stagedJob) step(ctx context.Context, events []fact) error {
	elems := j.process(events)
	if j.note != "" {
		elems = noted(elems, j.note)
	}
	j.epoch++
	if err := j.sink.Write(ctx, 0, elems); err != nil {
		return err
	}
	p, err := j.sink.PreCommit(ctx, 0, j.epoch)
	if err != nil {
		return err
	}
	return j.sink.Commit(ctx, j.epoch, [][]byte{p})
}

// members returns the member tables recorded for the env's staged view.
func stagedMemberTables(t *testing.T, e *facadeEnv) []string {
	t.Helper()
	var out []string
	for _, r := range e.query("SELECT member FROM "+StagedMembersTable+" WHERE view_name = "+e.q(1)+" ORDER BY seq", e.table) {
		out = append(out, r[0].(string))
	}
	return out
}

// TestStagedReaderThroughMerges writes a staged table across checkpoints
// with late panes, merging periodically (an injected clock) and on demand,
// then updates the job (generation 2, a new nullable column: a new staging
// table, the principal altered), while a consumer reads the view all the
// time from another connection: no (key, window) twice, none disappearing,
// no total going backwards; at the end every total is the ground truth, all
// rows are in the principal, the ended staging table is gone and the old
// rows read null in the new column.
func TestStagedReaderThroughMerges(t *testing.T) {
	forEachStagedDriver(t, func(t *testing.T, e *facadeEnv) {
		ctx := context.Background()
		clock := &testClock{now: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
		var merges []MergeReport
		var mergeMu sync.Mutex
		cfg := e.config("", "region")
		cfg.Layout, cfg.MergeInterval, cfg.Now = LayoutStaged, time.Minute, clock.Now
		cfg.OnMerge = func(r MergeReport, err error) {
			if err != nil {
				t.Errorf("periodic merge: %v", err)
			}
			mergeMu.Lock()
			merges = append(merges, r)
			mergeMu.Unlock()
		}
		job := &stagedJob{totalsJob: totalsJob{sink: e.sink(cfg, totalsSchema), total: map[cell]int64{}, panes: map[cell]int64{}}}
		if k := e.query("SELECT COUNT(*) FROM " + quoteTable(e.table))[0][0].(int64); k != 0 {
			t.Fatalf("a new staged view has %d rows", k)
		}
		c := &consumer{e: e}
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
					c.check(ctx)
				}
			}
		}()
		for r := range 12 {
			if r == 6 {
				// The update: generation 2 adds a column.
				if err := job.sink.Close(ctx); err != nil {
					t.Fatal(err)
				}
				cfg2 := cfg
				cfg2.Generation, cfg2.JobID, cfg2.SinkID = 2, "job-2", cfg.SinkID+"-2"
				sk2 := e.sink(cfg2, notedSchema)
				job = &stagedJob{totalsJob: totalsJob{sink: sk2, total: job.total, panes: job.panes}, note: "v2"}
			}
			if err := job.step(ctx, round(r)); err != nil {
				t.Fatalf("round %d: %v", r, err)
			}
			c.check(ctx)
			if r%3 == 2 {
				clock.advance(time.Minute) // the next commit merges
			}
			if r == 4 || r == 9 {
				if _, err := job.sink.Merge(ctx); err != nil {
					t.Fatalf("merge on demand: %v", err)
				}
				c.check(ctx)
			}
		}
		rep, err := MergeStaged(ctx, StagedTarget{Driver: e.driver, DSN: e.dsn, Table: e.table})
		if err != nil {
			t.Fatal(err)
		}
		c.check(ctx)
		close(stop)
		<-done
		if f := c.failures(); len(f) > 0 {
			t.Fatalf("the consumer saw %d anomalies in %d reads, first: %v", len(f), c.reads, f[:min(5, len(f))])
		}
		mergeMu.Lock()
		if len(merges) < 2 {
			t.Errorf("%d periodic merges ran, want 2 (a minute of the clock after each sink's first commit)", len(merges))
		}
		mergeMu.Unlock()
		if rep.Principal != PrincipalTableName(e.table) {
			t.Errorf("merged into %q", rep.Principal)
		}
		// Ground truth.
		got := map[cell]int64{}
		for _, r := range e.query("SELECT region, window_start, total FROM " + quoteTable(e.table)) {
			ws := asTime(t, r[1]).(mtime.Time)
			got[cell{r[0].(string), int(int64(ws-t0) / int64(mtime.Minute))}] = r[2].(int64)
		}
		if len(got) != len(job.total) {
			t.Errorf("the view has %d cells, want %d", len(got), len(job.total))
		}
		for k, want := range job.total {
			if got[k] != want {
				t.Errorf("%v: view total %d, want %d", k, got[k], want)
			}
		}
		members := stagedMemberTables(t, e)
		want := []string{PrincipalTableName(e.table), StagingTableName(e.table, 2)}
		if !slices.Equal(members, want) {
			t.Errorf("members after the merges: %v, want %v (the ended staging table 1 dropped)", members, want)
		}
		if n := e.query("SELECT COUNT(*) FROM " + quoteTable(StagingTableName(e.table, 2)))[0][0].(int64); n != 0 {
			t.Errorf("the current staging table still holds %d rows after a merge", n)
		}
		if n := e.query("SELECT COUNT(*) FROM " + quoteTable(PrincipalTableName(e.table)))[0][0].(int64); n != int64(len(job.total)) {
			t.Errorf("the principal holds %d rows, want %d", n, len(job.total))
		}
		// Windows 0..3 were final before the update: their rows read null
		// in the new column; rows written by generation 2 read "v2".
		for _, r := range e.query("SELECT window_start, note, generation FROM " + quoteTable(e.table)) {
			ws := asTime(t, r[0]).(mtime.Time)
			w := int(int64(ws-t0) / int64(mtime.Minute))
			gen := r[2].(int64)
			switch {
			case gen == 1 && r[1] != nil:
				t.Errorf("window %d written before the column existed reads %v, want null", w, r[1])
			case gen == 2 && r[1] != "v2":
				t.Errorf("window %d written by generation 2 reads %v, want v2", w, r[1])
			}
		}
	})
}

// stagedSnapshot returns the content of every member table and of the
// view, as sorted text.
func stagedSnapshot(t *testing.T, e *facadeEnv) map[string]string {
	t.Helper()
	out := map[string]string{}
	tables := append(stagedMemberTables(t, e), e.table)
	for _, tb := range tables {
		out[tb] = tableSnapshot(t, e, tb)
	}
	return out
}

// tableSnapshot returns a table's rows as sorted text.
func tableSnapshot(t *testing.T, e *facadeEnv, table string) string {
	t.Helper()
	var lines []string
	for _, r := range e.query("SELECT region, window_start, total, pane_index, generation FROM " + quoteTable(table)) {
		lines = append(lines, fmt.Sprintf("%v %v %v %v %v", r[0], asTime(t, r[1]), r[2], r[3], r[4]))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

var errCrash = errors.New("simulated crash")

// TestStagedMergeCrash stops a merge at each of its steps in turn (the
// hook fails, as a process killed between two statements: the transaction
// never commits) and checks that nothing changed, then runs the merge to
// the end twice: the principal holds exactly the rows the view served, the
// staging tables are empty (the ended one dropped), and the second merge
// moves nothing.
func TestStagedMergeCrash(t *testing.T) {
	forEachStagedDriver(t, func(t *testing.T, e *facadeEnv) {
		ctx := context.Background()
		cfg := e.config("", "region")
		cfg.Layout, cfg.MergeInterval = LayoutStaged, -1
		job := &stagedJob{totalsJob: totalsJob{sink: e.sink(cfg, totalsSchema), total: map[cell]int64{}, panes: map[cell]int64{}}}
		for r := range 3 {
			if err := job.step(ctx, round(r)); err != nil {
				t.Fatal(err)
			}
		}
		target := StagedTarget{Driver: e.driver, DSN: e.dsn, Table: e.table}
		if _, err := MergeStaged(ctx, target); err != nil {
			t.Fatal(err)
		}
		if err := job.step(ctx, round(3)); err != nil { // late panes over merged rows
			t.Fatal(err)
		}
		job.sink.Close(ctx)
		cfg2 := cfg
		cfg2.Generation, cfg2.SinkID = 2, cfg.SinkID+"-2"
		job = &stagedJob{totalsJob: totalsJob{sink: e.sink(cfg2, totalsSchema), total: job.total, panes: job.panes}}
		for r := 4; r < 6; r++ {
			if err := job.step(ctx, round(r)); err != nil {
				t.Fatal(err)
			}
		}
		before := stagedSnapshot(t, e)
		steps := 0
		for k := 1; ; k++ {
			calls := 0
			var at string
			target.Hook = func(step string) error {
				calls++
				if calls == k {
					at = step
					return errCrash
				}
				return nil
			}
			_, err := MergeStaged(ctx, target)
			if err == nil {
				steps = k - 1
				// The merge passed every step: it has committed.
				break
			}
			if !errors.Is(err, errCrash) {
				t.Fatalf("merge stopped at step %d: %v", k, err)
			}
			if got := stagedSnapshot(t, e); !maps.Equal(got, before) {
				t.Fatalf("a merge stopped at step %q changed the tables:\nbefore %v\nafter  %v", at, before, got)
			}
		}
		if steps < 6 {
			t.Fatalf("the merge has %d steps; the test expects insert, delete and drop of two staging tables, view and log", steps)
		}
		after := stagedSnapshot(t, e)
		principal := PrincipalTableName(e.table)
		if after[principal] != before[e.table] {
			t.Errorf("the principal after the merge:\n%s\nwant the view's rows before it:\n%s", after[principal], before[e.table])
		}
		if after[e.table] != before[e.table] {
			t.Errorf("the view changed across the merge:\n%s\nwant\n%s", after[e.table], before[e.table])
		}
		staging2 := StagingTableName(e.table, 2)
		if after[staging2] != "" {
			t.Errorf("%s still holds rows: %s", staging2, after[staging2])
		}
		if _, ok := after[StagingTableName(e.table, 1)]; ok {
			t.Errorf("the ended staging table 1 is still a member")
		}
		target.Hook = nil
		rep, err := MergeStaged(ctx, target)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Rows != 0 {
			t.Errorf("a second merge moved %d rows, want 0", rep.Rows)
		}
		if again := stagedSnapshot(t, e); !maps.Equal(again, after) {
			t.Errorf("a second merge changed the tables")
		}
		info, err := DescribeStaged(ctx, target)
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Merges) != 3 || len(info.Members) != 2 || info.Members[0].Rows != int64(len(job.total)) {
			t.Errorf("describe: %d merges, members %+v; want 3 merges, the principal with %d rows", len(info.Merges), info.Members, len(job.total))
		}
	})
}

// TestStagedRefusesMutations: a staged table refuses, before it changes
// anything, a renamed field (same generation: the staging table it
// writes; new generation: against the newest member), a changed type and a
// changed key, each naming the column or key and the fix; the tables keep
// their columns and rows.
func TestStagedRefusesMutations(t *testing.T) {
	renamed := row.MustSchema(
		row.Field{Name: "region", Type: row.Of(row.KindString)},
		row.Field{Name: "amount", Type: row.Of(row.KindInt)},
		row.Field{Name: "window_start", Type: row.Of(row.KindTimestamp)},
		row.Field{Name: "window_end", Type: row.Of(row.KindTimestamp)},
		row.Field{Name: "pane", Type: row.RowOf(row.PaneSchema())},
	)
	retyped := row.MustSchema(
		row.Field{Name: "region", Type: row.Of(row.KindString)},
		row.Field{Name: "total", Type: row.Of(row.KindString)},
		row.Field{Name: "window_start", Type: row.Of(row.KindTimestamp)},
		row.Field{Name: "window_end", Type: row.Of(row.KindTimestamp)},
		row.Field{Name: "pane", Type: row.RowOf(row.PaneSchema())},
	)
	forEachStagedDriver(t, func(t *testing.T, e *facadeEnv) {
		ctx := context.Background()
		cfg := e.config("", "region")
		cfg.Layout, cfg.MergeInterval = LayoutStaged, -1
		job := &stagedJob{totalsJob: totalsJob{sink: e.sink(cfg, totalsSchema), total: map[cell]int64{}, panes: map[cell]int64{}}}
		for r := range 2 {
			if err := job.step(ctx, round(r)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := MergeStaged(ctx, StagedTarget{Driver: e.driver, DSN: e.dsn, Table: e.table}); err != nil {
			t.Fatal(err)
		}
		if err := job.step(ctx, round(2)); err != nil {
			t.Fatal(err)
		}
		job.sink.Close(ctx)
		before := stagedSnapshot(t, e)
		columns := func() map[string]int {
			out := map[string]int{}
			for _, m := range stagedMemberTables(t, e) {
				out[m] = len(e.query("SELECT * FROM " + quoteTable(m) + " LIMIT 1")[0])
			}
			return out
		}
		cols := columns()
		cases := []struct {
			name   string
			gen    int64
			schema *row.Schema
			key    []string
			want   []string
		}{
			{"rename, same generation", 1, renamed, []string{"region"}, []string{"field amount is new", "column total", "rename", "Keep the field total"}},
			{"rename, new generation", 2, renamed, []string{"region"}, []string{"field amount is new", "column total", "rename"}},
			{"type change, same generation", 1, retyped, []string{"region"}, []string{"column total", "keep the type, or write to a new table"}},
			{"type change, new generation", 2, retyped, []string{"region"}, []string{"column total", "convert: [total]", "or write to a new table"}},
			{"key change", 2, totalsSchema, []string{"region", "total"}, []string{"keyed by (region, window_start, window_end)", "(region, total, window_start, window_end)"}},
		}
		for _, c := range cases {
			cfg2 := cfg
			cfg2.Generation, cfg2.Key, cfg2.SinkID = c.gen, c.key, cfg.SinkID+"-"+c.name
			sk, err := New(cfg2, c.schema)
			if err != nil {
				t.Fatalf("%s: New: %v", c.name, err)
			}
			for _, op := range []func(context.Context) error{sk.Validate, sk.Prepare} {
				err = op(ctx)
				if !errors.Is(err, ErrSchemaChange) {
					t.Fatalf("%s: got %v, want ErrSchemaChange", c.name, err)
				}
				for _, w := range c.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: the refusal %q does not say %q", c.name, err, w)
					}
				}
			}
			sk.Close(ctx)
			if got := stagedSnapshot(t, e); !maps.Equal(got, before) {
				t.Errorf("%s: the refused change altered the rows", c.name)
			}
			if got := columns(); !maps.Equal(got, cols) {
				t.Errorf("%s: the refused change altered the tables: %v, were %v", c.name, got, cols)
			}
		}
	})
}

// TestStagedIdentifierTooLong: on PostgreSQL a staged table whose member
// tables' names would be cut is refused, naming the longest name allowed.
func TestStagedIdentifierTooLong(t *testing.T) {
	for _, c := range []struct {
		table string
		ok    bool
	}{{strings.Repeat("a", 48), true}, {strings.Repeat("a", 49), false}} {
		cfg := Config{Driver: DriverPostgres, DSN: "postgres://x@127.0.0.1/db", Table: c.table, SinkID: "j/s", Layout: LayoutStaged}
		cfg.EnsureDefaults()
		err := cfg.Validate()
		if c.ok != (err == nil) || (err != nil && (!errors.Is(err, ErrIdentifierTooLong) || !strings.Contains(err.Error(), "at most 48 bytes"))) {
			t.Errorf("table of %d bytes: %v", len(c.table), err)
		}
	}
}

// TestStagedAdoptsPlainTable: a job that moves a plain table to layout:
// staged keeps its rows: the table becomes the principal (renamed, not
// copied), the view serves the same rows, and later panes win over them.
func TestStagedAdoptsPlainTable(t *testing.T) {
	forEachStagedDriver(t, func(t *testing.T, e *facadeEnv) {
		ctx := context.Background()
		cfg := e.config("", "region")
		job := &stagedJob{totalsJob: totalsJob{sink: e.sink(cfg, totalsSchema), total: map[cell]int64{}, panes: map[cell]int64{}}}
		for r := range 2 {
			if err := job.step(ctx, round(r)); err != nil {
				t.Fatal(err)
			}
		}
		job.sink.Close(ctx)
		plain := tableSnapshot(t, e, e.table)
		cfg2 := cfg
		cfg2.Layout, cfg2.MergeInterval, cfg2.Generation, cfg2.SinkID = LayoutStaged, -1, 2, cfg.SinkID+"-2"
		job = &stagedJob{totalsJob: totalsJob{sink: e.sink(cfg2, totalsSchema), total: job.total, panes: job.panes}}
		snap := stagedSnapshot(t, e)
		if snap[e.table] != plain || snap[PrincipalTableName(e.table)] != plain {
			t.Fatalf("after adopting the plain table, the view:\n%s\nthe principal:\n%s\nwant the plain table's rows:\n%s",
				snap[e.table], snap[PrincipalTableName(e.table)], plain)
		}
		if err := job.step(ctx, round(2)); err != nil {
			t.Fatal(err)
		}
		if _, err := job.sink.Merge(ctx); err != nil {
			t.Fatal(err)
		}
		got := map[cell]int64{}
		for _, r := range e.query("SELECT region, window_start, total FROM " + quoteTable(e.table)) {
			ws := asTime(t, r[1]).(mtime.Time)
			got[cell{r[0].(string), int(int64(ws-t0) / int64(mtime.Minute))}] = r[2].(int64)
		}
		if !maps.Equal(got, job.total) {
			t.Errorf("the view serves %v, want %v", got, job.total)
		}
	})
}

// TestPlainTableRefusesRename: a plain table (the default layout) refuses
// a renamed field before it changes anything, as a staged one does: the
// old column would keep its values and the new one read null, which no
// reader notices. Adding a field beside the old ones is still in place.
func TestPlainTableRefusesRename(t *testing.T) {
	renamed := row.MustSchema(
		row.Field{Name: "region", Type: row.Of(row.KindString)},
		row.Field{Name: "amount", Type: row.Of(row.KindInt)},
		row.Field{Name: "window_start", Type: row.Of(row.KindTimestamp)},
		row.Field{Name: "window_end", Type: row.Of(row.KindTimestamp)},
		row.Field{Name: "pane", Type: row.RowOf(row.PaneSchema())},
	)
	forEachStagedDriver(t, func(t *testing.T, e *facadeEnv) {
		ctx := context.Background()
		cfg := e.config("", "region")
		job := &stagedJob{totalsJob: totalsJob{sink: e.sink(cfg, totalsSchema), total: map[cell]int64{}, panes: map[cell]int64{}}}
		if err := job.step(ctx, round(0)); err != nil {
			t.Fatal(err)
		}
		job.sink.Close(ctx)
		n := 0
		width := func() int {
			// Another statement text each time: PostgreSQL refuses a cached
			// plan whose result type an ALTER TABLE changed.
			n++
			return len(e.query(fmt.Sprintf("SELECT * FROM %s LIMIT %d", quoteTable(e.table), n))[0])
		}
		before := width()

		cfg2 := cfg
		cfg2.Generation, cfg2.SinkID = 2, cfg.SinkID+"-renamed"
		sk, err := New(cfg2, renamed)
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range []func(context.Context) error{sk.Validate, sk.Prepare} {
			err := op(ctx)
			if !errors.Is(err, ErrSchemaChange) {
				t.Fatalf("got %v, want ErrSchemaChange", err)
			}
			for _, w := range []string{"field amount is new", "column total", "rename", "Keep the field total"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the refusal %q does not say %q", err, w)
				}
			}
		}
		sk.Close(ctx)
		if got := width(); got != before {
			t.Errorf("the refused rename altered the table: %d columns, were %d", got, before)
		}

		// A new field beside the old ones: added in place.
		cfg3 := cfg
		cfg3.Generation, cfg3.SinkID = 2, cfg.SinkID+"-noted"
		sk, err = New(cfg3, notedSchema)
		if err != nil {
			t.Fatal(err)
		}
		if err := sk.Prepare(ctx); err != nil {
			t.Fatalf("adding a field: %v", err)
		}
		sk.Close(ctx)
		if got := width(); got != before+1 {
			t.Errorf("after adding a field the table has %d columns, want %d", got, before+1)
		}
	})
}
