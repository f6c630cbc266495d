package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// audit10Pipeline writes a Pub/Sub → per-key 1-minute sums → SQLite upsert
// pipeline keyed by keys (a YAML flow list of fields) to dir/name.
func audit10Pipeline(t *testing.T, dir, name, db, keys string) string {
	t.Helper()
	yaml := `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Orders
      config: {topic: orders, schema: {key: string, region: string, amount: int, ts: timestamp}, timestamp_field: ts, idle_timeout: 1h, max_out_of_orderness: 1s}
    - type: Combine
      name: Totals
      input: Orders
      windowing: {type: fixed, size: 1m}
      config:
        group_by: ` + keys + `
        combine: {total: {value: amount, fn: sum}}
    - type: WriteToSql
      name: Write
      input: Totals
      config: {dsn: "` + db + `", table: totals, key: ` + keys + `}
`
	return writeTestFile(t, dir, name, yaml)
}

// audit10Job is what the prologue most audit10 tests share leaves behind:
// a server with topic orders and the v1 totals pipeline running as job
// orders.
type audit10Job struct {
	srv *serverProc
	// dir is the server's data directory (for a restart), work the CLI's
	// working directory, db the SQLite file v1 writes and v1 its pipeline.
	dir, work, db, v1 string
	// oldID is the ID of job orders as `weir run` printed it.
	oldID string
}

// startAudit10Job skips the test under -short, starts a server with
// serverArgs, creates topic orders and runs audit10Pipeline's v1 (totals
// per key into work/totals.db) as job orders with runArgs, failing the
// test unless each step exits 0.
func startAudit10Job(t *testing.T, serverArgs []string, runArgs ...string) *audit10Job {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a server")
	}
	a := &audit10Job{dir: t.TempDir(), work: t.TempDir()}
	a.db = filepath.Join(a.work, "totals.db")
	a.v1 = audit10Pipeline(t, a.work, "v1.yaml", a.db, "[key]")
	a.srv = startServerArgs(t, a.dir, serverArgs...)
	if r := a.srv.cli(a.work, "topics", "create", "orders"); r.code != ExitOK {
		t.Fatalf("topics create: %d %s", r.code, r.stderr)
	}
	r := a.srv.cli(a.work, append([]string{"run", a.v1, "--job-name", "orders"}, runArgs...)...)
	if r.code != ExitOK {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	a.oldID = strings.TrimSpace(r.stdout)
	return a
}

// TestCLIParallelNewKeyOnOldTableRefused: a parallel replacement whose new
// pipeline keys its rows by a column the old job's plain table lacks
// cannot put that table behind a façade view. Issue 10 checks every rule
// before anything changes, so the request is refused with
// REPLACEMENT_UNAVAILABLE (exit 1) and the old job keeps running alone.
// Before, the flow cut over and the new job stalled at its first commit
// (SINK_UNAVAILABLE, FAILED after a restart) with the old job drained:
// nobody wrote the table any more.
func TestCLIParallelNewKeyOnOldTableRefused(t *testing.T) {
	t.Parallel()
	a := startAudit10Job(t, []string{"--min-replace-interval", "0s"})
	srv, work, db, oldID := a.srv, a.work, a.db, a.oldID
	v2 := audit10Pipeline(t, work, "v2.yaml", db, "[key, region]")
	var b strings.Builder
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for i := range 300 {
		fmt.Fprintf(&b, `{"key": "k%d", "region": "r%d", "amount": %d, "ts": %q, "id": %d}`+"\n", i%3, i%2, i, base.Add(time.Duration(i)*time.Second).Format(time.RFC3339), i)
	}
	srv.publish(t, work, writeTestFile(t, work, "in.jsonl", b.String()))
	waitCaughtUp(t, srv, oldID)
	for _, opts := range []string{
		"update_strategy_parallel_job_update,parallel_replace_job_min_parallel_pipelines_duration=0s",
		"update_strategy_parallel_job_update,parallel_replace_job_min_parallel_pipelines_duration=0s,weir_replace_rewind=false",
	} {
		r := srv.cli(work, "run", v2, "--job-name", "orders", "--update", "--wait", "--dataflow_service_options="+opts)
		if r.code != ExitFailure || !strings.Contains(r.stderr, "REPLACEMENT_UNAVAILABLE") || !strings.Contains(r.stderr, "no column region") {
			t.Fatalf("%s: exit %d, want 1 with REPLACEMENT_UNAVAILABLE naming column region:\n%s", opts, r.code, r.stderr)
		}
	}
	m := srv.describe("orders")
	if m["id"] != oldID || m["state"] != "RUNNING" || m["replaced_by_job_id"] != nil {
		t.Fatalf("after the refusal the name's job is %v %v (replaced by %v), want %s RUNNING", m["id"], m["state"], m["replaced_by_job_id"], oldID)
	}
	if r := srv.cli(work, "jobs", "list", "--status", "all", "--format", "json"); strings.Count(r.stdout, `"id"`) != 1 {
		t.Fatalf("jobs after the refusal:\n%s", r.stdout)
	}
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var kind string
	if err := conn.QueryRow(`SELECT type FROM sqlite_master WHERE name = 'totals'`).Scan(&kind); err != nil || kind != "table" {
		t.Fatalf("totals is %q (%v), want the plain table, untouched", kind, err)
	}
}

// TestCLIInPlaceIgnoredOptionsNoteOnce: update_strategy_in_place_update
// with parallel options says once that the in-place update ignores them
// (the CLI printed the server's note and its own copy).
func TestCLIInPlaceIgnoredOptionsNoteOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	dir := t.TempDir()
	p := startServer(t, filepath.Join(dir, "data"))
	pipe := testdata(t, "stream_windows.yaml")
	if r := p.cli(dir, "run", pipe, "--job-name", "sums"); r.code != ExitOK {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	for _, extra := range [][]string{{"--validate-only"}, nil} {
		args := append([]string{"run", pipe, "--job-name", "sums", "--update",
			"--service_options", "update_strategy_in_place_update,parallel_replace_job_max_stop_duration=1m"}, extra...)
		r := p.cli(dir, args...)
		if r.code != ExitOK {
			t.Fatalf("%v: exit %d: %s", extra, r.code, r.stderr)
		}
		out := r.stdout + r.stderr
		if n := strings.Count(out, "the in-place update ignores parallel_replace_job_max_stop_duration"); n != 1 {
			t.Errorf("%v: the note is printed %d times, want once:\n%s", extra, n, out)
		}
	}
}

// TestCLIParallelAfterRestartWaitsQuietly: a parallel replacement of a job
// that has read nothing since the server restarted waits in PREPARING for
// its first message (T0 needs it). The wait took a subscription snapshot
// and deleted it again on every turn of the flow's driver, each waking
// the driver again: thousands a second in the broker and the log. Now
// nothing is taken until the old job has read, and the flow goes on once
// a message arrives.
func TestCLIParallelAfterRestartWaitsQuietly(t *testing.T) {
	t.Parallel()
	a := startAudit10Job(t, []string{"--min-replace-interval", "0s"})
	srv, work, v1, oldID := a.srv, a.work, a.v1, a.oldID
	msg := func(i int) string {
		line := fmt.Sprintf(`{"key": "k1", "region": "r1", "amount": %d, "ts": %q, "id": %d}`+"\n", i, time.Date(2026, 3, 1, 0, 0, i, 0, time.UTC).Format(time.RFC3339), i)
		return writeTestFile(t, work, fmt.Sprintf("m%d.jsonl", i), line)
	}
	srv.publish(t, work, msg(1))
	waitCaughtUp(t, srv, oldID)
	srv.stop(syscall.SIGTERM)
	srv = startServerArgs(t, a.dir, "--min-replace-interval", "0s")
	srv.waitJob(oldID, "resumed", func(m map[string]any) bool { return m["state"] == "RUNNING" })
	for _, opts := range []string{"", ",weir_replace_rewind=false"} {
		name := "orders-v2"
		if opts != "" {
			name = "orders-v3"
		}
		r := srv.cli(work, "run", v1, "--job-name", name, "--no-wait",
			"--dataflow_service_options=parallel_replace_job_id="+oldID+",parallel_replace_job_min_parallel_pipelines_duration=0s"+opts)
		if r.code != ExitOK {
			t.Fatalf("parallel replacement%s: exit %d: %s", opts, r.code, r.stderr)
		}
		// Some turns of the driver while it waits (each describe is a
		// request, and the flow's driver wakes on every record change).
		for range 20 {
			if m := srv.describe(name); m["replacement"].(map[string]any)["phase"] != "PREPARING" {
				t.Fatalf("%s left PREPARING before the old job read anything: %v", name, m["replacement"])
			}
		}
		if n := strings.Count(srv.log(), "subscription snapshot created"); n != 0 {
			t.Fatalf("%d subscription snapshots taken while job %s had read nothing since its restart, want none", n, oldID)
		}
		// Cancel it: the next round replaces the same old job.
		if r := srv.cli(work, "jobs", "cancel", name, "--wait"); r.code == ExitFailure && !strings.Contains(r.stderr, "CANCELLED") {
			t.Logf("cancel %s: %d %s", name, r.code, r.stderr)
		}
		srv.waitJob(oldID, "kept", func(m map[string]any) bool { return m["state"] == "RUNNING" && m["replaced_by_job_id"] == nil })
	}
	// With a message the flow goes on.
	r := srv.cli(work, "run", v1, "--job-name", "orders-v4", "--no-wait",
		"--dataflow_service_options=parallel_replace_job_id="+oldID+",parallel_replace_job_min_parallel_pipelines_duration=0s")
	if r.code != ExitOK {
		t.Fatalf("parallel replacement: exit %d: %s", r.code, r.stderr)
	}
	srv.publish(t, work, msg(2))
	srv.waitJob("orders-v4", "past PREPARING", func(m map[string]any) bool {
		rep, _ := m["replacement"].(map[string]any)
		return rep != nil && rep["phase"] != "PREPARING"
	})
}

// TestCLIRollbackDuringOverlapWait: `weir jobs rollback NAME --wait` during
// a parallel overlap cancels the new job and keeps the old one; the flow
// ending ROLLED_BACK is what was asked for, so it exits 0, and its lines
// name the new job (they named the kept old job twice, and exited 1).
func TestCLIRollbackDuringOverlapWait(t *testing.T) {
	a := startAudit10Job(t, []string{"--min-replace-interval", "0s"})
	srv, work, v1, oldID := a.srv, a.work, a.v1, a.oldID
	srv.publish(t, work, writeTestFile(t, work, "in.jsonl", `{"key": "k1", "region": "r1", "amount": 5, "ts": "2026-03-01T00:00:01Z", "id": 1}`+"\n"))
	waitCaughtUp(t, srv, oldID)
	r := srv.cli(work, "run", v1, "--job-name", "orders", "--update", "--no-wait",
		"--service-options", "update_strategy_parallel_job_update,parallel_replace_job_min_parallel_pipelines_duration=744h")
	if r.code != ExitOK {
		t.Fatalf("parallel replacement: exit %d: %s", r.code, r.stderr)
	}
	newID := strings.TrimSpace(r.stdout)
	srv.waitJob(newID, "the overlap", func(m map[string]any) bool {
		rep, _ := m["replacement"].(map[string]any)
		return rep != nil && rep["phase"] == "OVERLAP"
	})
	r = srv.cli(work, "jobs", "rollback", "orders", "--wait")
	if r.code != ExitOK {
		t.Fatalf("rollback --wait during the overlap: exit %d, want 0\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if want := "replacement of job " + oldID + " by job " + newID + " (parallel): ROLLED_BACK"; !strings.Contains(r.stderr, want) {
		t.Errorf("rollback --wait printed\n%s\nwant a line %q", r.stderr, want)
	}
	if m := srv.describe("orders"); m["id"] != oldID || m["state"] != "RUNNING" {
		t.Fatalf("after the rollback the name's job is %v %v, want %s RUNNING", m["id"], m["state"], oldID)
	}
	if m := srv.describe(newID); m["state"] != "CANCELLED" {
		t.Fatalf("the new job is %v, want CANCELLED", m["state"])
	}
	// The text form says which flow the job is in and its phase.
	r = srv.cli(work, "jobs", "describe", "orders")
	if want := "parallel of job " + oldID + " by job " + newID + ": ROLLED_BACK since"; r.code != ExitOK || !strings.Contains(r.stdout, want) {
		t.Errorf("jobs describe orders: exit %d, lacks %q:\n%s", r.code, want, r.stdout)
	}
}

// TestCLISQLPipelineRefusalsExit3: what is wrong with a WriteToSql step is
// an invalid pipeline (exit 3) whether the CLI or the server finds it: a
// PostgreSQL table name over 63 bytes (the server's refusal exited 2, the
// usage code, while --validate-only said 3), and a PostgreSQL URL given
// as the dsn of the default sqlite driver (which wrote a SQLite file named
// after the URL under ./postgres:/).
func TestCLISQLPipelineRefusalsExit3(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	dir, work := t.TempDir(), t.TempDir()
	srv := startServerArgs(t, dir)
	const pg = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	cases := []struct {
		name, sink, want string
	}{
		{"long-name", `driver: postgres, dsn: "` + pg + `", table: ` + strings.Repeat("t", 64), "PostgreSQL keeps at most 63 bytes"},
		{"url-as-sqlite", `dsn: "` + pg + `", table: totals`, "add driver: postgres"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(work, c.name+".yaml")
			yaml := `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Orders
      config: {topic: orders, schema: {key: string, amount: int, ts: timestamp}, timestamp_field: ts}
    - type: Combine
      name: Totals
      input: Orders
      windowing: {type: fixed, size: 1m}
      config: {group_by: key, combine: {total: {value: amount, fn: sum}}}
    - type: WriteToSql
      name: Write
      input: Totals
      config: {` + c.sink + `, key: [key]}
`
			if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"--validate-only"}, {"--job-name", c.name}} {
				r := srv.cli(work, append([]string{"run", path}, args...)...)
				if r.code != ExitInvalidPipeline || !strings.Contains(r.stderr, c.want) {
					t.Errorf("run %v: exit %d, want %d with %q:\n%s", args, r.code, ExitInvalidPipeline, c.want, r.stderr)
				}
			}
			if _, err := os.Stat(filepath.Join(work, "postgres:")); err == nil {
				t.Errorf("a directory postgres: was created in %s", work)
			}
		})
	}
}

// TestCLIReplaceBeforeFirstCheckpoint: a replacement under a new name
// (exempt from the 2-minute rule) of a job that has taken no checkpoint
// yet is an ordinary replacement: nothing the old job read is
// acknowledged, so the new job reads from the subscription's floor. The
// re-read's check answered INTERNAL ("checkpoint ... not found").
func TestCLIReplaceBeforeFirstCheckpoint(t *testing.T) {
	// No periodic checkpoint within the test.
	a := startAudit10Job(t, []string{"--checkpoint-interval", "1h"}, "--no-wait")
	srv, work, v1, oldID := a.srv, a.work, a.v1, a.oldID
	if m := srv.describe(oldID); m["last_checkpoint"] != nil {
		t.Fatalf("job %s has a checkpoint already: %v", oldID, m["last_checkpoint"])
	}
	r := srv.cli(work, "run", v1, "--job-name", "orders-v2", "--wait",
		"--dataflow_service_options=parallel_replace_job_name=orders,parallel_replace_job_max_stop_duration=1m")
	if r.code != ExitOK || !strings.Contains(r.stderr, "CUT_OVER") {
		t.Fatalf("stop-and-replace of a job without a checkpoint: exit %d, want 0 at CUT_OVER:\n%s", r.code, r.stderr)
	}
	if m := srv.describe(oldID); m["state"] != "DRAINED" {
		t.Fatalf("old job %v, want DRAINED", m["state"])
	}
	// A rollback of a replacement under a new name is refused before
	// anything changes, saying where the old job's snapshot is.
	r = srv.cli(work, "jobs", "rollback", "orders-v2")
	if r.code != ExitFailure || !strings.Contains(r.stderr, "NO_ROLLBACK_SNAPSHOT") || !strings.Contains(r.stderr, "of another name, orders") ||
		!strings.Contains(r.stderr, "weir snapshots list --job-id orders") {
		t.Fatalf("rollback across names: exit %d: %s", r.code, r.stderr)
	}
	if m := srv.describe("orders-v2"); m["state"] != "RUNNING" || m["replacement"].(map[string]any)["phase"] != "CUT_OVER" {
		t.Fatalf("after the refused rollback orders-v2 is %v %v", m["state"], m["replacement"])
	}
	// Every suggested command exists.
	if r := srv.cli(work, "snapshots", "list", "--job-id", "orders"); r.code != ExitOK || !strings.Contains(r.stdout, "rollback") {
		t.Fatalf("snapshots list --job-id orders: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestCLIStopAndReplaceZeroMaxStopWait: parallel_replace_job_max_stop_duration=0s
// with cancel_on_drain_timeout=false keeps both jobs until the drain ends,
// and --wait's progress says "at most 0s" (it said "no maximum stop
// duration"), the note that both are kept, and CUT_OVER.
func TestCLIStopAndReplaceZeroMaxStopWait(t *testing.T) {
	a := startAudit10Job(t, []string{"--min-replace-interval", "0s"})
	srv, work, v1, oldID := a.srv, a.work, a.v1, a.oldID
	r := srv.cli(work, "run", v1, "--job-name", "orders", "--update", "--wait", "--service-options",
		"update_strategy_parallel_job_update,parallel_replace_job_max_stop_duration=0s,parallel_replace_job_cancel_on_drain_timeout=false")
	if r.code != ExitOK {
		t.Fatalf("stop-and-replace: exit %d: %s", r.code, r.stderr)
	}
	old := srv.describe(oldID)
	rep, _ := old["replacement"].(map[string]any)
	if old["state"] != "DRAINED" {
		t.Fatalf("old job %v, want DRAINED", old["state"])
	}
	wants := []string{"of at most 0s", "(stop_and_replace): CUT_OVER"}
	if rep["drain_timed_out"] == true {
		// The usual case; a drain finished before the flow's driver
		// looked at the clock does not time out.
		wants = append(wants, "both jobs are kept")
	}
	for _, want := range wants {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("--wait printed\n%s\nwithout %q", r.stderr, want)
		}
	}
	if strings.Contains(r.stderr, "no maximum stop duration") {
		t.Errorf("--wait printed\n%s\nclaiming no maximum stop duration", r.stderr)
	}
}

// TestAPISubmitNamesReplacement: POST /v1/jobs that starts a replacement
// (create_or_update_job with a running job and a strategy, or a new name
// with parallel_replace_job_name) answers the flow's strategy in
// `replacement`, as POST /v1/jobs:update does; it answered only
// {id, name, state: PENDING}.
func TestAPISubmitNamesReplacement(t *testing.T) {
	a := startAudit10Job(t, []string{"--min-replace-interval", "0s"})
	srv, work, v1 := a.srv, a.work, a.v1
	src, err := os.ReadFile(v1)
	if err != nil {
		t.Fatal(err)
	}
	post := func(name string, opts ...string) map[string]any {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"name": name, "pipeline": string(src), "base_dir": work, "options": map[string]any{}, "service_options": opts})
		resp, err := http.Post(srv.url+"/v1/jobs", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST /v1/jobs %s %v: %d %v (%v)", name, opts, resp.StatusCode, out, err)
		}
		return out
	}
	if out := post("orders", "create_or_update_job", "update_strategy_parallel_job_update", "parallel_replace_job_max_stop_duration=1m", "weir_replace_rewind=false"); out["replacement"] != "stop_and_replace" {
		t.Fatalf("create_or_update_job with a stop-and-replace answered %v", out)
	}
	srv.waitJob("orders", "the cut-over", func(m map[string]any) bool {
		rep, _ := m["replacement"].(map[string]any)
		return m["state"] == "RUNNING" && rep != nil && rep["phase"] == "CUT_OVER"
	})
	if out := post("orders-v2", "parallel_replace_job_name=orders", "parallel_replace_job_min_parallel_pipelines_duration=0s", "weir_replace_rewind=false"); out["replacement"] != "parallel" {
		t.Fatalf("a parallel replacement under a new name answered %v", out)
	}
}

// TestCLIIncompatibleUpdateHintsReplacement: an in-place update refused
// as incompatible (exit 6, the job untouched) says how to replace the job
// instead, the Dataflow way, and the suggested options are accepted.
func TestCLIIncompatibleUpdateHintsReplacement(t *testing.T) {
	a := startAudit10Job(t, []string{"--min-replace-interval", "0s"})
	srv, work, oldID := a.srv, a.work, a.oldID
	v2 := audit10Pipeline(t, work, "v2.yaml", filepath.Join(work, "totals2.db"), "[key, region]")
	r := srv.cli(work, "run", v2, "--job-name", "orders", "--update")
	const hint = "update_strategy_parallel_job_update,parallel_replace_job_max_stop_duration=5m"
	if r.code != ExitIncompatible || !strings.Contains(r.stderr, hint) {
		t.Fatalf("incompatible update: exit %d, want %d with a hint %q:\n%s", r.code, ExitIncompatible, hint, r.stderr)
	}
	if m := srv.describe("orders"); m["id"] != oldID || m["state"] != "RUNNING" {
		t.Fatalf("after the refusal: %v %v", m["id"], m["state"])
	}
	r = srv.cli(work, "run", v2, "--job-name", "orders", "--update", "--wait", "--service-options", hint+",weir_replace_rewind=false")
	if r.code != ExitOK || !strings.Contains(r.stderr, "CUT_OVER") {
		t.Fatalf("the hinted replacement: exit %d:\n%s", r.code, r.stderr)
	}
}
