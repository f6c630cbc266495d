package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/errcode"
)

// TestCLISnapshotExportImport moves a snapshot between two real `weir
// server`s as a file: export from one, import into the other (a fresh data
// directory), and a job created there from it; a flipped byte and a
// truncated file are refused by the CLI and, sent as they are, by the
// server, which then has no snapshot.
func TestCLISnapshotExportImport(t *testing.T) {
	t.Parallel()
	a := startServer(t, t.TempDir())
	b := startServer(t, t.TempDir())
	work := t.TempDir()
	stream := testdata(t, "stream_windows.yaml")
	r := a.cli(work, "run", stream, "--job-name", "sums")
	cliCase{wantCode: ExitOK}.check(t, r)
	a.waitJob("sums", "a checkpoint", epochAtLeast(1))
	r = a.cli(work, "snapshots", "create", "--job-id", "sums", "--wait")
	cliCase{wantCode: ExitOK}.check(t, r)
	id := strings.TrimSpace(r.stdout)
	file := filepath.Join(work, "sums.weirsnap")

	for _, tc := range []cliCase{
		{name: "export", args: []string{"snapshots", "export", id, "--output", file}, wantStdout: []string{"Exported snapshot " + id + " of job sums to " + file, "format version 1"}},
		{name: "export without --output", args: []string{"snapshots", "export", id}, wantCode: ExitUsage, wantStderr: []string{"--output"}},
		{name: "export an unknown snapshot", args: []string{"snapshots", "export", "nope", "--output", filepath.Join(work, "x")}, wantCode: ExitFailure, wantStderr: []string{"SNAPSHOT_NOT_FOUND"}},
	} {
		tc.check(t, a.cli(work, tc.args...))
	}
	if _, err := os.Stat(filepath.Join(work, "x")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed export left its file: %v", err)
	}
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 1
	flippedFile := filepath.Join(work, "flipped.weirsnap")
	truncFile := filepath.Join(work, "truncated.weirsnap")
	if err := errors.Join(os.WriteFile(flippedFile, flipped, 0o644), os.WriteFile(truncFile, good[:len(good)-7], 0o644)); err != nil {
		t.Fatal(err)
	}
	// The server refuses a damaged file sent as it is (the CLI checks
	// first, so this goes through the API client).
	c, err := client.NewClient(b.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ae *client.Error
	if _, err := c.ImportSnapshot(context.Background(), bytes.NewReader(flipped), "", nil); !errors.As(err, &ae) || ae.Code != errcode.SnapshotCorrupt {
		t.Fatalf("the server took a flipped file: %v", err)
	}
	for _, tc := range []cliCase{
		{name: "import a flipped byte", args: []string{"snapshots", "import", flippedFile}, wantCode: ExitFailure, wantStderr: []string{"damaged", "SNAPSHOT_CORRUPT"}},
		{name: "import a truncated file", args: []string{"snapshots", "import", truncFile}, wantCode: ExitFailure, wantStderr: []string{"truncated", "SNAPSHOT_CORRUPT"}},
		{name: "nothing was imported", args: []string{"snapshots", "list", "--all", "--format", "json"}, wantStdout: []string{"[]"}},
		{name: "import", args: []string{"snapshots", "import", file, "--snapshot-ttl", "2d"}, wantStdout: []string{"Imported snapshot " + id + " of job sums", "READY"}},
		{name: "import it again", args: []string{"snapshots", "import", file}, wantCode: ExitFailure, wantStderr: []string{"SNAPSHOT_EXISTS"}},
		{name: "describe the import", args: []string{"snapshots", "describe", id}, wantStdout: []string{"READY", "2d"}},
	} {
		tc.check(t, b.cli(work, tc.args...))
	}
	// The job from it writes its own output (another job's file is
	// OUTPUT_EXISTS): it runs in another directory.
	moved := t.TempDir()
	cliCase{name: "a job from it", args: []string{"run", stream, "--job-name", "moved", "--create-from-snapshot", id}}.check(t, b.cli(moved, "run", stream, "--job-name", "moved", "--create-from-snapshot", id))
	m := b.waitJob("moved", "RUNNING", stateIs("RUNNING"))
	if m["created_from_snapshot_id"] != id {
		t.Fatalf("the job from the imported snapshot: %v", m)
	}
}
