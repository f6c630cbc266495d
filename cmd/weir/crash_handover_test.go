package main

import (
	"math/rand/v2"
	"path/filepath"
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
	t.Parallel()
	forEachCrashPoint(t, "WEIR_REPLACE_CRASH_POINTS", crashHandover)
}

func crashHandover(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 37))
	rewind := seed%2 == 0
	dir, work := t.TempDir(), t.TempDir()
	db := filepath.Join(work, "totals.db")
	pipeline := writeTestFile(t, work, "p.yaml", totalsPipeline("topic: orders", "", "", "", db))
	in := newCrashInput(t, work, 5)
	start := func() *serverProc { return startServerArgs(t, dir, "--min-replace-interval", "0s") }
	srv := start()
	srv.mustCLI(t, work, "topics", "create", "orders")
	oldID := strings.TrimSpace(srv.mustCLI(t, work, "run", pipeline, "--job-name", "orders").stdout)
	srv.publish(t, work, in.chunk(0, 1200, 0))
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
		srv.publish(t, work, in.chunk(5000, 5300, time.Minute))
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
	fin := srv.waitFlowEnd("orders-v2")
	newID := checkCutOver(t, srv, work, fin, oldID)
	rep := fin["replacement"].(map[string]any)
	if rp, _ := rep["rewind_point"].(map[string]any); rewind != (rp != nil) {
		t.Fatalf("rewind %v, but the record's rewind point is %v", rewind, rep["rewind_point"])
	}
	hs, _ := rep["handover_subscriptions"].([]any)
	if h, _ := firstOf(hs).(map[string]any); len(hs) != 1 || h["old"] != "orders--Orders" || h["new"] != "orders-v2--Orders" || h["old_deleted"] != true {
		t.Fatalf("handover record %v, want orders--Orders handed over to orders-v2--Orders and deleted", rep["handover_subscriptions"])
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
	srv.publish(t, work, in.chunk(1200, 2400, 10*time.Minute))
	waitCaughtUp(t, srv, newID)
	drainAndCheckTotals(t, srv, work, newID, db, in.want, in.wantN)
	srv.stop(syscall.SIGTERM)
}
