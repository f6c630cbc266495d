package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/weir-dev/weir/internal/testpki"
)

// TestCLITLS runs `weir server` as it should face a network: on every
// interface, HTTPS with a certificate from a CA made in the test, and a
// generated token. The CLI trusts the CA through --tls-ca or $WEIR_TLS_CA,
// refuses the server without it (or with another CA) saying how to fix
// it, and runs a job end to end over TLS with the token.
func TestCLITLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	pki := t.TempDir()
	ca := testpki.NewCA(t, pki, "weir-ca")
	pair := ca.Server(t, "weir-server")
	other := testpki.NewCA(t, t.TempDir(), "other-ca")
	data := t.TempDir()
	srv := startServerArgs(t, data, "--listen", "0.0.0.0:0", "--generate-auth-token", "--tls-cert", pair.CertFile, "--tls-key", pair.KeyFile)
	if !strings.HasPrefix(srv.url, "https://") {
		t.Fatalf("the server printed %s, want an https:// address", srv.url)
	}
	// The printed address is 0.0.0.0:P; the certificate names 127.0.0.1.
	srv.url = "https://127.0.0.1:" + srv.url[strings.LastIndexByte(srv.url, ':')+1:]
	tok := filepath.Join(data, "auth-token")
	work := t.TempDir()

	for _, tc := range []struct {
		name     string
		env      []string
		args     []string
		wantCode int
		want     []string // in stderr
	}{
		{name: "no CA", args: []string{"--token-file", tok}, wantCode: ExitServerUnreachable,
			want: []string{"not trusted", "--tls-ca", "WEIR_TLS_CA"}},
		{name: "another CA", args: []string{"--token-file", tok, "--tls-ca", other.File}, wantCode: ExitServerUnreachable,
			want: []string{"not trusted", "--tls-ca"}},
		{name: "another CA in WEIR_TLS_CA", env: []string{"WEIR_TLS_CA=" + other.File}, args: []string{"--token-file", tok}, wantCode: ExitServerUnreachable,
			want: []string{"not trusted"}},
		{name: "--tls-ca", args: []string{"--token-file", tok, "--tls-ca", ca.File}, wantCode: ExitOK},
		{name: "WEIR_TLS_CA", env: []string{"WEIR_TLS_CA=" + ca.File}, args: []string{"--token-file", tok}, wantCode: ExitOK},
		{name: "--tls-ca over WEIR_TLS_CA", env: []string{"WEIR_TLS_CA=" + other.File}, args: []string{"--token-file", tok, "--tls-ca", ca.File}, wantCode: ExitOK},
		{name: "TLS but no token", args: []string{"--tls-ca", ca.File}, wantCode: ExitFailure,
			want: []string{"UNAUTHENTICATED"}},
		{name: "missing CA file", args: []string{"--token-file", tok, "--tls-ca", filepath.Join(pki, "nope.pem")}, wantCode: ExitUsage,
			want: []string{"--tls-ca", "nope.pem"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLIEnv(t, work, tc.env, append([]string{"jobs", "list", "--server", srv.url}, tc.args...)...)
			if r.code != tc.wantCode {
				t.Fatalf("exit %d, want %d\n%s%s", r.code, tc.wantCode, r.stdout, r.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
		})
	}

	// A job end to end over TLS with the token: submit, wait, describe.
	env := []string{"WEIR_TLS_CA=" + ca.File}
	r := runCLIEnv(t, work, env, "run", testdata(t, "totals.yaml"), "--job-name", "batch", "--server", srv.url, "--token-file", tok)
	if r.code != ExitOK {
		t.Fatalf("run over TLS: exit %d\n%s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	r = runCLIEnv(t, work, env, "jobs", "describe", id, "--server", srv.url, "--token-file", tok)
	if r.code != ExitOK || !strings.Contains(r.stdout, id) {
		t.Fatalf("describe over TLS: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLIEnv(t, work, env, "topics", "create", "orders", "--server", srv.url, "--token-file", tok); r.code != ExitOK {
		t.Fatalf("topics create over TLS: exit %d\n%s", r.code, r.stderr)
	}
}

// TestCLIServerExternalNATS runs `weir server --nats-url` against a real
// NATS server (in the test process) that requires TLS, with a CA made in
// the test, and a user and password: with --nats-tls-ca, --nats-user and
// --nats-password-file the server starts and topics work; a wrong
// password stops it at once with an error naming the URL and the user;
// credentials without --nats-url are a usage error.
func TestCLIServerExternalNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	pki := t.TempDir()
	ca := testpki.NewCA(t, pki, "nats-ca")
	pair := ca.Server(t, "nats")
	tlsCfg, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: pair.CertFile, KeyFile: pair.KeyFile})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
		Username: "weir", Password: "nats-pass-1", TLS: true, TLSConfig: tlsCfg, TLSTimeout: 5})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("the NATS server did not start")
	}
	t.Cleanup(ns.Shutdown)
	natsURL := "nats://" + ns.Addr().String()
	pass := filepath.Join(pki, "pass")
	wrong := filepath.Join(pki, "wrong")
	for p, v := range map[string]string{pass: "nats-pass-1\n", wrong: "nope"} {
		if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	r := runCLI(t, "", "server", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--pubsub-grpc-listen", "",
		"--nats-url", natsURL, "--nats-tls-ca", ca.File, "--nats-user", "weir", "--nats-password-file", wrong)
	if r.code != ExitFailure {
		t.Fatalf("a wrong NATS password: exit %d, want %d\n%s", r.code, ExitFailure, r.stderr)
	}
	t.Logf("a wrong NATS password: %s", r.stderr)
	for _, w := range []string{natsURL, `refused user "weir"`, "--nats-password-file"} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("a wrong NATS password: stderr lacks %q:\n%s", w, r.stderr)
		}
	}
	r = runCLI(t, "", "server", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--pubsub-grpc-listen", "",
		"--nats-url", natsURL, "--nats-user", "weir", "--nats-password-file", pass)
	if r.code != ExitFailure || !strings.Contains(r.stderr, "--nats-tls-ca") {
		t.Errorf("no CA for a TLS NATS server: exit %d, want %d naming --nats-tls-ca\n%s", r.code, ExitFailure, r.stderr)
	}
	r = runCLI(t, "", "server", "--data-dir", t.TempDir(), "--nats-creds", pass)
	if r.code != ExitUsage || !strings.Contains(r.stderr, "need --nats-url") {
		t.Errorf("--nats-creds without --nats-url: exit %d, want %d\n%s", r.code, ExitUsage, r.stderr)
	}

	srv := startServerArgs(t, t.TempDir(), "--nats-url", natsURL, "--nats-tls-ca", ca.File, "--nats-user", "weir", "--nats-password-file", pass)
	work := t.TempDir()
	if r := srv.cli(work, "topics", "create", "tls-orders"); r.code != ExitOK {
		t.Fatalf("topics create on the external broker: exit %d\n%s", r.code, r.stderr)
	}
	msgs := filepath.Join(work, "m.jsonl")
	if err := os.WriteFile(msgs, []byte(`{"a":1}`+"\n"+`{"a":2}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := srv.cli(work, "subscriptions", "create", "tls-all", "--topic", "tls-orders"); r.code != ExitOK {
		t.Fatalf("subscriptions create: exit %d\n%s", r.code, r.stderr)
	}
	if r := srv.cli(work, "topics", "publish", "tls-orders", "--file", msgs); r.code != ExitOK {
		t.Fatalf("publish: exit %d\n%s", r.code, r.stderr)
	}
	r = srv.cli(work, "subscriptions", "pull", "tls-all", "--max", "10")
	if r.code != ExitOK || !strings.Contains(r.stdout, `"a":2`) && !strings.Contains(r.stdout, `"a": 2`) {
		t.Fatalf("pull: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(srv.log(), "connected to external broker") {
		t.Errorf("the server's log does not say it connected to the external broker:\n%s", srv.log())
	}
}
