package weirx_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/weirx"
)

// TestProgramCreateFromSnapshot runs examples/sdk-counts as real
// processes: a snapshot taken through the program's own snapshot routes,
// the job cancelled, a refused --create-from-snapshot (v3 changes a key:
// exit 6, nothing created), then v2 started from the snapshot: a new job
// of the name, generation above the snapshot's, naming the snapshot, that
// checkpoints.
func TestProgramCreateFromSnapshot(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs programs")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to build the example")
	}
	v1, v2, v3 := buildCounts(t, "v1"), buildCounts(t, "v2"), buildCounts(t, "v3")
	dir := t.TempDir()
	args := []string{"--job-name", "counts", "--data-dir", dir}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	p1 := startProgram(t, v1, args...)
	j1 := p1.waitEpoch("counts", 2)
	c := p1.client()
	snap, err := c.CreateSnapshot(ctx, client.CreateSnapshotRequest{JobID: "counts"})
	if err != nil {
		t.Fatalf("snapshot through the program's API: %v", err)
	}
	if snap, err = c.WaitSnapshot(ctx, snap.ID, 50*time.Millisecond, nil); err != nil || snap.State != client.SnapshotReady || snap.SDK != record.SDKGo {
		t.Fatalf("snapshot: %+v %v", snap, err)
	}
	if _, err := c.Cancel(ctx, "counts"); err != nil {
		t.Fatal(err)
	}
	if code := p1.wait(); code == weirx.ExitIncompatible {
		t.Fatalf("v1 after the cancel exited %d\nlog:\n%s", code, p1.log())
	}

	code, stdout, stderr := runProgram(t, v3, append(args, "--create-from-snapshot", snap.ID)...)
	if code != weirx.ExitIncompatible || !strings.Contains(stdout, "KEY_CODER_CHANGED") {
		t.Fatalf("v3 --create-from-snapshot: exit %d\nstdout:\n%s\nstderr:\n%s\nwant %d with the report", code, stdout, stderr, weirx.ExitIncompatible)
	}
	if code, _, stderr := runProgram(t, v2, append(args, "--create-from-snapshot", snap.ID, "--update")...); code != weirx.ExitUsage || !strings.Contains(stderr, "--update") {
		t.Fatalf("--create-from-snapshot with --update: exit %d %s", code, stderr)
	}
	if code, _, stderr := runProgram(t, v2, append(args, "--create-from-snapshot", "no-such-snapshot")...); code != weirx.ExitFailure || !strings.Contains(stderr, "no-such-snapshot") {
		t.Fatalf("from a missing snapshot: exit %d %s", code, stderr)
	}

	p2 := startProgram(t, v2, append(args, "--create-from-snapshot", snap.ID)...)
	j2 := p2.waitEpoch("counts", snap.Epoch)
	if j2.ID == j1.ID || j2.CreatedFromSnapshotID != snap.ID || j2.Generation < snap.Generation+1 || j2.SDK != record.SDKGo {
		t.Fatalf("the job from the snapshot: %s generation %d created_from %q sdk %q", j2.ID, j2.Generation, j2.CreatedFromSnapshotID, j2.SDK)
	}
	hist, err := p2.client().History(ctx, "counts")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist.Jobs) != 2 {
		t.Fatalf("the name's jobs: %d, want 2 (the refused start created none)", len(hist.Jobs))
	}
	if code := p2.signal(15); code != weirx.ExitOK {
		t.Fatalf("v2 exit code on SIGTERM = %d\nlog:\n%s", code, p2.log())
	}
}
