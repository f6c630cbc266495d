package main

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCLIServerCrashStopAndReplaceSliding kills the server with SIGKILL at
// a seeded random point of a re-reading stop-and-replace (the default,
// same name) whose pipelines count in sliding windows (2m every 1m) with
// an accumulating early trigger (every 7 elements), 30 messages a second
// of event time and a checkpoint every 10ms (so the new job's re-read
// spans several of its commits). At the cut the old
// job's watermark is ~2m29s, so the rewind point skips the windows that
// start before 1m (the window [0, 2m) had expired with its complete total
// in the table) and the new job holds its early panes until it has read
// the old job's last message (else the catch-up's partial panes would
// overwrite the old job's newer totals). Messages into the open windows
// are published once the server is back. Wherever the kill falls (before
// the request is recorded, while the old job drains, between recording
// the rewind point, positioning the subscription and starting the new
// job), after the restart the flow completes: exactly one job of the name
// is active (the new one, CUT_OVER), the old one DRAINED, the record's
// skip_before is 1m, and after the new job read later input and drained,
// every (key, window) total in the table equals the ground truth, and a
// consumer polling the table meanwhile never saw a total go backwards. Two
// seeded points by default; WEIR_REPLACE_CRASH_POINTS=N runs N.
func TestCLIServerCrashStopAndReplaceSliding(t *testing.T) {
	t.Parallel()
	forEachCrashPoint(t, "WEIR_REPLACE_CRASH_POINTS", crashReplaceSliding)
}

func crashReplaceSliding(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 41))
	dir, work := t.TempDir(), t.TempDir()
	db := filepath.Join(work, "totals.db")
	const windowing = "{type: sliding, size: 2m, period: 1m, accumulation_mode: accumulating, trigger: {type: after_watermark, early: {type: after_count, count: 7}}}"
	pipeline := writeTestFile(t, work, "p.yaml", totalsPipeline("subscription: orders-sub", "", "", windowing, db))
	in := newCrashInput(t, work, 5)
	in.windows = slidingWindows(2*time.Minute, time.Minute)
	start := func() *serverProc {
		return startServerArgs(t, dir, "--min-replace-interval", "0s", "--checkpoint-interval", "10ms")
	}
	stopWatch := watchTotals(t, db)
	srv := start()
	srv.mustCLI(t, work, "topics", "create", "orders")
	srv.mustCLI(t, work, "subscriptions", "create", "orders-sub", "--topic", "orders", "--from-beginning")
	oldID := strings.TrimSpace(srv.mustCLI(t, work, "run", pipeline, "--job-name", "orders").stdout)
	// Event time 0-150s, 30 messages a second: the re-read of the windows
	// open at the cut (from 1m) spans several of the new job's checkpoints,
	// so a partial pane of the catch-up would reach the table.
	in.per = 3
	srv.publish(t, work, in.chunk(0, 4500, 0))
	in.per = 1
	waitCaughtUp(t, srv, oldID)
	replace := []string{"run", pipeline, "--job-name", "orders", "--update", "--no-wait", "--request-id", "sliding-1",
		"--service-options", "update_strategy_parallel_job_update,parallel_replace_job_max_stop_duration=5m"}
	done := make(chan cliResult, 1)
	go func() { done <- srv.cli(work, replace...) }()
	delay := time.Duration(rng.IntN(200)) * time.Millisecond
	<-time.After(delay) // the crash point, on purpose a delay
	before := "no replacement yet"
	if m := srv.describe("orders"); m["id"] != oldID {
		if rep, ok := m["replacement"].(map[string]any); ok {
			before = fmt.Sprint(rep["phase"])
		}
	}
	srv.stop(syscall.SIGKILL)
	t.Logf("killed %s after the request with the flow in phase %s (read just before the kill)", delay, before)
	first := <-done
	srv = start()
	// Into the windows open at the cut ([1m, 3m) and [2m, 4m)), read by
	// the old job, the new one, or both; none before skip_before.
	srv.publish(t, work, in.chunk(6000, 6300, 150*time.Second))
	m := srv.describe("orders")
	if rep, ok := m["replacement"].(map[string]any); ok {
		t.Logf("after the restart: the flow is in phase %v (new job %v), old job %v", rep["phase"], m["state"], srv.describe(oldID)["state"])
	} else {
		t.Logf("after the restart: no replacement recorded (first attempt exit %d)", first.code)
	}
	if m["id"] == oldID {
		// The request had not reached the store: send it again (the same
		// request ID answers the first outcome if it had).
		if r := srv.cli(work, replace...); r.code != ExitOK {
			t.Fatalf("the replacement after the restart: %d %s (first attempt: %d %s)", r.code, r.stderr, first.code, first.stderr)
		}
	}
	fin := srv.waitFlowEnd("orders")
	newID := checkCutOver(t, srv, work, fin, oldID)
	rp, _ := fin["replacement"].(map[string]any)["rewind_point"].(map[string]any)
	skip, _ := time.Parse(time.RFC3339Nano, fmtAny(rp["skip_before"]))
	if want := in.base.Add(time.Minute); !skip.Equal(want) {
		t.Fatalf("the rewind point %v: want skip_before %s (the windows open at the cut start at 1m and 2m)", rp, want.Format(time.RFC3339))
	}
	// Later input goes to the new job; then drain it: every window fires.
	srv.publish(t, work, in.chunk(7000, 8200, 10*time.Minute))
	waitCaughtUp(t, srv, newID)
	drainAndCheckTotals(t, srv, work, newID, db, in.want, in.wantN)
	if back := stopWatch(); len(back) > 0 {
		t.Errorf("a consumer polling the table saw totals go backwards:\n%s", strings.Join(back, "\n"))
	}
	srv.stop(syscall.SIGTERM)
}

// fmtAny is s if v is the string s, "" otherwise.
func fmtAny(v any) string {
	s, _ := v.(string)
	return s
}
