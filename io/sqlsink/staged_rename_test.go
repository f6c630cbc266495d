package sqlsink

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
)

// schemaJob is a totalsJob whose rows are of schema (totalsSchema's
// fields, the total renamed or widened to float).
type schemaJob struct {
	totalsJob
	schema *row.Schema
	// plus is added to a float total (a fraction a narrowing truncates).
	plus float64
}

func (j *schemaJob) step(ctx context.Context, events []fact) error {
	elems := j.process(events)
	for i, e := range elems {
		r := e.Value.(*row.Row)
		vals := slices.Clone(r.Values)
		switch j.schema.Fields[1].Type.Kind {
		case row.KindFloat:
			vals[1] = float64(vals[1].(int64)) + j.plus
		case row.KindString:
			vals[1] = strconv.FormatInt(vals[1].(int64), 10)
		}
		e.Value = &row.Row{Schema: j.schema, Values: vals}
		elems[i] = e
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

// schemaJob is a job of rows of schema writing through a sink of cfg,
// carrying on from total and panes (new ones when nil).
func (e *facadeEnv) schemaJob(cfg Config, schema *row.Schema, total, panes map[cell]int64) *schemaJob {
	if total == nil {
		total = map[cell]int64{}
	}
	if panes == nil {
		panes = map[cell]int64{}
	}
	return &schemaJob{totalsJob: totalsJob{sink: e.sink(cfg, schema), total: total, panes: panes}, schema: schema}
}

// viewPoller polls the view from another connection until stopped, and can be
// paused (an update changes the view's columns: a dashboard then reads
// the new name).
type viewPoller struct {
	c      *consumer
	mu     sync.Mutex // held while paused
	stop   chan struct{}
	done   chan struct{}
	paused bool
}

func startPoller(ctx context.Context, c *consumer) *viewPoller {
	r := &viewPoller{c: c, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for {
			select {
			case <-r.stop:
				return
			default:
			}
			r.mu.Lock()
			c.check(ctx)
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *viewPoller) pause()  { r.mu.Lock() }
func (r *viewPoller) resume() { r.mu.Unlock() }
func (r *viewPoller) end()    { close(r.stop); <-r.done }

// viewColumns returns the columns the view serves.
func viewColumns(t *testing.T, e *facadeEnv, table string) []string {
	t.Helper()
	var out []string
	err := withFacade(context.Background(), FacadeTarget{Driver: e.driver, DSN: e.dsn, Table: table}, func(fx facadeExec, _ time.Time) error {
		cols, err := fxColumns(context.Background(), fx, table)
		for _, c := range cols {
			out = append(out, c.name)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// viewTotals returns the view's totals in column col by cell.
func viewTotals(t *testing.T, e *facadeEnv, col string) map[cell]int64 {
	t.Helper()
	got := map[cell]int64{}
	for _, r := range e.query("SELECT region, window_start, " + quoteIdent(col) + " FROM " + quoteTable(e.table)) {
		ws := asTime(t, r[1]).(mtime.Time)
		k := cell{r[0].(string), int(int64(ws-t0) / int64(mtime.Minute))}
		switch v := r[2].(type) {
		case int64:
			got[k] = v
		case float64:
			got[k] = int64(v)
		case string:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("%v reads %q, not an integer's text", k, v)
			}
			got[k] = n
		default:
			t.Fatalf("%v reads %v (%T)", k, v, v)
		}
	}
	return got
}

// TestStagedRenamesBehindTheView renames a value column of a staged table
// as a parallel replacement would: generation 2 declares total renamed to
// amount_total while generation 1 still writes its staging table (whose
// column keeps its name: its inserts go on); the view serves every row
// under the new name, the principal is renamed in place, merges move the
// old staging table's rows under the new name; a rollback (generation 3
// writes total again, declaring the reverse) serves total again. A reader
// polls the view throughout: no cell twice, none disappearing, no total
// going backwards; at the end every total is the ground truth.
func TestStagedRenamesBehindTheView(t *testing.T) {
	forEachStagedDriver(t, func(t *testing.T, e *facadeEnv) {
		ctx := context.Background()
		cfg := e.config("", "region")
		cfg.Layout, cfg.MergeInterval = LayoutStaged, -1
		total, panes := map[cell]int64{}, map[cell]int64{}
		gen1 := e.schemaJob(cfg, totalsSchema, total, panes)
		c := &consumer{e: e}
		rd := startPoller(ctx, c)
		for r := range 4 {
			if err := gen1.step(ctx, round(r)); err != nil {
				t.Fatalf("round %d: %v", r, err)
			}
			if r == 2 {
				if _, err := gen1.sink.Merge(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}

		// nextGen prepares generation gen's sink of rows of schema, which
		// declares renames, and points the reader at col meanwhile.
		nextGen := func(gen int64, renames map[string]string, schema *row.Schema, col string) *schemaJob {
			rd.pause()
			defer rd.resume()
			c2 := cfg
			c2.Generation, c2.JobID, c2.SinkID, c2.RenamedColumns = gen, fmt.Sprintf("job-%d", gen), fmt.Sprintf("%s-%d", cfg.SinkID, gen), renames
			c.col = col
			return e.schemaJob(c2, schema, total, panes)
		}
		// Generation 2 renames; generation 1 keeps writing its staging
		// table for a round (the overlap).
		gen2 := nextGen(2, map[string]string{"amount_total": "total"}, renamedSchema, "amount_total")
		if got := viewColumns(t, e, e.table); slices.Contains(got, "total") || !slices.Contains(got, "amount_total") {
			t.Fatalf("after the rename the view serves %v, want amount_total and no total", got)
		}
		if got := viewColumns(t, e, StagingTableName(e.table, 1)); !slices.Contains(got, "total") {
			t.Fatalf("generation 1's staging table has %v: its column total was renamed under the running job", got)
		}
		if got := viewColumns(t, e, PrincipalTableName(e.table)); slices.Contains(got, "total") || !slices.Contains(got, "amount_total") {
			t.Fatalf("the principal has %v, want amount_total in place of total", got)
		}
		info, err := DescribeStaged(ctx, StagedTarget{Driver: e.driver, DSN: e.dsn, Table: e.table})
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(info.Members); !strings.Contains(strings.ToLower(got), "total integer (served as amount_total)") && !strings.Contains(got, "total bigint (served as amount_total)") {
			t.Errorf("describe shows the members %s, want staging table 1's total served as amount_total", got)
		}
		if err := gen1.step(ctx, round(4)); err != nil {
			t.Fatalf("generation 1 writing its staging table after the rename: %v", err)
		}
		if err := gen1.sink.Close(ctx); err != nil {
			t.Fatal(err)
		}
		for r := 5; r < 9; r++ {
			if err := gen2.step(ctx, round(r)); err != nil {
				t.Fatalf("round %d: %v", r, err)
			}
			if r == 6 {
				rep, err := gen2.sink.Merge(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if rep.Rows == 0 {
					t.Errorf("the merge moved no rows: %+v", rep)
				}
			}
		}
		if got := viewTotals(t, e, "amount_total"); !maps.Equal(got, total) {
			t.Errorf("under the new name the view serves %v, want %v", got, total)
		}
		if got := stagedMemberTables(t, e); slices.Contains(got, StagingTableName(e.table, 1)) {
			t.Errorf("members %v: the ended staging table 1 was merged and should be gone", got)
		}
		if err := gen2.sink.Close(ctx); err != nil {
			t.Fatal(err)
		}

		// A rollback: generation 3 writes the old name again.
		gen3 := nextGen(3, map[string]string{"total": "amount_total"}, totalsSchema, "total")
		for r := 9; r < 11; r++ {
			if err := gen3.step(ctx, round(r)); err != nil {
				t.Fatalf("round %d: %v", r, err)
			}
		}
		if got := viewTotals(t, e, "total"); !maps.Equal(got, total) {
			t.Errorf("after the rollback the view serves %v, want %v", got, total)
		}
		if _, err := MergeStaged(ctx, StagedTarget{Driver: e.driver, DSN: e.dsn, Table: e.table}); err != nil {
			t.Fatal(err)
		}
		rd.end()
		if got := viewTotals(t, e, "total"); !maps.Equal(got, total) {
			t.Errorf("after the last merge the view serves %v, want %v", got, total)
		}
		if n := e.query("SELECT COUNT(*) FROM " + quoteTable(PrincipalTableName(e.table)))[0][0].(int64); n != int64(len(total)) {
			t.Errorf("the principal holds %d rows, want %d", n, len(total))
		}
		if f := c.failures(); len(f) > 0 {
			t.Fatalf("the reader saw %d anomalies in %d reads, first: %v", len(f), c.reads, f[:min(5, len(f))])
		}
		if c.reads < 10 {
			t.Errorf("the reader read %d times", c.reads)
		}
		gen3.sink.Close(ctx)
	})
}

// TestStagedRenameInPlace: an in-place update keeps the generation, so
// the sink writes its staging table again: the table's column is renamed
// in place, and a restart finds it done.
func TestStagedRenameInPlace(t *testing.T) {
	forEachStagedDriver(t, func(t *testing.T, e *facadeEnv) {
		ctx := context.Background()
		cfg := e.config("", "region")
		cfg.Layout, cfg.MergeInterval = LayoutStaged, -1
		total, panes := map[cell]int64{}, map[cell]int64{}
		j := e.schemaJob(cfg, totalsSchema, total, panes)
		for r := range 3 {
			if err := j.step(ctx, round(r)); err != nil {
				t.Fatal(err)
			}
		}
		j.sink.Close(ctx)
		cfg.RenamedColumns = map[string]string{"amount_total": "total"}
		for range 2 { // the update, then a restart
			epoch := j.epoch
			j = e.schemaJob(cfg, renamedSchema, total, panes)
			j.epoch = epoch
			if err := j.step(ctx, round(3)); err != nil {
				t.Fatal(err)
			}
			j.sink.Close(ctx)
		}
		if got := viewColumns(t, e, StagingTableName(e.table, 1)); slices.Contains(got, "total") || !slices.Contains(got, "amount_total") {
			t.Errorf("the staging table has %v, want amount_total in place of total", got)
		}
		if got := viewTotals(t, e, "amount_total"); !maps.Equal(got, total) {
			t.Errorf("the view serves %v, want %v", got, total)
		}
	})
}

// TestStagedWidensToFloat: an int output widened to float (compat's
// COMBINE_OUTPUT_WIDENED) writes a new staging table of floats beside the
// older ones of ints; the view serves both, and the merge widens the
// principal (PostgreSQL: bigint to double precision) and moves every row.
func TestStagedWidensToFloat(t *testing.T) {
	forEachStagedDriver(t, func(t *testing.T, e *facadeEnv) {
		ctx := context.Background()
		cfg := e.config("", "region")
		cfg.Layout, cfg.MergeInterval = LayoutStaged, -1
		total, panes := map[cell]int64{}, map[cell]int64{}
		j := e.schemaJob(cfg, totalsSchema, total, panes)
		c := &consumer{e: e}
		rd := startPoller(ctx, c)
		for r := range 3 {
			if err := j.step(ctx, round(r)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := j.sink.Merge(ctx); err != nil {
			t.Fatal(err)
		}
		j.sink.Close(ctx)
		cfg2 := cfg
		cfg2.Generation, cfg2.SinkID = 2, cfg.SinkID+"-2"
		j = e.schemaJob(cfg2, floatSchema, total, panes)
		for r := 3; r < 6; r++ {
			if err := j.step(ctx, round(r)); err != nil {
				t.Fatal(err)
			}
		}
		if got := viewTotals(t, e, "total"); !maps.Equal(got, total) {
			t.Errorf("before the merge the view serves %v, want %v", got, total)
		}
		if _, err := j.sink.Merge(ctx); err != nil {
			t.Fatal(err)
		}
		rd.end()
		if got := viewTotals(t, e, "total"); !maps.Equal(got, total) {
			t.Errorf("after the merge the view serves %v, want %v", got, total)
		}
		if e.driver == DriverPostgres {
			typ := e.query(`SELECT data_type::text FROM information_schema.columns WHERE table_name = $1 AND column_name = 'total'`,
				PrincipalTableName(e.table))
			if len(typ) != 1 || typ[0][0] != "double precision" {
				t.Errorf("the principal's total is %v, want double precision", typ)
			}
		}
		// A PostgreSQL client that prepared the query before the view's
		// column widened is told once to prepare it again (pgx then does).
		f := slices.DeleteFunc(c.failures(), func(s string) bool { return strings.Contains(s, "cached plan must not change result type") })
		if replanned := len(c.failures()) - len(f); replanned > 1 {
			t.Errorf("the reader's query was refused %d times for its cached plan, want at most once", replanned)
		}
		if len(f) > 0 {
			t.Fatalf("the reader saw %d anomalies in %d reads, first: %v", len(f), c.reads, f[:min(5, len(f))])
		}
		j.sink.Close(ctx)
	})
}

// TestStagedNarrowsToInt: a float output narrowed to int (declared
// allow_lossy upstream) on a staged table: generation 2's staging table
// holds ints, and the view serves the principal's and generation 1's
// floats truncated toward zero, before and after a merge, with a reader
// polling it throughout; every value it serves is an integer.
func TestStagedNarrowsToInt(t *testing.T) {
	forEachStagedDriver(t, func(t *testing.T, e *facadeEnv) {
		ctx := context.Background()
		cfg := e.config("", "region")
		cfg.Layout, cfg.MergeInterval = LayoutStaged, -1
		total, panes := map[cell]int64{}, map[cell]int64{}
		j := e.schemaJob(cfg, floatSchema, total, panes)
		j.plus = 0.75
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
		j = e.schemaJob(cfg2, totalsSchema, total, panes)
		c := &consumer{e: e}
		rd := startPoller(ctx, c)
		for r := 3; r < 5; r++ {
			if err := j.step(ctx, round(r)); err != nil {
				t.Fatal(err)
			}
		}
		e.checkIntTotals(t, "before the merge", total)
		if _, err := j.sink.Merge(ctx); err != nil {
			t.Fatal(err)
		}
		rd.end()
		e.checkIntTotals(t, "after the merge", total)
		if f := c.failures(); len(f) > 0 {
			t.Fatalf("the reader saw %d anomalies in %d reads, first: %v", len(f), c.reads, f[:min(5, len(f))])
		}
		j.sink.Close(ctx)
	})
}

// TestStagedRenameRefusals: a declared rename is refused when a member
// behind the view would serve two columns under one name, naming both;
// nothing is altered.
func TestStagedRenameRefusals(t *testing.T) {
	both := row.MustSchema(
		row.Field{Name: "region", Type: row.Of(row.KindString)},
		row.Field{Name: "total", Type: row.Of(row.KindInt)},
		row.Field{Name: "amount_total", Type: row.Of(row.KindInt)},
		row.Field{Name: "window_start", Type: row.Of(row.KindTimestamp)},
		row.Field{Name: "window_end", Type: row.Of(row.KindTimestamp)},
		row.Field{Name: "pane", Type: row.RowOf(row.PaneSchema())},
	)
	forEachStagedDriver(t, func(t *testing.T, e *facadeEnv) {
		ctx := context.Background()
		cfg := e.config("", "region")
		cfg.Layout, cfg.MergeInterval = LayoutStaged, -1
		sk := e.sink(cfg, both)
		r := total("NORTH", 5, fwin(0), onTime0).Value.(*row.Row)
		el := total("NORTH", 5, fwin(0), onTime0)
		el.Value = &row.Row{Schema: both, Values: []any{r.Values[0], int64(5), int64(7), r.Values[2], r.Values[3], r.Values[4]}}
		commit(t, sk, 1, el)
		sk.Close(ctx)
		before := stagedSnapshot(t, e)
		cfg2 := cfg
		cfg2.Generation, cfg2.SinkID = 2, cfg.SinkID+"-2"
		cfg2.RenamedColumns = map[string]string{"amount_total": "total"}
		s2, err := New(cfg2, renamedSchema)
		if err != nil {
			t.Fatal(err)
		}
		err = s2.Prepare(ctx)
		s2.Close(ctx)
		if !errors.Is(err, ErrSchemaChange) || !strings.Contains(err.Error(), "amount_total") {
			t.Fatalf("got %v, want ErrSchemaChange naming amount_total", err)
		}
		if got := stagedSnapshot(t, e); !maps.Equal(got, before) {
			t.Errorf("the refused rename altered the rows")
		}
		if got := fmt.Sprint(viewColumns(t, e, e.table)); !strings.Contains(got, "total") {
			t.Errorf("the view lost its column total: %s", got)
		}
	})
}
