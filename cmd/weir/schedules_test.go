package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/cmd/weir/internal/diffcmd"
	"github.com/weir-dev/weir/internal/await"
)

// TestCLISchedules runs a schedule of daily partition runs on a real
// server: the partitions already due run in order and publish the
// reference fixture's totals (NORTH 425, WEST 100; UNKNOWN rejected);
// partitions whose files are not there wait; a switch runs the new
// version from the first open partition; a rollback returns to the old
// version at the first partition the new one had not published, leaving
// what it published alone; every partition is published exactly once.
func TestCLISchedules(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())
	work := t.TempDir()
	db := filepath.Join(work, "out.db")
	writeTestFile(t, work, "p.yaml", partitionPipeline(db))
	// Version 2 keeps each region's largest amount instead of the sum.
	writeTestFile(t, work, "max.yaml", strings.Replace(partitionPipeline(db), "fn: sum", "fn: max", 1))

	today := time.Now().UTC().Truncate(24 * time.Hour)
	day := func(back int) string { return today.AddDate(0, 0, -back).Format("2006-01-02") }
	d1, d2, d3, d4 := day(4), day(3), day(2), day(1)
	input := func(d string, lines ...string) {
		dir := filepath.Join(work, "in", d)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeTestFile(t, dir, "a.jsonl", strings.Join(lines, "\n")+"\n")
	}
	input(d1, `{"region": "NORTH", "amount": 250}`, `{"region": "WEST", "amount": 100}`, `{"region": "NORTH", "amount": 175}`, `{"region": "UNKNOWN", "amount": 50}`)
	input(d2, `{"region": "WEST", "amount": 7}`)

	r := srv.mustCLI(t, work, "schedules", "create", "sales", "--pipeline", "p.yaml", "--every", "24h", "--start", d1,
		"--files", "in/{partition}/*.jsonl", "--job-name", "sales-daily", "--retry-backoff", "1s")
	if !strings.Contains(r.stdout, "Created schedule sales: job sales-daily, every 24h0m0s, partitions {YYYY}-{MM}-{DD}; first partition "+d1) {
		t.Errorf("create: %s", r.stdout)
	}
	describe := func() *client.Schedule {
		t.Helper()
		var s client.Schedule
		out := srv.mustCLI(t, work, "schedules", "describe", "sales", "--format", "json").stdout
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatalf("describe --format json: %v\n%s", err, out)
		}
		return &s
	}
	status := func(s *client.Schedule) map[string]string {
		m := map[string]string{}
		for _, r := range s.Runs {
			m[r.Partition] = r.Status
		}
		return m
	}
	waitStatus := func(what string, want map[string]string) *client.Schedule {
		t.Helper()
		var s *client.Schedule
		if !await.Until(60*time.Second, 100*time.Millisecond, func() bool {
			s = describe()
			got := status(s)
			for p, st := range want {
				if got[p] != st {
					return false
				}
			}
			return true
		}) {
			t.Fatalf("%s: runs %v, want %v\n%s", what, status(s), want, srv.log())
		}
		return s
	}

	// d1 and d2 are due: both run, in order, and publish; d3 and d4 have
	// no files yet and wait.
	s := waitStatus("the due partitions", map[string]string{d1: "published", d2: "published", d3: "waiting", d4: "waiting"})
	if got := published(t, db); !sameTotals(got[d1], map[string]int64{"NORTH": 425, "WEST": 100}) || !sameTotals(got[d2], map[string]int64{"WEST": 7}) {
		t.Fatalf("published %v", got)
	}
	for _, run := range s.Runs[:2] {
		if run.Version != 1 || run.Attempts != 1 || run.ManifestDigest == "" || run.JobID == "" {
			t.Errorf("run %+v", run)
		}
	}
	if w := s.Runs[2]; !strings.Contains(w.Error, "matches no file") || w.NextAttempt == nil {
		t.Errorf("waiting run %+v: want the missing files named and a next check", w)
	}
	if m := srv.mustCLI(t, work, "manifests", "show", "sales", "--partition", d1).stdout; !strings.Contains(m, filepath.Join(work, "in", d1, "a.jsonl")) {
		t.Errorf("the partition's manifest:\n%s", m)
	}
	list := srv.mustCLI(t, work, "schedules", "list").stdout
	if !strings.Contains(list, "sales") || !strings.Contains(list, "sales-daily") || !strings.Contains(list, "every 24h0m0s") || !strings.Contains(list, "active") {
		t.Errorf("list:\n%s", list)
	}

	// A published partition cannot be switched; the default is the first
	// open partition (d3).
	if r := srv.cli(work, "schedules", "switch", "sales", "--pipeline", "max.yaml", "--from-partition", d2); r.code != ExitFailure || !strings.Contains(r.stderr, "SCHEDULE_CONFLICT") || !strings.Contains(r.stderr, "published") {
		t.Errorf("switch from a published partition: %d %s", r.code, r.stderr)
	}
	r = srv.mustCLI(t, work, "schedules", "switch", "sales", "--pipeline", "max.yaml")
	if !strings.Contains(r.stdout, "version 2 (max.yaml) runs from partition "+d3) {
		t.Errorf("switch: %s", r.stdout)
	}
	input(d3, `{"region": "NORTH", "amount": 100}`, `{"region": "NORTH", "amount": 60}`)
	srv.mustCLI(t, work, "schedules", "retry", "sales", "--partition", d3) // look for its files now
	s = waitStatus("the switched partition", map[string]string{d3: "published"})
	if got := published(t, db); !sameTotals(got[d3], map[string]int64{"NORTH": 100}) {
		t.Fatalf("d3 published %v by version 2, want NORTH 100 (the max)", got[d3])
	}

	// Rollback: version 1 runs d4 (not published by version 2); d3 stays
	// as version 2 published it, once.
	r = srv.mustCLI(t, work, "schedules", "rollback", "sales")
	if !strings.Contains(r.stdout, "back to version 1 from partition "+d4) {
		t.Errorf("rollback: %s", r.stdout)
	}
	input(d4, `{"region": "NORTH", "amount": 100}`, `{"region": "NORTH", "amount": 60}`)
	srv.mustCLI(t, work, "schedules", "retry", "sales", "--partition", d4)
	s = waitStatus("the rolled-back partition", map[string]string{d4: "published"})
	got := published(t, db)
	if !sameTotals(got[d4], map[string]int64{"NORTH": 160}) || !sameTotals(got[d3], map[string]int64{"NORTH": 100}) {
		t.Fatalf("published %v: want d4 NORTH 160 (version 1's sum), d3 NORTH 100 untouched", got)
	}
	versions := map[string]int{}
	for _, run := range s.Runs {
		versions[run.Partition] = run.Version
	}
	if versions[d1] != 1 || versions[d2] != 1 || versions[d3] != 2 || versions[d4] != 1 {
		t.Errorf("versions by partition %v", versions)
	}
	for _, d := range []string{d1, d2, d3, d4} {
		if n, staged := publications(t, db, "sales-daily", d); n != 1 || staged != 0 {
			t.Errorf("partition %s: %d publication log entries and %d staging tables, want 1 and 0", d, n, staged)
		}
	}
	text := srv.mustCLI(t, work, "schedules", "describe", "sales").stdout
	for _, want := range []string{"Job name", "sales-daily", "rolled back", "PARTITION", d3 + "  published  2", "Next partition"} {
		if !strings.Contains(text, want) {
			t.Errorf("describe does not say %q:\n%s", want, text)
		}
	}

	// Refusals name the problem.
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"schedules", "rollback", "sales"}, ExitFailure, "no earlier version"},
		{[]string{"schedules", "create", "sales", "--pipeline", "p.yaml", "--every", "24h", "--files", "x"}, ExitFailure, "SCHEDULE_EXISTS"},
		{[]string{"schedules", "create", "s2", "--pipeline", "p.yaml", "--every", "24h", "--cron", "@daily", "--files", "x"}, ExitUsage, "one of them"},
		{[]string{"schedules", "create", "s2", "--pipeline", "p.yaml", "--every", "1h", "--partition-template", "{YYYY}-{MM}-{DD}", "--files", "x"}, ExitUsage, "the same ID"},
		{[]string{"schedules", "create", "s2", "--pipeline", "p.yaml", "--cron", "0 2 * *", "--files", "x"}, ExitUsage, "not a cron expression"},
		{[]string{"schedules", "create", "s2", "--pipeline", "p.yaml", "--every", "1h", "--start", "1970-01-01", "--files", "x"}, ExitUsage, "more than 100000 partitions due already"},
		{[]string{"schedules", "describe", "nope"}, ExitFailure, "SCHEDULE_NOT_FOUND"},
		{[]string{"schedules", "retry", "sales", "--partition", d1}, ExitFailure, "nothing to retry"},
	} {
		if r := srv.cli(work, tc.args...); r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d %s; want %d saying %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}

	// Pause and delete: no run starts while paused; a deleted schedule is
	// gone and what it published stays.
	if r := srv.mustCLI(t, work, "schedules", "pause", "sales"); !strings.Contains(r.stdout, "paused") {
		t.Errorf("pause: %s", r.stdout)
	}
	srv.mustCLI(t, work, "schedules", "delete", "sales")
	if r := srv.cli(work, "schedules", "describe", "sales"); r.code != ExitFailure {
		t.Errorf("describe after delete: %d", r.code)
	}
	if got := published(t, db); len(got) != 4 {
		t.Errorf("after delete, published %v", got)
	}
}

// yesterdayPartition writes under work the partition pipeline p.yaml
// (publishing to db, out.db) and the input directory in/D1 of yesterday's
// daily partition D1, and returns them.
func yesterdayPartition(t *testing.T, work string) (db, d1, dir string) {
	t.Helper()
	db = filepath.Join(work, "out.db")
	writeTestFile(t, work, "p.yaml", partitionPipeline(db))
	d1 = time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -1).Format("2006-01-02")
	dir = filepath.Join(work, "in", d1)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return db, d1, dir
}

// TestCLIScheduleRetriesSameManifest: a partition whose pinned file
// changed fails at each attempt (MANIFEST_CHANGED), is retried after the
// backoff against the same manifest, and is left failed after
// --max-attempts; once the file is as pinned again, weir schedules retry
// publishes it. A streaming pipeline cannot be scheduled.
func TestCLIScheduleRetriesSameManifest(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())
	work := t.TempDir()
	db, d1, dir := yesterdayPartition(t, work)
	good := `{"region": "NORTH", "amount": 250}` + "\n"
	f := writeTestFile(t, dir, "a.jsonl", good)
	// Pin the partition's manifest first (as the schedule would), then
	// change the file: every attempt finds it changed.
	srv.mustCLI(t, work, "manifests", "create", "sales", "--partition", d1, "--files", "in/"+d1+"/*.jsonl")
	if err := os.WriteFile(f, []byte(`{"region": "NORTH", "amount": 999}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv.mustCLI(t, work, "schedules", "create", "sales", "--pipeline", "p.yaml", "--every", "24h", "--start", d1,
		"--files", "in/{partition}/*.jsonl", "--max-attempts", "2", "--retry-backoff", "1s")
	var s client.Schedule
	if !await.Until(60*time.Second, 100*time.Millisecond, func() bool {
		out := srv.mustCLI(t, work, "schedules", "describe", "sales", "--format", "json").stdout
		s = client.Schedule{}
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatal(err)
		}
		return len(s.Runs) > 0 && s.Runs[0].Status == "failed"
	}) {
		t.Fatalf("the partition was not left failed: %+v\n%s", s.Runs, srv.log())
	}
	run := s.Runs[0]
	if run.Attempts != 2 || run.NextAttempt != nil || !strings.Contains(run.Error, "MANIFEST_CHANGED") || !strings.Contains(run.Error, "a.jsonl") {
		t.Errorf("failed run %+v: want 2 attempts and the changed file named", run)
	}
	if got := published(t, db); len(got) != 0 {
		t.Errorf("published %v from a changed input", got)
	}
	// The file as pinned again: a retry publishes what the manifest pinned.
	if err := os.WriteFile(f, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	srv.mustCLI(t, work, "schedules", "retry", "sales", "--partition", d1)
	if !await.Until(60*time.Second, 100*time.Millisecond, func() bool {
		out := srv.mustCLI(t, work, "schedules", "describe", "sales", "--format", "json").stdout
		s = client.Schedule{}
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatal(err)
		}
		return s.Runs[0].Status == "published"
	}) {
		t.Fatalf("the retried partition was not published: %+v\n%s", s.Runs, srv.log())
	}
	if got := published(t, db); !sameTotals(got[d1], map[string]int64{"NORTH": 250}) {
		t.Errorf("published %v", got)
	}

	// A streaming pipeline is refused before anything is recorded.
	writeTestFile(t, work, "stream.yaml", `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Read
      config: {topic: orders, format: json, schema: {region: string, amount: int}}
    - type: LogForTesting
      name: Log
      input: Read
`)
	if r := srv.cli(work, "schedules", "create", "live", "--pipeline", "stream.yaml", "--every", "1h", "--files", "in/x"); r.code != ExitInvalidPipeline || !strings.Contains(r.stderr, "unbounded source") {
		t.Errorf("a streaming schedule: exit %d %s", r.code, r.stderr)
	}
}

// TestCLIScheduleSurvivesKill: a schedule and its runs survive a kill -9
// of the server; the restarted server carries on at the next partition
// and never runs a published partition again.
func TestCLIScheduleSurvivesKill(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	srv := startServer(t, data)
	work := t.TempDir()
	db := filepath.Join(work, "out.db")
	writeTestFile(t, work, "p.yaml", partitionPipeline(db))
	today := time.Now().UTC().Truncate(24 * time.Hour)
	d1, d2 := today.AddDate(0, 0, -2).Format("2006-01-02"), today.AddDate(0, 0, -1).Format("2006-01-02")
	input := func(d string) {
		dir := filepath.Join(work, "in", d)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeTestFile(t, dir, "a.jsonl", `{"region": "NORTH", "amount": 250}`+"\n"+`{"region": "WEST", "amount": 100}`+"\n")
	}
	input(d1)
	srv.mustCLI(t, work, "schedules", "create", "sales", "--pipeline", "p.yaml", "--every", "24h", "--start", d1, "--files", "in/{partition}/*.jsonl")
	runs := func(p *serverProc) []client.ScheduleRun {
		var s client.Schedule
		if err := json.Unmarshal([]byte(p.mustCLI(t, work, "schedules", "describe", "sales", "--format", "json").stdout), &s); err != nil {
			t.Fatal(err)
		}
		return s.Runs
	}
	if !await.Until(60*time.Second, 100*time.Millisecond, func() bool {
		r := runs(srv)
		return len(r) == 2 && r[0].Status == "published" && r[1].Status == "waiting"
	}) {
		t.Fatalf("runs %+v\n%s", runs(srv), srv.log())
	}
	srv.stop(syscall.SIGKILL)

	srv = startServer(t, data)
	input(d2)
	srv.mustCLI(t, work, "schedules", "retry", "sales", "--partition", d2)
	if !await.Until(60*time.Second, 100*time.Millisecond, func() bool {
		r := runs(srv)
		return len(r) == 2 && r[1].Status == "published"
	}) {
		t.Fatalf("after the restart, runs %+v\n%s", runs(srv), srv.log())
	}
	r := runs(srv)
	if r[0].Attempts != 1 || len(r[0].JobIDs) != 1 {
		t.Errorf("the published partition ran again after the restart: %+v", r[0])
	}
	for _, d := range []string{d1, d2} {
		if n, _ := publications(t, db, "sales", d); n != 1 {
			t.Errorf("partition %s has %d publication log entries, want 1", d, n)
		}
	}
}

// TestCLIScheduleCrashAfterSubmit kills the server (kill -9) right after
// a scheduled partition run was submitted and before the schedule
// recorded it: the restarted server finds the job again and records it as
// the partition's run, instead of submitting a second one. One job, one
// attempt, one publication.
func TestCLIScheduleCrashAfterSubmit(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts servers")
	}
	data, work := t.TempDir(), t.TempDir()
	db, d1, dir := yesterdayPartition(t, work)
	writeTestFile(t, dir, "a.jsonl", `{"region": "NORTH", "amount": 250}`+"\n"+`{"region": "WEST", "amount": 100}`+"\n")
	srv := startServerEnv(t, data, []string{"WEIR_TEST_SCHEDULE_CRASH=after-submit"})
	srv.mustCLI(t, work, "schedules", "create", "sales", "--pipeline", "p.yaml", "--every", "24h", "--start", d1, "--files", "in/{partition}/*.jsonl")
	select {
	case <-srv.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the server was not killed after the submission\nlog:\n%s", srv.log())
	}
	srv = startServer(t, data)
	var s client.Schedule
	if !await.Until(60*time.Second, 100*time.Millisecond, func() bool {
		if err := json.Unmarshal([]byte(srv.mustCLI(t, work, "schedules", "describe", "sales", "--format", "json").stdout), &s); err != nil {
			t.Fatal(err)
		}
		return len(s.Runs) == 1 && s.Runs[0].Status == "published"
	}) {
		t.Fatalf("after the restart, runs %+v\n%s", s.Runs, srv.log())
	}
	if r := s.Runs[0]; r.Attempts != 1 || len(r.JobIDs) != 1 {
		t.Errorf("the partition's run: %d attempts, jobs %v; want the one job submitted before the crash", r.Attempts, r.JobIDs)
	}
	var jobs []map[string]any
	if err := json.Unmarshal([]byte(srv.mustCLI(t, work, "jobs", "list", "--status", "all", "--format", "json").stdout), &jobs); err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 {
		t.Errorf("%d jobs, want the one submitted before the crash: %v", len(jobs), jobs)
	}
	if n, _ := publications(t, db, "sales", d1); n != 1 {
		t.Errorf("%d publication log entries, want 1", n)
	}
}

// startParitySchedule writes base (partitionPipeline's shape) as p.yaml,
// the same summing the max as max.yaml and an equivalent version (a filter
// that keeps everything) as same.yaml, two daily partitions of input, and
// creates schedule sales (job name sales-daily) of p.yaml; it returns the
// partitions once both are published.
func startParitySchedule(t *testing.T, srv *serverProc, work, base string) (d1, d2 string) {
	t.Helper()
	writeTestFile(t, work, "p.yaml", base)
	writeTestFile(t, work, "max.yaml", strings.Replace(base, "fn: sum", "fn: max", 1))
	same := strings.Replace(base, "      input: CheckRegion\n", "      input: KeepAll\n", 1)
	same = strings.Replace(same, "    - type: Combine\n", "    - type: Filter\n      name: KeepAll\n      input: CheckRegion\n      config: {keep: \"amount >= 0\"}\n    - type: Combine\n", 1)
	writeTestFile(t, work, "same.yaml", same)
	today := time.Now().UTC().Truncate(24 * time.Hour)
	d1, d2 = today.AddDate(0, 0, -2).Format("2006-01-02"), today.AddDate(0, 0, -1).Format("2006-01-02")
	for d, lines := range map[string]string{
		d1: `{"region": "NORTH", "amount": 250}` + "\n" + `{"region": "WEST", "amount": 100}` + "\n" + `{"region": "NORTH", "amount": 175}` + "\n",
		d2: `{"region": "WEST", "amount": 7}` + "\n" + `{"region": "WEST", "amount": 3}` + "\n",
	} {
		dir := filepath.Join(work, "in", d)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeTestFile(t, dir, "a.jsonl", lines)
	}
	srv.mustCLI(t, work, "schedules", "create", "sales", "--pipeline", "p.yaml", "--every", "24h", "--start", d1,
		"--files", "in/{partition}/*.jsonl", "--job-name", "sales-daily")
	if !await.Until(60*time.Second, 100*time.Millisecond, func() bool {
		var s client.Schedule
		if err := json.Unmarshal([]byte(srv.mustCLI(t, work, "schedules", "describe", "sales", "--format", "json").stdout), &s); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range s.Runs {
			if r.Status == "published" {
				n++
			}
		}
		return n == 2
	}) {
		t.Fatalf("the partitions were not published:\n%s\n%s", srv.mustCLI(t, work, "schedules", "describe", "sales").stdout, srv.log())
	}
	return d1, d2
}

// TestCLIScheduleParityPostgres: the parity gate compares PostgreSQL
// outputs too. The server names the database without the DSN's password
// (the client brings its own, or gives the URL with --parity-dsn), and
// neither the partitions list nor the gate's report shows the password.
func TestCLIScheduleParityPostgres(t *testing.T) {
	dsn := postgresDSN(t)
	if dsn == "" {
		t.Skip("no PostgreSQL")
	}
	// A password in the pipeline's DSN (trust authentication ignores it):
	// the server must never show it.
	const secret = "hunter2-parity"
	withPassword := strings.Replace(dsn, "postgres://postgres@", "postgres://postgres:"+secret+"@", 1)
	if withPassword == dsn {
		t.Skipf("the test database %s names no user postgres to add a password to", dsn)
	}
	table := fmt.Sprintf("parity_%d", time.Now().UnixNano())
	dropPostgresTables(t, dsn, table)
	srv := startServer(t, t.TempDir())
	work := t.TempDir()
	base := strings.Replace(partitionPipeline(withPassword), "table: totals", "driver: postgres, table: "+table, 1)
	d1, _ := startParitySchedule(t, srv, work, base)

	list := srv.mustCLI(t, work, "partitions", "list", "sales-daily", "--format", "json").stdout
	if strings.Contains(list, secret) || !strings.Contains(list, `"target_source": "postgres://postgres@127.0.0.1:5432/test?sslmode=disable#`+table+`"`) {
		t.Fatalf("partitions list: the DSN without its password, as a weir diff specifier, wanted:\n%s", list)
	}
	r := srv.cli(work, "schedules", "switch", "sales", "--pipeline", "max.yaml", "--require-parity", "--parity-partitions", "2")
	if r.code != ExitRehearsalDiffers || !strings.Contains(r.stderr, "differs from what partition "+d1+" published") || !strings.Contains(r.stderr, "value_changed") {
		t.Fatalf("switch to max with --require-parity: exit %d, want %d naming the difference\n%s\n%s", r.code, ExitRehearsalDiffers, r.stdout, r.stderr)
	}
	r = srv.cli(work, "schedules", "switch", "sales", "--pipeline", "same.yaml", "--require-parity", "--parity-partitions", "2", "--parity-dsn", withPassword)
	if r.code != ExitOK || !strings.Contains(r.stdout, "version 2 (same.yaml)") || !strings.Contains(r.stderr, "postgres://postgres:xxxxx@") {
		t.Fatalf("switch to an equivalent version with --require-parity --parity-dsn: exit %d, want 0\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, out := range []string{r.stdout, r.stderr} {
		if strings.Contains(out, secret) {
			t.Errorf("the password shows:\n%s", out)
		}
	}
	if r := srv.cli(work, "schedules", "switch", "sales", "--pipeline", "same.yaml", "--require-parity", "--parity-dsn", "sqlite:x.db"); r.code != ExitUsage {
		t.Errorf("--parity-dsn sqlite:x.db: exit %d, want %d", r.code, ExitUsage)
	}
}

// dropPostgresTables drops every table and view whose name starts with
// prefix (a target, its staging tables, a façade's view and generation
// tables) now and after the test: the views first, which depend on the
// tables.
func dropPostgresTables(t *testing.T, dsn, prefix string) {
	t.Helper()
	nowAndAfter(t, dsn, func(db *sql.DB) {
		for _, kind := range []struct{ catalog, column, drop string }{
			{"pg_views", "viewname", "VIEW"},
			{"pg_tables", "tablename", "TABLE"},
		} {
			rows, err := db.Query(`SELECT `+kind.column+` FROM `+kind.catalog+` WHERE schemaname = current_schema() AND starts_with(`+kind.column+`, $1)`, prefix)
			if err != nil {
				t.Error(err)
				return
			}
			var names []string
			for rows.Next() {
				var n string
				if rows.Scan(&n) == nil {
					names = append(names, n)
				}
			}
			rows.Close()
			for _, n := range names {
				if _, err := db.Exec(`DROP ` + kind.drop + ` IF EXISTS ` + diffcmd.QuoteIdent(n)); err != nil {
					t.Error(err)
				}
			}
		}
	})
}

// TestCLIScheduleSwitchRequiresParity: with --require-parity a switch
// shadow-runs the new version on the latest published partitions and
// switches only when it reproduces what they published. A version that
// computes something else (the max instead of the sum) leaves the
// schedule and every published row unchanged and exits 7; an equivalent
// one (an extra filter that keeps everything) switches.
func TestCLIScheduleSwitchRequiresParity(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())
	work := t.TempDir()
	db := filepath.Join(work, "out.db")
	d1, d2 := startParitySchedule(t, srv, work, partitionPipeline(db))
	before := published(t, db)

	r := srv.cli(work, "schedules", "switch", "sales", "--pipeline", "max.yaml", "--require-parity", "--parity-partitions", "2")
	if r.code != ExitRehearsalDiffers || !strings.Contains(r.stderr, "differs from what partition "+d1+" published") || !strings.Contains(r.stderr, "value_changed") {
		t.Fatalf("switch to max with --require-parity: exit %d, want %d naming the difference\n%s\n%s", r.code, ExitRehearsalDiffers, r.stdout, r.stderr)
	}
	var s client.Schedule
	if err := json.Unmarshal([]byte(srv.mustCLI(t, work, "schedules", "describe", "sales", "--format", "json").stdout), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Versions) != 1 {
		t.Errorf("a refused switch left %d versions, want 1", len(s.Versions))
	}
	if after := published(t, db); !reflect.DeepEqual(after, before) {
		t.Errorf("the shadow runs changed the published rows: %v, was %v", after, before)
	}
	for _, d := range []string{d1, d2} {
		if n, _ := publications(t, db, "sales-daily", d); n != 1 {
			t.Errorf("partition %s has %d publication log entries, want 1", d, n)
		}
		if n, _ := publications(t, db, "sales-daily-parity", d); n != 0 {
			t.Errorf("a shadow run published partition %s", d)
		}
	}

	// A job's output by name: job:NAME[/STEP] is the table its WriteToSql
	// writes, found through the server.
	if r := srv.cli(work, "diff", "job:sales-daily", "sqlite:"+db+"#totals", "--key", "region", "--partition", d1, "--format", "json"); r.code != ExitOK || !strings.Contains(r.stdout, `"verdict": "identical"`) {
		t.Errorf("diff job:sales-daily against its table: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, tc := range []struct {
		spec string
		code int
		want string
	}{
		{"job:sales-daily/Nope", ExitUsage, `no WriteToSql or file sink step "Nope" (its sinks: Write)`},
		{"job:nope", ExitFailure, "JOB_NOT_FOUND"},
	} {
		if r := srv.cli(work, "diff", tc.spec, "sqlite:"+db+"#totals"); r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("diff %s: exit %d %s; want %d naming %q", tc.spec, r.code, r.stderr, tc.code, tc.want)
		}
	}

	r = srv.cli(work, "schedules", "switch", "sales", "--pipeline", "same.yaml", "--require-parity", "--parity-partitions", "2")
	if r.code != ExitOK || !strings.Contains(r.stdout, "version 2 (same.yaml)") {
		t.Fatalf("switch to an equivalent version with --require-parity: exit %d, want 0\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if n := strings.Count(r.stderr, "as a shadow run"); n != 2 {
		t.Errorf("%d shadow runs, want 2 (--parity-partitions 2):\n%s\n%s", n, r.stderr, srv.mustCLI(t, work, "schedules", "describe", "sales").stdout)
	}
	if r := srv.cli(work, "schedules", "switch", "sales", "--pipeline", "same.yaml", "--require-parity", "--parity-partitions", "0"); r.code != ExitUsage {
		t.Errorf("--parity-partitions 0: exit %d, want %d", r.code, ExitUsage)
	}
}

// TestCLIScheduleSwitchParityOnFiles: the parity gate compares a file
// output too, keyed by the group_by of the Combine its sink reads: the
// shadow run's staged version against the partition's published one.
func TestCLIScheduleSwitchParityOnFiles(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())
	work := t.TempDir()
	base := strings.Replace(partitionPipeline("unused.db"), "    - type: WriteToSql\n", "    - type: WriteToJson\n", 1)
	base = strings.Replace(base, `      config: {dsn: "unused.db", table: totals, key: [region]}`, `      config: {path: totals.jsonl}`, 1)
	writeTestFile(t, work, "p.yaml", base)
	writeTestFile(t, work, "max.yaml", strings.Replace(base, "fn: sum", "fn: max", 1))
	same := strings.Replace(base, "      input: CheckRegion\n", "      input: KeepAll\n", 1)
	same = strings.Replace(same, "    - type: Combine\n", "    - type: Filter\n      name: KeepAll\n      input: CheckRegion\n      config: {keep: \"amount >= 0\"}\n    - type: Combine\n", 1)
	writeTestFile(t, work, "same.yaml", same)
	today := time.Now().UTC().Truncate(24 * time.Hour)
	d1 := today.AddDate(0, 0, -1).Format("2006-01-02")
	dir := filepath.Join(work, "in", d1)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, dir, "a.jsonl", `{"region": "NORTH", "amount": 250}`+"\n"+`{"region": "WEST", "amount": 100}`+"\n"+`{"region": "NORTH", "amount": 175}`+"\n")
	srv.mustCLI(t, work, "schedules", "create", "files", "--pipeline", "p.yaml", "--every", "24h", "--start", d1,
		"--files", "in/{partition}/*.jsonl", "--job-name", "files-daily")
	if !await.Until(60*time.Second, 100*time.Millisecond, func() bool {
		var s client.Schedule
		if err := json.Unmarshal([]byte(srv.mustCLI(t, work, "schedules", "describe", "files", "--format", "json").stdout), &s); err != nil {
			t.Fatal(err)
		}
		return len(s.Runs) > 0 && s.Runs[0].Status == "published"
	}) {
		t.Fatalf("the partition was not published:\n%s", srv.log())
	}
	view, err := os.ReadFile(filepath.Join(work, "totals.jsonl"))
	if err != nil {
		t.Fatal(err)
	}

	r := srv.cli(work, "schedules", "switch", "files", "--pipeline", "max.yaml", "--require-parity")
	if r.code != ExitRehearsalDiffers || !strings.Contains(r.stderr, "differs from what partition "+d1+" published") || !strings.Contains(r.stderr, "value_changed") {
		t.Fatalf("switch to max with --require-parity: exit %d, want %d naming the difference\n%s\n%s", r.code, ExitRehearsalDiffers, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "totals.jsonl.manifest.json#"+d1) {
		t.Errorf("the comparison does not name the published version:\n%s", r.stderr)
	}
	if after, err := os.ReadFile(filepath.Join(work, "totals.jsonl")); err != nil || string(after) != string(view) {
		t.Errorf("the shadow run changed the published view: %q, was %q (%v)", after, view, err)
	}
	// A key the pipeline does not declare can be given.
	if r := srv.cli(work, "schedules", "switch", "files", "--pipeline", "max.yaml", "--require-parity", "--parity-key", "region"); r.code != ExitRehearsalDiffers {
		t.Errorf("switch to max with --parity-key: exit %d, want %d\n%s", r.code, ExitRehearsalDiffers, r.stderr)
	}
	r = srv.cli(work, "schedules", "switch", "files", "--pipeline", "same.yaml", "--require-parity")
	if r.code != ExitOK || !strings.Contains(r.stdout, "version 2 (same.yaml)") {
		t.Fatalf("switch to an equivalent version with --require-parity: exit %d, want 0\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// weir diff job:NAME of a file output finds its key the same way.
	if r := srv.cli(work, "diff", "job:files-daily", "totals.jsonl.manifest.json#"+d1, "--format", "json"); r.code != ExitOK || !strings.Contains(r.stdout, `"verdict": "identical"`) || !strings.Contains(r.stdout, `"region"`) {
		t.Errorf("diff job:files-daily against its published version: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestCLIScheduleFileSets: a schedule whose partitions are file sets: each
// directory under in/ is a partition, run once its _SUCCESS file exists,
// in the order found; a switch runs the sets found after it with the new
// version; nothing is published twice.
func TestCLIScheduleFileSets(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())
	work := t.TempDir()
	db := filepath.Join(work, "out.db")
	writeTestFile(t, work, "p.yaml", partitionPipeline(db))
	writeTestFile(t, work, "max.yaml", strings.Replace(partitionPipeline(db), "fn: sum", "fn: max", 1))
	set := func(name, lines string, ready bool) {
		dir := filepath.Join(work, "in", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if lines != "" {
			writeTestFile(t, dir, "a.jsonl", lines)
		}
		if ready {
			writeTestFile(t, dir, "_SUCCESS", "")
		}
	}
	describe := func() client.Schedule {
		var s client.Schedule
		if err := json.Unmarshal([]byte(srv.mustCLI(t, work, "schedules", "describe", "drops", "--format", "json").stdout), &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	awaitPublished := func(partition string) client.ScheduleRun {
		t.Helper()
		var run client.ScheduleRun
		if !await.Until(60*time.Second, 100*time.Millisecond, func() bool {
			for _, r := range describe().Runs {
				if r.Partition == partition && r.Status == "published" {
					run = r
					return true
				}
			}
			return false
		}) {
			t.Fatalf("file set %s was not published: %+v\n%s", partition, describe().Runs, srv.log())
		}
		return run
	}
	north := `{"region": "NORTH", "amount": 250}` + "\n" + `{"region": "WEST", "amount": 100}` + "\n" + `{"region": "NORTH", "amount": 175}` + "\n"
	set("b-later", `{"region": "WEST", "amount": 7}`+"\n"+`{"region": "WEST", "amount": 3}`+"\n", false)
	set("a-first", north, true)

	if r := srv.cli(work, "schedules", "create", "drops", "--pipeline", "p.yaml", "--file-sets", "--every", "1h", "--files", "in/{partition}/*.jsonl"); r.code != ExitUsage {
		t.Errorf("--file-sets with --every: exit %d, want %d", r.code, ExitUsage)
	}
	if r := srv.cli(work, "schedules", "create", "drops", "--pipeline", "p.yaml", "--file-sets", "--files", "in/*.jsonl"); r.code == ExitOK || !strings.Contains(r.stderr, "{partition}") {
		t.Errorf("--file-sets without {partition}: exit %d %s", r.code, r.stderr)
	}
	r := srv.mustCLI(t, work, "schedules", "create", "drops", "--pipeline", "p.yaml", "--file-sets",
		"--files", "in/{partition}/*.jsonl", "--ready-file", "in/{partition}/_SUCCESS")
	if !strings.Contains(r.stdout, "file sets, each due once") {
		t.Errorf("create: %s", r.stdout)
	}
	awaitPublished("a-first")
	// b-later has files but no ready file: ticks went by, and it has no run.
	for _, run := range describe().Runs {
		if run.Partition == "b-later" {
			t.Fatalf("b-later ran without its ready file: %+v", run)
		}
	}
	set("b-later", "", true)
	awaitPublished("b-later")

	srv.mustCLI(t, work, "schedules", "switch", "drops", "--pipeline", "max.yaml")
	set("c-after-switch", north, true)
	c := awaitPublished("c-after-switch")
	if c.Version != 2 {
		t.Errorf("the set found after the switch ran version %d, want 2", c.Version)
	}
	want := map[string]map[string]int64{
		"a-first":        {"NORTH": 425, "WEST": 100},
		"b-later":        {"WEST": 10},
		"c-after-switch": {"NORTH": 250, "WEST": 100},
	}
	if got := published(t, db); !reflect.DeepEqual(got, want) {
		t.Errorf("published %v, want %v", got, want)
	}
	for p := range want {
		if n, _ := publications(t, db, "drops", p); n != 1 {
			t.Errorf("partition %s has %d publication log entries, want 1", p, n)
		}
	}
	if s := describe(); len(s.Runs) != 3 || !s.FileSets {
		t.Errorf("the schedule has %d runs (file sets %t), want 3", len(s.Runs), s.FileSets)
	}
}
