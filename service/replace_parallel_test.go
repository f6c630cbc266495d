package service

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/errcode"

	"github.com/jackc/pgx/v5"

	"github.com/weir-dev/weir/duration"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/io/sqlsink"
)

// parYAML reads a topic (through a subscription the service names after
// the job), sums amounts per key in fixed 10s windows of event time and
// upserts the totals with the WriteToSql config %s.
const parYAML = `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Events
      config:
        topic: par-events
        schema: {key: string, amount: int, ts: string}
        timestamp_field: ts
    - type: Combine
      name: Sums
      input: Events
      windowing: {type: fixed, size: 10s}
      config:
        group_by: [key]
        combine:
          total: {value: amount, fn: sum}
          n: {value: amount, fn: count}
    - type: WriteToSql
      name: WriteTotals
      input: Sums
      config: %s
    - type: WriteToPubSub
      name: PublishTotals
      input: Sums
      config: {topic: par-out}
`

// parEvents returns the events of seconds [from, to) after base, three
// keys a second, in event-time order (the cut-over rule of a plain
// continuation assumes the topic is about in order).
func parEvents(base time.Time, from, to int, seed int64) []srEvent {
	var out []srEvent
	for sec := from; sec < to; sec++ {
		for k := range 3 {
			out = append(out, srEvent{key: fmt.Sprintf("k%d", k), amount: seed + int64(sec*3+k), at: base.Add(time.Duration(sec) * time.Second)})
		}
	}
	return out
}

func publishPar(t *testing.T, b *pubsub.Broker, evs []srEvent) {
	t.Helper()
	publishTo(t, b, "par-events", evs)
}

// kwTotal is one (key, window) row of the view.
type kwTotal struct{ total, n int64 }

// paneTruth is the ground truth of evs as the sorted "key total n" panes
// a topic's reader should see: one complete pane per (key, window).
func paneTruth(evs []srEvent) []string {
	var out []string
	for k, v := range parTruth(evs) {
		out = append(out, fmt.Sprintf("%s %d %d", k[:strings.IndexByte(k, '@')], v.total, v.n))
	}
	sort.Strings(out)
	return out
}

// pulledPanes pulls every message of subscription sub as sorted "key
// total n" panes.
func pulledPanes(t *testing.T, b *pubsub.Broker, sub string) []string {
	t.Helper()
	var out []string
	for {
		msgs, err := b.Pull(context.Background(), sub, 1000, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			var v struct {
				Key      string `json:"key"`
				Total, N int64
			}
			if err := json.Unmarshal(m.Data, &v); err != nil {
				t.Fatalf("message %s: %v", m.Data, err)
			}
			out = append(out, fmt.Sprintf("%s %d %d", v.Key, v.Total, v.N))
		}
	}
	sort.Strings(out)
	return out
}

// parTruth is the ground truth per "key@window start ms" of evs in 10s
// windows.
func parTruth(evs []srEvent) map[string]kwTotal {
	out := map[string]kwTotal{}
	for _, e := range evs {
		k := fmt.Sprintf("%s@%d", e.key, e.at.Truncate(10*time.Second).UnixMilli())
		v := out[k]
		out[k] = kwTotal{v.total + e.amount, v.n + 1}
	}
	return out
}

// viewReader reads the view (or, before the first parallel replacement,
// the table) as "key@window start ms" -> total; every row it returns is
// one (key, window).
type viewReader struct {
	name  string
	read  func(ctx context.Context) ([][4]any, error)
	close func()
}

func sqliteView(t *testing.T, path string) *viewReader {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	return &viewReader{name: "totals", close: func() { db.Close() }, read: func(ctx context.Context) ([][4]any, error) {
		rows, err := db.QueryContext(ctx, `SELECT key, window_start, total, n FROM totals`)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out [][4]any
		for rows.Next() {
			var key, start string
			var total, n int64
			if err := rows.Scan(&key, &start, &total, &n); err != nil {
				return nil, err
			}
			ts, err := time.Parse(time.RFC3339Nano, start)
			if err != nil {
				return nil, fmt.Errorf("window_start %q: %w", start, err)
			}
			out = append(out, [4]any{key, ts.UnixMilli(), total, n})
		}
		return out, rows.Err()
	}}
}

func postgresView(t *testing.T, dsn, table string) *viewReader {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	return &viewReader{name: table, close: func() { conn.Close(context.Background()) }, read: func(ctx context.Context) ([][4]any, error) {
		rows, err := conn.Query(ctx, `SELECT key, (EXTRACT(EPOCH FROM window_start)*1000)::bigint, total, n FROM `+table)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out [][4]any
		for rows.Next() {
			var key string
			var start, total, n int64
			if err := rows.Scan(&key, &start, &total, &n); err != nil {
				return nil, err
			}
			out = append(out, [4]any{key, start, total, n})
		}
		return out, rows.Err()
	}}
}

// consumer polls a view at every change of the service until stopped and
// records what a reader would object to: a (key, window) twice in one
// read, a total or count going backwards, a read that fails.
type consumer struct {
	viewPoller
	last map[string]kwTotal
}

func startConsumer(s *Service, v *viewReader) *consumer {
	c := &consumer{last: map[string]kwTotal{}}
	c.start(s, func() { c.poll(v) })
	return c
}

func (c *consumer) poll(v *viewReader) {
	rows, err := v.read(context.Background())
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if strings.Contains(err.Error(), "no such table") && c.reads == 0 {
			return // the old job has not created its table yet
		}
		c.violations = append(c.violations, "read: "+err.Error())
		return
	}
	c.reads++
	seen := map[string]bool{}
	for _, r := range rows {
		k := fmt.Sprintf("%s@%d", r[0], r[1])
		if seen[k] {
			c.violations = append(c.violations, "twice in one read: "+k)
		}
		seen[k] = true
		cur := kwTotal{r[2].(int64), r[3].(int64)}
		if p, ok := c.last[k]; ok && (cur.total < p.total || cur.n < p.n) {
			c.violations = append(c.violations, fmt.Sprintf("%s went backwards: %+v after %+v", k, cur, p))
		}
		c.last[k] = cur
	}
	for k := range c.last {
		if !seen[k] {
			c.violations = append(c.violations, "disappeared: "+k)
		}
	}
}

// finish stops the consumer and returns its last read.
func (c *consumer) finish(t *testing.T) map[string]kwTotal {
	t.Helper()
	c.end(t)
	return c.last
}

func diffTotals(got, want map[string]kwTotal) string {
	var out []string
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			out = append(out, fmt.Sprintf("%s: got %+v (present %v), want %+v", k, g, ok, w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			out = append(out, fmt.Sprintf("%s: got %+v, not in the input", k, g))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// waitAcked waits until subscription sub has no backlog (its reader
// checkpointed and acknowledged everything published).
func waitAcked(t *testing.T, s *Service, b *pubsub.Broker, sub string) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		changed := s.core.Changes.Next()
		info, err := b.Subscription(context.Background(), sub)
		if err == nil && info.Backlog == 0 {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("subscription %s still has a backlog: %+v %v", sub, info, err)
		}
	}
}

// parDriver is one database the scenarios run on.
type parDriver struct {
	name string
	// setup returns the WriteToSql config and the view's reader.
	setup func(t *testing.T, dir string) (string, *viewReader)
}

func parDrivers() []parDriver {
	return []parDriver{
		{name: "sqlite", setup: func(t *testing.T, dir string) (string, *viewReader) {
			db := filepath.Join(dir, "totals.sqlite")
			return fmt.Sprintf("{dsn: %s, table: totals, key: [key]}", db), sqliteView(t, db)
		}},
		{name: "postgres", setup: func(t *testing.T, dir string) (string, *viewReader) {
			dsn, schema, conn := pgTestSchema(t, "par")
			conn.Close(context.Background())
			table := schema + ".totals"
			return fmt.Sprintf("{driver: postgres, dsn: %q, table: %s, key: [key]}", dsn, table), postgresView(t, dsn, table)
		}},
	}
}

// pgTestSchema connects to the test PostgreSQL (WEIR_TEST_POSTGRES_DSN;
// the test is skipped when it is not reachable) and creates a schema
// named prefix_<nanoseconds>, dropped when the test ends; it returns the
// DSN, the schema and the connection, which the caller closes.
func pgTestSchema(t *testing.T, prefix string) (dsn, schema string, conn *pgx.Conn) {
	t.Helper()
	dsn = os.Getenv("WEIR_TEST_POSTGRES_DSN")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Skipf("PostgreSQL is not reachable at %s (set WEIR_TEST_POSTGRES_DSN): %v", dsn, err)
	}
	schema = fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		conn.Close(context.Background())
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), dsn)
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
			_ = c.Close(context.Background())
		}
	})
	return dsn, schema, conn
}

// TestParallelReplace: with data flowing (Pub/Sub in, windowed sums, an
// upsert SQL sink on SQLite and on PostgreSQL with a schema-qualified
// table), a parallel replacement with weir_replace_rewind=false — by the
// same name (option 1) and by a new name (option 2, by name and by ID),
// with D = 0s and D = 10m on the service's injectable clock — starts the
// new job at once on its own subscription, positioned where the old one
// stood, keeps both running through the overlap, drains the old one once
// D has passed and its watermark has passed the cut-over window, and cuts
// over. A consumer polling the view <table> all through never sees a
// (key, window) twice, a total going backwards or a row disappear, and at
// the end every (key, window) total equals the ground truth.
func TestParallelReplace(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		newName string
		byID    bool
		d       time.Duration
		rewind  bool
		// named: which pipelines read the user's named subscription
		// par-sub of par-events instead of the topic ("old", "new",
		// "both"; "" neither).
		named   string
		drivers []string
	}{
		{name: "same name D=0", d: 0, drivers: []string{"sqlite", "postgres"}},
		{name: "same name D=10m", d: 10 * time.Minute, drivers: []string{"sqlite"}},
		{name: "new name D=10m", newName: "sums-v2", d: 10 * time.Minute, drivers: []string{"sqlite", "postgres"}},
		{name: "new name by ID D=0", newName: "sums-v2", byID: true, d: 0, drivers: []string{"sqlite"}},
		{name: "same name rewind D=10m", d: 10 * time.Minute, rewind: true, drivers: []string{"sqlite", "postgres"}},
		{name: "new name rewind D=0", newName: "sums-v2", d: 0, rewind: true, drivers: []string{"sqlite"}},
		{name: "old reads a named subscription same name D=0", named: "old", d: 0, drivers: []string{"sqlite", "postgres"}},
		{name: "both read a named subscription new name rewind D=0", newName: "sums-v2", named: "both", d: 0, rewind: true, drivers: []string{"sqlite", "postgres"}},
		{name: "new reads a named subscription same name rewind D=10m", named: "new", d: 10 * time.Minute, rewind: true, drivers: []string{"sqlite"}},
		{name: "both read a named subscription same name D=10m", named: "both", d: 10 * time.Minute, drivers: []string{"postgres"}},
	}
	for _, tc := range tests {
		for _, drv := range parDrivers() {
			if !strings.Contains(strings.Join(tc.drivers, ","), drv.name) {
				continue
			}
			t.Run(tc.name+" "+drv.name, func(t *testing.T) {
				t.Parallel()
				runParallelNamed(t, drv, tc.newName, tc.byID, tc.d, tc.rewind, tc.named)
			})
		}
	}
}

// runParallelNamed runs one case of TestParallelReplace through drv: the
// replacement by newName (by ID with byID) with overlap d and rewind, and
// the checks the test's doc lists. named makes the old job, the new
// pipeline or both ("old", "new", "both"; "" neither) read the user's
// named subscription par-sub of par-events: the new job reads a
// subscription of its own on the topic in place of par-sub, and par-sub
// is never deleted.
func runParallelNamed(t *testing.T, drv parDriver, newName string, byID bool, d time.Duration, rewind bool, named string) {
	ctx := context.Background()
	dir := t.TempDir()
	b := startBroker(t, dir, "par-events", "par-out")
	if _, err := b.CreateSubscription(ctx, "par-out-reader", "par-out", pubsub.SubscriptionConfig{FromBeginning: true}); err != nil {
		t.Fatal(err)
	}
	if named != "" {
		if _, err := b.CreateSubscription(ctx, "par-sub", "par-events", pubsub.SubscriptionConfig{FromBeginning: true}); err != nil {
			t.Fatal(err)
		}
	}
	oldPipeline, newPipeline := func(p string) string { return p }, func(p string) string { return p }
	namedSub := func(p string) string { return strings.Replace(p, "topic: par-events", "subscription: par-sub", 1) }
	oldSub := pubsub.SubscriptionName("sums", "Events")
	if named == "old" || named == "both" {
		oldPipeline, oldSub = namedSub, "par-sub"
	}
	if named == "new" || named == "both" {
		newPipeline = namedSub
	}
	clock := &shiftClock{base: time.Now()}
	s, err := Open(ctx, Options{DataDir: filepath.Join(dir, "data"), CheckpointInterval: 50 * time.Millisecond,
		Clock: clock, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Broker: b})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	sinkCfg, view := drv.setup(t, dir)
	defer view.close()
	// Event times half an hour ahead of the wall clock: an idle
	// subscription's watermark (processing time) never makes them late.
	base := time.Now().Add(30 * time.Minute).Truncate(time.Minute)
	pipeline := fmt.Sprintf(parYAML, sinkCfg)
	old := submit(t, s, "sums", oldPipeline(pipeline), dir)
	pipeline = newPipeline(pipeline)
	phase1 := parEvents(base, 0, 34, 1)
	publishPar(t, b, phase1)
	waitElements(t, s, old.ID, "Events", int64(len(phase1)))
	waitAcked(t, s, b, oldSub)
	cons := startConsumer(s, view)
	clock.advance(DefaultMinReplaceInterval)

	req := SubmitRequest{Name: "sums", Pipeline: pipeline, BaseDir: dir,
		ServiceOptions: []string{"parallel_replace_job_min_parallel_pipelines_duration=" + duration.Format(d), "parallel_replace_job_max_stop_duration=5m"}}
	if !rewind {
		req.ServiceOptions = append(req.ServiceOptions, "weir_replace_rewind=false")
	}
	var nj *record.Job
	if newName == "" {
		req.ServiceOptions = append(req.ServiceOptions, "update_strategy_parallel_job_update")
		res, err := s.Update(ctx, UpdateRequest{SubmitRequest: req})
		if err != nil {
			t.Fatalf("parallel replacement: %v", err)
		}
		nj = res.Job
	} else {
		req.Name = newName
		target := "parallel_replace_job_name=sums"
		if byID {
			target = "parallel_replace_job_id=" + old.ID
		}
		req.ServiceOptions = append(req.ServiceOptions, target)
		if nj, err = s.Submit(ctx, req); err != nil {
			t.Fatalf("parallel replacement under a new name: %v", err)
		}
	}
	if nj.State != record.StateRunning || nj.ReplacesJobID != old.ID || nj.Generation != old.Generation+1 || nj.Replacement == nil ||
		nj.Replacement.Strategy != record.StrategyParallel || nj.Replacement.Phase != record.PhaseOverlap {
		t.Fatalf("new job: %s replaces %q generation %d replacement %+v (error %q)", nj.State, nj.ReplacesJobID, nj.Generation, nj.Replacement, nj.Error)
	}
	if got, _ := s.Get(nj.Name); got.ID != nj.ID {
		t.Fatalf("the name %s resolves to %s, want the new job %s", nj.Name, got.ID, nj.ID)
	}
	if o, _ := s.Get(old.ID); o.State != record.StateRunning || o.ReplacedByJobID != nj.ID || o.Replacement == nil || o.Replacement.Phase != record.PhaseOverlap {
		t.Fatalf("old job in the overlap: %s replaced by %q %+v", o.State, o.ReplacedByJobID, o.Replacement)
	}
	// T0 is the newest event time the old job had read when the new
	// subscription was positioned (second 33): the new job owns the
	// windows from second 40 on; the old job owns [30s, 40s), which only
	// it has whole (seconds 30-33 came before the new job's input), and is
	// drained once its watermark passes 43s (T0 + the 10s window).
	//
	// With the default (rewind) the new job re-reads from the first window
	// still open at the old job's last checkpoint ([20s, 30s): its
	// watermark was 23s), so every window it emits is complete; it
	// publishes the windows starting at or after the old watermark (23s),
	// the old job those before.
	wantCut := base.Add(33 * time.Second)
	if rewind {
		wantCut = base.Add(23*time.Second - time.Millisecond)
		if rp := nj.Replacement.RewindPoint; rp == nil || !rp.FromTime.Equal(base.Add(20*time.Second)) {
			t.Fatalf("rewind point %+v, want a re-read from %s", rp, base.Add(20*time.Second))
		}
	}
	if got := nj.Replacement.Parallel.CutTime; got == nil || !got.Equal(wantCut) {
		t.Fatalf("cut-over time %v, want %s", got, wantCut)
	}
	// Both jobs read the events from here on, each from its own
	// subscription.
	phase2 := parEvents(base, 35, 70, 1000)
	publishPar(t, b, phase2)
	waitElements(t, s, nj.ID, "Events", int64(len(phase2)))
	if d > 0 {
		// (With D = 0 the old job may be drained before it read them all.)
		waitElements(t, s, old.ID, "Events", int64(len(phase1)+len(phase2)))
		// The watermark rule holds; the duration does not yet.
		waitFor(t, s, nj.ID, "the old watermark past the cut-over window", func(j *record.Job) bool {
			pp := s.replace.ParallelProgress(j)
			return !pp.OldWatermark.IsZero() && !pp.OldWatermark.Before(pp.CutOver)
		})
		if o, _ := s.Get(old.ID); o.State != record.StateRunning {
			t.Fatalf("the old job is %s before min_parallel_pipelines_duration passed", o.State)
		}
		// What weir run --wait shows, on either job's record.
		for _, ref := range []string{nj.ID, old.ID} {
			j, _ := s.Get(ref)
			p := j.Replacement.Parallel.Progress
			if p == nil || p.MinParallelMillis != d.Milliseconds() || p.ElapsedMillis >= d.Milliseconds() || p.OldWatermark == nil || p.CutOverWatermark == nil ||
				!p.CutOverWatermark.Equal(j.Replacement.Parallel.CutTime.Add(10*time.Second)) || p.OldWatermark.Before(*p.CutOverWatermark) {
				t.Fatalf("progress on job %s: %+v", ref, p)
			}
		}
		clock.advance(d)
	}
	fin := waitFor(t, s, nj.ID, "CUT_OVER", func(j *record.Job) bool { return j.Replacement.Phase.Final() })
	if fin.Replacement.Phase != record.PhaseCutOver || fin.State != record.StateRunning {
		t.Fatalf("new job after the flow: %s %+v (error %q)", fin.State, fin.Replacement, fin.Error)
	}
	o, _ := s.Get(old.ID)
	if o.State != record.StateDrained || o.ReplacedByJobID != nj.ID || o.Replacement == nil || o.Replacement.Phase != record.PhaseCutOver {
		t.Fatalf("old job after the flow: %s replaced by %q %+v", o.State, o.ReplacedByJobID, o.Replacement)
	}
	for _, id := range []string{old.ID, nj.ID} {
		if got, want := phaseEvents(t, s, id), []string{"OVERLAP", "DRAINING_OLD", "CUT_OVER"}; !slices.Equal(got, want) {
			t.Errorf("job %s: replacement_phase events %v, want %v", id, got, want)
		}
	}
	if _, err := b.Subscription(ctx, oldSub); err == nil && oldSub != "par-sub" {
		t.Errorf("the old job's subscription is still there after the cut-over")
	} else if err != nil && oldSub == "par-sub" {
		t.Errorf("the user's named subscription par-sub was deleted at the cut-over: %v", err)
	}
	if named != "" {
		checkNamedRecord(t, fin, named)
	}
	// The new job goes on alone.
	phase3 := parEvents(base, 70, 90, 5000)
	publishPar(t, b, phase3)
	waitElements(t, s, nj.ID, "Events", int64(len(phase2)+len(phase3)))
	// A re-reading new job also counts what it re-read of phase 1, so its
	// element count says nothing about phase 3: wait until it has read the
	// topic's last message (a drain stops reading, and what it did not read
	// would be missing from the totals).
	waitReadSequence(t, s, nj.ID, "Events", uint64(len(phase1)+len(phase2)+len(phase3)))
	if _, err := s.Drain(ctx, nj.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, s, nj.ID, "DRAINED and committed", drainedAndCommitted)
	// The view's generations: the old job's (migrated from the plain
	// table, ended at the cut-over) and the new job's.
	fin = waitFor(t, s, nj.ID, "the old generation marked ended", func(j *record.Job) bool { return j.Replacement.Parallel.Tables[0].OldEnded })
	gens, err := (sqlsink.Admin{}).FacadeGenerations(ctx, s.replace.FacadeTarget(fin.Replacement.Parallel.Tables[0]))
	if err != nil {
		t.Fatal(err)
	}
	if len(gens) != 2 || gens[0].Generation+gens[1].Generation != old.Generation+nj.Generation {
		t.Fatalf("façade generations %+v, want the old job's %d and the new job's %d", gens, old.Generation, nj.Generation)
	}
	for _, g := range gens {
		if g.Generation == old.Generation && g.Ended.IsZero() {
			t.Errorf("the old job's generation is not marked ended: %+v", g)
		}
	}
	got := cons.finish(t)
	all := append(append(append([]srEvent{}, phase1...), phase2...), phase3...)
	if diff := diffTotals(got, parTruth(all)); diff != "" {
		t.Fatalf("the view %s against the ground truth:\n%s", view.name, diff)
	}
	// The topic's reader saw each window's pane from one job only: the
	// old job's before the cut-over time, the new job's after it.
	if got, want := pulledPanes(t, b, "par-out-reader"), paneTruth(all); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("WriteToPubSub published (key total n):\n%s\nwant one complete pane per (key, window):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Once the old job ended --rollback-retention ago (and the new job has
	// run that long), its rows are merged into the new table and its table
	// dropped; the view still serves the ground truth.
	clock.advance(DefaultRollbackRetention + time.Minute)
	waitFor(t, s, nj.ID, "the compaction", func(j *record.Job) bool { return j.Replacement.Parallel.Compacted })
	if gens, err := (sqlsink.Admin{}).FacadeGenerations(ctx, s.replace.FacadeTarget(fin.Replacement.Parallel.Tables[0])); err != nil || len(gens) != 1 || gens[0].Generation != nj.Generation {
		t.Fatalf("façade generations after the compaction: %+v %v", gens, err)
	}
	after := startConsumer(s, view)
	if diff := diffTotals(after.finish(t), parTruth(all)); diff != "" {
		t.Fatalf("the view %s after the compaction against the ground truth:\n%s", view.name, diff)
	}
}

// openParallel opens a service with an embedded broker holding the topics
// of the parallel scenarios.
func openParallel(t *testing.T, dir string) (*Service, *pubsub.Broker, *shiftClock) {
	t.Helper()
	ctx := context.Background()
	b := startBroker(t, dir, "par-events", "par-out")
	clock := &shiftClock{base: time.Now()}
	s, err := Open(ctx, Options{DataDir: filepath.Join(dir, "data"), CheckpointInterval: 50 * time.Millisecond,
		Clock: clock, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Broker: b})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s, b, clock
}

// TestParallelRollbackDuringOverlap: abortParallel (what weir jobs
// rollback does during an overlap) cancels the new job, drops its
// generation from the view, deletes its subscription and keeps the old
// job, which is the name's active job again and goes on: the view's
// consumer never sees a double count or a total going backwards, and
// after the old job drained every total equals the ground truth.
func TestParallelRollbackDuringOverlap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sc := startParScenario(t)
	s, b, old := sc.s, sc.b, sc.old
	cons := sc.acked(t)
	nj := sc.update(t, parallelOverlapOptions...)
	// No in-place update while the two jobs overlap.
	if _, err := s.Update(ctx, UpdateRequest{SubmitRequest: SubmitRequest{Name: "sums", Pipeline: sc.pipeline, BaseDir: sc.dir}}); errcode.Of(err) != errcode.UpdateInProgress {
		t.Fatalf("an in-place update during the overlap: %v", err)
	}
	// Both jobs' rows of the windows both fired are committed, so that
	// the rollback has a generation to drop.
	phase2 := sc.overlap(t, nj)
	cur, _ := s.Get(nj.ID)
	if gens, err := (sqlsink.Admin{}).FacadeGenerations(ctx, s.replace.FacadeTarget(cur.Replacement.Parallel.Tables[0])); err != nil || len(gens) != 2 || gens[0].Generation != nj.Generation || gens[1].Generation != old.Generation {
		t.Fatalf("façade generations before the rollback: %+v %v", gens, err)
	}
	if err := s.replace.AbortParallel(ctx, nj.ID, "rolled back during the overlap"); err != nil {
		t.Fatal(err)
	}
	n, _ := s.Get(nj.ID)
	o, _ := s.Get(old.ID)
	if n.State != record.StateCancelled || n.Replacement.Phase != record.PhaseRolledBack || o.State != record.StateRunning || o.Replacement.Phase != record.PhaseRolledBack || o.ReplacedByJobID != "" {
		t.Fatalf("after the rollback: new %s %s, old %s %s replaced by %q", n.State, n.Replacement.Phase, o.State, o.Replacement.Phase, o.ReplacedByJobID)
	}
	if a, _ := s.Get("sums"); a.ID != old.ID {
		t.Fatalf("the name resolves to %s, want the old job %s", a.ID, old.ID)
	}
	if _, err := b.Subscription(ctx, n.Replacement.Parallel.Subscriptions[0].New); err == nil {
		t.Errorf("the new job's subscription is still there")
	}
	gens, err := (sqlsink.Admin{}).FacadeGenerations(ctx, s.replace.FacadeTarget(n.Replacement.Parallel.Tables[0]))
	if err != nil || len(gens) != 1 || gens[0].Generation != old.Generation {
		t.Fatalf("façade generations after the rollback: %+v %v", gens, err)
	}
	// A rolled-back flow is not rolled back twice.
	if err := s.replace.AbortParallel(ctx, nj.ID, "again"); errcode.Of(err) != errcode.IllegalTransition {
		t.Fatalf("a second rollback: %v", err)
	}
	sc.drainToTruth(t, cons, old.ID, len(sc.phase1)+len(phase2), phase2)
	// The name's last job that ran is the old one, DRAINED, not the new
	// one the rollback cancelled (weir jobs describe sums).
	if a, _ := s.Get("sums"); a.ID != old.ID || a.State != record.StateDrained {
		t.Fatalf("after the drain the name resolves to %s (%s), want the drained job %s", a.ID, a.State, old.ID)
	}
}

// TestParallelRefusals: what a parallel replacement cannot hand over is
// refused with its code before anything changes: the old job keeps
// running as it was and no job is created.
func TestParallelRefusals(t *testing.T) {
	t.Parallel()
	missing := func(p string) string {
		return strings.Replace(p, "topic: par-events", "subscription: no-such-sub", 1)
	}
	global := func(p string) string { return strings.Replace(p, "      windowing: {type: fixed, size: 10s}\n", "", 1) }
	sessions := func(p string) string {
		return strings.Replace(p, "{type: fixed, size: 10s}", "{type: sessions, gap: 10s}", 1)
	}
	otherTopic := func(p string) string { return strings.Replace(p, "topic: par-events", "topic: par-out", 1) }
	same := func(p string) string { return p }
	tests := []struct {
		name     string
		old, new func(string) string
		code     errcode.Code
		msg      string
	}{
		// (Named subscriptions that exist are scenarios of TestParallelReplace.)
		{"new pipeline reads a named subscription that does not exist", same, missing, errcode.ReplacementUnavailable, "subscription no-such-sub, whose topic cannot be read"},
		{"new pipeline writes the global window", same, global, errcode.ReplacementUnavailable, "global window"},
		{"new pipeline writes session windows", same, sessions, errcode.ReplacementUnavailable, "sessions"},
		{"new pipeline reads a topic the old job does not", same, otherTopic, errcode.ReplacementUnavailable, "does not read"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := t.TempDir()
			s, b, clock := openParallel(t, dir)
			if _, err := b.CreateSubscription(ctx, "par-sub", "par-events", pubsub.SubscriptionConfig{FromBeginning: true}); err != nil {
				t.Fatal(err)
			}
			sinkCfg, view := parDrivers()[0].setup(t, dir)
			view.close()
			p := fmt.Sprintf(parYAML, sinkCfg)
			old := submit(t, s, "sums", tc.old(p), dir)
			clock.advance(DefaultMinReplaceInterval)
			_, err := s.Update(ctx, UpdateRequest{SubmitRequest: SubmitRequest{Name: "sums", Pipeline: tc.new(p), BaseDir: dir,
				ServiceOptions: []string{"update_strategy_parallel_job_update", "parallel_replace_job_min_parallel_pipelines_duration=0s", "weir_replace_rewind=false"}}})
			if errcode.Of(err) != tc.code || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), "was not changed") {
				t.Fatalf("got %v (%s), want %s saying %q", err, errcode.Of(err), tc.code, tc.msg)
			}
			if j, _ := s.Get("sums"); j.ID != old.ID || j.State != record.StateRunning || j.Replacement != nil || j.ReplacedByJobID != "" {
				t.Fatalf("the old job after the refusal: %s %s %+v", j.ID, j.State, j.Replacement)
			}
			if jobs, _ := s.List(StatusAll); len(jobs) != 1 {
				t.Fatalf("%d jobs after the refusal, want the old one only", len(jobs))
			}
		})
	}
}

// TestParallelNewJobCancelledDuringOverlap: cancelling the new job during
// the overlap ends the flow FAILED and keeps the old job as the name's
// active job, its generation the only one behind the view.
func TestParallelNewJobCancelledDuringOverlap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sc := startParScenario(t)
	s, old := sc.s, sc.old
	res := sc.update(t, parallelOverlapOptions...)
	nj := waitFor(t, s, res.ID, "the overlap", func(j *record.Job) bool { return j.Replacement.Phase == record.PhaseOverlap })
	if _, err := s.Cancel(ctx, nj.ID); err != nil {
		t.Fatal(err)
	}
	fin := waitFor(t, s, nj.ID, "the end of the flow", func(j *record.Job) bool { return j.Replacement.Phase.Final() })
	o, _ := s.Get(old.ID)
	if fin.State != record.StateCancelled || fin.Replacement.Phase != record.PhaseFailed || o.State != record.StateRunning || o.Replacement.Phase != record.PhaseFailed || o.ReplacedByJobID != "" {
		t.Fatalf("after cancelling the new job: new %s %s, old %s %s replaced by %q", fin.State, fin.Replacement.Phase, o.State, o.Replacement.Phase, o.ReplacedByJobID)
	}
	if a, _ := s.Get("sums"); a.ID != old.ID {
		t.Fatalf("the name resolves to %s, want the old job %s", a.ID, old.ID)
	}
	if gens, err := (sqlsink.Admin{}).FacadeGenerations(ctx, s.replace.FacadeTarget(fin.Replacement.Parallel.Tables[0])); err != nil || len(gens) > 1 || len(gens) == 1 && gens[0].Generation != old.Generation {
		t.Fatalf("façade generations after the flow failed: %+v %v", gens, err)
	}
}

// waitReadSequence waits until step of job ref, when it re-reads for a
// replacement (its catch_up metric), has read stream sequence seq; a step
// that does not re-read returns at once.
func waitReadSequence(t *testing.T, s *Service, ref, step string, seq uint64) {
	t.Helper()
	waitStep(t, s, ref, step, fmt.Sprintf("read sequence %d", seq), func(st record.StepMetrics) bool {
		return st.CatchUp == nil || st.CatchUp.ReadSequence >= seq
	})
}
