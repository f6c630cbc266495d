package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// TestCLIServerCrashStopAndReplaceNewName kills the server with SIGKILL at
// a seeded random point of a stop-and-replace under a new name (option 2:
// job orders-v2 replaces job orders) whose pipelines read a topic, so the
// new job reads a subscription of its own that the cut-over positions from
// the old job's, which is then deleted. Odd seeds continue from the old
// job's position (weir_replace_rewind=false), even seeds re-read from the
// rewind point (the window open at the cut gets more messages once the
// server is back). The kill falls while the request runs, while the old
// job drains, or around the cut (positioning, deleting the old
// subscription, starting the new job). After the restart the flow
// completes: exactly one job is active (the new one, CUT_OVER), the old
// one is DRAINED, its subscription orders--Orders is gone and the new
// one's is there, and after the new job read later input and drained,
// every (key, window) total in the table equals the ground truth. Two
// seeded points run by default; WEIR_REPLACE_CRASH_POINTS=N runs N.
func TestCLIServerCrashStopAndReplaceNewName(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	points := 2
	if v := os.Getenv("WEIR_REPLACE_CRASH_POINTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("WEIR_REPLACE_CRASH_POINTS=%q: want a positive number", v)
		}
		points = n
	}
	for seed := 1; seed <= points; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { crashHandover(t, uint64(seed)) })
	}
}

func crashHandover(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 37))
	rewind := seed%2 == 0
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
	want := map[string]int64{}
	wantN := map[string]int64{}
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	// chunk writes events from..to (100ms of event time apart, starting at
	// offset) and adds them to the ground truth; message IDs make a
	// republished chunk count once.
	chunk := func(from, to int, offset time.Duration) string {
		var b strings.Builder
		for i := from; i < to; i++ {
			k := fmt.Sprintf("k%d", i%5)
			ts := base.Add(offset + time.Duration(i-from)*100*time.Millisecond)
			w := ts.Truncate(time.Minute).Format(time.RFC3339)
			want[k+" "+w] += int64(i)
			wantN[k+" "+w]++
			fmt.Fprintf(&b, `{"key": %q, "amount": %d, "ts": %q, "id": %d}`+"\n", k, i, ts.Format(time.RFC3339Nano), i)
		}
		path := filepath.Join(work, fmt.Sprintf("chunk-%d.jsonl", from))
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	start := func() *serverProc { return startServerArgs(t, dir, "--min-replace-interval", "0s") }
	srv := start()
	if r := srv.cli(work, "topics", "create", "orders"); r.code != ExitOK {
		t.Fatalf("topics create: %d %s", r.code, r.stderr)
	}
	r := srv.cli(work, "run", pipeline, "--job-name", "orders")
	if r.code != ExitOK {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	oldID := strings.TrimSpace(r.stdout)
	if r := srv.cli(work, "topics", "publish", "orders", "--file", chunk(0, 1200, 0), "--id-field", "id"); r.code != ExitOK {
		t.Fatalf("publish: %d %s", r.code, r.stderr)
	}
	waitCaughtUp(t, srv, oldID)
	// The replacement under a new name, with the server killed at a
	// seeded point while it runs or soon after.
	opts := "parallel_replace_job_name=orders,parallel_replace_job_max_stop_duration=5m"
	if !rewind {
		opts += ",weir_replace_rewind=false"
	}
	replace := []string{"run", pipeline, "--job-name", "orders-v2", "--no-wait", "--request-id", "handover-1", "--service-options", opts}
	done := make(chan cliResult, 1)
	go func() { done <- srv.cli(work, replace...) }()
	// The flow under a new name is short (a drain of a caught-up job, a
	// cut-over): the points spread over the first 150ms.
	delay := time.Duration(rng.IntN(150)) * time.Millisecond
	<-time.After(delay) // the crash point, on purpose a delay
	srv.stop(syscall.SIGKILL)
	t.Logf("killed %s after the request was sent", delay)
	first := <-done
	srv = start()
	if rewind {
		// Into the window that was open at the cut, read by the old job,
		// the new one, or both.
		if r := srv.cli(work, "topics", "publish", "orders", "--file", chunk(5000, 5300, time.Minute), "--id-field", "id"); r.code != ExitOK {
			t.Fatalf("publish: %d %s", r.code, r.stderr)
		}
	}
	if r := srv.cli(work, "jobs", "describe", "orders-v2", "--format", "json"); r.code != ExitOK {
		// The request had not reached the store: send it again (the same
		// request ID answers the first outcome if it had).
		t.Logf("crash point: before the replacement was recorded (first attempt exit %d)", first.code)
		if r := srv.cli(work, replace...); r.code != ExitOK {
			t.Fatalf("the replacement after the restart: %d %s (first attempt: %d %s)", r.code, r.stderr, first.code, first.stderr)
		}
	} else {
		m := srv.describe("orders-v2")
		rep, _ := m["replacement"].(map[string]any)
		t.Logf("rewind %v; crash point: the flow was in phase %v (new job %v), old job %v", rewind, rep["phase"], m["state"], srv.describe(oldID)["state"])
	}
	fin := srv.waitJob("orders-v2", "the cut-over", func(m map[string]any) bool {
		rep, _ := m["replacement"].(map[string]any)
		return rep != nil && (rep["phase"] == "CUT_OVER" || rep["phase"] == "FAILED") && m["state"] != "PENDING"
	})
	rep := fin["replacement"].(map[string]any)
	if rep["phase"] != "CUT_OVER" || fin["state"] != "RUNNING" {
		t.Fatalf("after the restart the flow ended %v, job %v (%v)\nserver log:\n%s", rep["phase"], fin["state"], fin["error"], srv.log())
	}
	if rp, _ := rep["rewind_point"].(map[string]any); rewind != (rp != nil) {
		t.Fatalf("rewind %v, but the record's rewind point is %v", rewind, rep["rewind_point"])
	}
	hs, _ := rep["handover_subscriptions"].([]any)
	if h, _ := firstOf(hs).(map[string]any); len(hs) != 1 || h["old"] != "orders--Orders" || h["new"] != "orders-v2--Orders" || h["old_deleted"] != true {
		t.Fatalf("handover record %v, want orders--Orders handed over to orders-v2--Orders and deleted", rep["handover_subscriptions"])
	}
	newID := fin["id"].(string)
	if old := srv.describe(oldID); old["state"] != "DRAINED" || old["replaced_by_job_id"] != newID {
		t.Fatalf("old job: %v replaced by %v", old["state"], old["replaced_by_job_id"])
	}
	active := srv.cli(work, "jobs", "list", "--status", "active", "--format", "json")
	if n := strings.Count(active.stdout, `"id"`); n != 1 || !strings.Contains(active.stdout, newID) {
		t.Fatalf("active jobs after the flow (want only %s):\n%s", newID, active.stdout)
	}
	// The old job's subscription, which the service created, is gone; the
	// new job's is there.
	if r := srv.cli(work, "subscriptions", "describe", "orders--Orders"); r.code == ExitOK {
		t.Fatalf("the old job's subscription orders--Orders is still there after the cut-over:\n%s", r.stdout)
	}
	if r := srv.cli(work, "subscriptions", "describe", "orders-v2--Orders"); r.code != ExitOK {
		t.Fatalf("the new job's subscription orders-v2--Orders: %d %s", r.code, r.stderr)
	}
	// Later input goes to the new job; then drain it: every window fires.
	if r := srv.cli(work, "topics", "publish", "orders", "--file", chunk(1200, 2400, 10*time.Minute), "--id-field", "id"); r.code != ExitOK {
		t.Fatalf("publish: %d %s", r.code, r.stderr)
	}
	waitCaughtUp(t, srv, newID)
	drainAndCheckTotals(t, srv, work, newID, db, want, wantN)
	srv.stop(syscall.SIGTERM)
}

// firstOf returns the first element of xs, nil if none.
func firstOf(xs []any) any {
	if len(xs) == 0 {
		return nil
	}
	return xs[0]
}
