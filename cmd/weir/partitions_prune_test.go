package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/io/files"
)

// pruneReply decodes weir partitions prune --format json into its
// entries as "PARTITION STATUS TABLE JOB" and its dry_run flag.
func pruneReply(t *testing.T, out string) ([]string, bool) {
	t.Helper()
	var r struct {
		Removed []map[string]any `json:"removed"`
		DryRun  bool             `json:"dry_run"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("partitions prune --format json: %v\n%s", err, out)
	}
	var got []string
	for _, p := range r.Removed {
		got = append(got, p["partition"].(string)+" "+p["status"].(string)+" "+p["table"].(string)+" "+p["job_id"].(string))
	}
	return got, r.DryRun
}

// partitionStatuses is weir partitions list --format json as
// "PARTITION STATUS TABLE" lines.
func partitionStatuses(t *testing.T, srv *serverProc, work, name string) []string {
	t.Helper()
	r := srv.mustCLI(t, work, "partitions", "list", name, "--format", "json")
	var ps []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &ps); err != nil {
		t.Fatalf("partitions list --format json: %v\n%s", err, r.stdout)
	}
	var out []string
	for _, p := range ps {
		out = append(out, p["partition"].(string)+" "+p["status"].(string)+" "+p["table"].(string))
	}
	return out
}

// TestCLIPartitionsPrune: a shadow run of a published partition leaves
// its staging table; weir partitions prune --dry-run lists it and drops
// nothing, a prune narrowed to another partition or status drops nothing,
// and prune drops it: partitions list no longer shows it, the published
// partitions and their rows are untouched.
func TestCLIPartitionsPrune(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())
	work := t.TempDir()
	db := filepath.Join(work, "out.db")
	r, shadowID, stage := publishTwoAndShadow(t, srv, work, db)
	before := published(t, db)

	r = srv.mustCLI(t, work, "partitions", "prune", "sales-daily", "--dry-run", "--format", "json")
	got, dry := pruneReply(t, r.stdout)
	if want := "2026-12-01 shadow " + stage + " " + shadowID; !dry || len(got) != 1 || got[0] != want {
		t.Errorf("prune --dry-run: %q (dry_run %v), want [%q]", got, dry, want)
	}
	if n, staged := publications(t, db, "sales-daily", "2026-12-01"); n != 1 || staged != 1 {
		t.Errorf("after prune --dry-run: %d log entries and %d staging tables, want 1 and 1", n, staged)
	}
	// Narrowed to another partition or to staged entries: nothing to remove.
	for _, args := range [][]string{{"--partition", "2026-12-02"}, {"--status", "staged"}} {
		r = srv.mustCLI(t, work, append([]string{"partitions", "prune", "sales-daily", "--format", "json"}, args...)...)
		if got, _ := pruneReply(t, r.stdout); len(got) != 0 {
			t.Errorf("prune %v removed %q, want nothing", args, got)
		}
	}
	if _, staged := publications(t, db, "sales-daily", "2026-12-01"); staged != 1 {
		t.Errorf("a narrowed prune dropped the staging table")
	}

	r = srv.mustCLI(t, work, "partitions", "prune", "sales-daily", "--status", "shadow,staged")
	if !strings.Contains(r.stdout, "Removed 1:") || !strings.Contains(r.stdout, stage) || !strings.Contains(r.stdout, shadowID) {
		t.Errorf("prune's text output:\n%s", r.stdout)
	}
	if n, staged := publications(t, db, "sales-daily", "2026-12-01"); n != 1 || staged != 0 {
		t.Errorf("after prune: %d log entries and %d staging tables, want 1 and 0", n, staged)
	}
	want := []string{"2026-12-01 published totals", "2026-12-02 published totals"}
	if got := partitionStatuses(t, srv, work, "sales-daily"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("partitions list after prune:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	after := published(t, db)
	if len(after) != len(before) || !sameTotals(after["2026-12-01"], before["2026-12-01"]) || !sameTotals(after["2026-12-02"], before["2026-12-02"]) {
		t.Errorf("prune changed the published rows: %v, were %v", after, before)
	}
	// Nothing left: a second prune removes nothing and says so.
	r = srv.mustCLI(t, work, "partitions", "prune", "sales-daily")
	if !strings.Contains(r.stdout, "Removed nothing") {
		t.Errorf("a second prune:\n%s", r.stdout)
	}
	if r := srv.cli(work, "partitions", "prune", "nosuch"); r.code != ExitFailure || !strings.Contains(r.stderr, "JOB_NOT_FOUND") {
		t.Errorf("prune of an unknown name: exit %d, %s", r.code, r.stderr)
	}
}

// TestCLIPartitionsPruneFiles: a shadow run of a file sink's published
// partition leaves its version directory under PATH.versions/; prune
// --dry-run keeps it, prune removes it and nothing else: the published
// versions, the manifest and the view stay.
func TestCLIPartitionsPruneFiles(t *testing.T) {
	t.Parallel()
	srv, work, totals, rejects := filePartitionServer(t)
	srv.mustCLI(t, work, "run", "p.yaml", "--job-name", "sales-daily", "--partition", "2026-12-01", "--wait")
	_, cur := fileLog(t, totals)
	pubJob := cur["2026-12-01"]
	r := srv.mustCLI(t, work, "run", "p.yaml", "--job-name", "sales-daily", "--partition", "2026-12-01", "--shadow", "--wait")
	shadowID := strings.TrimSpace(strings.SplitN(r.stdout, "\n", 2)[0])
	shadowDirs := []string{files.VersionDir(rejects, "2026-12-01", shadowID), files.VersionDir(totals, "2026-12-01", shadowID)}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }

	r = srv.mustCLI(t, work, "partitions", "prune", "sales-daily", "--partition", "2026-12-01", "--dry-run", "--format", "json")
	got, dry := pruneReply(t, r.stdout)
	want := []string{"2026-12-01 shadow " + shadowDirs[0] + " " + shadowID, "2026-12-01 shadow " + shadowDirs[1] + " " + shadowID}
	if !dry || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("prune --dry-run:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, d := range shadowDirs {
		if !exists(d) {
			t.Errorf("prune --dry-run removed %s", d)
		}
	}
	r = srv.mustCLI(t, work, "partitions", "prune", "sales-daily", "--format", "json")
	if got, dry := pruneReply(t, r.stdout); dry || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("prune:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, d := range shadowDirs {
		if exists(d) {
			t.Errorf("prune left %s", d)
		}
	}
	for _, p := range []string{totals, rejects} {
		if d := files.VersionDir(p, "2026-12-01", pubJob); !exists(d) {
			t.Errorf("prune removed the published version %s", d)
		}
	}
	if n, cur := fileLog(t, totals); n != 1 || cur["2026-12-01"] != pubJob {
		t.Errorf("after prune: %d log entries, current %v", n, cur)
	}
	if got := totalsOf(t, totals); !sameTotals(got, map[string]int64{"NORTH": 425, "WEST": 100}) {
		t.Errorf("after prune the published view holds %v", got)
	}
	wantList := []string{"2026-12-01 published " + files.VersionDir(rejects, "2026-12-01", pubJob), "2026-12-01 published " + files.VersionDir(totals, "2026-12-01", pubJob)}
	if got := partitionStatuses(t, srv, work, "sales-daily"); strings.Join(got, "\n") != strings.Join(wantList, "\n") {
		t.Errorf("partitions list after prune:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantList, "\n"))
	}
}

// TestCLIPartitionsPruneArgs: prune's argument checks are usage errors,
// before any server is asked, naming the bad value.
func TestCLIPartitionsPruneArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown status", []string{"sales", "--status", "bogus"}, `--status "bogus"`},
		{"one bad status of two", []string{"sales", "--status", "staged,nope"}, `--status "nope"`},
		{"published", []string{"sales", "--status", "published"}, `published entries are never pruned`},
		{"running", []string{"sales", "--status", "running"}, `running entries are never pruned`},
		{"no name", nil, "NAME"},
		{"bad format", []string{"sales", "--format", "xml"}, "xml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, t.TempDir(), append([]string{"partitions", "prune", "--server", "http://127.0.0.1:1"}, tc.args...)...)
			if r.code != ExitUsage || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("prune %v: exit %d, stderr %q; want exit %d naming %q", tc.args, r.code, r.stderr, ExitUsage, tc.want)
			}
		})
	}
}

// TestCLIPartitionsPruneReplaced: a partition published again from a new
// manifest keeps the earlier version's directory (the log names it);
// prune leaves it by default, --status replaced removes it (and only it),
// the log keeps the entry and the view keeps the partition's new rows.
func TestCLIPartitionsPruneReplaced(t *testing.T) {
	t.Parallel()
	srv, work, totals, rejects := filePartitionServer(t)
	writeTestFile(t, work, "p2.yaml", manifestPipeline("manifest: sales-fixed", "out"))
	if err := os.MkdirAll(filepath.Join(work, "d3"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(work, "d3"), "a.jsonl", `{"region": "WEST", "amount": 7}`+"\n"+`{"region": "SOUTH", "amount": 1}`+"\n")
	srv.mustCLI(t, work, "manifests", "create", "sales-fixed", "--partition", "2026-12-01", "--files", "d3/*.jsonl")
	srv.mustCLI(t, work, "run", "p.yaml", "--job-name", "sales-daily", "--partition", "2026-12-01", "--wait")
	_, cur := fileLog(t, totals)
	first := cur["2026-12-01"]
	srv.mustCLI(t, work, "run", "p2.yaml", "--job-name", "sales-daily", "--partition", "2026-12-01", "--wait")
	n, cur := fileLog(t, totals)
	second := cur["2026-12-01"]
	if n != 2 || second == first {
		t.Fatalf("the second manifest did not replace the partition: %d log entries, current %s (first %s)", n, second, first)
	}
	oldDirs := []string{files.VersionDir(rejects, "2026-12-01", first), files.VersionDir(totals, "2026-12-01", first)}
	newDirs := []string{files.VersionDir(rejects, "2026-12-01", second), files.VersionDir(totals, "2026-12-01", second)}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	for _, d := range append(append([]string{}, oldDirs...), newDirs...) {
		if !exists(d) {
			t.Fatalf("version %s is missing before any prune", d)
		}
	}

	r := srv.mustCLI(t, work, "partitions", "prune", "sales-daily", "--format", "json")
	if got, _ := pruneReply(t, r.stdout); len(got) != 0 {
		t.Errorf("prune without --status removed %v", got)
	}
	want := []string{"2026-12-01 replaced " + oldDirs[0] + " " + first, "2026-12-01 replaced " + oldDirs[1] + " " + first}
	r = srv.mustCLI(t, work, "partitions", "prune", "sales-daily", "--status", "replaced", "--dry-run", "--format", "json")
	if got, dry := pruneReply(t, r.stdout); !dry || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("prune --status replaced --dry-run:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, d := range oldDirs {
		if !exists(d) {
			t.Errorf("prune --dry-run removed %s", d)
		}
	}
	r = srv.mustCLI(t, work, "partitions", "prune", "sales-daily", "--status", "replaced", "--format", "json")
	if got, _ := pruneReply(t, r.stdout); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("prune --status replaced:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, d := range oldDirs {
		if exists(d) {
			t.Errorf("prune --status replaced left %s", d)
		}
	}
	for _, d := range newDirs {
		if !exists(d) {
			t.Errorf("prune --status replaced removed the current version %s", d)
		}
	}
	if got := totalsOf(t, totals); !sameTotals(got, map[string]int64{"WEST": 7}) {
		t.Errorf("after prune the published view holds %v, want WEST 7", got)
	}
	if n, cur := fileLog(t, totals); n != 2 || cur["2026-12-01"] != second {
		t.Errorf("after prune: %d log entries, current %v", n, cur)
	}
	if len(partitionStatuses(t, srv, work, "sales-daily")) != 4 {
		t.Errorf("partitions list after prune: %v, want the 4 log entries", partitionStatuses(t, srv, work, "sales-daily"))
	}
	r = srv.mustCLI(t, work, "partitions", "prune", "sales-daily", "--status", "replaced", "--format", "json")
	if got, _ := pruneReply(t, r.stdout); len(got) != 0 {
		t.Errorf("a second prune --status replaced removed %v", got)
	}
}

// TestCLIPartitionsPruneFailedRun: a partition run that fails (its
// AssertEqual does not hold) publishes nothing; what its file sink wrote
// stays as a staged version, listed staged, and prune removes it — the
// published version of an earlier run untouched.
func TestCLIPartitionsPruneFailedRun(t *testing.T) {
	t.Parallel()
	srv, work, totals, _ := filePartitionServer(t)
	failing := manifestPipeline("manifest: sales", "out") + `    - type: AssertEqual
      name: ExpectNothing
      input: Totals
      config:
        elements: []
`
	writeTestFile(t, work, "failing.yaml", failing)
	srv.mustCLI(t, work, "run", "p.yaml", "--job-name", "sales-daily", "--partition", "2026-12-01", "--wait")
	_, cur := fileLog(t, totals)
	published := cur["2026-12-01"]

	r := srv.cli(work, "run", "failing.yaml", "--job-name", "sales-daily", "--partition", "2026-12-02", "--wait")
	if r.code == ExitOK {
		t.Fatalf("the failing run succeeded:\n%s", r.stderr)
	}
	jobs, err := srv.api.List(context.Background(), "all")
	if err != nil {
		t.Fatal(err)
	}
	failedID := ""
	for _, j := range jobs {
		if j.Name == "sales-daily" && j.State == client.StateFailed {
			failedID = j.ID
		}
	}
	if failedID == "" {
		t.Fatalf("no FAILED run of sales-daily:\n%s", r.stderr)
	}
	staged := files.VersionDir(totals, "2026-12-02", failedID)
	if _, err := os.Stat(staged); err != nil {
		t.Fatalf("the failed run left no version directory: %v", err)
	}
	if n, cur := fileLog(t, totals); n != 1 || cur["2026-12-02"] != "" {
		t.Fatalf("the failed run published: %d log entries, %v", n, cur)
	}
	if got := partitionStatuses(t, srv, work, "sales-daily"); !slices.Contains(got, "2026-12-02 staged "+staged) {
		t.Errorf("partitions list does not show the failed run's version staged:\n%s", strings.Join(got, "\n"))
	}
	r = srv.mustCLI(t, work, "partitions", "prune", "sales-daily", "--status", "staged", "--format", "json")
	if got, _ := pruneReply(t, r.stdout); !slices.Contains(got, "2026-12-02 staged "+staged+" "+failedID) {
		t.Errorf("prune --status staged removed %v, want the failed run's %s", got, staged)
	}
	if _, err := os.Stat(staged); !os.IsNotExist(err) {
		t.Errorf("prune left the failed run's version: %v", err)
	}
	if _, err := os.Stat(files.VersionDir(totals, "2026-12-01", published)); err != nil {
		t.Errorf("prune removed the published version: %v", err)
	}
}
