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
	t.Parallel()
	forEachCrashPoint(t, "WEIR_PARALLEL_CRASH_POINTS", func(t *testing.T, seed uint64) { crashParallelReplace(t, seed, false) })
}

// TestCLIServerCrashParallelReplaceNamed is the same for pipelines that
// read a named subscription (orders-sub) rather than a topic: the new job
// gets a subscription of its own on orders-sub's topic, positioned from
// the old job's, while the old job goes on reading orders-sub. Wherever
// the kill falls, after the restart the flow completes, exactly one job of
// the name is active and the view's totals equal the ground truth; the
// named subscription is still there; a consumer polling the view
// meanwhile never saw a total go backwards. Two seeded points by default;
// WEIR_PARALLEL_CRASH_POINTS=N runs N.
func TestCLIServerCrashParallelReplaceNamed(t *testing.T) {
	t.Parallel()
	forEachCrashPoint(t, "WEIR_PARALLEL_CRASH_POINTS", func(t *testing.T, seed uint64) { crashParallelReplace(t, seed, true) })
}

func crashParallelReplace(t *testing.T, seed uint64, named bool) {
	rng := rand.New(rand.NewPCG(seed, 31))
	dir, work := t.TempDir(), t.TempDir()
	db := filepath.Join(work, "totals.db")
	from := "topic: orders"
	if named {
		from = "subscription: orders-sub"
	}
	pipeline := writeTestFile(t, work, "p.yaml", totalsPipeline(from, "", "", "", db))
	in := newCrashInput(t, work, 5)
	// chunk puts message i at base+i×100ms.
	chunk := func(from, to int) string { return in.chunk(from, to, time.Duration(from)*100*time.Millisecond) }
	start := func() *serverProc { return startServerArgs(t, dir, "--min-replace-interval", "0s") }
	var stopWatch func() []string
	if named {
		stopWatch = watchTotals(t, db)
	}
	srv := start()
	srv.mustCLI(t, work, "topics", "create", "orders")
	if named {
		srv.mustCLI(t, work, "subscriptions", "create", "orders-sub", "--topic", "orders", "--from-beginning")
	}
	oldID := strings.TrimSpace(srv.mustCLI(t, work, "run", pipeline, "--job-name", "orders").stdout)
	srv.publish(t, work, chunk(0, 1200)) // event time 0-120s
	waitCaughtUp(t, srv, oldID)
	// The replacement, and input that moves it on (both jobs read it; the
	// old job's watermark passes the cut-over window, so it is drained),
	// with the server killed at a seeded point meanwhile.
	opts := "update_strategy_parallel_job_update,parallel_replace_job_min_parallel_pipelines_duration=0s,parallel_replace_job_max_stop_duration=5m"
	rewind := seed%2 == 0
	if !rewind {
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
		t.Logf("rewind %v; crash point: the flow was in phase %v (new job %v), old job %v", rewind, rep["phase"], m["state"], srv.describe(oldID)["state"])
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
		srv.publish(t, work, c)
	}
	// And more: should the cut-over time have been taken after the old job
	// read all of c2 (a request sent again after the restart), the old
	// watermark must still pass the cut-over window.
	srv.publish(t, work, chunk(3600, 4800)) // 360-480s
	newID := checkCutOver(t, srv, work, srv.waitFlowEnd("orders"), oldID)
	if named {
		if r := srv.cli(work, "subscriptions", "describe", "orders-sub"); r.code != ExitOK {
			t.Fatalf("the named subscription orders-sub after the flow: %d %s", r.code, r.stderr)
		}
		t.Logf("subscriptions after the flow:\n%s", srv.cli(work, "subscriptions", "list").stdout)
	}
	// Later input goes to the new job; then drain it: every window fires.
	srv.publish(t, work, chunk(4800, 5400))
	waitCaughtUp(t, srv, newID)
	drainAndCheckTotals(t, srv, work, newID, db, in.want, in.wantN)
	if named {
		if back := stopWatch(); len(back) > 0 {
			t.Errorf("a consumer polling the view saw totals go backwards:\n%s", strings.Join(back, "\n"))
		}
	}
	srv.stop(syscall.SIGTERM)
}
