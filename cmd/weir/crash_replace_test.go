package main

import (
	"math/rand/v2"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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
	t.Parallel()
	forEachCrashPoint(t, "WEIR_REPLACE_CRASH_POINTS", func(t *testing.T, seed uint64) { crashStopAndReplace(t, seed, false) })
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
	t.Parallel()
	forEachCrashPoint(t, "WEIR_REPLACE_CRASH_POINTS", func(t *testing.T, seed uint64) { crashStopAndReplace(t, seed, true) })
}

func crashStopAndReplace(t *testing.T, seed uint64, rewind bool) {
	rng := rand.New(rand.NewPCG(seed, 29))
	dir, work := t.TempDir(), t.TempDir()
	db := filepath.Join(work, "totals.db")
	pipeline := writeTestFile(t, work, "p.yaml", totalsPipeline("subscription: orders-sub", "", "", "", db))
	in := newCrashInput(t, work, 5)
	start := func() *serverProc { return startServerArgs(t, dir, "--min-replace-interval", "0s") }
	srv := start()
	srv.mustCLI(t, work, "topics", "create", "orders")
	srv.mustCLI(t, work, "subscriptions", "create", "orders-sub", "--topic", "orders", "--from-beginning")
	oldID := strings.TrimSpace(srv.mustCLI(t, work, "run", pipeline, "--job-name", "orders").stdout)
	srv.publish(t, work, in.chunk(0, 1200, 0))
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
		srv.publish(t, work, in.chunk(5000, 5300, time.Minute))
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
	fin := srv.waitFlowEnd("orders")
	newID := checkCutOver(t, srv, work, fin, oldID)
	rep := fin["replacement"].(map[string]any)
	if rp, _ := rep["rewind_point"].(map[string]any); rewind != (rp != nil) {
		t.Fatalf("rewind %v, but the record's rewind point is %v", rewind, rep["rewind_point"])
	}
	// Later input goes to the new job; then drain it: every window fires.
	srv.publish(t, work, in.chunk(1200, 2400, 10*time.Minute))
	waitCaughtUp(t, srv, newID)
	drainAndCheckTotals(t, srv, work, newID, db, in.want, in.wantN)
	srv.stop(syscall.SIGTERM)
}
