package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

const updateV1 = `pipeline:
  transforms:
    - type: Generate
      name: Events
      config: {rate: 500, keys: 3, spacing: 1s}
    - type: Combine
      name: Sums
      input: Events
      windowing: {type: fixed, size: 1h}
      config:
        group_by: [key]
        combine: {total: {value: amount, fn: sum}}
    - type: WriteToSql
      name: Write
      input: Sums
      config: {dsn: totals.sqlite, table: totals, key: [key]}
`

// TestCLIUpdate drives `weir run --update` against a real server: a
// refused update (rename without a mapping) leaves the job running and
// exits 6 with the report and a fix; --validate-only with the mapping
// reports compatible and changes nothing; the real update replaces the job
// (UPDATED → new RUNNING job, generation 2); history shows the lineage and
// the refused attempt; updating again by the old lineage works on the new job.
func TestCLIUpdate(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a server")
	}
	dir := t.TempDir()
	p := startServer(t, filepath.Join(dir, "data"))
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	v1 := write("v1.yaml", updateV1)
	renamed := write("v2.yaml", strings.ReplaceAll(updateV1, "Sums", "Totals"))
	r := p.cli(dir, "run", v1, "--job-name", "totals", "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("submit: exit %d: %s", r.code, r.stderr)
	}
	var sub struct{ ID string }
	if err := json.Unmarshal([]byte(r.stdout), &sub); err != nil {
		t.Fatal(err)
	}
	p.waitJob(sub.ID, "a checkpoint", epochAtLeast(2))

	r = p.cli(dir, "run", renamed, "--job-name", "totals", "--update")
	if r.code != ExitIncompatible {
		t.Fatalf("rename without mapping: exit %d, want %d\n%s%s", r.code, ExitIncompatible, r.stdout, r.stderr)
	}
	for _, want := range []string{"STEP_MISSING", "Sums", `--transform-name-mapping '{"Sums":"Totals"}'`} {
		if !strings.Contains(r.stdout+r.stderr, want) {
			t.Errorf("refusal does not mention %q:\n%s%s", want, r.stdout, r.stderr)
		}
	}
	if m := p.describe("totals"); m["id"] != sub.ID || m["state"] != "RUNNING" {
		t.Fatalf("after a refused update the job is %v %v", m["id"], m["state"])
	}

	r = p.cli(dir, "run", renamed, "--job-name", "totals", "--update", "--validate-only", "--transform-name-mapping", `{"Sums":"Totals"}`, "--format", "json")
	if r.code != ExitOK || !strings.Contains(r.stdout, `"compatible": true`) {
		t.Fatalf("validate-only: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if m := p.describe("totals"); m["id"] != sub.ID {
		t.Fatalf("validate-only replaced the job")
	}
	// --validate-only carries the plan: the state renamed, with the keys
	// the running job holds.
	var vo struct {
		Plan *struct {
			Steps []struct {
				Old, New, Action string
				Keys             *int64
				OpenWindows      *int64 `json:"open_windows"`
			}
			KeysFrom string `json:"keys_from"`
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &vo); err != nil || vo.Plan == nil || len(vo.Plan.Steps) != 1 {
		t.Fatalf("validate-only plan: %v\n%s%s", err, r.stdout, r.stderr)
	}
	if st := vo.Plan.Steps[0]; st.Old != "Sums" || st.New != "Totals" || st.Action != "renamed" || st.Keys == nil || *st.Keys < 1 || st.OpenWindows == nil || *st.OpenWindows < 1 || !strings.Contains(vo.Plan.KeysFrom, sub.ID) {
		t.Errorf("validate-only plan step: %+v (keys from %q)", st, vo.Plan.KeysFrom)
	}
	// weir plan against the running job: the same, for people; without
	// the mapping, refused (exit 6) naming the fix.
	r = p.cli(dir, "plan", "totals", renamed, "--transform-name-mapping", `{"Sums":"Totals"}`)
	if r.code != ExitOK || !strings.Contains(r.stdout, "renamed   Sums → Totals") || !strings.Contains(r.stdout, " open windows]") || !strings.Contains(r.stdout, "continues at the running job's read position") {
		t.Fatalf("plan: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = p.cli(dir, "plan", "totals", renamed)
	if r.code != ExitIncompatible || !strings.Contains(r.stdout, "STEP_MISSING") || !strings.Contains(r.stdout, `--transform-name-mapping '{"Sums":"Totals"}'`) {
		t.Fatalf("plan without the mapping: exit %d, want %d\n%s%s", r.code, ExitIncompatible, r.stdout, r.stderr)
	}
	if m := p.describe("totals"); m["id"] != sub.ID || m["state"] != "RUNNING" {
		t.Fatalf("after weir plan the job is %v %v", m["id"], m["state"])
	}

	r = p.cli(dir, "run", renamed, "--job-name", "totals", "--update", "--transform-name-mapping", `{"Sums":"Totals"}`, "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("update: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var upd struct {
		ID            string `json:"id"`
		ReplacesJobID string `json:"replaces_job_id"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &upd); err != nil || upd.ID == "" || upd.ReplacesJobID != sub.ID {
		t.Fatalf("update output: %v\n%s", err, r.stdout)
	}
	old := p.describe(sub.ID)
	if old["state"] != "UPDATED" || old["replaced_by_job_id"] != upd.ID {
		t.Fatalf("old job: %v replaced by %v", old["state"], old["replaced_by_job_id"])
	}
	nj := p.waitJob(upd.ID, "RUNNING", stateIs("RUNNING"))
	if nj["replaces_job_id"] != sub.ID || nj["generation"] != float64(2) {
		t.Fatalf("new job: replaces %v generation %v", nj["replaces_job_id"], nj["generation"])
	}
	r = p.cli(dir, "jobs", "update-options", "totals", "--num-workers", "2", "--format", "json")
	if r.code != ExitOK || !strings.Contains(r.stdout, upd.ID) {
		t.Fatalf("rescale: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stderr, "autoscaling") {
		t.Errorf("a rescale without autoscaling options notes autoscaling:\n%s", r.stderr)
	}
	// The autoscaling range and target are the job's options now (the
	// server's autoscaler scales within them); the JSON stays one record.
	r = p.cli(dir, "jobs", "update-options", "totals", "--num-workers", "2", "--max-num-workers", "8", "--worker-utilization-hint", "0.7", "--format", "json")
	var rescaled map[string]any
	if r.code != ExitOK || json.Unmarshal([]byte(r.stdout), &rescaled) != nil || rescaled["id"] != upd.ID {
		t.Fatalf("rescale with autoscaling options: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if opts, _ := p.describe("totals")["options"].(map[string]any); opts["max_num_workers"] != float64(8) || opts["worker_utilization_hint"] != 0.7 {
		t.Errorf("options after update-options: %v, want max_num_workers 8 and worker_utilization_hint 0.7", opts)
	}
	if opts, _ := rescaled["options"].(map[string]any); opts["num_workers"] != float64(2) || opts["max_num_workers"] != float64(8) {
		t.Errorf("update-options answered options %v, want num_workers 2 and max_num_workers 8", rescaled["options"])
	}
	// A new minimum over the count moves the count to it (a rescale), and
	// the command prints the options the job has now.
	r = p.cli(dir, "jobs", "update-options", "totals", "--min-num-workers", "3")
	if want := "num_workers=3 min_num_workers=3 max_num_workers=8 worker_utilization_hint=0.7"; r.code != ExitOK || !strings.Contains(r.stdout, want) {
		t.Errorf("update-options --min-num-workers 3: exit %d, output %q, want %q\n%s", r.code, r.stdout, want, r.stderr)
	}
	if m := p.describe("totals"); m["id"] != upd.ID || m["state"] != "RUNNING" {
		t.Fatalf("after rescale: %v %v", m["id"], m["state"])
	}
	r = p.cli(dir, "jobs", "history", "totals")
	if r.code != ExitOK || !strings.Contains(r.stdout, sub.ID) || !strings.Contains(r.stdout, upd.ID) || !strings.Contains(r.stdout, "refused") {
		t.Fatalf("history: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = p.cli(dir, "jobs", "drain", "totals")
	if r.code != ExitOK {
		t.Fatalf("drain: %d %s", r.code, r.stderr)
	}
	p.waitJob(upd.ID, "DRAINED", stateIs("DRAINED"))
	r = p.cli(dir, "run", renamed, "--job-name", "totals", "--update")
	if r.code == ExitOK || !strings.Contains(r.stderr, "has already been updated") && !strings.Contains(r.stderr, "no running job named totals") {
		t.Errorf("update of a drained lineage: exit %d %s", r.code, r.stderr)
	}
}

// TestCLIBenchUpdate runs `weir bench update` at a tiny size: both jobs
// (a YAML job in the job service, a Go SDK pipeline) and both modes run in
// child processes and report a pause; the SDK runs verify their totals, the
// YAML runs report the baseline gap beside the pause and count the steady
// load their publisher process (--publisher process) published.
func TestCLIBenchUpdate(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs benchmark children")
	}
	r := runCLI(t, "", "bench", "update", "--keys", "5000", "--rate", "20000", "--steady", "300ms", "--publisher", "process", "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var runs []struct {
		Mode       string  `json:"mode"`
		Server     bool    `json:"server"`
		Keys       int64   `json:"keys"`
		PauseMS    float64 `json:"pause_ms"`
		BaselineMS float64 `json:"baseline_gap_ms"`
		Verified   bool    `json:"verified"`
		PeakRSS    int64   `json:"peak_rss_bytes"`
		Elements   int64   `json:"elements"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &runs); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	want := []struct {
		mode   string
		server bool
	}{{"update", true}, {"restore", true}, {"update", false}, {"restore", false}}
	if len(runs) != len(want) {
		t.Fatalf("runs: %+v", runs)
	}
	for i, run := range runs {
		if run.Mode != want[i].mode || run.Server != want[i].server || run.PauseMS <= 0 || run.Keys != 5000 || run.PeakRSS <= 0 {
			t.Errorf("run %d: %+v", i, run)
		}
		if run.Server && run.BaselineMS <= 0 {
			t.Errorf("run %d (YAML job): no baseline gap: %+v", i, run)
		}
		if run.Server && run.Elements <= run.Keys {
			t.Errorf("run %d (YAML job): the publisher process published nothing of the steady load: %+v", i, run)
		}
		if !run.Server && !run.Verified {
			t.Errorf("run %d (SDK pipeline): totals not verified: %+v", i, run)
		}
	}
}

const crashUpdateV1 = `pipeline:
  transforms:
    - type: Generate
      name: Events
      config: {count: 8000, rate: 2000, keys: 5, spacing: 1s, seed: 3}
%s    - type: Combine
      name: Sums
      input: %s
      windowing: {type: fixed, size: 1h}
      config:
        group_by: [key]
        combine: {total: {value: amount, fn: sum}, n: {value: amount, fn: count}}
    - type: WriteToSql
      name: Write
      input: Sums
      config: {dsn: %s, table: totals, key: [key]}
`

func crashPipeline(db string, filter bool) string {
	if filter {
		return fmt.Sprintf(crashUpdateV1, "    - type: Filter\n      name: Keep\n      input: Events\n      config: {keep: \"amount >= 0\"}\n", "Keep", db)
	}
	return fmt.Sprintf(crashUpdateV1, "", "Events", db)
}

func sqlRows(t *testing.T, db string) string {
	t.Helper()
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(`SELECT key, window_start, total, n FROM totals ORDER BY key, window_start`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var k, w string
		var total, n int64
		if err := rows.Scan(&k, &w, &total, &n); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s %d %d\n", k, w, total, n)
	}
	return b.String()
}

// TestCLIUpdateCrash kills the server with SIGKILL while an update is in
// flight, at a different moment each round, restarts it, and checks that
// at most one job of the name is active (none when the restarted server
// has already finished it) and that the finished job's table equals a run
// without update or crash: nothing lost, nothing twice.
func TestCLIUpdateCrash(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts servers")
	}
	for round, delay := range []time.Duration{0, 40 * time.Millisecond, 150 * time.Millisecond} {
		t.Run(fmt.Sprintf("kill-after-%s", delay), func(t *testing.T) {
			dir := t.TempDir()
			oracleDB := filepath.Join(dir, "oracle.sqlite")
			if err := os.WriteFile(filepath.Join(dir, "oracle.yaml"), []byte(crashPipeline(oracleDB, false)), 0o644); err != nil {
				t.Fatal(err)
			}
			if r := runCLI(t, dir, "run", "oracle.yaml"); r.code != ExitOK {
				t.Fatalf("oracle run: %d %s", r.code, r.stderr)
			}
			want := sqlRows(t, oracleDB)
			db := filepath.Join(dir, "job.sqlite")
			for name, filter := range map[string]bool{"v1.yaml": false, "v2.yaml": true} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(crashPipeline(db, filter)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			data := filepath.Join(dir, "data")
			p := startServer(t, data)
			if r := p.cli(dir, "run", "v1.yaml", "--job-name", "crash"); r.code != ExitOK {
				t.Fatalf("submit: %d %s", r.code, r.stderr)
			}
			p.waitJob("crash", "a checkpoint", epochAtLeast(float64(3+round)))
			update := make(chan cliResult, 1)
			go func() {
				update <- runCLI(t, dir, "run", "v2.yaml", "--job-name", "crash", "--update", "--server", p.url)
			}()
			// Kill the server delay after the update started: a delay on
			// purpose, since what is under test is a crash at that point of
			// the handover, whatever the update was doing then.
			<-time.After(delay)
			p.stop(syscall.SIGKILL)
			<-update
			p = startServer(t, data)
			r := p.cli(dir, "jobs", "list", "--status", "active", "--format", "json")
			var active []map[string]any
			if err := json.Unmarshal([]byte(r.stdout), &active); err != nil || len(active) > 1 {
				t.Fatalf("active jobs after the crash: %v %s", err, r.stdout)
			}
			// The job of the name that runs on: the one active job, or, when
			// the restarted server finished it before the list (a loaded
			// machine: the job runs 4 s), the name's newest job, DONE.
			id := "crash"
			if len(active) == 1 {
				id, _ = active[0]["id"].(string)
			}
			p.waitJob(id, "DONE", func(m map[string]any) bool {
				return m["state"] == "DONE" && m["pending_commit"] != true || m["state"] == "FAILED"
			})
			if got := sqlRows(t, db); got != want {
				t.Errorf("table after update and crash:\n%s\nwithout:\n%s", got, want)
			}
		})
	}
}

// TestCLIPubSubNeedsServer: a Pub/Sub pipeline run in-process says it needs
// a server (exit 4), while graph, check and --validate-only inspect it
// without one.
func TestCLIPubSubNeedsServer(t *testing.T) {
	dir := t.TempDir()
	src := `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Orders
      config: {topic: orders, schema: {key: string, amount: int}}
    - type: WriteToPubSub
      name: Out
      input: Orders
      config: {topic: copy}
`
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, dir, "run", "p.yaml"); r.code != ExitNeedsServer || !strings.Contains(r.stderr, "weir server") {
		t.Errorf("run: exit %d %s", r.code, r.stderr)
	}
	for _, args := range [][]string{{"graph", "p.yaml"}, {"run", "p.yaml", "--validate-only"}, {"check", "p.yaml", "p.yaml"}} {
		if r := runCLI(t, dir, args...); r.code != ExitOK {
			t.Errorf("%v: exit %d %s", args, r.code, r.stderr)
		}
	}
}
