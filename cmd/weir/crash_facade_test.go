package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/io/sqlsink"
)

// facadeRetention is the --rollback-retention of
// TestCLIServerCrashFacadeSweep's server when it kills in the sweep (even
// seeds): the rollback comes within it after the parallel cut-over
// (during the compaction wait) — after input the parallel job must read,
// which took more than 8 s once on a loaded machine (the suite beside two
// CPU burners and other tests: ROLLBACK_SNAPSHOT_EXPIRED), hence 15 s —
// and the façade sweep merges the
// generations once it has passed. Odd seeds kill within 300 ms of the
// rollback request, often before the server recorded it, and send it
// again after the restart: their retention (rollbackFlowRetention) must
// outlast a restart on a loaded machine, or the retried rollback is
// rightly refused (ROLLBACK_SNAPSHOT_EXPIRED).
const (
	facadeRetention       = 15 * time.Second
	rollbackFlowRetention = 30 * time.Second
)

// TestCLIServerCrashFacadeSweep kills the server with SIGKILL at a seeded
// random point after `weir jobs rollback` was sent during a parallel
// replacement's compaction wait (the cut-over done, the old generation
// still behind the view totals, --rollback-retention not yet passed):
// while the rollback request runs, while the parallel job drains, around
// the rollback's cut-over, or while the façade sweep (which compacts the
// view instead of the parallel flow's driver, stopped by the takeover)
// marks and merges the old generations. After the restart the rollback
// completes: exactly one job of the name is active (the rollback job,
// generation 3, CUT_OVER), the parallel job is DRAINED and replaced by it,
// the sweep leaves one generation (3) behind the view, and after the
// rollback job read later input and drained, every (key, window) total
// the view serves equals the ground truth; a consumer polling the view
// meanwhile never saw a total go backwards. Two seeded points by default;
// WEIR_FACADE_CRASH_POINTS=N runs N.
func TestCLIServerCrashFacadeSweep(t *testing.T) {
	t.Parallel()
	forEachCrashPoint(t, "WEIR_FACADE_CRASH_POINTS", crashFacadeSweep)
}

func crashFacadeSweep(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 43))
	ctx := context.Background()
	dir, work := t.TempDir(), t.TempDir()
	db := filepath.Join(work, "totals.db")
	pipeline := writeTestFile(t, work, "p.yaml", totalsPipeline("topic: orders", "", "", "", db))
	in := newCrashInput(t, work, 5)
	// chunk puts message i at base+i×100ms.
	chunk := func(from, to int) string { return in.chunk(from, to, time.Duration(from)*100*time.Millisecond) }
	retention := facadeRetention
	if seed%2 == 1 {
		retention = rollbackFlowRetention
	}
	start := func() *serverProc {
		return startServerArgs(t, dir, "--min-replace-interval", "0s", "--rollback-retention", retention.String())
	}
	generations := func() []sqlsink.FacadeGeneration {
		gens, err := sqlsink.FacadeGenerations(ctx, sqlsink.FacadeTarget{Driver: sqlsink.DriverSQLite, DSN: db, Table: "totals"})
		if err != nil {
			t.Fatalf("the façade view totals: %v", err)
		}
		return gens
	}
	stopWatch := watchTotals(t, db)
	srv := start()
	srv.mustCLI(t, work, "topics", "create", "orders")
	id1 := strings.TrimSpace(srv.mustCLI(t, work, "run", pipeline, "--job-name", "orders").stdout)
	srv.publish(t, work, chunk(0, 1200)) // event time 0-120s
	waitCaughtUp(t, srv, id1)
	// The parallel replacement, cut over by input that moves the old
	// job's watermark past the cut-over window.
	srv.mustCLI(t, work, "run", pipeline, "--job-name", "orders", "--update", "--no-wait", "--service-options",
		"update_strategy_parallel_job_update,parallel_replace_job_min_parallel_pipelines_duration=0s,weir_replace_rewind=false")
	srv.publish(t, work, chunk(1200, 3600)) // 120-360s
	fin := srv.waitFlowEnd("orders")
	id2 := checkCutOver(t, srv, work, fin, id1)
	if par, _ := fin["replacement"].(map[string]any)["parallel"].(map[string]any); par["compacted"] == true {
		t.Fatalf("the parallel flow compacted its view before the rollback: %v", par)
	}
	srv.publish(t, work, chunk(3600, 4200)) // 360-420s, read by the parallel job
	waitCaughtUp(t, srv, id2)
	// The rollback snapshot is copied after the cut-over: until it is
	// READY the server answers ROLLBACK_UNAVAILABLE.
	var vo cliResult
	if !await.Until(30*time.Second, 50*time.Millisecond, func() bool {
		vo = srv.cli(work, "jobs", "rollback", "orders", "--validate-only")
		return vo.code == ExitOK || !strings.Contains(vo.stderr, "ROLLBACK_UNAVAILABLE")
	}) || vo.code != ExitOK {
		t.Fatalf("validate-only rollback: %d %s", vo.code, vo.stderr)
	}
	rollback := []string{"jobs", "rollback", "orders", "--request-id", "rollback-1"}
	done := make(chan cliResult, 1)
	go func() { done <- srv.cli(work, rollback...) }()
	// Odd seeds kill in the rollback's flow (it cuts over within a few
	// hundred milliseconds), even seeds in the sweep after it: the
	// generations are marked ended, and merge once they ended the
	// retention ago (the sweep looks again every retention).
	delay := time.Duration(rng.IntN(300)) * time.Millisecond
	if seed%2 == 0 {
		delay = retention/2 + time.Duration(rng.Int64N(int64(2*retention)))
	}
	<-time.After(delay) // the crash point, on purpose a delay
	srv.stop(syscall.SIGKILL)
	first := <-done
	gensAtKill := generations()
	srv = start()
	m := srv.describe("orders")
	if rp, ok := m["replacement"].(map[string]any); ok && m["id"] != id2 {
		t.Logf("killed %s after the rollback request: rollback in phase %v (rollback job %v), parallel job %v; %d generations behind the view",
			delay.Round(time.Millisecond), rp["phase"], m["state"], srv.describe(id2)["state"], len(gensAtKill))
	} else {
		t.Logf("killed %s after the rollback request: before it was recorded (first attempt exit %d)", delay.Round(time.Millisecond), first.code)
		// The same request ID answers the first outcome if it had been.
		if r := srv.cli(work, rollback...); r.code != ExitOK {
			t.Fatalf("the rollback after the restart: %d %s (first attempt: %d %s)", r.code, r.stderr, first.code, first.stderr)
		}
	}
	fin = srv.waitFlowEnd("orders")
	if rp := fin["replacement"].(map[string]any); rp["strategy"] != "rollback" || fin["generation"] != float64(3) {
		t.Fatalf("after the restart the name's job is %v generation %v (%v)", rp, fin["generation"], fin["error"])
	}
	id3 := checkCutOver(t, srv, work, fin, id2)
	// The sweep leaves the rollback job's generation alone behind the view.
	var gens []sqlsink.FacadeGeneration
	if !await.Until(3*retention+30*time.Second, 100*time.Millisecond, func() bool {
		gens = generations()
		return len(gens) == 1
	}) || gens[0].Generation != 3 {
		t.Fatalf("façade generations after the retention: %+v, want the rollback job's (3) only\nserver log:\n%s", gens, srv.log())
	}
	srv.publish(t, work, chunk(4200, 4800)) // 420-480s
	waitCaughtUp(t, srv, id3)
	drainAndCheckTotals(t, srv, work, id3, db, in.want, in.wantN)
	if back := stopWatch(); len(back) > 0 {
		t.Errorf("a consumer polling the view saw totals go backwards:\n%s", strings.Join(back, "\n"))
	}
	if gens := generations(); len(gens) != 1 {
		t.Errorf("façade generations after the drain: %s", fmt.Sprint(gens))
	}
	srv.stop(syscall.SIGTERM)
}
