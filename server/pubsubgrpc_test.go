package server

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestPubSubGRPCBeyondLoopback: an address beyond loopback needs TLS and a
// token, and says so.
func TestPubSubGRPCBeyondLoopback(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tok, []byte("0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		cfg  Config
	}{
		{"neither", Config{PubSubGRPCListen: "0.0.0.0:0"}},
		{"token without TLS", Config{PubSubGRPCListen: "0.0.0.0:0", AuthTokenFile: tok}},
		{"TLS without token", Config{PubSubGRPCListen: ":0", PubSubGRPCTLSCert: "c.pem", PubSubGRPCTLSKey: "k.pem"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.DataDir, c.cfg.Listen = t.TempDir(), "127.0.0.1:0"
			_, err := Open(context.Background(), c.cfg)
			if !errors.Is(err, ErrAuthRequired) {
				t.Fatalf("got %v, want ErrAuthRequired", err)
			}
			for _, want := range []string{"--pubsub-grpc-tls-cert", "--auth-token-file", "PUBSUB.md"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("message %q lacks %q", err, want)
				}
			}
		})
	}
}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestPubSubGRPCBusyPort: a port in use is a warning; the API still serves.
func TestPubSubGRPCBusyPort(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	var logs syncBuffer
	p, err := Open(context.Background(), Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", PubSubGRPCListen: busy.Addr().String(),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	if err := p.Serve(); err != nil {
		t.Fatalf("Serve with a busy Pub/Sub port: %v", err)
	}
	if a := p.PubSubGRPCAddress(); a != "" {
		t.Fatalf("PubSubGRPCAddress %q, want none", a)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "port is in use") {
		t.Fatalf("no warning in the log:\n%s", logs.String())
	}
	if r := call(t, "GET", p.Address()+"/healthz", ""); r.status != 200 {
		t.Fatalf("/healthz: %d", r.status)
	}
}

// selfSigned writes a CA-less self-signed certificate for 127.0.0.1 and
// returns the files and a pool that trusts it.
func selfSigned(t *testing.T) (cert, key string, pool *x509.CertPool) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "weir test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return cert, key, pool
}

// TestPubSubGRPCTokenAndTLS: the listener takes the API's tokens, over TLS.
func TestPubSubGRPCTokenAndTLS(t *testing.T) {
	const token = "0123456789abcdef0123"
	tok := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tok, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, key, pool := selfSigned(t)
	p := openServing(t, Config{Listen: "127.0.0.1:0", AuthTokenFile: tok, PubSubGRPCListen: "127.0.0.1:0",
		PubSubGRPCTLSCert: cert, PubSubGRPCTLSKey: key, PubSubProject: "p"})
	addr := p.PubSubGRPCAddress()
	if addr == "" {
		t.Fatal("the Pub/Sub gRPC API is not served")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dial := func(creds credentials.TransportCredentials) pubsubpb.PublisherClient {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return pubsubpb.NewPublisherClient(conn)
	}
	tlsClient := dial(credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	with := func(tok string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
	}
	cases := []struct {
		name string
		c    pubsubpb.PublisherClient
		ctx  context.Context
		code codes.Code
	}{
		{"TLS, no token", tlsClient, ctx, codes.Unauthenticated},
		{"TLS, wrong token", tlsClient, with("wrong-wrong-wrong-wrong"), codes.Unauthenticated},
		{"TLS, the token", tlsClient, with(token), codes.OK},
		{"plaintext to a TLS listener", dial(insecure.NewCredentials()), with(token), codes.Unavailable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.c.CreateTopic(c.ctx, &pubsubpb.Topic{Name: "projects/p/topics/t-" + strings.ReplaceAll(strings.ReplaceAll(c.name, ",", ""), " ", "-")})
			if got := status.Code(err); got != c.code {
				t.Fatalf("CreateTopic: %v, want %v", err, c.code)
			}
		})
	}
	// The topic created through gRPC is the HTTP API's too.
	r := call(t, "GET", p.Address()+"/v1/topics/t-TLS-the-token", "", "Authorization", "Bearer "+token)
	if r.status != 200 {
		t.Fatalf("GET /v1/topics/t-TLS-the-token: %d %s", r.status, r.body)
	}
}

// TestPubSubGRPCUsesAPICert: with --tls-cert and --tls-key (the API's)
// and no gRPC-specific pair, the Pub/Sub listener serves TLS with the same
// certificate.
func TestPubSubGRPCUsesAPICert(t *testing.T) {
	const token = "0123456789abcdef0123"
	tok := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tok, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, key, pool := selfSigned(t)
	p := openServing(t, Config{Listen: "127.0.0.1:0", AuthTokenFile: tok, PubSubGRPCListen: "127.0.0.1:0",
		TLSCertFile: cert, TLSKeyFile: key})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name  string
		creds credentials.TransportCredentials
		code  codes.Code
	}{
		{"TLS with the API certificate", credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}), codes.OK},
		{"plaintext", insecure.NewCredentials(), codes.Unavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := grpc.NewClient(p.PubSubGRPCAddress(), grpc.WithTransportCredentials(tc.creds))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_, err = pubsubpb.NewPublisherClient(conn).CreateTopic(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token),
				&pubsubpb.Topic{Name: "projects/p/topics/" + strings.ReplaceAll(tc.name, " ", "-")})
			if got := status.Code(err); got != tc.code {
				t.Fatalf("CreateTopic: %v, want %v", err, tc.code)
			}
		})
	}
}

// TestPubSubREST: a weir process serves Pub/Sub's REST surface under
// /v1/projects/ beside its API, behind the same token; a topic created
// there is the HTTP API's and the gRPC API's too.
func TestPubSubREST(t *testing.T) {
	const token = "0123456789abcdef0123"
	tok := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tok, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := openServing(t, Config{Listen: "127.0.0.1:0", AuthTokenFile: tok})
	auth := []string{"Authorization", "Bearer " + token, "Content-Type", "application/json"}
	if r := call(t, "PUT", p.Address()+"/v1/projects/p/topics/rest-topic", "{}"); r.status != http.StatusUnauthorized {
		t.Fatalf("PUT without the token: %d %s", r.status, r.body)
	}
	if r := call(t, "PUT", p.Address()+"/v1/projects/p/topics/rest-topic", "{}", auth...); r.status != 200 {
		t.Fatalf("PUT topic: %d %s", r.status, r.body)
	}
	if r := call(t, "PUT", p.Address()+"/v1/projects/p/subscriptions/rest-sub", `{"topic": "projects/p/topics/rest-topic"}`, auth...); r.status != 200 {
		t.Fatalf("PUT subscription: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", p.Address()+"/v1/projects/p/topics/rest-topic:publish", `{"messages": [{"data": "aGVsbG8="}]}`, auth...); r.status != 200 || !strings.Contains(r.body, "messageIds") {
		t.Fatalf("publish: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", p.Address()+"/v1/projects/p/subscriptions/rest-sub:pull", `{"maxMessages": 5}`, auth...); r.status != 200 || !strings.Contains(r.body, "aGVsbG8=") {
		t.Fatalf("pull: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", p.Address()+"/v1/topics/rest-topic", "", auth...); r.status != 200 {
		t.Fatalf("GET /v1/topics/rest-topic (weir's API): %d %s", r.status, r.body)
	}
	// A message of 9 MiB, within Pub/Sub's 10 MB, is 12 MiB of JSON: more
	// than the API's other requests may be, and accepted here.
	big := `{"messages": [{"data": "` + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("x"), 9<<20)) + `"}]}`
	if r := call(t, "POST", p.Address()+"/v1/projects/p/topics/rest-topic:publish", big, auth...); r.status != 200 || !strings.Contains(r.body, "messageIds") {
		t.Fatalf("publish of 9 MiB: %d %.300s", r.status, r.body)
	}
}
