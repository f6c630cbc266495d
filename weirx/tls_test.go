package weirx_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/internal/testpki"
	"github.com/weir-dev/weir/weirx"
)

// TestProgramTakeoverOverTLS: a program serving HTTPS (a certificate from
// a CA made in the test) with a generated token is taken over by its
// successor, which serves a certificate of its own from the same CA: the
// release call verifies the predecessor's certificate and sends the
// token. A successor that does not trust the CA, or sends a wrong token,
// is refused and the job runs on; one given the CA through $WEIR_TLS_CA
// takes the job over.
func TestProgramTakeoverOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs programs")
	}
	v1, v2 := buildCounts(t, "v1"), buildCounts(t, "v2")
	pki := t.TempDir()
	ca := testpki.NewCA(t, pki, "weir-ca")
	cert1, cert2 := ca.Server(t, "program-1"), ca.Server(t, "program-2")
	dir := t.TempDir()
	base := []string{"--job-name", "counts", "--data-dir", dir, "--generate-auth-token"}
	withCert := func(p testpki.Pair, more ...string) []string {
		return append(append(append([]string{}, base...), "--tls-cert", p.CertFile, "--tls-key", p.KeyFile), more...)
	}
	ctx := context.Background()
	hc, err := client.NewHTTPClient(ca.File, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	clientOf := func(p *proc, tok string) *client.Client {
		t.Helper()
		if !strings.HasPrefix(p.addr, "https://") {
			t.Fatalf("the program serves %s, want https://", p.addr)
		}
		c, err := client.NewClient(p.addr, hc)
		if err != nil {
			t.Fatal(err)
		}
		return c.WithToken(tok)
	}

	p1 := startProgram(t, v1, withCert(cert1)...)
	b, err := os.ReadFile(filepath.Join(dir, "auth-token"))
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(string(b))
	c1 := clientOf(p1, tok)
	j1 := waitCheckpoint(t, p1, c1, "counts")

	// Refused: the successor does not trust the CA (its own, different
	// certificate is no CA); then it trusts it but sends a wrong token.
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{name: "untrusted", args: withCert(cert2, "--update"), want: "--tls-ca"},
		{name: "another CA", args: withCert(cert2, "--update", "--tls-ca", testpki.NewCA(t, t.TempDir(), "other-ca").File), want: "not trusted"},
		{name: "wrong token", args: withCert(cert2, "--update", "--tls-ca", ca.File, "--token", "wrong-token-0123456789"), want: "wrong bearer token"},
	} {
		code, _, stderr := runProgram(t, v2, tc.args...)
		t.Logf("%s: exit %d: %s", tc.name, code, strings.TrimSpace(stderr))
		if code == weirx.ExitOK || !strings.Contains(stderr, tc.want) {
			t.Fatalf("%s: v2 --update exit %d, want a failure naming %q; stderr:\n%s", tc.name, code, tc.want, stderr)
		}
		if j, err := c1.Get(ctx, "counts"); err != nil || j.ID != j1.ID || j.State != client.StateRunning {
			t.Fatalf("%s: after the refused takeover the job is %+v (%v)", tc.name, j, err)
		}
	}

	// Accepted: the CA from $WEIR_TLS_CA, the token from DATA_DIR/auth-token.
	t.Setenv(client.TLSCAEnv, ca.File)
	p2 := startProgram(t, v2, withCert(cert2, "--update")...)
	if code := p1.wait(); code != weirx.ExitOK {
		t.Fatalf("v1 exit code after the release = %d, want 0\nlog:\n%s", code, p1.log())
	}
	c2 := clientOf(p2, tok)
	j2, err := c2.Get(ctx, "counts")
	if err != nil {
		t.Fatal(err)
	}
	if j2.Generation != 2 || j2.ReplacesJobID != j1.ID {
		t.Fatalf("v2's job: generation %d replaces %q, want 2 replacing %s", j2.Generation, j2.ReplacesJobID, j1.ID)
	}
	var ae *client.Error
	if _, err := c2.WithToken("").Get(ctx, "counts"); !errors.As(err, &ae) || ae.Code != errcode.Unauthenticated {
		t.Fatalf("the successor without the token: %v, want UNAUTHENTICATED", err)
	}
	if _, err := c2.Drain(ctx, "counts"); err != nil {
		t.Fatal(err)
	}
	if code := p2.wait(); code != weirx.ExitOK {
		t.Fatalf("v2 exit code after the drain = %d\nlog:\n%s", code, p2.log())
	}
}

// waitCheckpoint waits, through client c, until p's job ref has taken a
// checkpoint, and returns it.
func waitCheckpoint(t *testing.T, p *proc, c *client.Client, ref string) *client.Job {
	t.Helper()
	var j *client.Job
	if !await.Until(time.Minute, 50*time.Millisecond, func() bool {
		got, err := c.Get(context.Background(), ref)
		if err == nil && got.LastCheckpoint != nil {
			j = got
		}
		return j != nil
	}) {
		t.Fatalf("job %s took no checkpoint\nlog:\n%s", ref, p.log())
	}
	return j
}

// TestProgramExternalNATS: a program takes the NATS flags of `weir
// server`: against a real NATS server that requires an NKEY, a wrong seed
// stops it at once naming the URL and the seed file, the right one serves,
// and credentials without --nats-url are a usage error.
func TestProgramExternalNATS(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs programs")
	}
	v1 := buildCounts(t, "v1")
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	other, _ := nkeys.CreateUser()
	otherSeed, _ := other.Seed()
	keys := t.TempDir()
	good, bad := filepath.Join(keys, "weir.nk"), filepath.Join(keys, "other.nk")
	for p, b := range map[string][]byte{good: seed, bad: otherSeed} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		NoLog: true, NoSigs: true, Nkeys: []*natsserver.NkeyUser{{Nkey: pub}}})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("the NATS server did not start")
	}
	t.Cleanup(ns.Shutdown)
	url := "nats://" + ns.Addr().String()

	code, _, stderr := runProgram(t, v1, "--job-name", "counts", "--data-dir", t.TempDir(), "--nats-url", url, "--nats-nkey", bad)
	if code != weirx.ExitFailure || !strings.Contains(stderr, url) || !strings.Contains(stderr, "refused the NKEY seed of --nats-nkey "+bad) {
		t.Fatalf("a wrong NKEY: exit %d, stderr:\n%s", code, stderr)
	}
	code, _, stderr = runProgram(t, v1, "--job-name", "counts", "--data-dir", t.TempDir(), "--nats-creds", good)
	if code != weirx.ExitUsage || !strings.Contains(stderr, "need --nats-url") {
		t.Fatalf("--nats-creds without --nats-url: exit %d, stderr:\n%s", code, stderr)
	}
	p := startProgram(t, v1, "--job-name", "counts", "--data-dir", t.TempDir(), "--nats-url", url, "--nats-nkey", good)
	if !strings.Contains(p.log(), "connected to external broker") {
		t.Errorf("the program's log does not say it connected to the external broker:\n%s", p.log())
	}
	p.waitEpoch("counts", 0)
	if code := p.signal(syscall.SIGTERM); code != weirx.ExitOK {
		t.Fatalf("exit %d after SIGTERM\nlog:\n%s", code, p.log())
	}
}
