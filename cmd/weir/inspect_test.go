package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// TestCLIInspectDataDir: once the server (or a Go program) that kept a
// data directory has stopped, `weir jobs list|describe|history|logs
// --data-dir DIR` prints its records as the server would have, changes
// nothing in the directory (its state store's files are byte-identical
// after, and a server started on it again resumes the streaming job),
// and refuses a directory a running process holds, --follow, and
// --server beside --data-dir.
func TestCLIInspectDataDir(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	work := t.TempDir()
	srv := startServer(t, dataDir)
	r := srv.cli(work, "run", testdata(t, "totals.yaml"), "--job-name", "totals")
	cliCase{args: []string{"run", "totals"}, wantCode: ExitOK}.check(t, r)
	r = srv.cli(work, "run", testdata(t, "stream_windows.yaml"), "--job-name", "sums")
	cliCase{args: []string{"run", "sums"}, wantCode: ExitOK}.check(t, r)
	totals := srv.waitJob("totals", "DONE", stateIs("DONE"))
	srv.waitJob("sums", "a checkpoint", epochAtLeast(2))

	// While the server holds the directory, it is the one to ask.
	runSeq(t, work, []cliCase{
		{name: "in use", args: []string{"jobs", "list", "--data-dir", dataDir}, wantCode: ExitFailure, wantStderr: []string{"in use", "--server"}},
	})
	if code := srv.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("server exit %d\n%s", code, srv.log())
	}
	before := treeDigest(t, filepath.Join(dataDir, "state"))

	r = runCLI(t, work, "jobs", "list", "--data-dir", dataDir)
	cliCase{args: []string{"jobs", "list", "--data-dir"}, wantCode: ExitOK, wantStdout: []string{"JOB_ID", totals["id"].(string)}}.check(t, r)
	rows := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) == 6 {
			rows[f[1]] = f[2] + " " + f[5]
		}
	}
	if rows["totals"] != "Batch Done" || rows["sums"] != "Streaming Running" {
		t.Errorf("jobs list --data-dir rows %v, want totals Batch Done and sums Streaming Running\n%s", rows, r.stdout)
	}

	r = runCLI(t, work, "jobs", "describe", "totals", "--data-dir", dataDir, "--format", "json")
	var j map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil || r.code != ExitOK {
		t.Fatalf("describe --data-dir: exit %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if j["id"] != totals["id"] || j["state"] != "DONE" || fmt.Sprint(j["steps"]) != fmt.Sprint(totals["steps"]) {
		t.Errorf("describe --data-dir says %v %v steps %v, the server said %v %v steps %v", j["id"], j["state"], j["steps"], totals["id"], totals["state"], totals["steps"])
	}
	runSeq(t, work, []cliCase{
		{name: "describe text", args: []string{"jobs", "describe", "sums", "--data-dir", dataDir}, wantCode: ExitOK, wantStdout: []string{"sums", "Running"}},
		{name: "history", args: []string{"jobs", "history", "sums", "--data-dir", dataDir}, wantCode: ExitOK, wantStdout: []string{"GENERATION", "create  Running"}},
		{name: "logs", args: []string{"jobs", "logs", "totals", "--data-dir", dataDir}, wantCode: ExitOK, wantStdout: []string{"job moved from RUNNING to DONE"}},
		{name: "snapshots", args: []string{"snapshots", "list", "--data-dir", dataDir}, wantCode: ExitOK, wantStdout: []string{"SNAPSHOT_ID"}},
		{name: "manifests", args: []string{"manifests", "list", "--data-dir", dataDir}, wantCode: ExitOK},
		{name: "unknown job", args: []string{"jobs", "describe", "nope", "--data-dir", dataDir}, wantCode: ExitFailure, wantStderr: []string{"JOB_NOT_FOUND"}},
		{name: "follow", args: []string{"jobs", "logs", "sums", "--follow", "--data-dir", dataDir}, wantCode: ExitUsage, wantStderr: []string{"--follow"}},
		{name: "with --server", args: []string{"jobs", "list", "--data-dir", dataDir, "--server", "127.0.0.1:1"}, wantCode: ExitUsage, wantStderr: []string{"--data-dir", "--server"}},
		{name: "no directory", args: []string{"jobs", "list", "--data-dir", filepath.Join(work, "nope")}, wantCode: ExitFailure, wantStderr: []string{"no such directory"}},
		{name: "not a data directory", args: []string{"jobs", "list", "--data-dir", work}, wantCode: ExitFailure, wantStderr: []string{"not a weir data directory"}},
		{name: "unreachable says --data-dir", args: []string{"jobs", "list", "--server", "127.0.0.1:1"}, wantCode: ExitServerUnreachable, wantStderr: []string{"--data-dir"}},
	})

	if after := treeDigest(t, filepath.Join(dataDir, "state")); after != before {
		t.Errorf("reading the records changed the state store:\nbefore %s\nafter  %s", before, after)
	}
	// Nothing resumed or ended the streaming job: a server on the
	// directory resumes it.
	srv = startServer(t, dataDir)
	srv.waitJob("sums", "RUNNING again", stateIs("RUNNING"))
}

// treeDigest hashes every file's name and content under dir.
func treeDigest(t *testing.T, dir string) string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			names = append(names, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%s %d\n", strings.TrimPrefix(n, dir), len(b))
		h.Write(b)
	}
	return fmt.Sprintf("%x (%d files)", h.Sum(nil), len(names))
}

// runSeq runs cases one after the other, now (runCases's run in parallel
// once the test function has returned).
func runSeq(t *testing.T, dir string, cases []cliCase) {
	t.Helper()
	for _, tc := range cases {
		tc.check(t, runCLI(t, dir, tc.args...))
	}
}
