package weirx_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/weirx"
)

// TestProgramTakeoverWithToken: a program serving with a generated token
// refuses unauthenticated requests and a successor with a wrong token; a
// successor reading the data directory's token file takes the job over.
func TestProgramTakeoverWithToken(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs programs")
	}
	v1, v2 := buildCounts(t, "v1"), buildCounts(t, "v2")
	dir := t.TempDir()
	args := []string{"--job-name", "counts", "--data-dir", dir, "--generate-auth-token"}
	ctx := context.Background()

	p1 := startProgram(t, v1, args...)
	b, err := os.ReadFile(filepath.Join(dir, "auth-token"))
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(string(b))
	if !strings.Contains(p1.log(), tok) {
		t.Errorf("the program did not print its generated token on stderr")
	}
	var ae *client.Error
	if _, err := p1.client().Get(ctx, "counts"); !errors.As(err, &ae) || ae.Code != errcode.Unauthenticated || ae.Status != 401 {
		t.Fatalf("a request without the token: %v, want 401 UNAUTHENTICATED", err)
	}
	c := p1.client().WithToken(tok)
	j1, err := c.Get(ctx, "counts")
	if err != nil {
		t.Fatal(err)
	}

	// A successor with a wrong token is refused; the job runs on.
	code, _, stderr := runProgram(t, v2, append(args, "--update", "--token", "wrong-token-0123456789")...)
	if code != weirx.ExitFailure || !strings.Contains(stderr, "UNAUTHENTICATED") && !strings.Contains(stderr, "bearer token") {
		t.Fatalf("v2 --update with a wrong token: exit %d, stderr %q", code, stderr)
	}
	if j, err := c.Get(ctx, "counts"); err != nil || j.ID != j1.ID {
		t.Fatalf("after the refused takeover: %v %v", j, err)
	}

	// A successor that reads DATA_DIR/auth-token takes over.
	p2 := startProgram(t, v2, append(args, "--update")...)
	if code := p1.wait(); code != weirx.ExitOK {
		t.Fatalf("v1 exit code after the release = %d, want 0\nlog:\n%s", code, p1.log())
	}
	if strings.Contains(p2.log(), tok) {
		t.Errorf("the successor printed the reused token")
	}
	c2 := p2.client().WithToken(tok)
	j2, err := c2.Get(ctx, "counts")
	if err != nil {
		t.Fatal(err)
	}
	if j2.Generation != 2 || j2.ReplacesJobID != j1.ID {
		t.Fatalf("v2's job: generation %d replaces %q, want 2 replacing %s", j2.Generation, j2.ReplacesJobID, j1.ID)
	}
	if _, err := p2.client().Get(ctx, "counts"); !errors.As(err, &ae) || ae.Code != errcode.Unauthenticated {
		t.Fatalf("the successor without the token: %v, want UNAUTHENTICATED", err)
	}
	if _, err := c2.Drain(ctx, "counts"); err != nil {
		t.Fatal(err)
	}
	if code := p2.wait(); code != weirx.ExitOK {
		t.Fatalf("v2 exit code after the drain = %d\nlog:\n%s", code, p2.log())
	}
}
