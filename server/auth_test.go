package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-dev/weir/api"
	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/errcode"
)

// openServing opens and serves a process on cfg (a temp data directory
// unless set), closed at the end of the test.
func openServing(t *testing.T, cfg Config) *Process {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	p, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Serve(); err != nil {
		t.Fatal(errors.Join(err, p.Close(context.Background())))
	}
	t.Cleanup(func() {
		if err := p.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return p
}

// reply is one HTTP reply: status, headers and the error body's code.
type reply struct {
	status int
	header http.Header
	code   errcode.Code
	body   string
}

// call sends method url with the headers (name, value pairs) and body.
func call(t *testing.T, method, url, body string, headers ...string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if strings.EqualFold(headers[i], "Host") {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var eb client.ErrorBody
	_ = json.Unmarshal(b, &eb)
	return reply{status: resp.StatusCode, header: resp.Header, code: eb.Error.Code, body: string(b)}
}

// loopbackURL is p's API through 127.0.0.1 (p may listen on every interface).
func loopbackURL(p *Process) string {
	addr := p.ln.Addr().String()
	port := addr[strings.LastIndex(addr, ":")+1:]
	return "http://127.0.0.1:" + port
}

func TestIsLoopback(t *testing.T) {
	for listen, want := range map[string]bool{
		"127.0.0.1:7070": true, "127.3.4.5:1": true, "[::1]:7070": true, "localhost:7070": true, "LOCALHOST.:1": true,
		"0.0.0.0:7070": false, "[::]:7070": false, ":7070": false, "192.0.2.1:7070": false, "[2001:db8::1]:1": false,
	} {
		got, err := IsLoopback(listen)
		if err != nil || got != want {
			t.Errorf("IsLoopback(%q) = %v, %v; want %v", listen, got, err, want)
		}
	}
	if _, err := IsLoopback("7070"); err == nil {
		t.Error("IsLoopback(7070): no error for an address without host:port")
	}
}

// TestAuthRequiredBeyondLoopback: a listen address beyond loopback without
// a token refuses to start, saying how to give one; nothing is created.
func TestAuthRequiredBeyondLoopback(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:0", "[::]:0", ":0"} {
		dir := filepath.Join(t.TempDir(), "data")
		_, err := Open(context.Background(), Config{DataDir: dir, Listen: listen})
		if !errors.Is(err, ErrAuthRequired) {
			t.Fatalf("--listen %s without a token: %v, want ErrAuthRequired", listen, err)
		}
		for _, want := range []string{listen, "--generate-auth-token", "--auth-token-file", "WEIR_TOKEN", "SECURITY.md"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("--listen %s: message %q lacks %q", listen, err, want)
			}
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("--listen %s: the refused start created the data directory (%v)", listen, err)
		}
	}
	if _, err := Open(context.Background(), Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", AuthTokenFile: "x", GenerateAuthToken: true}); err == nil || !strings.Contains(err.Error(), "choose one") {
		t.Errorf("both token options: %v", err)
	}
}

// TestGenerateAuthToken: --generate-auth-token writes DATA_DIR/auth-token
// 0600 once, returns it once, and a later start reuses it.
func TestGenerateAuthToken(t *testing.T) {
	dir := t.TempDir()
	p := openServing(t, Config{DataDir: dir, Listen: "0.0.0.0:0", GenerateAuthToken: true})
	tok := p.GeneratedToken()
	if len(tok) < api.MinTokenLength {
		t.Fatalf("generated token %q", tok)
	}
	path := filepath.Join(dir, AuthTokenFileName)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s is %v, want 0600", path, fi.Mode().Perm())
	}
	if got, err := client.ReadToken(path); err != nil || got != tok {
		t.Errorf("token file holds %q (%v), GeneratedToken %q", got, err, tok)
	}
	url := loopbackURL(p)
	if r := call(t, "GET", url+"/v1/jobs", ""); r.status != 401 {
		t.Errorf("no token: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", url+"/v1/jobs", "", "Authorization", "Bearer "+tok); r.status != 200 {
		t.Errorf("the generated token: %d %s", r.status, r.body)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	p2 := openServing(t, Config{DataDir: dir, Listen: "127.0.0.1:0", GenerateAuthToken: true})
	if p2.GeneratedToken() != "" {
		t.Errorf("the second start generated another token")
	}
	if got, _ := client.ReadToken(path); got != tok {
		t.Errorf("the second start rewrote the token file: %q, was %q", got, tok)
	}
	if r := call(t, "GET", p2.Address()+"/v1/jobs", "", "Authorization", "Bearer "+tok); r.status != 200 {
		t.Errorf("the reused token: %d %s", r.status, r.body)
	}
}

// TestAuthHTTP: a server on every interface with a token file refuses
// requests without the token or with a wrong one (401, WWW-Authenticate),
// serves exempt routes without one, and answers wrong tokens 429 with
// Retry-After after repeated failures, while the right token is served.
func TestAuthHTTP(t *testing.T) {
	tokFile := filepath.Join(t.TempDir(), "tokens")
	const tok = "0123456789abcdef-right"
	if err := os.WriteFile(tokFile, []byte("# weir tokens\n"+tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := openServing(t, Config{Listen: "0.0.0.0:0", AuthTokenFile: tokFile, AuthExempt: []string{"/healthz"}})
	url := loopbackURL(p)

	for _, tc := range []struct {
		name, method, path string
		headers            []string
		status             int
		code               errcode.Code
	}{
		{"no token", "GET", "/v1/jobs", nil, 401, errcode.Unauthenticated},
		{"no token, metrics", "GET", "/metrics", nil, 401, errcode.Unauthenticated},
		{"no token, submit", "POST", "/v1/jobs", []string{"Content-Type", "application/json"}, 401, errcode.Unauthenticated},
		{"no token, release", "POST", "/v1/process:release", []string{"Content-Type", "application/json"}, 401, errcode.Unauthenticated},
		{"basic auth", "GET", "/v1/jobs", []string{"Authorization", "Basic dXNlcjpwYXNz"}, 401, errcode.Unauthenticated},
		{"exempt health", "GET", "/healthz", nil, 200, ""},
		{"right token", "GET", "/v1/jobs", []string{"Authorization", "Bearer " + tok}, 200, ""},
		{"right token, metrics", "GET", "/metrics", []string{"Authorization", "bearer " + tok}, 200, ""},
	} {
		r := call(t, tc.method, url+tc.path, "", tc.headers...)
		if r.status != tc.status || r.code != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, r.status, r.body, tc.status, tc.code)
		}
		if tc.status == 401 && !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: WWW-Authenticate %q, want Bearer", tc.name, r.header.Get("WWW-Authenticate"))
		}
	}
	// 5 failures so far; up to api.DefaultAuthFailures are answered 401.
	for i := 5; i < api.DefaultAuthFailures; i++ {
		if r := call(t, "GET", url+"/v1/jobs", "", "Authorization", "Bearer wrong-token-guess"); r.status != 401 || r.code != errcode.Unauthenticated {
			t.Fatalf("wrong token %d: %d %s", i+1, r.status, r.body)
		}
	}
	for _, auth := range []string{"Bearer wrong-token-guess", ""} {
		r := call(t, "GET", url+"/v1/jobs", "", "Authorization", auth)
		if r.status != 429 || r.code != errcode.RateLimited || r.header.Get("Retry-After") == "" {
			t.Errorf("after %d failures: %d %s (Retry-After %q), want 429 RATE_LIMITED with Retry-After", api.DefaultAuthFailures, r.status, r.body, r.header.Get("Retry-After"))
		}
	}
	if r := call(t, "GET", url+"/v1/jobs", "", "Authorization", "Bearer "+tok); r.status != 200 {
		t.Errorf("the right token after %d failures: %d %s, want 200", api.DefaultAuthFailures, r.status, r.body)
	}
	if r := call(t, "GET", url+"/healthz", ""); r.status != 200 {
		t.Errorf("exempt route while rate-limited: %d", r.status)
	}
}

// TestLoopbackWithoutToken: the zero-setup default serves without a token.
func TestLoopbackWithoutToken(t *testing.T) {
	p := openServing(t, Config{Listen: "127.0.0.1:0"})
	for _, path := range []string{"/v1/jobs", "/metrics", "/healthz"} {
		if r := call(t, "GET", p.Address()+path, ""); r.status != 200 {
			t.Errorf("GET %s: %d %s", path, r.status, r.body)
		}
	}
}
