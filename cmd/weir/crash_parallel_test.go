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

// TestCLIServerCrashParallelReplace kills the server with SIGKILL at a
// seeded random point of a parallel replacement (the same name,
// min_parallel_pipelines_duration=0s; odd seeds weir_replace_rewind=false,
// even seeds the default re-read) — while the request
// runs, during the overlap, while the old job drains, around the cut-over
// — restarts it, and checks that the flow completes: exactly one job of
// the name is active (the new one, CUT_OVER), the old one DRAINED, and
// after the new job read later input and drained, every (key, window)
// total the view totals serves equals the ground truth. Two seeded points
// run by default; WEIR_PARALLEL_CRASH_POINTS=N runs N.
func TestCLIServerCrashParallelReplace(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	points := 2
	if v := os.Getenv("WEIR_PARALLEL_CRASH_POINTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("WEIR_PARALLEL_CRASH_POINTS=%q: want a positive number", v)
		}
		points = n
	}
	for seed := 1; seed <= points; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { crashParallelReplace(t, uint64(seed)) })
	}
}

func crashParallelReplace(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 31))
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
	// chunk writes events from..to (100ms of event time apart from base)
	// and adds them to the ground truth; message IDs make a republished
	// chunk count once.
	chunk := func(from, to int) string {
		var b strings.Builder
		for i := from; i < to; i++ {
			k := fmt.Sprintf("k%d", i%5)
			ts := base.Add(time.Duration(i) * 100 * time.Millisecond)
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
	c1 := chunk(0, 1200) // event time 0-120s
	if r := srv.cli(work, "topics", "publish", "orders", "--file", c1, "--id-field", "id"); r.code != ExitOK {
		t.Fatalf("publish: %d %s", r.code, r.stderr)
	}
	waitCaughtUp(t, srv, oldID)
	// The replacement, and input that moves it on (both jobs read it; the
	// old job's watermark passes the cut-over window, so it is drained),
	// with the server killed at a seeded point meanwhile.
	opts := "update_strategy_parallel_job_update,parallel_replace_job_min_parallel_pipelines_duration=0s,parallel_replace_job_max_stop_duration=5m"
	if seed%2 == 1 {
		opts += ",weir_replace_rewind=false"
	}
	replace := []string{"run", pipeline, "--job-name", "orders", "--update", "--no-wait", "--request-id", "parallel-1", "--service-options", opts}
	// 120-360s in four parts published one after the other, so that the
	// old watermark passes the cut-over window part way (the crash points
	// then spread over the phases).
	var c2 []string
	for from := 1200; from < 3600; from += 600 {
		c2 = append(c2, chunk(from, from+600))
	}
	done := make(chan cliResult, 1)
	go func() {
		res := srv.cli(work, replace...)
		for _, c := range c2 {
			if res.code != ExitOK || srv.cli(work, "topics", "publish", "orders", "--file", c, "--id-field", "id").code != ExitOK {
				break
			}
		}
		done <- res
	}()
	<-time.After(time.Duration(rng.IntN(200)) * time.Millisecond) // the crash point, on purpose a delay
	before := "no replacement yet"
	if m := srv.describe("orders"); m["id"] != oldID {
		if rep, ok := m["replacement"].(map[string]any); ok {
			before = fmt.Sprint(rep["phase"])
		}
	}
	srv.stop(syscall.SIGKILL)
	t.Logf("killed with the flow in phase %s (read just before the kill)", before)
	first := <-done
	srv = start()
	m := srv.describe("orders")
	if rep, ok := m["replacement"].(map[string]any); ok && m["id"] != oldID {
		t.Logf("rewind %v; crash point: the flow was in phase %v (new job %v), old job %v", seed%2 == 0, rep["phase"], m["state"], srv.describe(oldID)["state"])
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
	// Published again: what reached the topic before the crash counts once.
	for _, c := range c2 {
		if r := srv.cli(work, "topics", "publish", "orders", "--file", c, "--id-field", "id"); r.code != ExitOK {
			t.Fatalf("publish: %d %s", r.code, r.stderr)
		}
	}
	// And more: should the cut-over time have been taken after the old job
	// read all of c2 (a request sent again after the restart), the old
	// watermark must still pass the cut-over window.
	if r := srv.cli(work, "topics", "publish", "orders", "--file", chunk(3600, 4800), "--id-field", "id"); r.code != ExitOK { // 360-480s
		t.Fatalf("publish: %d %s", r.code, r.stderr)
	}
	fin := srv.waitJob("orders", "the cut-over", func(m map[string]any) bool {
		rep, _ := m["replacement"].(map[string]any)
		return rep != nil && (rep["phase"] == "CUT_OVER" || rep["phase"] == "FAILED" || rep["phase"] == "ROLLED_BACK") && m["state"] != "PENDING"
	})
	if rep := fin["replacement"].(map[string]any); rep["phase"] != "CUT_OVER" || fin["state"] != "RUNNING" {
		t.Fatalf("after the restart the flow ended %v, job %v (%v)\nserver log:\n%s", rep["phase"], fin["state"], fin["error"], srv.log())
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
	if r := srv.cli(work, "topics", "publish", "orders", "--file", chunk(4800, 5400), "--id-field", "id"); r.code != ExitOK {
		t.Fatalf("publish: %d %s", r.code, r.stderr)
	}
	waitCaughtUp(t, srv, newID)
	drainAndCheckTotals(t, srv, work, newID, db, want, wantN)
	srv.stop(syscall.SIGTERM)
}
