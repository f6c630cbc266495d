package main

import (
	"fmt"
	"os"
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
	if testing.Short() {
		t.Skip("starts a server")
	}
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
	want, wantN := map[string]int64{}, map[string]int64{}
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
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
	srv := startServerArgs(t, dir, "--min-replace-interval", "0s")
	if r := srv.cli(work, "topics", "create", "orders"); r.code != ExitOK {
		t.Fatalf("topics create: %d %s", r.code, r.stderr)
	}
	r := srv.cli(work, "run", pipeline, "--job-name", "orders")
	if r.code != ExitOK {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	oldID := strings.TrimSpace(r.stdout)
	if r := srv.cli(work, "topics", "publish", "orders", "--file", chunk(0, 1200), "--id-field", "id"); r.code != ExitOK {
		t.Fatalf("publish: %d %s", r.code, r.stderr)
	}
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
	if r := srv.cli(work, "topics", "publish", "orders", "--file", chunk(1200, 3600), "--id-field", "id"); r.code != ExitOK {
		t.Fatalf("publish: %d %s", r.code, r.stderr)
	}
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
	drainAndCheckTotals(t, srv, work, newID, db, want, wantN)
	srv.stop(syscall.SIGTERM)
}
