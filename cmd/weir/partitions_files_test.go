package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/io/files"
)

// fileLog reads the publication manifest of sink path p: its log's
// entries and the partitions' current job IDs.
func fileLog(t *testing.T, p string) (entries int, current map[string]string) {
	t.Helper()
	m, found, err := files.ReadPublicationManifest(p)
	if err != nil {
		t.Fatal(err)
	}
	current = map[string]string{}
	if !found {
		return 0, current
	}
	for part, pub := range m.Partitions {
		current[part] = pub.JobID
	}
	return len(m.Log), current
}

// TestCLIPartitionFileSinks runs the reference fixture as partition runs
// writing JSON files on a real server: each run stages a version
// directory and publishes it by swapping the publication manifest, the
// path itself is the published view of every partition (NORTH 425 and
// WEST 100, one reject UNKNOWN 50); a rerun of the same manifest publishes
// nothing (where a batch job of the name is refused, OUTPUT_EXISTS);
// another partition adds its rows; a shadow run stages, prints the
// comparison, which runs and agrees; weir partitions list shows the file

// filePartitionServer starts a server and a work directory holding the
// fixture's manifests (partitionWork) and p.yaml, the fixture pipeline
// reading manifest sales into the file sinks out/totals.jsonl and
// out/rejects.jsonl, whose paths it returns.
func filePartitionServer(t *testing.T) (srv *serverProc, work, totals, rejects string) {
	t.Helper()
	srv = startServer(t, t.TempDir())
	work = t.TempDir()
	writeTestFile(t, work, "p.yaml", manifestPipeline("manifest: sales", "out"))
	partitionWork(t, srv, work)
	return srv, work, filepath.Join(work, "out", "totals.jsonl"), filepath.Join(work, "out", "rejects.jsonl")
}

// targets.
func TestCLIPartitionFileSinks(t *testing.T) {
	t.Parallel()
	srv, work, totals, rejects := filePartitionServer(t)

	run := []string{"run", "p.yaml", "--job-name", "sales-daily", "--partition", "2026-12-01", "--wait"}
	srv.mustCLI(t, work, run...)
	want1 := map[string]int64{"NORTH": 425, "WEST": 100}
	if got := totalsOf(t, totals); !sameTotals(got, want1) {
		t.Fatalf("the published view holds %v, want %v", got, want1)
	}
	if rej := readLines(t, rejects); len(rej) != 1 || !strings.Contains(rej[0], "UNKNOWN") {
		t.Errorf("rejects %q, want one UNKNOWN 50", rej)
	}
	n, cur := fileLog(t, totals)
	firstJob := cur["2026-12-01"]
	if n != 1 || firstJob == "" {
		t.Fatalf("after the first run the log has %d entries, current %v", n, cur)
	}
	if got := totalsOf(t, filepath.Join(files.VersionDir(totals, "2026-12-01", firstJob), "totals-w00.jsonl")); !sameTotals(got, want1) {
		t.Errorf("the version directory holds %v", got)
	}

	// A rerun of the same manifest publishes nothing new.
	srv.mustCLI(t, work, run...)
	if n, cur := fileLog(t, totals); n != 1 || cur["2026-12-01"] != firstJob {
		t.Errorf("after a rerun: %d log entries, current %v", n, cur)
	}
	if got := totalsOf(t, totals); !sameTotals(got, want1) {
		t.Errorf("after a rerun the view holds %v", got)
	}
	// Another partition: its rows join the view, the first's untouched.
	srv.mustCLI(t, work, "run", "p.yaml", "--job-name", "sales-daily", "--partition", "2026-12-02", "--wait")
	if got := totalsOf(t, totals); !sameTotals(got, map[string]int64{"NORTH": 425, "WEST": 107}) {
		t.Errorf("with two partitions the view holds %v", got)
	}
	// A batch job of another name may not take the path.
	writeTestFile(t, work, "plain.yaml", manifestPipeline("path: d1/*.jsonl", "out"))
	if r := srv.cli(work, "run", "plain.yaml", "--job-name", "billing"); r.code == ExitOK || !strings.Contains(r.stderr, "OUTPUT_EXISTS") {
		t.Errorf("another name on the published path: exit %d, %s", r.code, r.stderr)
	}

	// A shadow run stages only, and says how to compare.
	r := srv.mustCLI(t, work, "run", "p.yaml", "--job-name", "sales-daily", "--partition", "2026-12-01", "--shadow", "--wait")
	shadowID := strings.TrimSpace(strings.SplitN(r.stdout, "\n", 2)[0])
	version := files.VersionDir(totals, "2026-12-01", shadowID)
	wantCmd := "weir diff '" + files.ManifestPath(totals) + "#2026-12-01' '" + version + "' --key FIELDS"
	if !strings.Contains(r.stderr, "shadow run: partition 2026-12-01 staged in "+version) || !strings.Contains(r.stderr, wantCmd) {
		t.Errorf("the shadow run does not say where it staged and how to compare (want %q):\n%s", wantCmd, r.stderr)
	}
	if n, cur := fileLog(t, totals); n != 2 || cur["2026-12-01"] != firstJob {
		t.Errorf("the shadow run published: %d log entries, current %v", n, cur)
	}
	if d := runCLI(t, work, "diff", files.ManifestPath(totals)+"#2026-12-01", version, "--key", "region"); d.code != ExitOK || !strings.Contains(d.stdout, "identical") && !strings.Contains(d.stdout, "0 differ") {
		t.Errorf("the shadow run's comparison: exit %d\n%s\n%s", d.code, d.stdout, d.stderr)
	}
	if d := runCLI(t, work, "diff", files.ManifestPath(totals)+"#2026-12-09", version, "--key", "region"); d.code == ExitOK || !strings.Contains(d.stderr, "has not published partition") {
		t.Errorf("a partition never published: exit %d\n%s", d.code, d.stderr)
	}

	// job:NAME/STEP finds the newest run's files (the shadow run's version).
	if d := srv.cli(work, "diff", "job:sales-daily/WriteTotals", files.ManifestPath(totals)+"#2026-12-01", "--key", "region"); d.code != ExitOK {
		t.Errorf("diff of job:sales-daily/WriteTotals: exit %d\n%s\n%s", d.code, d.stdout, d.stderr)
	}
	if d := srv.cli(work, "diff", "job:sales-daily", totals, "--key", "region"); d.code != ExitUsage || !strings.Contains(d.stderr, "WriteRejects, WriteTotals") {
		t.Errorf("diff of job:sales-daily with two file sinks: exit %d\n%s", d.code, d.stderr)
	}

	r = srv.mustCLI(t, work, "partitions", "list", "sales-daily", "--format", "json")
	var ps []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &ps); err != nil {
		t.Fatalf("partitions list --format json: %v\n%s", err, r.stdout)
	}
	var got []string
	for _, p := range ps {
		got = append(got, p["partition"].(string)+" "+p["status"].(string)+" "+filepath.Base(p["target"].(string))+" "+p["driver"].(string))
	}
	want := []string{
		"2026-12-01 published rejects.jsonl files", "2026-12-01 shadow rejects.jsonl files",
		"2026-12-01 published totals.jsonl files", "2026-12-01 shadow totals.jsonl files",
		"2026-12-02 published rejects.jsonl files", "2026-12-02 published totals.jsonl files",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("partitions list:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestCLIPartitionFilePublishCrash kills the server (kill -9) at the
// seeded points of a file publication — the version staged but the
// manifest not swapped, and the manifest swapped but the job not yet
// recorded as done — restarts it and checks that the partition ends
// published exactly once with exactly the fixture's totals.
func TestCLIPartitionFilePublishCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	for _, point := range []string{"before-publish", "after-publish"} {
		t.Run(point, func(t *testing.T) {
			data, work := t.TempDir(), t.TempDir()
			writeTestFile(t, work, "p.yaml", manifestPipeline("manifest: sales", "out"))
			totals, rejects := filepath.Join(work, "out", "totals.jsonl"), filepath.Join(work, "out", "rejects.jsonl")
			// Both sinks' publications: the crash comes at the first.
			entries := func() int {
				a, _ := fileLog(t, totals)
				b, _ := fileLog(t, rejects)
				return a + b
			}
			srv := startServerEnv(t, data, []string{"WEIR_TEST_PUBLISH_CRASH=" + point})
			partitionWork(t, srv, work)
			srv.cli(work, "run", "p.yaml", "--job-name", "sales-crash", "--partition", "2026-12-01", "--no-wait")
			select {
			case <-srv.done:
			case <-time.After(60 * time.Second):
				t.Fatalf("the server was not killed at %s\nlog:\n%s", point, srv.log())
			}
			switch n := entries(); {
			case point == "before-publish" && n != 0:
				t.Fatalf("killed before publishing, the logs have %d entries", n)
			case point == "after-publish" && n != 1:
				t.Fatalf("killed after the first publication, the logs have %d entries", n)
			}
			srv2 := startServer(t, data)
			var m map[string]any
			if !await.Until(60*time.Second, 100*time.Millisecond, func() bool {
				m = srv2.describe("sales-crash")
				return m["state"] == "DONE" && m["pending_commit"] != true && entries() == 2
			}) {
				t.Fatalf("after the restart: state %v, %d publications\nlog:\n%s", m["state"], entries(), srv2.log())
			}
			if got := totalsOf(t, totals); !sameTotals(got, map[string]int64{"NORTH": 425, "WEST": 100}) {
				t.Errorf("published %v", got)
			}
			if rej := readLines(t, rejects); len(rej) != 1 || !strings.Contains(rej[0], "UNKNOWN") {
				t.Errorf("rejects %q, want one UNKNOWN 50", rej)
			}
		})
	}
}

// TestCLIPartitionFileSinkMidRunCrash kills the server (kill -9) in the
// middle of a partition run writing a file sink, after a checkpoint: the
// restarted server cannot resume a file source from the checkpoint, so it
// runs the partition again from the beginning, and the published view
// holds every total exactly once (nothing the dead attempt staged is
// published).
func TestCLIPartitionFileSinkMidRunCrash(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts servers")
	}
	data, work := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(work, "big"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Enough rows that the run spans several 100 ms checkpoints: the crash
	// point is the second barrier after rows arrived. 400,000 rows ran in
	// 190 ms on a quiet machine (one barrier); 1.5 million take about
	// 750 ms there, seven barriers, and longer on a loaded one.
	const rows = 1_500_000
	var b strings.Builder
	want := map[string]int64{}
	for i := range rows {
		region := []string{"NORTH", "WEST", "EAST"}[i%3]
		fmt.Fprintf(&b, "{\"region\": %q, \"amount\": %d}\n", region, i%7)
		want[region] += int64(i % 7)
	}
	writeTestFile(t, filepath.Join(work, "big"), "a.jsonl", b.String())
	// Rows of amount 0 are rejected: the rejects sink gets rows all
	// through the run (the totals only at its end).
	pipeline := strings.Replace(manifestPipeline("manifest: big", "out"), `known_region: region in ["NORTH", "WEST"]`, `positive: amount > 0`, 1)
	writeTestFile(t, work, "p.yaml", pipeline)
	totals, rejects := filepath.Join(work, "out", "totals.jsonl"), filepath.Join(work, "out", "rejects.jsonl")
	wantRejects := (rows + 6) / 7

	srv := startServerEnv(t, data, []string{"WEIR_TEST_PUBLISH_CRASH=mid-run"})
	srv.mustCLI(t, work, "manifests", "create", "big", "--partition", "p1", "--files", "big/*.jsonl")
	srv.cli(work, "run", "p.yaml", "--job-name", "big-run", "--partition", "p1", "--no-wait")
	select {
	case <-srv.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the server was not killed in the middle of the run: %s\nlog:\n%s", srv.cli(work, "jobs", "describe", "big-run").stdout, srv.log())
	}
	if n, _ := fileLog(t, rejects); n != 0 {
		t.Fatalf("killed in the middle of the run, the log has %d entries", n)
	}
	srv2 := startServer(t, data)
	var m map[string]any
	if !await.Until(90*time.Second, 100*time.Millisecond, func() bool {
		m = srv2.describe("big-run")
		n, _ := fileLog(t, totals)
		r, _ := fileLog(t, rejects)
		return m["state"] == "DONE" && m["pending_commit"] != true && n == 1 && r == 1
	}) {
		t.Fatalf("after the restart: state %v\nlog:\n%s", m["state"], srv2.log())
	}
	if got := totalsOf(t, totals); !sameTotals(got, want) {
		t.Errorf("published %v, want %v", got, want)
	}
	if got := len(readLines(t, rejects)); got != wantRejects {
		t.Errorf("published %d rejects, want %d (each once)", got, wantRejects)
	}
}

// TestCLIDiffInputManifest: weir diff counts conservation's input itself
// from the partition's input manifest (--input manifest:NAME#P): the
// fixture's 575 = 525 + 50 on both sides of a published partition and its
// shadow rerun; a manifest file changed since refuses the comparison, as
// a run of the partition would.
func TestCLIDiffInputManifest(t *testing.T) {
	t.Parallel()
	srv, work, totals, rejects := filePartitionServer(t)
	srv.mustCLI(t, work, "run", "p.yaml", "--job-name", "sales-daily", "--partition", "2026-12-01", "--wait")
	r := srv.mustCLI(t, work, "run", "p.yaml", "--job-name", "sales-daily", "--partition", "2026-12-01", "--shadow", "--wait")
	shadowID := strings.TrimSpace(strings.SplitN(r.stdout, "\n", 2)[0])
	args := []string{"diff", files.ManifestPath(totals) + "#2026-12-01", files.VersionDir(totals, "2026-12-01", shadowID), "--key", "region",
		"--rejects-old", files.ManifestPath(rejects) + "#2026-12-01", "--rejects-new", files.VersionDir(rejects, "2026-12-01", shadowID),
		"--conserve", "amount=total", "--input", "manifest:sales#2026-12-01"}

	d := srv.cli(work, append(slices.Clone(args), "--format", "json")...)
	if d.code != ExitOK {
		t.Fatalf("diff --input manifest: exit %d\n%s\n%s", d.code, d.stdout, d.stderr)
	}
	var rep struct {
		Input struct {
			Files int     `json:"files"`
			Rows  int64   `json:"rows"`
			Field string  `json:"field"`
			Sum   float64 `json:"sum"`
		} `json:"input"`
		Conservation []struct {
			Input, Accepted, Rejected float64
			Balanced                  bool
		} `json:"conservation"`
	}
	if err := json.Unmarshal([]byte(d.stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, d.stdout)
	}
	if rep.Input.Files != 2 || rep.Input.Rows != 4 || rep.Input.Field != "amount" || rep.Input.Sum != 575 {
		t.Errorf("input read: %+v, want 2 files, 4 rows, amount 575", rep.Input)
	}
	if len(rep.Conservation) != 2 {
		t.Fatalf("conservation: %+v, want both sides", rep.Conservation)
	}
	for _, c := range rep.Conservation {
		if !c.Balanced || c.Input != 575 || c.Accepted != 525 || c.Rejected != 50 {
			t.Errorf("conservation %+v, want 575 = 525 + 50", c)
		}
	}
	if d := srv.cli(work, args...); d.code != ExitOK || !strings.Contains(d.stdout, "input manifest:sales#2026-12-01: 4 row(s) in 2 file(s), amount 575") {
		t.Errorf("the text report does not say what the input held: exit %d\n%s", d.code, d.stdout)
	}
	if d := srv.cli(work, append(slices.Clone(args), "--input-count", "575")...); d.code != ExitUsage || !strings.Contains(d.stderr, "not both") {
		t.Errorf("--input with --input-count: exit %d, %s", d.code, d.stderr)
	}
	if d := srv.cli(work, append(slices.Clone(args[:len(args)-1]), "manifest:sales")...); d.code != ExitUsage || !strings.Contains(d.stderr, "manifest:NAME#PARTITION") {
		t.Errorf("--input manifest without a partition: exit %d, %s", d.code, d.stderr)
	}

	// An input file changed since the manifest: the count would not be of
	// what the runs read.
	writeTestFile(t, filepath.Join(work, "d1"), "b.jsonl", `{"region": "NORTH", "amount": 175}`+"\n"+`{"region": "UNKNOWN", "amount": 51}`+"\n")
	if d := srv.cli(work, args...); d.code != ExitRehearsalFailed || !strings.Contains(d.stderr, "changed since the manifest was created") || !strings.Contains(d.stderr, "b.jsonl") {
		t.Errorf("--input of a changed manifest file: exit %d, %s", d.code, d.stderr)
	}
}
