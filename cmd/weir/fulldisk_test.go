package main

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/io/pubsub"
)

// mountTmpfs mounts a tmpfs of sizeMiB MiB on dir (created), unmounted when
// the test ends. It skips the test when the machine does not let it mount
// (not root, no mount(8)), unless WEIR_REQUIRE_TMPFS=1, which .ci/run sets
// when it runs as root: then it fails.
func mountTmpfs(t *testing.T, dir string, sizeMiB int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", sizeMiB), "tmpfs", dir).CombinedOutput()
	if err != nil {
		msg := fmt.Sprintf("cannot mount a tmpfs on %s: %v %s", dir, err, strings.TrimSpace(string(out)))
		if os.Getenv("WEIR_REQUIRE_TMPFS") == "1" {
			t.Fatal(msg + " (WEIR_REQUIRE_TMPFS=1)")
		}
		t.Skip(msg)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
}

// fillDisk writes a filler file in dir until the file system has no room
// left, and returns its path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the disk: %v", err)
			}
			break
		}
	}
	// The last bytes too: a few pages may remain for a smaller write.
	one := make([]byte, 512)
	for {
		if _, err := f.Write(one); err != nil {
			break
		}
	}
	return path
}

// TestCLIServerFullDisk runs a real weir server whose state store lives on
// a small tmpfs, with a job ReadFromPubSub → windowed Combine → WriteToSql.
// Mid-stream a filler file fills the disk until the store fails: the job
// stays RUNNING with condition STORAGE_UNAVAILABLE, the API answers, the
// subscription's acknowledgement does not move and the table does not
// change. Then the filler is deleted: the job resumes by itself, without a
// restart, and after a drain the table equals the ground truth (0
// acknowledged messages lost, none counted twice).
//
// Two layouts: only DATA_DIR/state on the tmpfs, with messages published
// while the disk is full (the broker is on another disk); and the whole
// data directory on it, broker included, with the backlog published
// before the disk fills (a publish to a full disk is refused, so the
// publisher keeps it).
func TestCLIServerFullDisk(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a server on a tmpfs")
	}
	for _, tt := range []struct {
		name         string
		whole        bool // the whole data directory on the tmpfs, else DATA_DIR/state
		sizeMiB      int
		publishFirst bool // publish everything before filling the disk
	}{
		{name: "state directory", sizeMiB: 24},
		{name: "whole data directory", whole: true, sizeMiB: 64, publishFirst: true},
	} {
		t.Run(tt.name, func(t *testing.T) { testFullDisk(t, tt.whole, tt.sizeMiB, tt.publishFirst) })
	}
}

func testFullDisk(t *testing.T, whole bool, sizeMiB int, publishFirst bool) {
	dir, work := t.TempDir(), t.TempDir()
	disk := filepath.Join(dir, "state") // the store's directory: DATA_DIR/state
	if whole {
		disk = dir
	}
	mountTmpfs(t, disk, sizeMiB)
	pipeline, db := writeOrdersPipeline(t, work, "totals")
	f := newOrdersFeed(t, work)
	srv := startServerArgs(t, dir, "--storage-retry-interval", "200ms")
	id, sub := f.start(srv, pipeline)
	f.publish(srv, 0, 2000)
	waitCaughtUp(t, srv, id)

	// Fill the disk while messages keep coming (or while the job reads the
	// backlog): the store fails.
	n := 2000
	if publishFirst {
		f.publish(srv, n, 8000)
		n = 8000
	}
	filler := fillDisk(t, disk)
	faulted := await.Until(60*time.Second, 100*time.Millisecond, func() bool {
		m := srv.describe(id)
		if c, ok := m["condition"].(map[string]any); ok && c["code"] == "STORAGE_UNAVAILABLE" {
			return true
		}
		if n < 8000 {
			f.publish(srv, n, n+500)
			n += 500
		}
		return false
	})
	if !faulted {
		t.Fatalf("the store never failed on the full disk\nserver log:\n%s", srv.log())
	}
	m := srv.describe(id)
	if m["state"] != "RUNNING" {
		t.Fatalf("state %v on the full disk, want RUNNING", m["state"])
	}
	// Wait for the job's execution to have stopped, then the two readings
	// must not move while the disk stays full.
	if !await.Until(30*time.Second, 100*time.Millisecond, func() bool {
		return strings.Contains(srv.log(), "job stopped: the state store failed")
	}) {
		t.Fatalf("the job's execution did not stop\nserver log:\n%s", srv.log())
	}
	floor, rows := f.ackFloor(srv, sub), tableTotal(t, db)
	if !await.Until(30*time.Second, 50*time.Millisecond, func() bool {
		return strings.Count(srv.log(), "the state store is still unavailable") >= 5
	}) {
		t.Fatalf("the server did not retry\nserver log:\n%s", srv.log())
	}
	if r := srv.cli(work, "jobs", "list"); r.code != ExitOK || !strings.Contains(r.stdout, "orders") {
		t.Errorf("jobs list on the full disk: %d %s %s", r.code, r.stdout, r.stderr)
	}
	t.Logf("store failed after %d messages published; at the fault: ack floor %v, table %s", n, floor, rows)
	if got := f.ackFloor(srv, sub); got != floor {
		t.Errorf("the subscription's acknowledgement moved from %v to %v while the store was failed", floor, got)
	}
	if got := tableTotal(t, db); got != rows {
		t.Errorf("the table changed from %v to %v while the store was failed", rows, got)
	}

	if publishFirst {
		// The broker shares the full disk: a publish now fails (and leaves
		// JetStream's stream refusing writes, as after any failed write).
		if r := f.tryPublish(srv, n, n+500); r.code == ExitOK {
			t.Fatalf("a publish to the full disk succeeded")
		} else {
			t.Logf("publish on the full disk: %d %s", r.code, strings.TrimSpace(r.stderr))
		}
	}

	// Room again: the job resumes by itself.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	// It resumes when the store writes again, or, when its broker shares
	// the disk and is still reloading then, once the broker answers
	// (CONNECTOR_UNAVAILABLE meanwhile, never FAILED).
	// A broker reloading its streams may take its own while (the source
	// asks for its subscription for up to 30 s per start): a longer wait
	// than waitJob's.
	if !await.Until(120*time.Second, 100*time.Millisecond, func() bool {
		m := srv.describe(id)
		l := srv.log()
		return m["state"] == "RUNNING" && m["condition"] == nil && (strings.Contains(l, "job resumed after the state store came back") ||
			strings.Contains(l, "the state store came back; the job waits for its connector") && strings.Contains(l, "the connectors answer again"))
	}) {
		t.Fatalf("the job did not resume without a restart: %v\nserver log:\n%s", srv.describe(id)["condition"], srv.log())
	}
	if publishFirst {
		// The broker shared the full disk: it accepts publishes again,
		// without a restart, within a few retry intervals.
		var last cliResult
		if !await.Until(60*time.Second, 50*time.Millisecond, func() bool {
			last = f.tryPublish(srv, n, n+500)
			return last.code == ExitOK
		}) {
			t.Fatalf("publishes still fail after the disk had room again: %d %s\nserver log:\n%s", last.code, last.stderr, srv.log())
		}
		n += 500
		if !strings.Contains(srv.log(), "the broker recovered from its storage failure") {
			t.Errorf("no log line of the broker's recovery\nserver log:\n%s", srv.log())
		}
	}
	for n < 8000 {
		f.publish(srv, n, n+500)
		n += 500
	}
	waitCaughtUp(t, srv, id)
	t.Logf("resumed; %d messages published in all; ack floor now %v", n, f.ackFloor(srv, sub))
	drainAndCheckTotals(t, srv, work, id, db, f.want, f.wantN)
	for _, l := range strings.Split(srv.log(), "\n") {
		if strings.Contains(l, "state store") && !strings.Contains(l, "still unavailable") {
			t.Log(l)
		}
	}
	srv.stop(syscall.SIGTERM)
}

// tableTotal returns the row count and the sum of total of the totals
// table in the SQLite file db ("" while the table does not exist).
func tableTotal(t *testing.T, db string) string {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var n, sum int64
	if err := conn.QueryRow(`SELECT count(*), coalesce(sum(total), 0) FROM totals`).Scan(&n, &sum); err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return ""
		}
		t.Fatal(err)
	}
	return fmt.Sprintf("%d rows, total %d", n, sum)
}

// writeOrdersPipeline writes ordersTotalsYAML, with its table in
// WORK/NAME.db, to WORK/NAME.yaml and returns the two paths.
func writeOrdersPipeline(t *testing.T, work, name string) (pipeline, db string) {
	t.Helper()
	db = filepath.Join(work, name+".db")
	pipeline = filepath.Join(work, name+".yaml")
	if err := os.WriteFile(pipeline, []byte(ordersTotalsYAML(db)), 0o644); err != nil {
		t.Fatal(err)
	}
	return pipeline, db
}

// ordersTotalsYAML is the pipeline of the fault tests: ReadFromPubSub →
// per-key sums in one-minute windows → WriteToSql upsert into SQLite db.
func ordersTotalsYAML(db string) string {
	return `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Orders
      config: {topic: orders, schema: {key: string, amount: int, ts: timestamp}, timestamp_field: ts, idle_timeout: 1h, max_out_of_orderness: 1s}
    - type: Combine
      name: Totals
      input: Orders
      windowing: {type: fixed, size: 1m}
      config:
        group_by: key
        combine: {total: {value: amount, fn: sum}, n: {value: amount, fn: count}}
    - type: WriteToSql
      name: Write
      input: Totals
      config: {dsn: "` + db + `", table: totals, key: [key]}
`
}

// ordersFeed publishes numbered orders to topic orders and keeps the
// ground truth of what it published: total and count per "key window".
type ordersFeed struct {
	t           *testing.T
	work        string
	want, wantN map[string]int64
}

func newOrdersFeed(t *testing.T, work string) *ordersFeed {
	return &ordersFeed{t: t, work: work, want: map[string]int64{}, wantN: map[string]int64{}}
}

// start creates the topic, runs the pipeline file as job "orders" and
// waits for its subscription; it returns the job's ID and subscription.
func (f *ordersFeed) start(srv *serverProc, pipeline string) (id, sub string) {
	t := f.t
	t.Helper()
	if r := srv.cli(f.work, "topics", "create", "orders"); r.code != ExitOK {
		t.Fatalf("topics create: %d %s", r.code, r.stderr)
	}
	r := srv.cli(f.work, "run", pipeline, "--job-name", "orders")
	if r.code != ExitOK {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	id = strings.TrimSpace(r.stdout)
	srv.waitJob(id, "RUNNING", stateIs("RUNNING"))
	// A subscription starts at the end of the topic: publish once it exists.
	sub = pubsub.SubscriptionName("orders", "Orders")
	if !await.Until(30*time.Second, 20*time.Millisecond, func() bool { return srv.cli(f.work, "subscriptions", "describe", sub).code == ExitOK }) {
		t.Fatalf("the job's subscription %s was not created\nserver log:\n%s", sub, srv.log())
	}
	return id, sub
}

// publish publishes orders from..to-1 (with --id-field: a retry is
// harmless) and adds them to the ground truth.
func (f *ordersFeed) publish(srv *serverProc, from, to int) {
	f.t.Helper()
	if r := f.tryPublish(srv, from, to); r.code != ExitOK {
		f.t.Fatalf("publish %d..%d: %d %s", from, to, r.code, r.stderr)
	}
}

// tryPublish publishes orders from..to-1 and, when the publish succeeded,
// adds them to the ground truth; it returns the CLI's result.
func (f *ordersFeed) tryPublish(srv *serverProc, from, to int) cliResult {
	t := f.t
	t.Helper()
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var b strings.Builder
	want, wantN := map[string]int64{}, map[string]int64{}
	for i := from; i < to; i++ {
		// Many keys, so that every checkpoint writes keyed state.
		k := fmt.Sprintf("k%d", i%97)
		ts := base.Add(time.Duration(i) * 100 * time.Millisecond)
		w := ts.Truncate(time.Minute).Format(time.RFC3339)
		want[k+" "+w] += int64(i)
		wantN[k+" "+w]++
		fmt.Fprintf(&b, `{"key": %q, "amount": %d, "ts": %q, "id": %d}`+"\n", k, i, ts.Format(time.RFC3339Nano), i)
	}
	path := filepath.Join(f.work, fmt.Sprintf("chunk-%d.jsonl", from))
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	r := srv.cli(f.work, "topics", "publish", "orders", "--file", path, "--id-field", "id")
	if r.code == ExitOK {
		for k, v := range want {
			f.want[k] += v
			f.wantN[k] += wantN[k]
		}
	}
	return r
}

// ackFloor returns the acknowledged position of subscription sub.
func (f *ordersFeed) ackFloor(srv *serverProc, sub string) float64 {
	t := f.t
	t.Helper()
	r := srv.cli(f.work, "subscriptions", "describe", sub, "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("subscriptions describe: %d %s", r.code, r.stderr)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("subscriptions describe: %v\n%s", err, r.stdout)
	}
	v, ok := m["ack_floor"].(float64)
	if !ok {
		t.Fatalf("subscriptions describe has no ack_floor: %s", r.stdout)
	}
	return v
}

// TestCLIServerSinkUnavailable: a real server's job ReadFromPubSub →
// windowed Combine → WriteToSql whose SQLite table refuses every write for
// a while (triggers raise, as a database that is down or full would): the
// job stays RUNNING with condition SINK_UNAVAILABLE, the subscription's
// acknowledgement and the table do not move across several retries; once
// the triggers are gone the job goes on by itself and after a drain the
// table equals the ground truth.
func TestCLIServerSinkUnavailable(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a server")
	}
	dir, work := t.TempDir(), t.TempDir()
	pipeline, db := writeOrdersPipeline(t, work, "totals")
	f := newOrdersFeed(t, work)
	srv := startServerArgs(t, dir, "--storage-retry-interval", "200ms")
	id, sub := f.start(srv, pipeline)
	f.publish(srv, 0, 2000)
	waitCaughtUp(t, srv, id)
	if tableTotal(t, db) == "" {
		t.Fatal("no rows committed before the fault")
	}
	conn, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(20000)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{
		`CREATE TRIGGER fail_insert BEFORE INSERT ON totals BEGIN SELECT RAISE(ABORT, 'injected fault'); END`,
		`CREATE TRIGGER fail_update BEFORE UPDATE ON totals BEGIN SELECT RAISE(ABORT, 'injected fault'); END`,
	} {
		if _, err := conn.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	n := 2000
	if !await.Until(60*time.Second, 100*time.Millisecond, func() bool {
		if c, ok := srv.describe(id)["condition"].(map[string]any); ok && c["code"] == "SINK_UNAVAILABLE" {
			return true
		}
		if n < 8000 {
			f.publish(srv, n, n+500)
			n += 500
		}
		return false
	}) {
		t.Fatalf("no SINK_UNAVAILABLE condition\nserver log:\n%s", srv.log())
	}
	floor, rows := f.ackFloor(srv, sub), tableTotal(t, db)
	retries := strings.Count(srv.log(), "a sink commit failed again")
	if !await.Until(60*time.Second, 50*time.Millisecond, func() bool {
		return strings.Count(srv.log(), "a sink commit failed again") >= retries+3
	}) {
		t.Fatalf("the commit was not retried\nserver log:\n%s", srv.log())
	}
	m := srv.describe(id)
	if m["state"] != "RUNNING" {
		t.Fatalf("state %v while the sink fails, want RUNNING", m["state"])
	}
	if got := f.ackFloor(srv, sub); got != floor {
		t.Errorf("the subscription's acknowledgement moved from %v to %v while the sink failed", floor, got)
	}
	if got := tableTotal(t, db); got != rows {
		t.Errorf("the table changed from %v to %v while its commits failed", rows, got)
	}
	t.Logf("sink failing after %d messages published: ack floor %v, table %s", n, floor, rows)
	for _, q := range []string{`DROP TRIGGER fail_insert`, `DROP TRIGGER fail_update`} {
		if _, err := conn.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	srv.waitJob(id, "the sink to accept again", func(m map[string]any) bool { return m["state"] == "RUNNING" && m["condition"] == nil })
	for n < 8000 {
		f.publish(srv, n, n+500)
		n += 500
	}
	waitCaughtUp(t, srv, id)
	t.Logf("the sink accepts again; %d messages published in all; ack floor now %v", n, f.ackFloor(srv, sub))
	drainAndCheckTotals(t, srv, work, id, db, f.want, f.wantN)
	srv.stop(syscall.SIGTERM)
}
