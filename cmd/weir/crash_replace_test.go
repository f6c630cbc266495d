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

// TestCLIServerCrashStopAndReplace kills the server with SIGKILL at a
// seeded random point of a stop-and-replace (weir_replace_rewind=false,
// same name) — while the request runs, while the old job drains, around
// the cut — restarts it, and checks that the flow completes: exactly one
// job of the name is active (the new one, CUT_OVER), and after the new
// job read later input and drained, every (key, window) total in the
// table equals the ground truth. Two seeded points run by default;
// WEIR_REPLACE_CRASH_POINTS=N runs N.
func TestCLIServerCrashStopAndReplace(t *testing.T) {
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
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { crashStopAndReplace(t, uint64(seed), false) })
	}
}

// TestCLIServerCrashStopAndReplaceRewind is the same for the default
// stop-and-replace, which re-reads retained input: the old job's last
// window is open at the cut ([1m, 2m), its watermark at 1m59s), more
// messages for it are published once the server is back, and the new job
// re-reads the topic from the window's first message — so the window's
// total in the table is the ground truth of all of them, however the
// crash fell (before the request was recorded, while the old job drained,
// between recording the rewind point, positioning the subscription and
// starting the new job). Two seeded points by default;
// WEIR_REPLACE_CRASH_POINTS=N runs N.
func TestCLIServerCrashStopAndReplaceRewind(t *testing.T) {
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
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { crashStopAndReplace(t, uint64(seed), true) })
	}
}

func crashStopAndReplace(t *testing.T, seed uint64, rewind bool) {
	rng := rand.New(rand.NewPCG(seed, 29))
	dir, work := t.TempDir(), t.TempDir()
	db := filepath.Join(work, "totals.db")
	pipeline := filepath.Join(work, "p.yaml")
	yaml := `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Orders
      config: {subscription: orders-sub, schema: {key: string, amount: int, ts: timestamp}, timestamp_field: ts, idle_timeout: 1h, max_out_of_orderness: 1s}
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
	// offset) and adds them to the ground truth.
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
	for _, args := range [][]string{{"topics", "create", "orders"}, {"subscriptions", "create", "orders-sub", "--topic", "orders", "--from-beginning"}} {
		if r := srv.cli(work, args...); r.code != ExitOK {
			t.Fatalf("%v: %d %s", args, r.code, r.stderr)
		}
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
	// The replacement, with the server killed at a seeded point while it
	// runs or soon after.
	opts := "update_strategy_parallel_job_update,parallel_replace_job_max_stop_duration=5m"
	if !rewind {
		opts += ",weir_replace_rewind=false"
	}
	replace := []string{"run", pipeline, "--job-name", "orders", "--update", "--no-wait", "--request-id", "replace-1",
		"--service-options", opts}
	done := make(chan cliResult, 1)
	go func() { done <- srv.cli(work, replace...) }()
	window := 400
	if rewind {
		window = 200 // the re-reading flow's phases, packed closer to the request
	}
	<-time.After(time.Duration(rng.IntN(window)) * time.Millisecond) // the crash point, on purpose a delay
	srv.stop(syscall.SIGKILL)
	first := <-done
	srv = start()
	if rewind {
		// Into the window that was open at the cut, read by the old job,
		// the new one, or both.
		if r := srv.cli(work, "topics", "publish", "orders", "--file", chunk(5000, 5300, time.Minute), "--id-field", "id"); r.code != ExitOK {
			t.Fatalf("publish: %d %s", r.code, r.stderr)
		}
	}
	m := srv.describe("orders")
	if rep, ok := m["replacement"].(map[string]any); ok {
		t.Logf("crash point: the flow was in phase %v (new job %v), old job %v", rep["phase"], m["state"], srv.describe(oldID)["state"])
	} else {
		t.Logf("crash point: before the replacement was recorded (first attempt exit %d)", first.code)
	}
	if m["id"] == oldID {
		// The request had not reached the store: send it again (the same
		// request ID answers the first outcome if it had).
		if r := srv.cli(work, replace...); r.code != ExitOK {
			t.Fatalf("the replacement after the restart: %d %s (first attempt: %d %s)", r.code, r.stderr, first.code, first.stderr)
		}
	}
	fin := srv.waitJob("orders", "the cut-over", func(m map[string]any) bool {
		rep, _ := m["replacement"].(map[string]any)
		return rep != nil && (rep["phase"] == "CUT_OVER" || rep["phase"] == "FAILED") && m["state"] != "PENDING"
	})
	rep := fin["replacement"].(map[string]any)
	if rep["phase"] != "CUT_OVER" || fin["state"] != "RUNNING" {
		t.Fatalf("after the restart the flow ended %v, job %v (%v)", rep["phase"], fin["state"], fin["error"])
	}
	if rp, _ := rep["rewind_point"].(map[string]any); rewind != (rp != nil) {
		t.Fatalf("rewind %v, but the record's rewind point is %v", rewind, rep["rewind_point"])
	}
	newID := fin["id"].(string)
	if old := srv.describe(oldID); old["state"] != "DRAINED" || old["replaced_by_job_id"] != newID {
		t.Fatalf("old job: %v replaced by %v", old["state"], old["replaced_by_job_id"])
	}
	active := srv.cli(work, "jobs", "list", "--status", "active", "--format", "json")
	if n := strings.Count(active.stdout, `"id"`); n != 1 || !strings.Contains(active.stdout, newID) {
		t.Fatalf("active jobs after the flow (want only %s):\n%s", newID, active.stdout)
	}
	// Later input goes to the new job; then drain it: every window fires.
	if r := srv.cli(work, "topics", "publish", "orders", "--file", chunk(1200, 2400, 10*time.Minute), "--id-field", "id"); r.code != ExitOK {
		t.Fatalf("publish: %d %s", r.code, r.stderr)
	}
	waitCaughtUp(t, srv, newID)
	drainAndCheckTotals(t, srv, work, newID, db, want, wantN)
	srv.stop(syscall.SIGTERM)
}
