package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCLIParallelReplaceWait: `weir run --update --wait` with a Dataflow
// user's parallel-replacement options (and weir_replace_rewind=false)
// follows the flow through a real
// server — PREPARING, OVERLAP with its progress line, DRAINING_OLD,
// CUT_OVER — and exits 0 at the cut-over, the new job the name's only
// active job and the view holding every total.
func TestCLIParallelReplaceWait(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a server")
	}
	dir, work := t.TempDir(), t.TempDir()
	db := filepath.Join(work, "totals.db")
	pipeline := writeTestFile(t, work, "p.yaml", totalsPipeline("topic: orders", "", "", "", db))
	in := newCrashInput(t, work, 5)
	chunk := func(from, to int) string { return in.chunk(from, to, time.Duration(from)*100*time.Millisecond) }
	srv := startServerArgs(t, dir, "--min-replace-interval", "0s")
	srv.mustCLI(t, work, "topics", "create", "orders")
	oldID := strings.TrimSpace(srv.mustCLI(t, work, "run", pipeline, "--job-name", "orders").stdout)
	srv.publish(t, work, chunk(0, 1200))
	waitCaughtUp(t, srv, oldID)
	done := make(chan cliResult, 1)
	go func() {
		done <- srv.cli(work, "run", pipeline, "--job-name", "orders", "--update", "--wait",
			"--dataflow_service_options=update_strategy_parallel_job_update,parallel_replace_job_min_parallel_pipelines_duration=0s,weir_replace_rewind=false")
	}()
	// Input that moves the old job's watermark past the cut-over window
	// (weir_replace_rewind=false: the overlap lasts until it has, so the
	// progress line is printed meanwhile).
	srv.waitJob("orders", "the overlap", func(m map[string]any) bool {
		rep, _ := m["replacement"].(map[string]any)
		return rep != nil && rep["phase"] != "PREPARING"
	})
	srv.publish(t, work, chunk(1200, 3600))
	res := <-done
	if res.code != ExitOK {
		t.Fatalf("run --wait: exit %d\nstderr:\n%s", res.code, res.stderr)
	}
	for _, s := range []string{"(parallel): OVERLAP", "parallel: overlap", "the cut-over needs", "(parallel): CUT_OVER"} {
		if !strings.Contains(res.stderr, s) {
			t.Errorf("run --wait's stderr lacks %q:\n%s", s, res.stderr)
		}
	}
	t.Logf("run --wait printed:\n%s", res.stderr)
	m := srv.describe("orders")
	newID, _ := m["id"].(string)
	if newID == oldID || m["state"] != "RUNNING" {
		t.Fatalf("the name's job after the cut-over: %v %v", newID, m["state"])
	}
	if old := srv.describe(oldID); old["state"] != "DRAINED" {
		t.Fatalf("old job %v", old["state"])
	}
	waitCaughtUp(t, srv, newID)
	drainAndCheckTotals(t, srv, work, newID, db, in.want, in.wantN)
	srv.stop(syscall.SIGTERM)
}
