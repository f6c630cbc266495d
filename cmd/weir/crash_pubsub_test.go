package main

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/io/pubsub"
)

// TestCLIServerCrashPubSubUpsert publishes a known stream to a topic while a
// job reads it (ReadFromPubSub → per-key sums in one-minute windows →
// WriteToSql upsert), kills the server with SIGKILL at random points three
// times, restarts it each time, then drains: the table's consumer-visible
// totals equal the ground truth exactly — nothing lost, nothing counted
// twice, whatever the crashes interrupted.
func TestCLIServerCrashPubSubUpsert(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	rng := rand.New(rand.NewPCG(11, 13))
	dir, work := t.TempDir(), t.TempDir()
	db := filepath.Join(work, "totals.db")
	pipeline := filepath.Join(work, "p.yaml")
	yaml := `pipeline:
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
	if err := os.WriteFile(pipeline, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	const total = 6000
	want := map[string]int64{}
	wantN := map[string]int64{}
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	chunk := func(from, to int) string {
		var b strings.Builder
		for i := from; i < to; i++ {
			k := fmt.Sprintf("k%d", i%7)
			w := base.Add(time.Duration(i) * 100 * time.Millisecond).Truncate(time.Minute).Format(time.RFC3339)
			want[k+" "+w] += int64(i)
			wantN[k+" "+w]++
			fmt.Fprintf(&b, `{"key": %q, "amount": %d, "ts": %q, "id": %d}`+"\n", k, i, base.Add(time.Duration(i)*100*time.Millisecond).Format(time.RFC3339Nano), i)
		}
		path := filepath.Join(work, fmt.Sprintf("chunk-%d.jsonl", from))
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	srv := startServer(t, dir)
	if r := srv.cli(work, "topics", "create", "orders"); r.code != ExitOK {
		t.Fatalf("topics create: %d %s", r.code, r.stderr)
	}
	r := srv.cli(work, "run", pipeline, "--job-name", "orders")
	if r.code != ExitOK {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	srv.waitJob(id, "RUNNING", stateIs("RUNNING"))
	// The source creates its subscription (named after the job and step)
	// when it opens; a subscription starts at the end of the topic, so
	// publish only once it exists.
	sub := pubsub.SubscriptionName("orders", "Orders")
	if !await.Until(30*time.Second, 20*time.Millisecond, func() bool { return srv.cli(work, "subscriptions", "describe", sub).code == ExitOK }) {
		t.Fatalf("the job's subscription %s was not created\nserver log:\n%s", sub, srv.log())
	}
	bounds := []int{0, 1500, 3000, 4500, total}
	for i := 0; i < len(bounds)-1; i++ {
		// --id-field makes a publish retried after a crash harmless.
		if r := srv.cli(work, "topics", "publish", "orders", "--file", chunk(bounds[i], bounds[i+1]), "--id-field", "id"); r.code != ExitOK {
			t.Fatalf("publish chunk %d: %d %s", i, r.code, r.stderr)
		}
		if i == len(bounds)-2 {
			break
		}
		// Kill at a random point in time: a delay on purpose, since the
		// behaviour under test is that a crash wherever it lands (reading,
		// checkpointing, committing) loses and duplicates nothing.
		<-time.After(time.Duration(50+rng.IntN(600)) * time.Millisecond)
		srv.stop(syscall.SIGKILL)
		srv = startServer(t, dir)
		srv.waitJob(id, "RUNNING after the restart", stateIs("RUNNING"))
	}
	// Let the job read everything, then drain: every window fires.
	waitCaughtUp(t, srv, id)
	drainAndCheckTotals(t, srv, work, id, db, want, wantN)
	srv.stop(syscall.SIGTERM)
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
