package service

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/errcode"

	"github.com/jackc/pgx/v5"

	"github.com/weir-dev/weir/io/pubsub"
)

var _ contract.ReReadingSource = (*pubsub.Source)(nil)

// rwYAML reads the subscription sr-sub (no idle advancement: the
// watermark follows event time only, so the scenario is deterministic),
// sums amounts per %s in fixed windows of %s and upserts the totals into
// table %s of %s.
const rwYAML = `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Events
      config:
        subscription: sr-sub
        schema: {key: string, grp: string, amount: int, ts: string}
        timestamp_field: ts
        idle_timeout: 24h
    - type: Combine
      name: Sums
      input: Events
      windowing: {type: fixed, size: %s}
      config:
        group_by: [%s]
        combine:
          total: {value: amount, fn: sum}
          n: {value: amount, fn: count}
    - type: WriteToSql
      name: WriteTotals
      input: Sums
      config: {driver: %s, dsn: %q, table: %s, key: [%s]}
    - type: WriteToSql
      name: WriteEvents
      input: Events
      config: {driver: %s, dsn: %q, table: %s, mode: append}
`

// rwPipeline is rwYAML; every event is also appended to <table>_ev
// (without a _grp suffix).
func rwPipeline(size, key string, db *rwDB, table string) string {
	return fmt.Sprintf(rwYAML, size, key, db.driver, db.dsn, table, key, db.driver, db.dsn, eventsTable(table))
}

func eventsTable(table string) string { return strings.TrimSuffix(table, "_grp") + "_ev" }

// rwEvent is one message of the re-read scenarios.
type rwEvent struct {
	key, grp string
	amount   int64
	at       time.Time
}

// rwEvents returns n events over keys k0..k2 and groups g0..g1, at event
// times rising evenly over [from, from+span).
func rwEvents(n int, from, span time.Duration, seed int64) []rwEvent {
	out := make([]rwEvent, n)
	for i := range out {
		out[i] = rwEvent{key: fmt.Sprintf("k%d", i%3), grp: fmt.Sprintf("g%d", i%2), amount: seed + int64(i),
			at: srBase.Add(from + span*time.Duration(i)/time.Duration(n))}
	}
	return out
}

func publishRW(t *testing.T, b *pubsub.Broker, evs []rwEvent) {
	t.Helper()
	for _, e := range evs {
		msg := fmt.Sprintf(`{"key": %q, "grp": %q, "amount": %d, "ts": %q}`, e.key, e.grp, e.amount, e.at.Format(time.RFC3339Nano))
		if _, err := b.Publish(context.Background(), "sr-events", []byte(msg), nil, ""); err != nil {
			t.Error(err)
			return
		}
	}
}

// rwCell is one (key, window) of a totals table.
type rwCell struct {
	key        string
	start, end time.Time
}

func (c rwCell) String() string {
	return fmt.Sprintf("%s [%s,%s)", c.key, c.start.Format("15:04:05"), c.end.Format("15:04:05"))
}

// rwTruth is the ground truth of evs in windows of size, grouped by grp
// or key, for the windows starting at or after from.
func rwTruth(evs []rwEvent, size time.Duration, byGrp bool, from time.Time) map[rwCell][2]int64 {
	out := map[rwCell][2]int64{}
	for _, e := range evs {
		k := e.key
		if byGrp {
			k = e.grp
		}
		start := e.at.Truncate(size)
		if start.Before(from) {
			continue
		}
		c := rwCell{k, start, start.Add(size)}
		v := out[c]
		out[c] = [2]int64{v[0] + e.amount, v[1] + 1}
	}
	return out
}

// rwDB is a totals table in SQLite or PostgreSQL.
type rwDB struct {
	driver, dsn, table string
	read               func(t *testing.T) (map[rwCell][2]int64, map[rwCell]int64, error)
	// events returns the rows of the append table and their distinct
	// amounts (every published amount is unique).
	events func() (rows, distinct int64, err error)
}

func openRWDB(t *testing.T, driver, dir, table string) *rwDB {
	t.Helper()
	ctx := context.Background()
	q := "SELECT %s, window_start, window_end, total, n, generation FROM %s"
	switch driver {
	case "sqlite":
		db := &rwDB{driver: driver, dsn: filepath.Join(dir, "totals.sqlite"), table: table}
		db.read = func(t *testing.T) (map[rwCell][2]int64, map[rwCell]int64, error) {
			conn, err := sql.Open("sqlite", db.dsn)
			if err != nil {
				return nil, nil, err
			}
			defer conn.Close()
			return scanRW(conn.QueryContext, fmt.Sprintf(q, keyCol(table), table))
		}
		db.events = func() (rows, distinct int64, err error) {
			conn, err := sql.Open("sqlite", db.dsn)
			if err != nil {
				return 0, 0, err
			}
			defer conn.Close()
			err = conn.QueryRow("SELECT COUNT(*), COUNT(DISTINCT amount) FROM "+eventsTable(table)).Scan(&rows, &distinct)
			return rows, distinct, err
		}
		return db
	default:
		dsn := os.Getenv("WEIR_TEST_POSTGRES_DSN")
		if dsn == "" {
			dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(cctx, dsn)
		if err != nil {
			t.Skipf("PostgreSQL is not reachable at %s (set WEIR_TEST_POSTGRES_DSN): %v", dsn, err)
		}
		t.Cleanup(func() {
			_, _ = conn.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)
			_, _ = conn.Exec(context.Background(), "DROP TABLE IF EXISTS "+eventsTable(table))
			_ = conn.Close(context.Background())
		})
		_, _ = conn.Exec(ctx, "DROP TABLE IF EXISTS "+table)
		var mu sync.Mutex
		db := &rwDB{driver: driver, dsn: dsn, table: table}
		db.read = func(t *testing.T) (map[rwCell][2]int64, map[rwCell]int64, error) {
			mu.Lock()
			defer mu.Unlock()
			rows, err := conn.Query(ctx, fmt.Sprintf(q, keyCol(table), table))
			if err != nil {
				return nil, nil, err
			}
			defer rows.Close()
			tot, gens := map[rwCell][2]int64{}, map[rwCell]int64{}
			for rows.Next() {
				var c rwCell
				var total, n, gen int64
				if err := rows.Scan(&c.key, &c.start, &c.end, &total, &n, &gen); err != nil {
					return nil, nil, err
				}
				c.start, c.end = c.start.UTC(), c.end.UTC()
				tot[c], gens[c] = [2]int64{total, n}, gen
			}
			return tot, gens, rows.Err()
		}
		db.events = func() (rows, distinct int64, err error) {
			mu.Lock()
			defer mu.Unlock()
			err = conn.QueryRow(ctx, "SELECT COUNT(*), COUNT(DISTINCT amount) FROM "+eventsTable(table)).Scan(&rows, &distinct)
			return rows, distinct, err
		}
		return db
	}
}

func keyCol(table string) string {
	if strings.HasSuffix(table, "_grp") {
		return "grp"
	}
	return "key"
}

func scanRW(query func(context.Context, string, ...any) (*sql.Rows, error), q string) (map[rwCell][2]int64, map[rwCell]int64, error) {
	rows, err := query(context.Background(), q)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	tot, gens := map[rwCell][2]int64{}, map[rwCell]int64{}
	for rows.Next() {
		var c rwCell
		var start, end string
		var total, n, gen int64
		if err := rows.Scan(&c.key, &start, &end, &total, &n, &gen); err != nil {
			return nil, nil, err
		}
		if c.start, err = time.Parse(time.RFC3339Nano, start); err != nil {
			return nil, nil, err
		}
		if c.end, err = time.Parse(time.RFC3339Nano, end); err != nil {
			return nil, nil, err
		}
		tot[c], gens[c] = [2]int64{total, n}, gen
	}
	return tot, gens, rows.Err()
}

// rwWatcher polls tables while a flow runs, as a consumer would, and
// records every (key, window) total that went backwards or beyond the
// ground truth (a double count).
type rwWatcher struct {
	stop   chan struct{}
	done   chan struct{}
	reads  atomic.Int64
	mu     sync.Mutex
	errors []string
}

func watchRW(t *testing.T, dbs []*rwDB, truth []map[rwCell][2]int64) *rwWatcher {
	w := &rwWatcher{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		last := make([]map[rwCell][2]int64, len(dbs))
		for i := range last {
			last[i] = map[rwCell][2]int64{}
		}
		for {
			for i, db := range dbs {
				got, _, err := db.read(t)
				if err != nil {
					continue // the table does not exist yet
				}
				w.reads.Add(1)
				for c, v := range got {
					if p, ok := last[i][c]; ok && (v[0] < p[0] || v[1] < p[1]) {
						w.fail("%s %s went backwards: %v after %v", db.table, c, v, p)
					}
					if tv, ok := truth[i][c]; ok && v[1] > tv[1] {
						w.fail("%s %s counts %d elements, more than the %d published (a double count)", db.table, c, v[1], tv[1])
					}
					last[i][c] = v
				}
			}
			select {
			case <-w.stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *rwWatcher) fail(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.errors) < 20 {
		w.errors = append(w.errors, fmt.Sprintf(format, args...))
	}
}

func (w *rwWatcher) finish(t *testing.T) {
	t.Helper()
	close(w.stop)
	<-w.done
	for _, e := range w.errors {
		t.Error(e)
	}
	if w.reads.Load() == 0 {
		t.Error("the consumer never read the table")
	}
}

// openRewindService opens a service with an embedded broker (topic
// sr-events, subscription sr-sub from the beginning) and an optional hook
// on a finishing execution.
func openRewindService(t *testing.T, dir string, finishing func(string)) (*Service, *pubsub.Broker, *shiftClock) {
	t.Helper()
	ctx := context.Background()
	b := startBroker(t, dir, "sr-events")
	if _, err := b.CreateSubscription(ctx, "sr-sub", "sr-events", pubsub.SubscriptionConfig{FromBeginning: true}); err != nil {
		t.Fatal(err)
	}
	clock := &shiftClock{base: time.Now()}
	s, err := open(ctx, Options{DataDir: filepath.Join(dir, "data"), CheckpointInterval: 50 * time.Millisecond,
		Clock: clock, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Broker: b}, Hooks{Finishing: finishing})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s, b, clock
}

// TestStopAndReplaceRewind: the default stop-and-replace re-reads retained
// input. With data flowing (Pub/Sub in, a windowed accumulating Combine,
// an upsert WriteToSql on SQLite and PostgreSQL) and messages published
// while the flow runs into windows that span the cut, a consumer polling
// the table never sees a total go backwards or count an element twice,
// and at the end every (key, window) the new job emitted equals the
// ground truth of every message published (for a new window size or a
// new key: the new pipeline's), the window that had expired before the
// cut keeps the old job's complete total, and the job records carry the
// rewind point and the stop window. Also: no preallocation, and a drain
// timeout with cancel and with cancel_on_drain_timeout=false.
func TestStopAndReplaceRewind(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		size        string // the new pipeline's window size
		byGrp       bool   // the new pipeline groups by grp into table <t>_grp
		opts        []string
		holdOld     bool // the old job's end waits for the drain timeout
		wantOldStop record.JobState
		newName     string // under a new name (option 2); "" the same name
		topic       bool   // both read the topic (subscriptions named after the job) instead of sr-sub
	}{
		{name: "compatible", size: "10s", wantOldStop: record.StateDrained},
		{name: "new window size", size: "20s", wantOldStop: record.StateDrained},
		{name: "new key", size: "10s", byGrp: true, wantOldStop: record.StateDrained},
		{name: "no preallocation", size: "10s", opts: []string{"parallel_replace_job_preallocate_compute_resources=false"}, wantOldStop: record.StateDrained},
		{name: "drain timeout cancels", size: "10s", holdOld: true, wantOldStop: record.StateCancelled},
		{name: "drain timeout keeps both", size: "10s", opts: []string{"parallel_replace_job_cancel_on_drain_timeout=false"}, holdOld: true, wantOldStop: record.StateDrained},
		{name: "new name reading a topic", size: "20s", newName: "sums-v2", topic: true, wantOldStop: record.StateDrained},
	}
	for _, driver := range []string{"sqlite", "postgres"} {
		for i, tc := range tests {
			t.Run(driver+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				dir := t.TempDir()
				release := make(chan struct{})
				var hold atomic.Value
				s, b, clock := openRewindService(t, dir, func(id string) {
					if v, _ := hold.Load().(string); v == id {
						<-release
					}
				})
				table := fmt.Sprintf("rw_totals_%d_%d", i, time.Now().UnixNano()%1_000_000)
				oldDB := openRWDB(t, driver, dir, table)
				newDB := oldDB
				newTable, newKey := table, "key"
				if tc.byGrp {
					newTable, newKey = table+"_grp", "grp"
					newDB = openRWDB(t, driver, dir, newTable)
				}
				pipeline := func(size, key string, db *rwDB, table string) string {
					y := rwPipeline(size, key, db, table)
					if tc.topic {
						y = strings.Replace(y, "subscription: sr-sub", "topic: sr-events", 1)
					}
					return y
				}
				oldSub, newSub := "sr-sub", "sr-sub"
				if tc.topic {
					oldSub, newSub = pubsub.SubscriptionName("sums", "Events"), pubsub.SubscriptionName(cmp.Or(tc.newName, "sums"), "Events")
				}
				old := submit(t, s, "sums", pipeline("10s", "key", oldDB, table), dir)
				// Phase 1: event times in [0s, 30s); the old job's watermark
				// ends at 19s (29s − 10s of out-of-orderness): window
				// [0s,10s) fired and expired, [10s,20s) and [20s,30s) open.
				phase1 := rwEvents(300, 0, 30*time.Second, 1)
				publishRW(t, b, phase1)
				waitElements(t, s, old.ID, "Events", int64(len(phase1)))
				epoch := waitFor(t, s, old.ID, "a checkpoint", checkpointed(1)).LastCheckpoint.Epoch
				waitFor(t, s, old.ID, "a checkpoint after phase 1", checkpointed(epoch+1))
				// Phase 2, published while the flow runs: event times in
				// [15s, 29s), into the open windows that span the cut.
				phase2 := rwEvents(200, 15*time.Second, 14*time.Second, 1000)
				// Phase 3, after the cut-over: [30s, 50s).
				phase3 := rwEvents(200, 30*time.Second, 20*time.Second, 5000)
				all := append(append(append([]rwEvent{}, phase1...), phase2...), phase3...)
				newSize, _ := time.ParseDuration(tc.size)
				from := srBase.Add(10 * time.Second) // the first window not expired at 19s
				if newSize == 20*time.Second {
					from = srBase
				}
				want := rwTruth(all, newSize, tc.byGrp, from)
				truths := []map[rwCell][2]int64{rwTruth(all, 10*time.Second, false, srBase)}
				dbs := []*rwDB{oldDB}
				if tc.byGrp {
					dbs, truths = append(dbs, newDB), append(truths, want)
				} else if newSize != 10*time.Second {
					for c, v := range want {
						truths[0][c] = v
					}
				}
				w := watchRW(t, dbs, truths)

				if tc.holdOld {
					hold.Store(old.ID)
				}
				clock.advance(DefaultMinReplaceInterval)
				req := SubmitRequest{Name: "sums", Pipeline: pipeline(tc.size, newKey, newDB, newTable), BaseDir: dir,
					ServiceOptions: append([]string{"parallel_replace_job_max_stop_duration=1m"}, tc.opts...)}
				var nj *record.Job
				if tc.newName == "" {
					req.ServiceOptions = append(req.ServiceOptions, "update_strategy_parallel_job_update")
					res, err := s.Update(ctx, UpdateRequest{SubmitRequest: req})
					if err != nil {
						t.Fatalf("stop-and-replace: %v", err)
					}
					nj = res.Job
				} else {
					req.Name = tc.newName
					req.ServiceOptions = append(req.ServiceOptions, "parallel_replace_job_name=sums")
					var err error
					if nj, err = s.Submit(ctx, req); err != nil {
						t.Fatalf("stop-and-replace under a new name: %v", err)
					}
				}
				if !nj.Replacement.Rewind || nj.State != record.StatePending {
					t.Fatalf("new job: %s %+v", nj.State, nj.Replacement)
				}
				publishRW(t, b, phase2)
				if tc.holdOld {
					clock.advance(time.Minute)
					waitFor(t, s, nj.ID, "the drain timeout recorded", func(j *record.Job) bool { return j.Replacement.DrainTimedOut })
					if tc.wantOldStop == record.StateCancelled {
						waitFor(t, s, old.ID, "CANCELLING", func(j *record.Job) bool { return j.State == record.StateCancelling })
					}
					close(release)
				}
				fin := waitPhase(t, s, nj.ID)
				if fin.Replacement.Phase != record.PhaseCutOver || fin.State != record.StateRunning || fin.Replacement.StopWindowMillis == nil {
					t.Fatalf("new job after the flow: %s %+v (error %q)", fin.State, fin.Replacement, fin.Error)
				}
				rp := fin.Replacement.RewindPoint
				if rp == nil || len(rp.Sources) != 1 || rp.Sources[0].Topic != "sr-events" || rp.Sources[0].Subscription != oldSub ||
					rp.Sources[0].FirstSequence != 1 || rp.Sources[0].LastSequence < uint64(len(phase1)) {
					t.Fatalf("rewind point: %+v", rp)
				}
				if o, _ := s.Get(old.ID); o.State != tc.wantOldStop || o.ReplacedByJobID != nj.ID {
					t.Fatalf("old job: %s replaced by %q, want %s", o.State, o.ReplacedByJobID, tc.wantOldStop)
				}
				waitFor(t, s, nj.ID, "its execution", func(j *record.Job) bool { return s.core.RunningJob(j.ID) != nil })
				publishRW(t, b, phase3)
				waitBacklog(t, s, b, newSub)
				// The window [0s,10s) had expired at the old job's watermark:
				// the re-read skips its 100 messages (10s windows) and counts
				// them; with 20s windows nothing had expired.
				wantSkipped := int64(100)
				if newSize == 20*time.Second {
					wantSkipped = 0
				}
				m, err := s.Metrics(nj.ID)
				if err != nil {
					t.Fatal(err)
				}
				for _, st := range m.Steps {
					if st.Name != "Events" {
						continue
					}
					if got := st.RewindSkippedElements; wantSkipped == 0 && got != nil || wantSkipped > 0 && (got == nil || *got != wantSkipped) {
						t.Errorf("rewind_skipped_elements of Events: %v, want %d", got, wantSkipped)
					}
				}
				if _, err := s.Drain(ctx, nj.ID); err != nil {
					t.Fatal(err)
				}
				waitFor(t, s, nj.ID, "DRAINED and committed", func(j *record.Job) bool {
					return j.State == record.StateDrained && !j.PendingCommit || j.State.Terminal() && j.State != record.StateDrained
				})
				w.finish(t)

				got, gens, err := newDB.read(t)
				if err != nil {
					t.Fatal(err)
				}
				var diffs []string
				for c, v := range want {
					if got[c] != v {
						diffs = append(diffs, fmt.Sprintf("%s: table %v, truth %v", c, got[c], v))
					} else if gens[c] != nj.Generation {
						diffs = append(diffs, fmt.Sprintf("%s: generation %d, want the new job's %d", c, gens[c], nj.Generation))
					}
				}
				for c, v := range got {
					if _, ok := want[c]; !ok && c.end.Sub(c.start) == newSize && (newDB != oldDB || !c.start.Before(from)) {
						diffs = append(diffs, fmt.Sprintf("%s: %v in the table, not in the truth", c, v))
					}
				}
				// The window that expired before the cut keeps the old job's
				// total, complete.
				oldGot, oldGens, err := oldDB.read(t)
				if err != nil {
					t.Fatal(err)
				}
				for c, v := range rwTruth(phase1, 10*time.Second, false, srBase) {
					if c.start.Equal(srBase) && (oldGot[c] != v || oldGens[c] != old.Generation) {
						diffs = append(diffs, fmt.Sprintf("expired window %s: %v generation %d, want %v of generation %d", c, oldGot[c], oldGens[c], v, old.Generation))
					}
				}
				// The append table holds every event once, re-read or not.
				if rows, distinct, err := oldDB.events(); err != nil || rows != int64(len(all)) || distinct != int64(len(all)) {
					diffs = append(diffs, fmt.Sprintf("append table: %d rows, %d distinct events, want %d of each (%v)", rows, distinct, len(all), err))
				}
				sort.Strings(diffs)
				if len(diffs) > 0 {
					t.Fatalf("%d differences:\n%s", len(diffs), strings.Join(diffs, "\n"))
				}
			})
		}
	}
}

// TestRewindRefusals: a re-reading stop-and-replace is refused before
// anything changes when the topic has discarded messages the re-read
// needs (a topic capped in bytes), and when the new pipeline's windows
// cannot be made complete (a discarding early trigger, sessions); the running job keeps its ID,
// its state and its checkpoints, and no job is created.
func TestRewindRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b, err := pubsub.StartEmbedded(ctx, pubsub.Options{StoreDir: filepath.Join(dir, "broker"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Shutdown(context.Background()) })
	if _, err := b.CreateTopic(ctx, "sr-events", pubsub.TopicConfig{MaxBytes: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateSubscription(ctx, "sr-sub", "sr-events", pubsub.SubscriptionConfig{FromBeginning: true}); err != nil {
		t.Fatal(err)
	}
	clock := &shiftClock{base: time.Now()}
	s, err := Open(ctx, Options{DataDir: filepath.Join(dir, "data"), CheckpointInterval: 50 * time.Millisecond,
		Clock: clock, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Broker: b})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	db := &rwDB{driver: "sqlite", dsn: filepath.Join(dir, "totals.sqlite")}
	old := submit(t, s, "sums", rwPipeline("10s", "key", db, "totals"), dir)
	// Event times in [0s, 30s): the re-read must start at the window
	// [10s, 20s), whose first message is in the first minute's bucket —
	// sequence 1 — and then more messages (at 29s) until the topic has
	// discarded sequence 1.
	phase1 := rwEvents(300, 0, 30*time.Second, 1)
	publishRW(t, b, phase1)
	read := int64(len(phase1))
	for {
		// The topic discards its oldest messages whether or not the
		// subscription has read them: wait for the job to read what is
		// published before publishing more, or a slow machine loses
		// messages the test counts on.
		waitElements(t, s, old.ID, "Events", read)
		first, _, err := b.Retained(ctx, "sr-events")
		if err != nil {
			t.Fatal(err)
		}
		if first > 1 {
			break
		}
		more := rwEvents(100, 29*time.Second, 500*time.Millisecond, 100)
		publishRW(t, b, more)
		read += int64(len(more))
	}
	waitElements(t, s, old.ID, "Events", read)
	epoch := waitFor(t, s, old.ID, "a checkpoint", checkpointed(1)).LastCheckpoint.Epoch
	waitFor(t, s, old.ID, "a checkpoint after the reads", checkpointed(epoch+1))
	clock.advance(DefaultMinReplaceInterval)
	// Discarding panes can only go to an append table (an upsert sink
	// refuses them at load).
	discarding := strings.Replace(strings.Replace(rwPipeline("10s", "key", db, "totals_d"), ", key: [key]}", ", mode: append}", 1),
		"{type: fixed, size: 10s}", "{type: sliding, size: 20s, period: 10s, trigger: {type: after_watermark, early: {type: after_count, count: 5}}}", 1)
	sessions := strings.Replace(rwPipeline("10s", "key", db, "totals"), "{type: fixed, size: 10s}", "{type: sessions, gap: 10s}", 1)
	tests := []struct {
		name     string
		pipeline string
		code     errcode.Code
		msgs     []string
	}{
		{"beyond retention", rwPipeline("10s", "key", db, "totals"), errcode.RewindBeyondRetention,
			[]string{"topic sr-events no longer retains the messages the replacement must re-read: it needs sequence 1 on (event times from 2026-11-30T00:00:10Z",
				"its oldest retained message is sequence ", "weir_replace_rewind=false", "in place", "snapshot"}},
		{"discarding early trigger", discarding, errcode.ReplacementUnavailable, []string{"step Sums of the new pipeline has an early or repeated trigger (after_watermark) in discarding mode", "accumulation_mode: accumulating", "weir_replace_rewind=false"}},
		{"session windows", sessions, errcode.ReplacementUnavailable, []string{"step Sums of the new pipeline uses session windows", "weir_replace_rewind=false"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Update(ctx, UpdateRequest{SubmitRequest: SubmitRequest{Name: "sums", Pipeline: tc.pipeline, BaseDir: dir,
				ServiceOptions: []string{"update_strategy_parallel_job_update", "parallel_replace_job_max_stop_duration=1m"}}})
			if !hasCode(err, tc.code) {
				t.Fatalf("got %v (%s), want %s", err, errcode.Of(err), tc.code)
			}
			for _, m := range tc.msgs {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("the refusal %q does not say %q", err, m)
				}
			}
			got, _ := s.Get("sums")
			if got.ID != old.ID || got.State != record.StateRunning || got.ReplacedByJobID != "" {
				t.Fatalf("the refusal changed the running job: %s %s replaced by %q", got.ID, got.State, got.ReplacedByJobID)
			}
			jobs, err := s.List(StatusAll)
			if err != nil {
				t.Fatal(err)
			}
			if len(jobs) != 1 {
				t.Fatalf("the refusal created a job: %d jobs", len(jobs))
			}
		})
	}
	epoch = waitFor(t, s, old.ID, "a checkpoint", checkpointed(1)).LastCheckpoint.Epoch
	waitFor(t, s, old.ID, "a later checkpoint", checkpointed(epoch+1))
	// With weir_replace_rewind=false the same replacement goes ahead.
	res, err := s.Update(ctx, UpdateRequest{SubmitRequest: SubmitRequest{Name: "sums", Pipeline: rwPipeline("10s", "key", db, "totals"), BaseDir: dir,
		ServiceOptions: []string{"update_strategy_parallel_job_update", "parallel_replace_job_max_stop_duration=1m", "weir_replace_rewind=false"}}})
	if err != nil {
		t.Fatalf("plain continuation: %v", err)
	}
	if fin := waitPhase(t, s, res.Job.ID); fin.Replacement.Phase != record.PhaseCutOver {
		t.Fatalf("plain continuation: %+v", fin.Replacement)
	}
}
