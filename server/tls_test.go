package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/internal/await"
)

// testCA is a certificate authority generated for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // its certificate, PEM
}

func newTestCA(t *testing.T, dir string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "weir test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &testCA{cert: cert, key: key, file: filepath.Join(dir, "ca.pem")}
	writePEM(t, ca.file, "CERTIFICATE", der)
	return ca
}

// issue writes a server certificate for 127.0.0.1 and localhost, with
// serial, to certFile and keyFile (each through a rename, as a rotation
// should).
func (ca *testCA) issue(t *testing.T, serial int64, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "weir"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, keyFile, "PRIVATE KEY", kb)
	writePEM(t, certFile, "CERTIFICATE", der)
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// servedSerial is the serial of the certificate the server at addr shows.
func servedSerial(t *testing.T, addr string, ca *testCA) int64 {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	conn, err := tls.Dial("tcp", strings.TrimPrefix(addr, "https://"), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// TestTLS: with --tls-cert and --tls-key the API serves HTTPS only; a client
// trusting the test's CA (--tls-ca) round-trips with a token, one that does
// not is refused with a message saying how, a plain-HTTP client gets no
// API; a rotated certificate is served without a restart.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	certFile, keyFile := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")
	ca.issue(t, 100, certFile, keyFile)
	p := openServing(t, Config{Listen: "127.0.0.1:0", TLSCertFile: certFile, TLSKeyFile: keyFile, GenerateAuthToken: true})
	if !strings.HasPrefix(p.Address(), "https://") {
		t.Fatalf("address %s, want https", p.Address())
	}
	ctl, err := ReadControlFile(p.DataDir())
	if err != nil || ctl.Address != p.Address() {
		t.Errorf("control file address %v (%v), want %s for a successor's release call", ctl, err, p.Address())
	}
	ctx := context.Background()

	hc, err := client.NewHTTPClient(ca.file, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewClient(p.Address(), hc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WithToken(p.GeneratedToken()).List(ctx, "all"); err != nil {
		t.Fatalf("a client trusting the CA: %v", err)
	}
	if _, err := c.List(ctx, "all"); !isCode(err, "UNAUTHENTICATED") {
		t.Errorf("TLS does not replace the token: %v", err)
	}

	untrusting, err := client.NewHTTPClient("", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := client.NewClient(p.Address(), untrusting)
	if _, err := c2.List(ctx, "all"); !errors.Is(err, client.ErrTLS) || !strings.Contains(err.Error(), "--tls-ca") {
		t.Errorf("a client without the CA: %v, want ErrTLS naming --tls-ca", err)
	}
	plain, _ := client.NewClient(strings.Replace(p.Address(), "https://", "http://", 1), nil)
	if _, err := plain.WithToken(p.GeneratedToken()).List(ctx, "all"); err == nil {
		t.Error("the API answered plain HTTP on its TLS port")
	}
	if _, err := client.NewHTTPClient(certFile+".missing", time.Second); err == nil {
		t.Error("a missing CA file was accepted")
	}

	// Rotation: a new certificate, written in place, is served to new
	// connections; a half-written pair keeps the old one.
	if got := servedSerial(t, p.Address(), ca); got != 100 {
		t.Fatalf("served serial %d, want 100", got)
	}
	if err := os.WriteFile(keyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := servedSerial(t, p.Address(), ca); got != 100 {
		t.Errorf("with a broken key the server serves serial %d, want the previous 100", got)
	}
	ca.issue(t, 101, certFile, keyFile)
	if !await.Until(10*time.Second, 10*time.Millisecond, func() bool { return servedSerial(t, p.Address(), ca) == 101 }) {
		t.Errorf("the rotated certificate is not served")
	}
	if _, err := c.WithToken(p.GeneratedToken()).List(ctx, "all"); err != nil {
		t.Errorf("after the rotation: %v", err)
	}
}

// TestTLSConfigErrors: a certificate without its key (or the reverse),
// or a pair that does not load, stops the start with a message.
func TestTLSConfigErrors(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	certFile, keyFile := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")
	ca.issue(t, 7, certFile, keyFile)
	for _, tc := range []struct {
		name       string
		cert, key  string
		wantSubstr string
	}{
		{"cert without key", certFile, "", "both --tls-cert and --tls-key"},
		{"key without cert", "", keyFile, "both --tls-cert and --tls-key"},
		{"the CA's certificate with the server's key", ca.file, keyFile, "--tls-cert"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Open(context.Background(), Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", TLSCertFile: tc.cert, TLSKeyFile: tc.key})
			if err == nil {
				p.Close(context.Background())
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), tc.wantSubstr) {
				t.Errorf("error %q lacks %q", err, tc.wantSubstr)
			}
		})
	}
}

func isCode(err error, code string) bool {
	var ae *client.Error
	return errors.As(err, &ae) && string(ae.Code) == code
}
