package main

// The scaffolding shared by the kill -9 tests of cmd/weir (crash_*_test.go,
// rollback_test.go, parallel_wait_test.go, soak_test.go): how many seeded
// kill points a flow gets, the orders pipeline they run (ReadFromPubSub →
// per-key sums in windows → WriteToSql upsert), the input with its ground
// truth, and the checks after a restart (the flow completed, one job of the
// name is active, the table equals the ground truth).

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/io/pubsub"
)

// crashPointsFrom is how many seeded kill points a flow gets: 2 (the
// subset .ci/run runs), or the positive number in the environment
// variable env (the full set: WEIR_REPLACE_CRASH_POINTS=10 ...).
func crashPointsFrom(t *testing.T, env string) int {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		return 2
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", env, v)
	}
	return n
}

// forEachCrashPoint runs flow once per seeded kill point (seeds 1..N, N
// from crashPointsFrom), each as the subtest seed=N; it skips in -short
// mode, since every point starts servers.
func forEachCrashPoint(t *testing.T, env string, flow func(t *testing.T, seed uint64)) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts servers")
	}
	points := crashPointsFrom(t, env)
	for seed := 1; seed <= points; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel() // each seed has its own server and directories
			flow(t, uint64(seed))
		})
	}
}

// totalsPipeline is the YAML of the kill -9 tests' pipeline: the source
// Orders reading from (a "topic: T" or "subscription: S" entry, plus any
// other config, e.g. "topic: orders, idle_timeout: 2h"; idle_timeout 1h
// when from does not set one), then the transforms in extra (YAML list
// entries, may be empty) with the last one named input, then Totals (sum
// and count of amount per key in windowing, "{type: fixed, size: 1m}"
// when empty) upserted into table totals of the SQLite file db.
func totalsPipeline(from, extra, input, windowing, db string) string {
	if !strings.Contains(from, "idle_timeout") {
		from += ", idle_timeout: 1h"
	}
	if input == "" {
		input = "Orders"
	}
	if windowing == "" {
		windowing = "{type: fixed, size: 1m}"
	}
	return `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Orders
      config: {` + from + `, schema: {key: string, amount: int, ts: timestamp}, timestamp_field: ts, max_out_of_orderness: 1s}
` + extra + `    - type: Combine
      name: Totals
      input: ` + input + `
      windowing: ` + windowing + `
      config:
        group_by: key
        combine: {total: {value: amount, fn: sum}, n: {value: amount, fn: count}}
    - type: WriteToSql
      name: Write
      input: Totals
      config: {dsn: "` + db + `", table: totals, key: [key]}
`
}

// writeTestFile writes content to name in dir and returns its path.
func writeTestFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// crashInput writes the kill -9 tests' input and keeps its ground truth:
// message i has key k(i mod keys), amount i and message ID i, so a chunk
// published again counts once.
type crashInput struct {
	t    *testing.T
	work string
	keys int
	base time.Time
	// windows are the starts of the windows an event time falls in (one
	// fixed minute when nil).
	windows func(ts time.Time) []time.Time
	// per is how many messages share each 100ms of event time (1 when 0).
	per int
	// want and wantN are the ground truth per "key window_start" (RFC
	// 3339): the total and the count of every message written.
	want, wantN map[string]int64
}

// newCrashInput is the input of keys keys from 2026-03-01 in one-minute
// fixed windows, its files in work.
func newCrashInput(t *testing.T, work string, keys int) *crashInput {
	return &crashInput{t: t, work: work, keys: keys, base: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC),
		want: map[string]int64{}, wantN: map[string]int64{}}
}

// slidingWindows are the starts of the sliding windows of size every
// period (aligned to the epoch, as weir's are) that ts falls in.
func slidingWindows(size, period time.Duration) func(ts time.Time) []time.Time {
	return func(ts time.Time) []time.Time {
		var out []time.Time
		for start := ts.Truncate(period); start.After(ts.Add(-size)); start = start.Add(-period) {
			out = append(out, start)
		}
		return out
	}
}

// chunk writes messages from..to (100ms of event time apart, or per of
// them in each 100ms, the first at base+offset) to a file, adds them to the ground truth and returns the
// file's path. chunk(from, to, from*100ms) puts message i at base+i×100ms.
func (c *crashInput) chunk(from, to int, offset time.Duration) string {
	c.t.Helper()
	var b strings.Builder
	for i := from; i < to; i++ {
		k := fmt.Sprintf("k%d", i%c.keys)
		ts := c.base.Add(offset + time.Duration((i-from)/max(c.per, 1))*100*time.Millisecond)
		starts := []time.Time{ts.Truncate(time.Minute)}
		if c.windows != nil {
			starts = c.windows(ts)
		}
		for _, w := range starts {
			c.want[k+" "+w.Format(time.RFC3339)] += int64(i)
			c.wantN[k+" "+w.Format(time.RFC3339)]++
		}
		fmt.Fprintf(&b, `{"key": %q, "amount": %d, "ts": %q, "id": %d}`+"\n", k, i, ts.Format(time.RFC3339Nano), i)
	}
	return writeTestFile(c.t, c.work, fmt.Sprintf("chunk-%d.jsonl", from), b.String())
}

// mustCLI runs the CLI against srv in dir and fails the test unless it
// exits 0.
func (p *serverProc) mustCLI(t *testing.T, dir string, args ...string) cliResult {
	t.Helper()
	r := p.cli(dir, args...)
	if r.code != ExitOK {
		t.Fatalf("weir %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r
}

// runOrdersJob creates topic orders, runs pipeline (reading it through
// step Orders) as job orders, and returns the job's ID once it runs and
// its subscription exists: a subscription starts at the end of the
// topic, so publish only then.
func (p *serverProc) runOrdersJob(t *testing.T, dir, pipeline string) string {
	t.Helper()
	p.mustCLI(t, dir, "topics", "create", "orders")
	id := strings.TrimSpace(p.mustCLI(t, dir, "run", pipeline, "--job-name", "orders").stdout)
	p.waitJob(id, "RUNNING", stateIs("RUNNING"))
	sub := pubsub.SubscriptionName("orders", "Orders")
	if !await.Until(30*time.Second, 20*time.Millisecond, func() bool { return p.cli(dir, "subscriptions", "describe", sub).code == ExitOK }) {
		t.Fatalf("the job's subscription %s was not created\nserver log:\n%s", sub, p.log())
	}
	return id
}

// runThroughKills runs pipeline as streaming job ids on a server over
// dataDir, kills the server with SIGKILL kills times once the job has
// checkpointed (three checkpoints before each kill, three new ones after
// each restart), then drains the job. It returns the last server and the
// job's ID. The job must be exactly once.
// idsPipeline is the crash tests' streaming job: 300 generated events a
// second, each with a unique id, written by the sink transform sinkType
// with the given config (a YAML flow mapping) as step WriteIds.
func idsPipeline(sinkType, config string) string {
	return `pipeline:
  transforms:
    - type: Generate
      name: Events
      config: {rate: 300, keys: 5, spacing: 10ms}
    - type: MapToFields
      name: Ids
      input: Events
      config:
        fields: {id: id, key: key}
    - type: ` + sinkType + `
      name: WriteIds
      input: Ids
      config: ` + config + "\n"
}

func runThroughKills(t *testing.T, dataDir, work, pipeline string, kills int) (*serverProc, string) {
	t.Helper()
	srv := startServer(t, dataDir)
	r := srv.cli(work, "run", pipeline, "--job-name", "ids", "--no-wait")
	if r.code != ExitOK {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	j := srv.waitJob(id, "three checkpoints", epochAtLeast(3))
	if j["delivery"] != "exactly_once" {
		t.Fatalf("delivery %v (%v), want exactly_once", j["delivery"], j["delivery_note"])
	}
	for range kills {
		if code := srv.stop(syscall.SIGKILL); code != 128+int(syscall.SIGKILL) {
			t.Fatalf("kill -9: exit %d", code)
		}
		srv = startServer(t, dataDir)
		after := srv.describe(id)
		srv.waitJob(id, "new checkpoints after the restart", epochAtLeast(epochOf(after)+3))
	}
	if r := srv.cli("", "jobs", "drain", id, "--wait"); r.code != ExitOK {
		t.Fatalf("drain: %d %s", r.code, r.stderr)
	}
	return srv, id
}

// publish publishes the messages of file to topic orders, with their
// message IDs (a publish repeated after a crash is harmless).
func (p *serverProc) publish(t *testing.T, dir, file string) {
	t.Helper()
	p.mustCLI(t, dir, "topics", "publish", "orders", "--file", file, "--id-field", "id")
}

// waitFlowEnd waits until name's job has a replacement record in a final
// phase (CUT_OVER, FAILED, ROLLED_BACK) and has left PENDING, and returns
// the job.
func (p *serverProc) waitFlowEnd(name string) map[string]any {
	return p.waitJob(name, "the end of the flow", func(m map[string]any) bool {
		rep, _ := m["replacement"].(map[string]any)
		return rep != nil && (rep["phase"] == "CUT_OVER" || rep["phase"] == "FAILED" || rep["phase"] == "ROLLED_BACK") && m["state"] != "PENDING"
	})
}

// checkCutOver checks that the flow that ended in fin (from waitFlowEnd)
// cut over: the new job RUNNING with its record CUT_OVER, job oldID
// DRAINED and replaced by it, and the new job the only active one. It
// returns the new job's ID.
func checkCutOver(t *testing.T, srv *serverProc, work string, fin map[string]any, oldID string) string {
	t.Helper()
	rep := fin["replacement"].(map[string]any)
	if rep["phase"] != "CUT_OVER" || fin["state"] != "RUNNING" {
		t.Fatalf("after the restart the flow ended %v, job %v (%v)\nserver log:\n%s", rep["phase"], fin["state"], fin["error"], srv.log())
	}
	newID := fin["id"].(string)
	if old := srv.describe(oldID); old["state"] != "DRAINED" || old["replaced_by_job_id"] != newID {
		t.Fatalf("old job: %v replaced by %v", old["state"], old["replaced_by_job_id"])
	}
	checkOnlyActive(t, srv, work, newID)
	return newID
}

// checkOnlyActive checks that job id is the server's only active job.
func checkOnlyActive(t *testing.T, srv *serverProc, work, id string) {
	t.Helper()
	active := srv.cli(work, "jobs", "list", "--status", "active", "--format", "json")
	if n := strings.Count(active.stdout, `"id"`); n != 1 || !strings.Contains(active.stdout, id) {
		t.Fatalf("active jobs after the flow (want only %s):\n%s", id, active.stdout)
	}
}

// waitCaughtUp waits until job id has read its subscription to the end
// (no backlog) and taken a checkpoint.
func waitCaughtUp(t *testing.T, srv *serverProc, id string) {
	t.Helper()
	if !await.Until(60*time.Second, 100*time.Millisecond, func() bool {
		m := srv.describe(id)
		mm, _ := m["metrics"].(map[string]any)
		b, ok := mm["backlog_elements"].(float64)
		return ok && b == 0 && epochOf(m) > 0
	}) {
		t.Fatalf("job %s did not catch up\nserver log:\n%s", id, srv.log())
	}
}

// drainAndCheckTotals drains job id, waits until it is DRAINED with its
// last commit done, and checks that the totals table of the SQLite file db
// holds exactly want (total) and wantN (count) per "key window_start"
// (RFC 3339): nothing lost, nothing counted twice.
func drainAndCheckTotals(t *testing.T, srv *serverProc, work, id, db string, want, wantN map[string]int64) {
	t.Helper()
	if r := srv.cli(work, "jobs", "drain", id); r.code != ExitOK {
		t.Fatalf("drain: %d %s", r.code, r.stderr)
	}
	done := srv.waitJob(id, "DRAINED", func(m map[string]any) bool {
		return m["state"] != "DRAINING" && m["state"] != "RUNNING" && m["pending_commit"] == nil
	})
	if done["state"] != "DRAINED" {
		t.Fatalf("state %v (error %v)", done["state"], done["error"])
	}
	checkTotals(t, db, want, wantN)
}

// checkTotals checks that the totals table (or view) of the SQLite file
// db holds exactly want (total) and wantN (count) per "key window_start".
func checkTotals(t *testing.T, db string, want, wantN map[string]int64) {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(`SELECT key, window_start, total, n FROM totals`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got, gotN := map[string]int64{}, map[string]int64{}
	for rows.Next() {
		var k, w string
		var tot, n int64
		if err := rows.Scan(&k, &w, &tot, &n); err != nil {
			t.Fatal(err)
		}
		ws, err := time.Parse(time.RFC3339Nano, w)
		if err != nil {
			t.Fatalf("window_start %q: %v", w, err)
		}
		key := k + " " + ws.UTC().Format(time.RFC3339)
		got[key], gotN[key] = tot, n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("table has %d (key, window) rows, want %d", len(got), len(want))
	}
	for k, w := range want {
		if got[k] != w || gotN[k] != wantN[k] {
			t.Errorf("%s: total %d count %d, want %d and %d", k, got[k], gotN[k], w, wantN[k])
		}
	}
}

// firstOf returns the first element of xs, nil if none.
func firstOf(xs []any) any {
	if len(xs) == 0 {
		return nil
	}
	return xs[0]
}

// watchTotals polls the totals table of the SQLite file db (from before
// it exists) as a consumer would, until the returned stop is called; stop
// returns every time a (key, window) total or count went backwards
// between two polls (a consumer of an accumulating pipeline never sees
// that: a replacement's catch-up holds its partial panes, a crash repeats
// only committed output).
func watchTotals(t *testing.T, db string) (stop func() []string) {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+db+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	quit, done := make(chan struct{}), make(chan []string, 1)
	go func() {
		defer conn.Close()
		var back []string
		last := map[string][2]int64{}
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				done <- back
				return
			case <-tick.C:
			}
			rows, err := conn.Query(`SELECT key, window_start, total, n FROM totals`)
			if err != nil {
				continue // not created yet, or busy
			}
			for rows.Next() {
				var k, w string
				var tot, n int64
				if rows.Scan(&k, &w, &tot, &n) != nil {
					continue
				}
				ws, err := time.Parse(time.RFC3339Nano, w)
				if err != nil {
					continue
				}
				key := k + " " + ws.UTC().Format(time.RFC3339)
				if p, ok := last[key]; ok && (tot < p[0] || n < p[1]) && len(back) < 20 {
					back = append(back, fmt.Sprintf("%s: total %d count %d after %d and %d", key, tot, n, p[0], p[1]))
				}
				last[key] = [2]int64{tot, n}
			}
			rows.Close()
		}
	}()
	return func() []string {
		close(quit)
		return <-done
	}
}
