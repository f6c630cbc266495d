package sqlsink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// facadeSchema is the PostgreSQL schema of the schema-qualified façade
// tests.
const facadeSchema = "weir_facade_test"

// facadeEnv is a database with a façade view under test, and a reader
// connection of its own (a consumer), usable from another goroutine.
type facadeEnv struct {
	*env
	// read runs a query on the consumer's connection.
	read func(ctx context.Context, q string) ([][]any, error)
}

// forEachFacadeDriver runs f on SQLite, PostgreSQL and PostgreSQL with a
// schema-qualified table.
func forEachFacadeDriver(t *testing.T, f func(t *testing.T, e *facadeEnv)) {
	t.Helper()
	for _, c := range []struct {
		name, driver string
		schema       bool
	}{{"sqlite", DriverSQLite, false}, {"postgres", DriverPostgres, false}, {"postgres_schema", DriverPostgres, true}} {
		t.Run(c.name, func(t *testing.T) { f(t, newFacadeEnv(t, c.driver, c.schema)) })
	}
}

func newFacadeEnv(t *testing.T, driver string, qualified bool) *facadeEnv {
	t.Helper()
	e := &facadeEnv{env: newEnv(t, driver)}
	ctx := context.Background()
	switch driver {
	case DriverSQLite:
		db, err := sql.Open("sqlite", "file:"+e.dsn+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		t.Cleanup(func() { db.Close() })
		e.read = func(ctx context.Context, q string) ([][]any, error) {
			rows, err := db.QueryContext(ctx, q)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			cols, _ := rows.Columns()
			var out [][]any
			for rows.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					return nil, err
				}
				out = append(out, vals)
			}
			return out, rows.Err()
		}
	case DriverPostgres:
		conn, err := pgx.Connect(ctx, e.dsn)
		if err != nil {
			t.Fatal(err)
		}
		if qualified {
			if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+facadeSchema); err != nil && !strings.Contains(err.Error(), "already exists") {
				t.Fatal(err)
			}
			e.table = facadeSchema + "." + e.table
		}
		table := e.table
		t.Cleanup(func() {
			conn.Exec(ctx, "DROP VIEW IF EXISTS "+quoteTable(table))
			for g := range 4 {
				conn.Exec(ctx, "DROP TABLE IF EXISTS "+quoteTable(FacadeTableName(table, int64(g))))
			}
			conn.Exec(ctx, "DROP TABLE IF EXISTS "+quoteTable(table))
			conn.Exec(ctx, "DELETE FROM "+FacadeTable+" WHERE facade = $1", table)
			conn.Close(ctx)
		})
		e.read = func(ctx context.Context, q string) ([][]any, error) {
			rows, err := conn.Query(ctx, q)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			var out [][]any
			for rows.Next() {
				vals, err := rows.Values()
				if err != nil {
					return nil, err
				}
				out = append(out, vals)
			}
			return out, rows.Err()
		}
	}
	return e
}

func (e *facadeEnv) target(now func() time.Time) FacadeTarget {
	return FacadeTarget{Driver: e.driver, DSN: e.dsn, Table: e.table, Now: now}
}

// exists reports whether a table or view of that name exists.
func (e *facadeEnv) exists(name string) bool {
	e.t.Helper()
	ctx := context.Background()
	var kind string
	err := withFacade(ctx, FacadeTarget{Driver: e.driver, DSN: e.dsn, Table: e.table}, func(fx facadeExec, _ time.Time) error {
		var err error
		kind, err = fxKind(ctx, fx, name)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return kind != ""
}

// cell is a key and window of the totals.
type cell struct {
	region string
	window int
}

// totalsJob models one job of the overlap: a windowed accumulating sum per
// region, fed by the published rounds, emitting a pane for every cell whose
// total changed in a round, through a real sink.
type totalsJob struct {
	sink  *Sink
	epoch uint64
	total map[cell]int64
	panes map[cell]int64
	// from is the first window the job's input still holds (the topic's
	// retention when it started).
	from int
}

func fwin(w int) window.Window {
	return window.Window{Start: t0.Add(mtime.Duration(w) * mtime.Minute), End: t0.Add(mtime.Duration(w+1) * mtime.Minute)}
}

// process applies events and returns the panes to write.
func (j *totalsJob) process(events []fact) []contract.Element {
	changed := map[cell]bool{}
	var order []cell
	for _, ev := range events {
		if ev.window < j.from {
			continue
		}
		c := cell{ev.region, ev.window}
		j.total[c] += ev.amount
		if !changed[c] {
			changed[c] = true
			order = append(order, c)
		}
	}
	out := make([]contract.Element, 0, len(order))
	for _, c := range order {
		idx := j.panes[c]
		j.panes[c]++
		p := window.PaneInfo{Index: idx, Timing: window.OnTime, IsFirst: idx == 0}
		if idx > 0 {
			p.Timing = window.Late
		}
		out = append(out, total(c.region, j.total[c], fwin(c.window), p))
	}
	return out
}

// step processes events and commits them as the job's next epoch, on two
// workers.
func (j *totalsJob) step(ctx context.Context, events []fact) error {
	elems := j.process(events)
	j.epoch++
	var parts [][]byte
	for w := range 2 {
		var mine []contract.Element
		for i := w; i < len(elems); i += 2 {
			mine = append(mine, elems[i])
		}
		if err := j.sink.Write(ctx, w, mine); err != nil {
			return err
		}
		p, err := j.sink.PreCommit(ctx, w, j.epoch)
		if err != nil {
			return err
		}
		parts = append(parts, p)
	}
	return j.sink.Commit(ctx, j.epoch, parts)
}

type fact struct {
	region string
	window int
	amount int64
}

// round returns the events published in round r: an on-time event per
// region for window r and a late one for window r-1.
func round(r int) []fact {
	var out []fact
	for k, region := range []string{"NORTH", "SOUTH", "EAST", "WEST"} {
		out = append(out, fact{region, r, int64(100*r + k + 1)})
		if r > 0 {
			out = append(out, fact{region, r - 1, int64(10*r + k)})
		}
	}
	return out
}

// consumer reads the view the way a dashboard would and checks every read:
// no cell twice, no cell disappearing, no total going backwards.
type consumer struct {
	e *facadeEnv
	// col is the column of the totals ("total" when empty); set it only
	// while no check runs.
	col   string
	mu    sync.Mutex
	seen  map[cell]int64
	reads int
	errs  []string
}

func (c *consumer) check(ctx context.Context) {
	c.mu.Lock() // also serialises the consumer's connection
	defer c.mu.Unlock()
	col := c.col
	if col == "" {
		col = "total"
	}
	rows, err := c.e.read(ctx, `SELECT region, window_start, `+quoteIdent(col)+` FROM `+quoteTable(c.e.table))
	if err != nil {
		c.errs = append(c.errs, fmt.Sprintf("reading the view: %v", err))
		return
	}
	c.reads++
	now := map[cell]int64{}
	for _, r := range rows {
		var ws mtime.Time
		switch x := r[1].(type) {
		case time.Time:
			ws = mtime.FromTime(x)
		case string:
			ws, _ = mtime.Parse(x)
		}
		k := cell{r[0].(string), int(int64(ws-t0) / int64(mtime.Minute))}
		if _, dup := now[k]; dup {
			c.errs = append(c.errs, fmt.Sprintf("read %d: %v appears twice", c.reads, k))
		}
		switch v := r[2].(type) {
		case int64:
			now[k] = v
		case float64:
			now[k] = int64(v)
			if float64(now[k]) != v {
				c.errs = append(c.errs, fmt.Sprintf("read %d: %v reads %v, not a whole number", c.reads, k, v))
			}
		case string:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				c.errs = append(c.errs, fmt.Sprintf("read %d: %v reads %q, not an integer's text", c.reads, k, v))
			}
			now[k] = n
		default:
			c.errs = append(c.errs, fmt.Sprintf("read %d: %v reads %v (%T)", c.reads, k, v, v))
		}
	}
	for k, prev := range c.seen {
		got, ok := now[k]
		switch {
		case !ok:
			c.errs = append(c.errs, fmt.Sprintf("read %d: %v disappeared (was %d)", c.reads, k, prev))
		case got < prev:
			c.errs = append(c.errs, fmt.Sprintf("read %d: the total of %v went back from %d to %d", c.reads, k, prev, got))
		}
	}
	c.seen = now
}

func (c *consumer) failures() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.errs)
}

// TestFacadeOverlap runs a parallel replacement's sink side with two real
// sinks: generation 1 writes the plain table from round 0; at round 4
// generation 2 starts in façade mode (migrating the table while generation
// 1 commits), re-reads the retained input (windows from 2 on) and commits
// concurrently with generation 1, each with epochs from 1 under the same
// sink ID; at round 8 generation 1 ends; the compaction waits for the
// retention (an injected clock) and then merges windows 0 and 1 into
// generation 2's table. A consumer reads the view all the time, from
// another connection, and between every commit: no (key, window) twice,
// none disappearing, no total going backwards; at the end every total
// equals the ground truth.
func TestFacadeOverlap(t *testing.T) {
	forEachFacadeDriver(t, func(t *testing.T, e *facadeEnv) {
		ctx := context.Background()
		const rounds, start2, end1 = 12, 4, 8
		truth := map[cell]int64{}
		var published []fact
		newJob := func(gen int64, facade bool, from int) *totalsJob {
			cfg := e.config(ModeUpsert, "region")
			cfg.SinkID, cfg.Generation, cfg.JobID, cfg.Facade = e.table+"/WriteTotals", gen, fmt.Sprintf("job-%d", gen), facade
			return &totalsJob{sink: e.sink(cfg, totalsSchema), total: map[cell]int64{}, panes: map[cell]int64{}, from: from}
		}
		gen1 := newJob(1, false, 0) // prepared: the plain table exists
		cons := &consumer{e: e}
		stop := make(chan struct{})
		var readers sync.WaitGroup
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				cons.check(ctx)
			}
		}()
		var once sync.Once
		halt := func() { once.Do(func() { close(stop); readers.Wait() }) }
		defer halt()
		var mu sync.Mutex // guards now
		now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
		var gen2 *totalsJob
		for r := range rounds {
			evs := round(r)
			published = append(published, evs...)
			for _, ev := range evs {
				truth[cell{ev.region, ev.window}] += ev.amount
			}
			var wg sync.WaitGroup
			errs := make(chan error, 2)
			if r <= end1 {
				wg.Add(1)
				go func() { defer wg.Done(); errs <- gen1.step(ctx, evs) }()
			}
			switch {
			case r == start2:
				wg.Add(1)
				backlog := slices.Clone(published)
				go func() {
					defer wg.Done()
					gen2 = newJob(2, true, 2)
					errs <- gen2.step(ctx, backlog)
				}()
			case r > start2:
				wg.Add(1)
				go func() { defer wg.Done(); errs <- gen2.step(ctx, evs) }()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatalf("round %d: %v", r, err)
				}
			}
			cons.check(ctx)
			if r == start2 {
				if !e.exists(FacadeTableName(e.table, 1)) || !e.exists(FacadeTableName(e.table, 2)) {
					t.Fatalf("round %d: the generations' tables %s and %s do not both exist", r, FacadeTableName(e.table, 1), FacadeTableName(e.table, 2))
				}
			}
			if r == end1 {
				must(t, gen1.sink.Close(ctx))
				must(t, EndFacadeGeneration(ctx, e.target(clock), 1))
				advance(30 * time.Minute)
				rep, err := CompactFacade(ctx, e.target(clock), 2, time.Hour)
				must(t, err)
				if len(rep.Merged) != 0 || !slices.Equal(rep.Waiting, []int64{1}) {
					t.Fatalf("compaction 30m after the end with a 1h retention: %+v, want generation 1 waiting", rep)
				}
				cons.check(ctx)
				advance(31 * time.Minute)
				rep, err = CompactFacade(ctx, e.target(clock), 2, time.Hour)
				must(t, err)
				// Windows 0 and 1 are only in generation 1: 4 regions each.
				if !slices.Equal(rep.Merged, []int64{1}) || rep.Rows != 8 || len(rep.Waiting) != 0 {
					t.Fatalf("compaction after the retention: %+v, want generation 1 merged, 8 rows", rep)
				}
				if e.exists(FacadeTableName(e.table, 1)) {
					t.Fatalf("%s still exists after the compaction", FacadeTableName(e.table, 1))
				}
				cons.check(ctx)
			}
		}
		halt()
		cons.check(ctx)
		if f := cons.failures(); len(f) > 0 {
			t.Fatalf("the consumer saw %d problems in %d reads, first: %s", len(f), cons.reads, strings.Join(f[:min(len(f), 5)], "; "))
		}
		if len(cons.seen) != len(truth) {
			t.Fatalf("the view has %d (key, window) rows, the ground truth %d", len(cons.seen), len(truth))
		}
		for c, want := range truth {
			if got := cons.seen[c]; got != want {
				t.Errorf("%v: total %d, ground truth %d", c, got, want)
			}
		}
		// Progress records are per generation: both started at epoch 1
		// under one sink ID and neither skipped the other's epochs.
		if got := e.progress(e.table + "/WriteTotals"); got != end1+1 {
			t.Errorf("generation 1's progress %d, want %d", got, end1+1)
		}
		if got := e.progress(e.table + "/WriteTotals@g2"); got != rounds-start2 {
			t.Errorf("generation 2's progress %d, want %d", got, rounds-start2)
		}
		gens, err := FacadeGenerations(ctx, e.target(nil))
		must(t, err)
		if len(gens) != 1 || gens[0].Generation != 2 {
			t.Errorf("generations after the compaction: %+v, want only 2", gens)
		}
		t.Logf("%d consumer reads", cons.reads)
	})
}

var factsSchema = row.MustSchema(
	row.Field{Name: "event_id", Type: row.Of(row.KindString)},
	row.Field{Name: "amount", Type: row.Of(row.KindInt)},
)

// TestFacadeAppend: two append-mode generations write the same source
// elements (identities agree across jobs); the view shows each once, and
// the compaction keeps them once.
func TestFacadeAppend(t *testing.T) {
	forEachFacadeDriver(t, func(t *testing.T, e *facadeEnv) {
		ctx := context.Background()
		mk := func(gen int64) *Sink {
			cfg := e.config(ModeAppend)
			cfg.Generation, cfg.Facade, cfg.SinkID = gen, true, e.table+"/Write"
			cfg.ElementID = func(_ *contract.Element, r *row.Row) (string, error) { return r.Values[0].(string), nil }
			return e.sink(cfg, factsSchema)
		}
		el := func(i int) contract.Element {
			return contract.Element{Value: &row.Row{Schema: factsSchema, Values: []any{fmt.Sprintf("ev-%03d", i), int64(i)}}, Window: window.Global, Pane: window.NoFiring}
		}
		span := func(a, b int) []contract.Element {
			var out []contract.Element
			for i := a; i < b; i++ {
				out = append(out, el(i))
			}
			return out
		}
		count := func() (rows, distinct int64) {
			r := e.query(`SELECT COUNT(*), COUNT(DISTINCT event_id) FROM ` + quoteTable(e.table))
			return r[0][0].(int64), r[0][1].(int64)
		}
		g1 := mk(1)
		commit(t, g1, 1, span(0, 30)...)
		g2 := mk(2)
		commit(t, g2, 1, span(10, 40)...) // re-read from element 10
		commit(t, g1, 2, span(30, 45)...)
		commit(t, g2, 2, span(40, 50)...)
		steps := []struct {
			name string
			do   func()
		}{
			{"overlap", func() {}},
			{"compacted", func() {
				now := time.Now()
				must(t, EndFacadeGeneration(ctx, e.target(func() time.Time { return now }), 1))
				rep, err := CompactFacade(ctx, e.target(func() time.Time { return now.Add(time.Hour) }), 2, time.Minute)
				must(t, err)
				if !slices.Equal(rep.Merged, []int64{1}) || rep.Rows != 10 {
					t.Fatalf("compaction: %+v, want generation 1 merged with 10 rows (ev-000..ev-009)", rep)
				}
			}},
		}
		for _, st := range steps {
			st.do()
			if n, d := count(); n != 50 || d != 50 {
				t.Fatalf("%s: the view has %d rows, %d distinct elements; want 50 and 50", st.name, n, d)
			}
		}
	})
}

// TestFacadeAppendMigration: a plain append table written by generation
// 1 is put behind the view the first time generation 4 (not 2: the new
// job's name had jobs before) writes it in façade mode. The old
// generation's plain sink goes on writing (it joins the façade as
// generation 1) and both write the same elements during the overlap; the
// view shows each element once at every step. Ending every generation
// before the new one (EndFacadeGeneration(3), what the service does at
// the cut-over) covers both the migrated table and the old sink's, so the
// compaction merges both, moves only the elements generation 4 lacks, and
// leaves generation 4 alone behind the view.
func TestFacadeAppendMigration(t *testing.T) {
	forEachFacadeDriver(t, func(t *testing.T, e *facadeEnv) {
		ctx := context.Background()
		mk := func(gen int64, facade bool) *Sink {
			cfg := e.config(ModeAppend)
			cfg.Generation, cfg.Facade, cfg.SinkID = gen, facade, e.table+"/Write"
			return e.sink(cfg, factsSchema)
		}
		el := func(i int) contract.Element {
			return contract.Element{Value: &row.Row{Schema: factsSchema, Values: []any{fmt.Sprintf("ev-%03d", i), int64(i)}},
				Source: &contract.SourcePos{Source: "events", Offset: int64(i)}, Window: fwin(i / 10), Pane: window.NoFiring}
		}
		span := func(a, b int) []contract.Element {
			var out []contract.Element
			for i := a; i < b; i++ {
				out = append(out, el(i))
			}
			return out
		}
		check := func(step string, want int64) {
			t.Helper()
			r := e.query(`SELECT COUNT(*), COUNT(DISTINCT event_id) FROM ` + quoteTable(e.table))
			if r[0][0].(int64) != want || r[0][1].(int64) != want {
				t.Fatalf("%s: the view has %d rows, %d distinct elements; want %d and %d", step, r[0][0], r[0][1], want, want)
			}
		}
		g1 := mk(1, false)
		commit(t, g1, 1, span(0, 30)...)
		check("plain table", 30)
		g4 := mk(4, true)
		if !e.exists(FacadeTableName(e.table, 3)) {
			t.Fatalf("the plain append table was not moved to %s", FacadeTableName(e.table, 3))
		}
		check("migrated", 30)
		commit(t, g4, 1, span(20, 40)...) // the rewind re-read
		check("new generation re-read", 40)
		commit(t, g1, 2, span(30, 45)...) // joins as generation 1
		if !e.exists(FacadeTableName(e.table, 1)) {
			t.Fatalf("the old generation's plain sink did not join the façade as %s", FacadeTableName(e.table, 1))
		}
		check("overlap", 45)
		commit(t, g4, 2, span(40, 50)...)
		check("overlap, new generation ahead", 50)
		must(t, g1.Close(ctx))
		now := time.Now()
		must(t, EndFacadeGeneration(ctx, e.target(func() time.Time { return now }), 3))
		gens, err := FacadeGenerations(ctx, e.target(nil))
		must(t, err)
		for _, g := range gens {
			if ended := !g.Ended.IsZero(); ended != (g.Generation < 4) {
				t.Fatalf("after ending the generations before 4: %+v", gens)
			}
		}
		rep, err := CompactFacade(ctx, e.target(func() time.Time { return now.Add(time.Hour) }), 4, time.Minute)
		must(t, err)
		if !slices.Equal(rep.Merged, []int64{3, 1}) || rep.Rows != 20 || len(rep.Waiting) != 0 {
			t.Fatalf("compaction: %+v, want generations 3 and 1 merged with 20 rows (ev-000..ev-019)", rep)
		}
		check("compacted", 50)
		if gens, err := FacadeGenerations(ctx, e.target(nil)); err != nil || len(gens) != 1 || gens[0].Generation != 4 {
			t.Fatalf("generations after the compaction: %+v %v", gens, err)
		}
		for _, g := range []int64{1, 3} {
			if e.exists(FacadeTableName(e.table, g)) {
				t.Errorf("the table of generation %d is still there after the compaction", g)
			}
		}
	})
}

// TestFacadeMigrationKeepsRows: a plain table with rows of several
// generations becomes the physical table of the newest one; the view
// serves every row; a plain sink of the old generation keeps writing
// through it (it joins the façade), and a sink fed the same key by the new
// generation wins.
func TestFacadeMigrationKeepsRows(t *testing.T) {
	forEachFacadeDriver(t, func(t *testing.T, e *facadeEnv) {
		old := e.config(ModeUpsert, "region")
		old.Generation = 3
		s3 := e.sink(old, totalsSchema)
		var elems []contract.Element
		for i := range 200 {
			elems = append(elems, total(fmt.Sprintf("r%03d", i), int64(i), w0, onTime0))
		}
		commit(t, s3, 1, elems...)
		nf := e.config(ModeUpsert, "region")
		nf.Generation, nf.Facade, nf.JobID = 4, true, "job-4"
		s4 := e.sink(nf, totalsSchema)
		if !e.exists(FacadeTableName(e.table, 3)) {
			t.Fatalf("the plain table was not moved to %s", FacadeTableName(e.table, 3))
		}
		if n := e.count(); n != 200 {
			t.Fatalf("the view has %d rows after the migration, want 200", n)
		}
		// The old generation's prepared sink commits after the migration.
		commit(t, s3, 2, total("r000", 1000, w0, late1), total("zzz", 7, w0, onTime0))
		commit(t, s4, 1, total("r001", 5, w0, onTime0))
		got := map[string]int64{}
		for _, r := range e.query(`SELECT region, total FROM ` + quoteTable(e.table)) {
			got[r[0].(string)] = r[1].(int64)
		}
		if len(got) != 201 || got["r000"] != 1000 || got["zzz"] != 7 || got["r001"] != 5 || got["r199"] != 199 {
			t.Fatalf("the view after writes of both generations: %d rows, r000=%d zzz=%d r001=%d r199=%d; want 201, 1000, 7, 5, 199",
				len(got), got["r000"], got["zzz"], got["r001"], got["r199"])
		}
		// Rolling the new generation back serves the old one's row again.
		must(t, s4.Close(context.Background()))
		must(t, DropFacadeGeneration(context.Background(), e.target(nil), 4))
		for _, r := range e.query(`SELECT total FROM `+quoteTable(e.table)+` WHERE region = `+e.q(1), "r001") {
			if r[0].(int64) != 1 {
				t.Fatalf("after dropping generation 4, r001 = %d, want generation 3's 1", r[0])
			}
		}
	})
}

// TestFacadeRefusals: what a façade cannot be, each with its message.
func TestFacadeRefusals(t *testing.T) {
	forEachFacadeDriver(t, func(t *testing.T, e *facadeEnv) {
		ctx := context.Background()
		cfg := e.config(ModeUpsert, "region")
		cfg.Facade = true
		e.sink(cfg, totalsSchema)
		// A generation keyed differently.
		other := row.MustSchema(append(slices.Clone(totalsSchema.Fields), row.Field{Name: "city", Type: row.Of(row.KindString)})...)
		bad := e.config(ModeUpsert, "region", "city")
		bad.Facade, bad.Generation = true, 2
		s, err := New(bad, other)
		must(t, err)
		verr := s.Validate(ctx)
		err = s.Prepare(ctx)
		s.Close(ctx)
		for what, err := range map[string]error{"Validate": verr, "Prepare": err} {
			if !errors.Is(err, ErrFacade) || !strings.Contains(err.Error(), "keyed by (region, city, window_start, window_end)") {
				t.Fatalf("%s of a generation keyed differently: %v, want ErrFacade naming both keys", what, err)
			}
		}
		// A view of the table's name that weir did not make.
		foreign := e.config(ModeUpsert, "region")
		foreign.Table += "_v"
		must(t, e.exec("CREATE VIEW "+quoteTable(foreign.Table)+" AS SELECT 1 AS x"))
		defer e.exec("DROP VIEW IF EXISTS " + quoteTable(foreign.Table))
		for _, facade := range []bool{false, true} {
			foreign.Facade = facade
			s, err := New(foreign, totalsSchema)
			must(t, err)
			err = s.Prepare(ctx)
			s.Close(ctx)
			if err == nil || !strings.Contains(err.Error(), "view weir did not create") {
				t.Fatalf("Prepare (facade %t) over a foreign view: %v, want a refusal naming it", facade, err)
			}
		}
		if e.exists(FacadeTableName(foreign.Table, 1)) {
			t.Errorf("the refused façade sink created %s", FacadeTableName(foreign.Table, 1))
		}
		// No generation up to the one ended (the façade holds generation 1).
		if err := EndFacadeGeneration(ctx, e.target(nil), 0); !errors.Is(err, ErrFacade) {
			t.Fatalf("ending generation 0 of a façade of generation 1: %v, want ErrFacade", err)
		}
		// A table that is no façade.
		if err := EndFacadeGeneration(ctx, FacadeTarget{Driver: e.driver, DSN: e.dsn, Table: e.table + "_plain"}, 9); !errors.Is(err, ErrFacade) {
			t.Fatalf("ending a generation of a table that is no façade: %v, want ErrFacade", err)
		}
		if _, err := CompactFacade(ctx, e.target(nil), 9, 0); !errors.Is(err, ErrFacade) {
			t.Fatalf("compacting into an unknown generation: %v, want ErrFacade", err)
		}
	})
}

// TestIdentifierTooLong: PostgreSQL keeps 63 bytes of a name; longer table
// names, and façade tables whose generation suffix passes the limit, are
// refused when the configuration is checked, with the limit.
func TestIdentifierTooLong(t *testing.T) {
	n := func(k int) string { return "t" + strings.Repeat("x", k-1) }
	cases := []struct {
		name   string
		driver string
		table  string
		facade bool
		gen    int64
		want   string // "" = accepted
	}{
		{"63 bytes", DriverPostgres, n(63), false, 1, ""},
		{"64 bytes", DriverPostgres, n(64), false, 1, "is 64 bytes, and PostgreSQL keeps at most 63 bytes"},
		{"schema 64 bytes", DriverPostgres, n(64) + ".t", false, 1, "schema name"},
		{"façade fits", DriverPostgres, n(59), true, 9, ""},
		{"façade suffix passes", DriverPostgres, n(59), true, 10, "may have at most 58 bytes"},
		{"façade schema-qualified", DriverPostgres, "s." + n(60), true, 1, "may have at most 59 bytes"},
		{"sqlite has no limit", DriverSQLite, n(100), true, 1000, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{Driver: c.driver, DSN: "x.sqlite", Table: c.table, SinkID: "j/s", Generation: c.gen, Facade: c.facade}
			if c.driver == DriverPostgres {
				cfg.DSN = "postgres://localhost/db"
			}
			cfg.EnsureDefaults()
			err := cfg.Validate()
			if c.want == "" {
				must(t, err)
				return
			}
			if !errors.Is(err, ErrIdentifierTooLong) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate: %v, want ErrIdentifierTooLong containing %q", err, c.want)
			}
		})
	}
}

// TestFacadeScale measures, behind WEIR_FACADE_SCALE=<rows>, a migration
// of a plain table of that many rows, the view's read of all rows during
// an overlap where generation 2 has half of them, and the compaction.
func TestFacadeScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("WEIR_FACADE_SCALE"))
	if n <= 0 {
		t.Skip("set WEIR_FACADE_SCALE=<rows> to measure")
	}
	forEachDriver(t, func(t *testing.T, base *env) {
		e := &facadeEnv{env: base}
		if e.driver == DriverPostgres {
			e = newFacadeEnv(t, DriverPostgres, false)
		}
		ctx := context.Background()
		rows := func(from, to int, v int64) []contract.Element {
			out := make([]contract.Element, 0, to-from)
			for i := from; i < to; i++ {
				out = append(out, total(fmt.Sprintf("r%07d", i), v, w0, onTime0))
			}
			return out
		}
		s1 := e.sink(e.config(ModeUpsert, "region"), totalsSchema)
		commit(t, s1, 1, rows(0, n, 1)...)
		cfg := e.config(ModeUpsert, "region")
		cfg.Generation, cfg.Facade = 2, true
		start := time.Now()
		s2 := e.sink(cfg, totalsSchema)
		migrate := time.Since(start)
		commit(t, s2, 1, rows(0, n/2, 2)...)
		start = time.Now()
		got := e.query(`SELECT COUNT(*), CAST(SUM(total) AS BIGINT) FROM ` + quoteTable(e.table))
		read := time.Since(start)
		if got[0][0].(int64) != int64(n) || got[0][1].(int64) != int64(n/2*2+(n-n/2)) {
			t.Fatalf("view: %v", got)
		}
		must(t, s1.Close(ctx))
		now := time.Now()
		must(t, EndFacadeGeneration(ctx, e.target(func() time.Time { return now }), 1))
		start = time.Now()
		rep, err := CompactFacade(ctx, e.target(func() time.Time { return now.Add(time.Hour) }), 2, time.Minute)
		must(t, err)
		compact := time.Since(start)
		if rep.Rows != int64(n-n/2) {
			t.Fatalf("compaction: %+v", rep)
		}
		t.Logf("%s, %d rows: migration (Prepare of generation 2) %v; view read of all rows during the overlap %v; compaction of %d rows %v",
			e.driver, n, migrate.Round(time.Millisecond), read.Round(time.Millisecond), rep.Rows, compact.Round(time.Millisecond))
	})
}
