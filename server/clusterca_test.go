package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/testpki"
)

// TestClusterCAFollowsItsFile: a member's forwards trust the CA in
// --cluster-tls-ca as the file is now: a leader whose certificate another
// CA signed is refused until the file names that CA, then served without
// a restart; a file that turns unreadable (a rotation half done) leaves
// the last CA in force, with one warning; and the leader's name is checked
// as crypto/tls checks it.
func TestClusterCAFollowsItsFile(t *testing.T) {
	dir := t.TempDir()
	oldCA := testpki.NewCA(t, dir, "old-ca")
	newCA := testpki.NewCA(t, dir, "new-ca")
	pair := newCA.Server(t, "leader")
	cert, err := tls.LoadX509KeyPair(pair.CertFile, pair.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	leader := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	leader.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	leader.StartTLS()
	defer leader.Close()

	caFile := filepath.Join(dir, "cluster-ca.pem")
	written := time.Now().Add(-time.Hour)
	write := func(from string) {
		t.Helper()
		b := []byte("not a certificate")
		if from != "" {
			var err error
			if b, err = os.ReadFile(from); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(caFile, b, 0o600); err != nil {
			t.Fatal(err)
		}
		// A later modification time each write, whatever the file
		// system's clock granularity.
		written = written.Add(time.Minute)
		if err := os.Chtimes(caFile, written, written); err != nil {
			t.Fatal(err)
		}
	}
	write(oldCA.File)
	var logs bytes.Buffer
	rt, err := forwardTransport(caFile, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	tr := rt.(*http.Transport)
	get := func(url string) error {
		t.Helper()
		tr.CloseIdleConnections() // each request a new handshake
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := tr.RoundTrip(req)
		if err == nil {
			res.Body.Close()
		}
		return err
	}
	var cv *tls.CertificateVerificationError
	if err := get(leader.URL); !errors.As(err, &cv) {
		t.Fatalf("a leader signed by another CA: %v, want a certificate verification error", err)
	}
	write(newCA.File)
	if err := get(leader.URL); err != nil {
		t.Fatalf("after the file names the leader's CA: %v", err)
	}
	write("")
	for range 2 {
		if err := get(leader.URL); err != nil {
			t.Fatalf("after the file turned unreadable: %v, want the last CA read kept", err)
		}
	}
	if n := strings.Count(logs.String(), "cannot be read"); n != 1 {
		t.Errorf("%d warnings about the unreadable file, want 1:\n%s", n, logs.String())
	}
	// Removed (a rotation that renames files): the same, one more warning.
	if err := os.Remove(caFile); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := get(leader.URL); err != nil {
			t.Fatalf("after the file was removed: %v, want the last CA read kept", err)
		}
	}
	if n := strings.Count(logs.String(), "cannot be read"); n != 2 {
		t.Errorf("%d warnings after the file was removed, want 2:\n%s", n, logs.String())
	}

	// The name: the same leader reached as a host its certificate does
	// not name is refused.
	write(newCA.File)
	addr := leader.Listener.Addr().String()
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	_, port, _ := net.SplitHostPort(addr)
	if err := get("https://other.invalid:" + port); !errors.As(err, &cv) {
		t.Fatalf("a leader reached under a name its certificate lacks: %v, want a certificate verification error", err)
	}
}

// TestClusterCARefusesABadFile: a --cluster-tls-ca that cannot be read
// or holds no certificate stops the member at its start.
func TestClusterCARefusesABadFile(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(empty, []byte("nothing"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{filepath.Join(dir, "missing.pem"), empty} {
		if _, err := forwardTransport(file, slog.Default()); !errors.Is(err, ErrClusterConfig) || !strings.Contains(err.Error(), "--cluster-tls-ca") {
			t.Errorf("%s: %v, want ErrClusterConfig naming --cluster-tls-ca", file, err)
		}
	}
}
