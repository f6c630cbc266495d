package main

import (
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/await"
)

// partitionPipeline is the reference fixture reading its input manifest
// (bound by --manifest), totals upserted into table totals of the SQLite
// file db, rejects logged.
func partitionPipeline(db string) string {
	return `pipeline:
  transforms:
    - type: ReadFromJson
      name: Transactions
      config: {path: unused.jsonl, schema: {region: string, amount: int}}
    - type: Validate
      name: CheckRegion
      input: Transactions
      config:
        rules:
          known_region: region in ["NORTH", "WEST"]
      error_handling:
        output: invalid
    - type: Combine
      name: Totals
      input: CheckRegion
      config:
        group_by: region
        combine:
          total: {value: amount, fn: sum}
    - type: WriteToSql
      name: Write
      input: Totals
      config: {dsn: "` + db + `", table: totals, key: [region]}
    - type: LogForTesting
      name: LogRejects
      input: CheckRegion.invalid
`
}

// published reads the target table: partition → region → total.
func published(t *testing.T, db string) map[string]map[string]int64 {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	out := map[string]map[string]int64{}
	var n int
	if err := conn.QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'totals'`).Scan(&n); err != nil || n == 0 {
		return out // nothing published yet
	}
	rows, err := conn.Query(`SELECT weir_partition, region, total FROM totals`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var p, r string
		var n int64
		if err := rows.Scan(&p, &r, &n); err != nil {
			t.Fatal(err)
		}
		if out[p] == nil {
			out[p] = map[string]int64{}
		}
		out[p][r] += n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// publications counts the publication log's entries of job and partition,
// and the tables named like a staging table left in db.
func publications(t *testing.T, db, job, partition string) (entries, staged int) {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var logs int
	if err := conn.QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'weir_publications'`).Scan(&logs); err != nil {
		t.Fatal(err)
	}
	if logs > 0 {
		if err := conn.QueryRow(`SELECT COUNT(*) FROM weir_publications WHERE job_name = ? AND partition_id = ?`, job, partition).Scan(&entries); err != nil {
			t.Fatal(err)
		}
	}
	if err := conn.QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name LIKE 'totals__stage_%'`).Scan(&staged); err != nil {
		t.Fatal(err)
	}
	return entries, staged
}

// partitionWork writes the fixture's input for two partitions under work
// and creates their manifests on srv.
func partitionWork(t *testing.T, srv *serverProc, work string) {
	t.Helper()
	for _, d := range []string{"d1", "d2"} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeTestFile(t, filepath.Join(work, "d1"), "a.jsonl", `{"region": "NORTH", "amount": 250}`+"\n"+`{"region": "WEST", "amount": 100}`+"\n")
	writeTestFile(t, filepath.Join(work, "d1"), "b.jsonl", `{"region": "NORTH", "amount": 175}`+"\n"+`{"region": "UNKNOWN", "amount": 50}`+"\n")
	writeTestFile(t, filepath.Join(work, "d2"), "a.jsonl", `{"region": "WEST", "amount": 7}`+"\n")
	srv.mustCLI(t, work, "manifests", "create", "sales", "--partition", "2026-12-01", "--files", "d1/*.jsonl")
	srv.mustCLI(t, work, "manifests", "create", "sales", "--partition", "2026-12-02", "--files", "d2/*.jsonl")
}

// TestCLIPartitionPublish runs the reference fixture as partition runs
// on a real server: the totals are published with their partition
// (NORTH 425, WEST 100), a rerun of the same manifest publishes nothing
// new, another partition leaves the first one's rows alone, and a second
// writer of a running partition is refused.
func TestCLIPartitionPublish(t *testing.T) {
	srv := startServer(t, t.TempDir())
	work := t.TempDir()
	db := filepath.Join(work, "out.db")
	writeTestFile(t, work, "p.yaml", partitionPipeline(db))
	partitionWork(t, srv, work)

	run := []string{"run", "p.yaml", "--job-name", "sales-daily", "--manifest", "sales", "--partition", "2026-12-01", "--wait"}
	srv.mustCLI(t, work, run...)
	want1 := map[string]int64{"NORTH": 425, "WEST": 100}
	if got := published(t, db); len(got) != 1 || !sameTotals(got["2026-12-01"], want1) {
		t.Fatalf("published %v, want 2026-12-01: %v", got, want1)
	}
	if n, staged := publications(t, db, "sales-daily", "2026-12-01"); n != 1 || staged != 0 {
		t.Fatalf("publication log has %d entries and %d staging tables remain, want 1 and 0", n, staged)
	}
	// A rerun of the same manifest publishes nothing new.
	srv.mustCLI(t, work, run...)
	if n, _ := publications(t, db, "sales-daily", "2026-12-01"); n != 1 {
		t.Errorf("after a rerun the publication log has %d entries, want 1", n)
	}
	// Another partition: its own rows, the first partition's untouched.
	srv.mustCLI(t, work, "run", "p.yaml", "--job-name", "sales-daily", "--manifest", "sales", "--partition", "2026-12-02", "--wait")
	got := published(t, db)
	if len(got) != 2 || !sameTotals(got["2026-12-01"], want1) || !sameTotals(got["2026-12-02"], map[string]int64{"WEST": 7}) {
		t.Errorf("published %v", got)
	}
}

func sameTotals(got, want map[string]int64) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// TestCLIPartitionPublishCrash kills the server (kill -9) at the seeded
// points of a publication — staged but not published, and published but
// not recorded as done — restarts it and checks that the partition ends
// published exactly once with exactly the fixture's totals.
func TestCLIPartitionPublishCrash(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts servers")
	}
	for _, point := range []string{"before-publish", "after-publish"} {
		t.Run(point, func(t *testing.T) {
			data, work := t.TempDir(), t.TempDir()
			db := filepath.Join(work, "out.db")
			writeTestFile(t, work, "p.yaml", partitionPipeline(db))
			srv := startServerEnv(t, data, []string{"WEIR_TEST_PUBLISH_CRASH=" + point})
			partitionWork(t, srv, work)
			srv.cli(work, "run", "p.yaml", "--job-name", "sales-crash", "--manifest", "sales", "--partition", "2026-12-01", "--no-wait")
			select {
			case <-srv.done:
			case <-time.After(60 * time.Second):
				t.Fatalf("the server was not killed at %s\nlog:\n%s", point, srv.log())
			}
			// The kill came at the seeded point: the rows are staged, and
			// published (with their log entry) only after the commit.
			n, staged := publications(t, db, "sales-crash", "2026-12-01")
			got := published(t, db)
			switch {
			case staged != 1:
				t.Fatalf("killed at %s: %d staging tables, want 1", point, staged)
			case point == "before-publish" && (len(got) != 0 || n != 0):
				t.Fatalf("killed before publishing, the target holds %v and the log %d entries", got, n)
			case point == "after-publish" && (len(got) != 1 || n != 1):
				t.Fatalf("killed after publishing, the target holds %v and the log %d entries", got, n)
			}
			srv2 := startServer(t, data)
			var m map[string]any
			if !await.Until(60*time.Second, 100*time.Millisecond, func() bool {
				m = srv2.describe("sales-crash")
				n, staged := publications(t, db, "sales-crash", "2026-12-01")
				return m["state"] == "DONE" && m["pending_commit"] != true && n == 1 && staged == 0
			}) {
				n, staged := publications(t, db, "sales-crash", "2026-12-01")
				t.Fatalf("after the restart: state %v, %d publications, %d staging tables\nlog:\n%s", m["state"], n, staged, srv2.log())
			}
			if got := published(t, db); len(got) != 1 || !sameTotals(got["2026-12-01"], map[string]int64{"NORTH": 425, "WEST": 100}) {
				t.Errorf("published %v", got)
			}
		})
	}
}

// TestCLIPartitionBusy: one writer per partition. While a run of a name and
// partition is active, a second run of them is refused (PARTITION_BUSY),
// and one of another partition of the name with JOB_NAME_ACTIVE.
func TestCLIPartitionBusy(t *testing.T) {
	srv := startServer(t, t.TempDir())
	work := t.TempDir()
	writeTestFile(t, work, "busy.yaml", `pipeline:
  transforms:
    - type: Generate
      name: Ticks
      config: {rate: 10}
    - type: LogForTesting
      name: Log
      input: Ticks
`)
	srv.mustCLI(t, work, "run", "busy.yaml", "--job-name", "busy", "--partition", "p1", "--no-wait")
	srv.waitJob("busy", "RUNNING", stateIs("RUNNING"))
	for _, tc := range []struct{ partition, code string }{{"p1", "PARTITION_BUSY"}, {"p2", "JOB_NAME_ACTIVE"}} {
		r := srv.cli(work, "run", "busy.yaml", "--job-name", "busy", "--partition", tc.partition, "--no-wait")
		if r.code != ExitFailure || !strings.Contains(r.stderr, tc.code) {
			t.Errorf("second run of partition %s: exit %d, stderr %q; want %s", tc.partition, r.code, r.stderr, tc.code)
		}
	}
	srv.mustCLI(t, work, "jobs", "cancel", "busy", "--wait")
}

// TestCLIPartitionsList: weir partitions list shows the publication log of
// a job name's partition runs — two partitions published with their row
// counts and output digests — and a shadow run of a published partition,
// which stages without publishing (the target keeps the published rows,
// the staging table stays) and prints where it staged and the diff
// command.
func TestCLIPartitionsList(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())
	work := t.TempDir()
	db := filepath.Join(work, "out.db")
	r, _, stage := publishTwoAndShadow(t, srv, work, db)
	if !strings.Contains(r.stderr, "shadow run: partition 2026-12-01 staged in "+stage) ||
		!strings.Contains(r.stderr, "weir diff 'sqlite:"+db+"#totals' 'sqlite:"+db+"#"+stage+"'") {
		t.Errorf("the shadow run's output does not say where it staged and how to compare:\n%s", r.stderr)
	}
	d := runCLI(t, work, "diff", "sqlite:"+db+"#totals", "sqlite:"+db+"#"+stage)
	// The printed comparison runs: the shadow rows against the published ones.
	if !strings.Contains(d.stdout, "per-key totals") || !strings.Contains(d.stdout, `key {"region":"WEST"}: total 107 -> total 100`) {
		t.Errorf("the shadow run's diff command: exit %d\n%s\n%s", d.code, d.stdout, d.stderr)
	}
	// Nothing was published by the shadow run: the target and the log are as before.
	if got := published(t, db); len(got) != 2 || !sameTotals(got["2026-12-01"], map[string]int64{"NORTH": 425, "WEST": 100}) {
		t.Errorf("after the shadow run the target holds %v", got)
	}
	if n, staged := publications(t, db, "sales-daily", "2026-12-01"); n != 1 || staged != 1 {
		t.Errorf("after the shadow run: %d log entries and %d staging tables, want 1 and 1", n, staged)
	}

	r = srv.mustCLI(t, work, "partitions", "list", "sales-daily", "--format", "json")
	var ps []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &ps); err != nil {
		t.Fatalf("partitions list --format json: %v\n%s", err, r.stdout)
	}
	type row struct {
		partition, status, table string
		rows                     float64
	}
	var got []row
	for _, p := range ps {
		got = append(got, row{p["partition"].(string), p["status"].(string), p["table"].(string), p["rows"].(float64)})
		if p["status"] == "published" && (!strings.HasPrefix(p["output_digest"].(string), "sha256:") || p["published_at"] == "") {
			t.Errorf("published partition without its digest or time: %v", p)
		}
	}
	want := []row{{"2026-12-01", "published", "totals", 2}, {"2026-12-01", "shadow", stage, 0}, {"2026-12-02", "published", "totals", 1}}
	if len(got) != len(want) {
		t.Fatalf("partitions list: %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("partitions list row %d: %v, want %v", i, got[i], want[i])
		}
	}
	r = srv.mustCLI(t, work, "partitions", "list", "sales-daily")
	if !strings.Contains(r.stdout, "PARTITION") || !strings.Contains(r.stdout, "shadow") {
		t.Errorf("partitions list text:\n%s", r.stdout)
	}
	if r := srv.cli(work, "run", "p.yaml", "--job-name", "sales-daily", "--shadow"); r.code != ExitUsage || !strings.Contains(r.stderr, "--shadow needs --partition") {
		t.Errorf("--shadow without --partition: exit %d, %s", r.code, r.stderr)
	}
	if r := srv.cli(work, "partitions", "list", "nosuch"); r.code != ExitFailure || !strings.Contains(r.stderr, "JOB_NOT_FOUND") {
		t.Errorf("partitions list of an unknown name: exit %d, %s", r.code, r.stderr)
	}
}

// publishTwoAndShadow publishes partitions 2026-12-01 and 2026-12-02 of
// job name sales-daily into SQLite database db, then shadow-runs
// 2026-12-01; it returns the shadow run's output, job ID and staging
// table.
func publishTwoAndShadow(t *testing.T, srv *serverProc, work, db string) (r cliResult, shadowID, stage string) {
	t.Helper()
	writeTestFile(t, work, "p.yaml", partitionPipeline(db))
	partitionWork(t, srv, work)
	for _, p := range []string{"2026-12-01", "2026-12-02"} {
		srv.mustCLI(t, work, "run", "p.yaml", "--job-name", "sales-daily", "--manifest", "sales", "--partition", p, "--wait")
	}
	r = srv.mustCLI(t, work, "run", "p.yaml", "--job-name", "sales-daily", "--manifest", "sales", "--partition", "2026-12-01", "--shadow", "--wait")
	shadowID = strings.TrimSpace(strings.SplitN(r.stdout, "\n", 2)[0])
	return r, shadowID, "totals__stage_2026_12_01_" + strings.ReplaceAll(shadowID, "-", "_")
}
