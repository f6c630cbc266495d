package main

import (
	"database/sql"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/cmd/weir/internal/diffcmd"
)

// TestCLIParallelParityGatePostgres: a parity-gated parallel replacement
// (weir_cutover_gate=parity) through a real server process, its sink a
// PostgreSQL table behind the façade. A wrong new pipeline (max instead of
// sum) never agrees: the gate aborts at its deadline, run --wait fails
// naming it, the old job keeps serving as the name's job, and no row of
// the wrong job's generation was ever visible through the view (polled
// all through). An equivalent pipeline then cuts over, and a drain leaves
// the view holding every total exactly.
func TestCLIParallelParityGatePostgres(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a server")
	}
	dsn := postgresDSN(t)
	if dsn == "" {
		t.Skip("no PostgreSQL")
	}
	table := fmt.Sprintf("gate_%d", time.Now().UnixNano())
	dropPostgresTables(t, dsn, table)
	dir, work := t.TempDir(), t.TempDir()
	sums := strings.Replace(totalsPipeline("topic: orders", "", "", "", dsn), "table: totals", "driver: postgres, table: "+table, 1)
	maxes := strings.Replace(sums, "total: {value: amount, fn: sum}", "total: {value: amount, fn: max}", 1)
	if maxes == sums {
		t.Fatal("the wrong pipeline is the same as the right one")
	}
	pipeline, wrong := writeTestFile(t, work, "sums.yaml", sums), writeTestFile(t, work, "maxes.yaml", maxes)
	in := newCrashInput(t, work, 5)
	chunk := func(from, to int) string { return in.chunk(from, to, time.Duration(from)*100*time.Millisecond) }
	srv := startServerArgs(t, dir, "--min-replace-interval", "0s")
	srv.mustCLI(t, work, "topics", "create", "orders")
	oldID := strings.TrimSpace(srv.mustCLI(t, work, "run", pipeline, "--job-name", "orders").stdout)
	srv.publish(t, work, chunk(0, 1200))
	waitCaughtUp(t, srv, oldID)
	oldGen, _ := srv.describe(oldID)["generation"].(float64)

	// A reader of the view, all through the wrong replacement.
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	type pollResult struct {
		bad        []string
		reads, got int
	}
	stop := make(chan struct{})
	polled := make(chan pollResult, 1)
	go func() {
		var r pollResult
		for {
			select {
			case <-stop:
				polled <- r
				return
			case <-time.After(50 * time.Millisecond):
			}
			rows, err := db.Query(`SELECT key, generation FROM ` + diffcmd.QuoteIdent(table))
			if err != nil {
				continue // the table becomes a view at the façade's creation
			}
			r.reads++
			for rows.Next() {
				var k string
				var g int64
				if rows.Scan(&k, &g) == nil {
					r.got++
					if float64(g) != oldGen {
						r.bad = append(r.bad, fmt.Sprintf("key %s of generation %d", k, g))
					}
				}
			}
			rows.Close()
		}
	}()
	gate := "--dataflow_service_options=update_strategy_parallel_job_update,parallel_replace_job_min_parallel_pipelines_duration=0s,weir_replace_rewind=false," +
		"weir_cutover_gate=parity,weir_parity_windows=2,weir_parity_deadline=20s"
	done := make(chan cliResult, 1)
	go func() { done <- srv.cli(work, "run", wrong, "--job-name", "orders", "--update", "--wait", gate) }()
	srv.waitJob("orders", "the overlap", func(m map[string]any) bool {
		rep, _ := m["replacement"].(map[string]any)
		return rep != nil && rep["phase"] != "PREPARING"
	})
	// Windows both jobs complete, for the gate to compare.
	srv.publish(t, work, chunk(1200, 3600))
	res := <-done
	close(stop)
	if r := <-polled; len(r.bad) > 0 || r.reads == 0 || r.got == 0 {
		t.Errorf("the view, read %d times (%d rows), showed rows of another generation than the old job's %v: %v", r.reads, r.got, oldGen, r.bad)
	} else {
		t.Logf("the view, read %d times during the wrong replacement, showed %d rows, all of generation %v", r.reads, r.got, oldGen)
	}
	if res.code == ExitOK || !strings.Contains(res.stderr, "parity gate aborted") {
		t.Fatalf("a wrong pipeline behind the parity gate: exit %d, want a failure naming the aborted gate\nstderr:\n%s", res.code, res.stderr)
	}
	if m := srv.describe("orders"); m["id"] != oldID || m["state"] != "RUNNING" {
		t.Fatalf("after the abort the name's job is %v %v, want the old %s RUNNING", m["id"], m["state"], oldID)
	}

	// The equivalent pipeline (the same, under the gate) cuts over.
	go func() { done <- srv.cli(work, "run", pipeline, "--job-name", "orders", "--update", "--wait", gate) }()
	srv.waitJob("orders", "the second overlap", func(m map[string]any) bool {
		rep, _ := m["replacement"].(map[string]any)
		return m["id"] != oldID || rep != nil && rep["phase"] == "OVERLAP"
	})
	srv.publish(t, work, chunk(3600, 6000))
	if res := <-done; res.code != ExitOK || !strings.Contains(res.stderr, "CUT_OVER") {
		t.Fatalf("an equivalent pipeline behind the parity gate: exit %d, want the cut-over\nstderr:\n%s", res.code, res.stderr)
	}
	m := srv.describe("orders")
	newID, _ := m["id"].(string)
	if newID == oldID || m["state"] != "RUNNING" {
		t.Fatalf("after the cut-over the name's job is %v %v", newID, m["state"])
	}
	waitCaughtUp(t, srv, newID)
	if r := srv.cli(work, "jobs", "drain", newID); r.code != ExitOK {
		t.Fatalf("drain: %d %s", r.code, r.stderr)
	}
	srv.waitJob(newID, "DRAINED", func(m map[string]any) bool {
		return m["state"] != "DRAINING" && m["state"] != "RUNNING" && m["pending_commit"] == nil
	})
	rows, err := db.Query(`SELECT key, window_start, total, n FROM ` + diffcmd.QuoteIdent(table))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]int64{}
	for rows.Next() {
		var k string
		var w time.Time
		var tot, n int64
		if err := rows.Scan(&k, &w, &tot, &n); err != nil {
			t.Fatal(err)
		}
		key := k + " " + w.UTC().Format(time.RFC3339)
		got[key] = tot
		if n != in.wantN[key] {
			t.Errorf("%s: n %d, want %d", key, n, in.wantN[key])
		}
	}
	if len(got) != len(in.want) {
		t.Errorf("%d rows in the view, want %d", len(got), len(in.want))
	}
	for k, w := range in.want {
		if got[k] != w {
			t.Errorf("%s: total %d, want %d", k, got[k], w)
		}
	}
	srv.stop(syscall.SIGTERM)
}
