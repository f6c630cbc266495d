package service

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/duration"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/io/sqlsink"
)

// appendYAML reads the events topic in fixed 10s windows and appends
// every event, as it is, with the WriteToSql config %s (no key: append
// mode, one row per source element, identified by element_id). Its sums
// per key, published, give the old job state, so that under the rewind
// rule the new job re-reads (and appends again) events the old job
// appended already.
const appendYAML = `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Events
      windowing: {type: fixed, size: 10s}
      config:
        topic: par-events
        schema: {key: string, amount: int, ts: string}
        timestamp_field: ts
    - type: WriteToSql
      name: WriteEvents
      input: Events
      config: %s
    - type: Combine
      name: Sums
      input: Events
      config:
        group_by: [key]
        combine:
          total: {value: amount, fn: sum}
    - type: WriteToPubSub
      name: PublishTotals
      input: Sums
      config: {topic: par-out}
`

// elemReader reads the append view (or the plain table before the first
// parallel replacement) as one "key amount" string per row; amounts are
// unique per event, so a row read twice is an element shown twice.
type elemReader struct {
	name string
	read func(ctx context.Context) ([]string, error)
	// count counts the rows of a table (a generation's physical table).
	count func(ctx context.Context, table string) (int64, error)
	close func()
}

// appendDriver is one database the append scenarios run on.
type appendDriver struct {
	name  string
	setup func(t *testing.T, dir string) (string, *elemReader)
}

func appendDrivers() []appendDriver {
	return []appendDriver{
		{name: "sqlite", setup: func(t *testing.T, dir string) (string, *elemReader) {
			path := filepath.Join(dir, "events.sqlite")
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&mode=ro")
			if err != nil {
				t.Fatal(err)
			}
			return fmt.Sprintf("{dsn: %s, table: events}", path), &elemReader{name: "events", close: func() { db.Close() },
				count: func(ctx context.Context, table string) (n int64, err error) {
					err = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM "`+table+`"`).Scan(&n)
					return n, err
				},
				read: func(ctx context.Context) ([]string, error) {
					rows, err := db.QueryContext(ctx, `SELECT key, amount FROM events`)
					if err != nil {
						return nil, err
					}
					defer rows.Close()
					return readElems(rows)
				}}
		}},
		{name: "postgres", setup: func(t *testing.T, dir string) (string, *elemReader) {
			dsn, schema, conn := pgTestSchema(t, "parapp")
			table := schema + ".events"
			var mu sync.Mutex
			return fmt.Sprintf("{driver: postgres, dsn: %q, table: %s}", dsn, table), &elemReader{name: table,
				close: func() { conn.Close(context.Background()) },
				count: func(ctx context.Context, table string) (n int64, err error) {
					mu.Lock()
					defer mu.Unlock()
					err = conn.QueryRow(ctx, `SELECT COUNT(*) FROM `+table).Scan(&n)
					return n, err
				},
				read: func(ctx context.Context) ([]string, error) {
					mu.Lock()
					defer mu.Unlock()
					rows, err := conn.Query(ctx, `SELECT key, amount FROM `+table)
					if err != nil {
						return nil, err
					}
					defer rows.Close()
					return readElems(rows)
				}}
		}},
	}
}

// readElems reads rows of (key, amount) as "key amount"; the caller
// closes rows.
func readElems(rows sqlRows) ([]string, error) {
	var out []string
	for rows.Next() {
		var key string
		var amount int64
		if err := rows.Scan(&key, &amount); err != nil {
			return nil, err
		}
		out = append(out, fmt.Sprintf("%s %d", key, amount))
	}
	return out, rows.Err()
}

// elemConsumer polls an append view at every change of the service and
// records what its reader would object to: an element twice in one read,
// an element that was there and is gone, an element not in the input.
type elemConsumer struct {
	viewPoller
	input map[string]bool
	last  map[string]bool
}

func startElemConsumer(s *Service, r *elemReader, input []srEvent) *elemConsumer {
	c := &elemConsumer{input: map[string]bool{}, last: map[string]bool{}}
	for _, e := range input {
		c.input[fmt.Sprintf("%s %d", e.key, e.amount)] = true
	}
	c.start(s, func() { c.poll(r) })
	return c
}

func (c *elemConsumer) poll(r *elemReader) {
	rows, err := r.read(context.Background())
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.violations = append(c.violations, "read: "+err.Error())
		return
	}
	c.reads++
	seen := map[string]bool{}
	for _, e := range rows {
		if seen[e] {
			c.violations = append(c.violations, "twice in one read: "+e)
		}
		if !c.input[e] {
			c.violations = append(c.violations, "not in the input: "+e)
		}
		seen[e] = true
	}
	for e := range c.last {
		if !seen[e] {
			c.violations = append(c.violations, "disappeared: "+e)
		}
	}
	c.last = seen
}

// finish stops the consumer and returns the elements of its last read.
func (c *elemConsumer) finish(t *testing.T) map[string]bool {
	t.Helper()
	c.end(t)
	return c.last
}

// diffElems compares the elements read with the events published.
func diffElems(got map[string]bool, want []srEvent) string {
	w := map[string]bool{}
	for _, e := range want {
		w[fmt.Sprintf("%s %d", e.key, e.amount)] = true
	}
	var out []string
	for e := range w {
		if !got[e] {
			out = append(out, "missing: "+e)
		}
	}
	for e := range got {
		if !w[e] {
			out = append(out, "not in the input: "+e)
		}
	}
	sort.Strings(out)
	if len(out) > 20 {
		out = append(out[:20], fmt.Sprintf("... (%d differences)", len(out)))
	}
	return strings.Join(out, "\n")
}

// TestParallelReplaceAppend: an append-mode table (no key: one row per
// source element) in a parallel replacement, with data flowing through
// both jobs during the overlap, on SQLite and on PostgreSQL with a
// schema-qualified table. The plain table the old job wrote is migrated
// behind the façade view, both jobs append the elements they read (with
// the rewind rule the new job re-reads some the old job wrote already),
// and a consumer polling the view <table> before, during and after the
// overlap, and after the compaction, sees every source element exactly
// once: never twice, never one that went away.
func TestParallelReplaceAppend(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		newName string
		d       time.Duration
		rewind  bool
		// priorRuns jobs of newName ran (and were cancelled) before, so
		// the new job's generation is not the old job's + 1.
		priorRuns int
		drivers   []string
	}{
		{name: "same name rewind D=10m", d: 10 * time.Minute, rewind: true, drivers: []string{"sqlite", "postgres"}},
		{name: "same name D=0", d: 0, drivers: []string{"sqlite", "postgres"}},
		{name: "new name rewind D=0", newName: "events-v2", d: 0, rewind: true, drivers: []string{"sqlite"}},
		{name: "new name used before D=10m", newName: "events-v2", d: 10 * time.Minute, priorRuns: 2, drivers: []string{"sqlite", "postgres"}},
	}
	for _, tc := range tests {
		for _, drv := range appendDrivers() {
			if !strings.Contains(strings.Join(tc.drivers, ","), drv.name) {
				continue
			}
			t.Run(tc.name+" "+drv.name, func(t *testing.T) {
				t.Parallel()
				runParallelAppend(t, drv, tc.newName, tc.d, tc.rewind, tc.priorRuns)
			})
		}
	}
}

func runParallelAppend(t *testing.T, drv appendDriver, newName string, d time.Duration, rewind bool, priorRuns int) {
	ctx := context.Background()
	dir := t.TempDir()
	s, b, clock := openParallel(t, dir)
	for range priorRuns {
		j := submit(t, s, newName, statelessYAML, dir)
		if _, err := s.Cancel(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		waitState(t, s, j.ID, record.StateCancelled)
		waitLetGo(t, s, j.ID)
	}
	sinkCfg, view := drv.setup(t, dir)
	defer view.close()
	base := time.Now().Add(30 * time.Minute).Truncate(time.Minute)
	phase1 := parEvents(base, 0, 34, 1)
	phase2 := parEvents(base, 35, 70, 1000)
	phase3 := parEvents(base, 70, 90, 5000)
	all := append(append(append([]srEvent{}, phase1...), phase2...), phase3...)
	pipeline := fmt.Sprintf(appendYAML, sinkCfg)
	old := submit(t, s, "events", pipeline, dir)
	publishPar(t, b, phase1)
	waitElements(t, s, old.ID, "Events", int64(len(phase1)))
	waitAcked(t, s, b, pubsub.SubscriptionName("events", "Events"))
	// Before the replacement: the plain table.
	cons := startElemConsumer(s, view, all)
	clock.advance(DefaultMinReplaceInterval)

	req := SubmitRequest{Name: "events", Pipeline: pipeline, BaseDir: dir,
		ServiceOptions: []string{"parallel_replace_job_min_parallel_pipelines_duration=" + duration.Format(d), "parallel_replace_job_max_stop_duration=5m"}}
	if !rewind {
		req.ServiceOptions = append(req.ServiceOptions, "weir_replace_rewind=false")
	}
	var nj *record.Job
	var err error
	if newName == "" {
		req.ServiceOptions = append(req.ServiceOptions, "update_strategy_parallel_job_update")
		res, err := s.Update(ctx, UpdateRequest{SubmitRequest: req})
		if err != nil {
			t.Fatalf("parallel replacement: %v", err)
		}
		nj = res.Job
	} else {
		req.Name = newName
		req.ServiceOptions = append(req.ServiceOptions, "parallel_replace_job_name=events")
		if nj, err = s.Submit(ctx, req); err != nil {
			t.Fatalf("parallel replacement under a new name: %v", err)
		}
	}
	if nj.State != record.StateRunning || nj.Replacement == nil || nj.Replacement.Phase != record.PhaseOverlap {
		t.Fatalf("new job: %s replacement %+v (error %q)", nj.State, nj.Replacement, nj.Error)
	}
	if want := max(old.Generation, int64(priorRuns)) + 1; nj.Generation != want {
		t.Fatalf("the new job's generation is %d, want %d", nj.Generation, want)
	}
	reread := 0
	if rewind {
		// The old job's watermark was at 23s: the new job re-reads the
		// events of [20s, 34s), which the old job appended already.
		if rp := nj.Replacement.RewindPoint; rp == nil || !rp.FromTime.Equal(base.Add(20*time.Second)) {
			t.Fatalf("rewind point %+v, want a re-read from %s", rp, base.Add(20*time.Second))
		}
		reread = len(parEvents(base, 20, 34, 1))
	}
	// The overlap: both jobs read and append the events from here on.
	publishPar(t, b, phase2)
	waitElements(t, s, nj.ID, "Events", int64(reread+len(phase2)))
	if d > 0 {
		waitElements(t, s, old.ID, "Events", int64(len(phase1)+len(phase2)))
		// Both jobs' rows of the overlap are committed, in their own tables.
		waitCheckpointsAfter(t, s, 2, old.ID, nj.ID)
		// Both generations' tables hold the overlap's elements; the view
		// shows each once.
		gens, err := (sqlsink.Admin{}).FacadeGenerations(ctx, s.replace.FacadeTarget(nj.Replacement.Parallel.Tables[0]))
		if err != nil {
			t.Fatal(err)
		}
		var inOld, inNew int64
		for _, g := range gens {
			n, err := view.count(ctx, g.Table)
			if err != nil {
				t.Fatal(err)
			}
			if g.Generation == nj.Generation {
				inNew += n
			} else {
				inOld += n
			}
		}
		// (Without the rewind the new job writes only the windows it owns
		// under the cut-over rule, from the first one it read whole.)
		if inOld < int64(len(phase1)+len(phase2)) || inNew == 0 || inOld+inNew <= int64(len(phase1)+len(phase2)) {
			t.Fatalf("during the overlap the old generations' tables hold %d rows, generation %d's %d (%+v); want the old ones all %d elements and both some of the overlap's",
				inOld, nj.Generation, inNew, gens, len(phase1)+len(phase2))
		}
		if rewind && inNew < int64(reread+len(phase2)) {
			t.Fatalf("with the rewind rule generation %d's table holds %d rows, want the %d re-read and the overlap's %d", nj.Generation, inNew, reread, len(phase2))
		}
		if rows, err := view.read(ctx); err != nil || len(rows) != len(phase1)+len(phase2) {
			t.Fatalf("the view serves %d elements during the overlap (%v), want %d", len(rows), err, len(phase1)+len(phase2))
		}
		clock.advance(d)
	}
	fin := waitFor(t, s, nj.ID, "CUT_OVER", func(j *record.Job) bool { return j.Replacement.Phase.Final() })
	if fin.Replacement.Phase != record.PhaseCutOver || fin.State != record.StateRunning {
		t.Fatalf("new job after the flow: %s %+v (error %q)", fin.State, fin.Replacement, fin.Error)
	}
	if len(fin.Replacement.Parallel.Tables) != 1 {
		t.Fatalf("the flow's tables: %+v", fin.Replacement.Parallel.Tables)
	}
	// After the overlap: the new job goes on alone.
	publishPar(t, b, phase3)
	waitElements(t, s, nj.ID, "Events", int64(reread+len(phase2)+len(phase3)))
	if _, err := s.Drain(ctx, nj.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, s, nj.ID, "DRAINED and committed", drainedAndCommitted)
	fin = waitFor(t, s, nj.ID, "the old generation marked ended", func(j *record.Job) bool { return j.Replacement.Parallel.Tables[0].OldEnded })
	target := s.replace.FacadeTarget(fin.Replacement.Parallel.Tables[0])
	gens, err := (sqlsink.Admin{}).FacadeGenerations(ctx, target)
	// The plain table becomes generation nj.Generation-1 (append rows
	// carry no generation); the old job writes its own generation's table
	// if it commits after the migration, the same one unless the
	// generations have a gap. All of them end at the cut-over.
	if err != nil || len(gens) < 2 || gens[0].Generation != nj.Generation || gens[1].Generation != nj.Generation-1 {
		t.Fatalf("façade generations %+v %v, want the new job's %d, the migrated plain table's %d and maybe the old job's %d", gens, err, nj.Generation, nj.Generation-1, old.Generation)
	}
	for _, g := range gens {
		if g.Generation < nj.Generation && g.Ended.IsZero() {
			t.Errorf("generation %d is not marked ended after the cut-over: %+v", g.Generation, gens)
		}
	}
	if got := cons.finish(t); len(got) != len(all) {
		t.Fatalf("the view %s serves %d elements, want %d:\n%s", view.name, len(got), len(all), diffElems(got, all))
	} else if diff := diffElems(got, all); diff != "" {
		t.Fatalf("the view %s against the input:\n%s", view.name, diff)
	}
	// The compaction moves into the new table only the elements it lacks.
	after := startElemConsumer(s, view, all)
	clock.advance(DefaultRollbackRetention + time.Minute)
	waitFor(t, s, nj.ID, "the compaction", func(j *record.Job) bool { return j.Replacement.Parallel.Compacted })
	if gens, err := (sqlsink.Admin{}).FacadeGenerations(ctx, target); err != nil || len(gens) != 1 || gens[0].Generation != nj.Generation {
		t.Fatalf("façade generations after the compaction: %+v %v", gens, err)
	}
	// The cut-over's façade sweep entry goes once one generation is left.
	waitSwept(t, s)
	if got := after.finish(t); len(got) != len(all) {
		t.Fatalf("the view %s after the compaction serves %d elements, want %d:\n%s", view.name, len(got), len(all), diffElems(got, all))
	} else if diff := diffElems(got, all); diff != "" {
		t.Fatalf("the view %s after the compaction against the input:\n%s", view.name, diff)
	}
}
