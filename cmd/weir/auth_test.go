package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServerRefusesOpenListenWithoutToken: `weir server --listen
// 0.0.0.0:P` without a token does not start, and says how.
func TestServerRefusesOpenListenWithoutToken(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:0", ":0"} {
		r := runCLI(t, "", "server", "--data-dir", t.TempDir(), "--listen", listen)
		if r.code != ExitUsage {
			t.Fatalf("--listen %s without a token: exit %d, want %d\n%s", listen, r.code, ExitUsage, r.stderr)
		}
		for _, want := range []string{"--generate-auth-token", "--auth-token-file", "loopback"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("--listen %s: stderr lacks %q:\n%s", listen, want, r.stderr)
			}
		}
	}
}

// TestCLIToken: a server on every interface started with
// --generate-auth-token prints its token once; the CLI's commands are
// refused without it and accepted with --token, --token-file or
// $WEIR_TOKEN.
func TestCLIToken(t *testing.T) {
	data := t.TempDir()
	srv := startServerArgs(t, data, "--listen", "0.0.0.0:0", "--generate-auth-token", "--auth-exempt", "/healthz")
	tokFile := filepath.Join(data, "auth-token")
	b, err := os.ReadFile(tokFile)
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(string(b))
	if !strings.Contains(srv.log(), tok) {
		t.Errorf("the server did not print the generated token on stderr:\n%s", srv.log())
	}
	if fi, err := os.Stat(tokFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file: %v %v, want 0600", fi.Mode(), err)
	}
	dir := t.TempDir()

	r := srv.cli(dir, "jobs", "list")
	if r.code != ExitFailure || !strings.Contains(r.stderr, "UNAUTHENTICATED") || !strings.Contains(r.stderr, "--token-file") {
		t.Fatalf("jobs list without a token: exit %d\n%s", r.code, r.stderr)
	}
	if r := srv.cli(dir, "jobs", "list", "--token", "wrong-token-0123456789"); r.code != ExitFailure || !strings.Contains(r.stderr, "UNAUTHENTICATED") {
		t.Fatalf("jobs list with a wrong token: exit %d\n%s", r.code, r.stderr)
	}
	if r := srv.cli(dir, "topics", "create", "orders", "--token-file", tokFile); r.code != ExitOK {
		t.Fatalf("topics create --token-file: exit %d\n%s", r.code, r.stderr)
	}
	if r := runCLIEnv(t, dir, []string{"WEIR_TOKEN=" + tok}, "topics", "list", "--server", srv.url); r.code != ExitOK || !strings.Contains(r.stdout, "orders") {
		t.Fatalf("topics list with WEIR_TOKEN: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// --token wins over $WEIR_TOKEN.
	if r := runCLIEnv(t, dir, []string{"WEIR_TOKEN=" + tok}, "jobs", "list", "--server", srv.url, "--token", "wrong-token-0123456789"); r.code != ExitFailure {
		t.Fatalf("--token over WEIR_TOKEN: exit %d\n%s", r.code, r.stderr)
	}
	if r := srv.cli(dir, "run", testdata(t, "totals.yaml"), "--job-name", "batch", "--token-file", tokFile); r.code != ExitOK {
		t.Fatalf("run --job-name with a token: exit %d\n%s", r.code, r.stderr)
	}
	if r := srv.cli(dir, "subscriptions", "create", "all", "--topic", "orders", "--token", tok); r.code != ExitOK {
		t.Fatalf("subscriptions create --token: exit %d\n%s", r.code, r.stderr)
	}
	if r := srv.stop(15); r != 0 {
		t.Fatalf("server exit %d", r)
	}

	// The restart reuses the token and prints none.
	srv = startServerArgs(t, data, "--listen", "0.0.0.0:0", "--generate-auth-token")
	if strings.Contains(srv.log(), tok) {
		t.Errorf("the restart printed the token again")
	}
	if r := srv.cli(dir, "jobs", "list", "--token-file", tokFile); r.code != ExitOK {
		t.Fatalf("jobs list after the restart: exit %d\n%s", r.code, r.stderr)
	}
}
