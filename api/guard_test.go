package api

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/mtime"
)

// guarded serves a handler that answers 200 {"ok": true} (reading the
// body) behind a guard of cfg.
func guarded(t *testing.T, cfg GuardConfig) *httptest.Server {
	t.Helper()
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	g, err := NewGuard(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v map[string]any
		if r.Body != nil && r.ContentLength != 0 {
			if err := decode(r, &v); err != nil {
				(&Server{logger: cfg.Logger}).writeError(w, err)
				return
			}
		}
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	})))
	t.Cleanup(ts.Close)
	return ts
}

type guardReply struct {
	status int
	header http.Header
	code   errcode.Code
	body   string
}

func send(t *testing.T, method, url string, body io.Reader, headers ...string) guardReply {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
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
	var eb ErrorBody
	_ = json.Unmarshal(b, &eb)
	return guardReply{status: resp.StatusCode, header: resp.Header, code: eb.Error.Code, body: string(b)}
}

func writeTokens(t *testing.T, path string, lines ...string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestGuardTokenRotation: the token file is read again when it changes;
// two lines let the old and the new token overlap.
func TestGuardTokenRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	const oldTok, newTok = "old-token-0123456789", "new-token-0123456789"
	writeTokens(t, path, oldTok)
	ts := guarded(t, GuardConfig{TokenFile: path})
	ok := func(tok string) bool {
		return send(t, "GET", ts.URL+"/v1/jobs", nil, "Authorization", "Bearer "+tok).status == 200
	}
	if !ok(oldTok) || ok(newTok) {
		t.Fatal("before the rotation: want the old token only")
	}
	writeTokens(t, path, "# rotating", oldTok, newTok)
	if !ok(oldTok) || !ok(newTok) {
		t.Fatal("during the rotation: want both tokens")
	}
	writeTokens(t, path, newTok)
	if ok(oldTok) || !ok(newTok) {
		t.Fatal("after the rotation: want the new token only")
	}
	// A broken file keeps the last good tokens.
	writeTokens(t, path, "short")
	if !ok(newTok) {
		t.Fatal("a token file with a short token dropped the good tokens")
	}
	for _, bad := range [][]string{{"short"}, {"# nothing"}} {
		writeTokens(t, path, bad...)
		if _, err := NewGuard(GuardConfig{TokenFile: path}); err == nil {
			t.Errorf("NewGuard with a token file %q: no error", bad)
		}
	}
}

// TestGuardAuthRateLimit: after AuthFailures failures a client's failing
// attempts are answered 429 with Retry-After until the bucket refills (on
// the injected clock), while the right token is served all along.
func TestGuardAuthRateLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	const tok = "token-0123456789abcdef"
	writeTokens(t, path, tok)
	clock := mtime.NewManualClock(mtime.FromTime(time.Unix(1_700_000_000, 0)))
	ts := guarded(t, GuardConfig{TokenFile: path, AuthFailures: 3, AuthFailureRefill: 10 * time.Second, Clock: clock})
	for i := 0; i < 3; i++ {
		if r := send(t, "GET", ts.URL+"/x", nil, "Authorization", "Bearer nope"); r.status != 401 || r.code != errcode.Unauthenticated || r.header.Get("WWW-Authenticate") != `Bearer realm="weir"` {
			t.Fatalf("failure %d: %d %s %q", i+1, r.status, r.body, r.header.Get("WWW-Authenticate"))
		}
	}
	r := send(t, "GET", ts.URL+"/x", nil, "Authorization", "Bearer nope")
	if r.status != 429 || r.code != errcode.RateLimited || r.header.Get("Retry-After") != "10" {
		t.Fatalf("after 3 failures: %d %s Retry-After %q, want 429 RATE_LIMITED Retry-After 10", r.status, r.body, r.header.Get("Retry-After"))
	}
	if r := send(t, "GET", ts.URL+"/x", nil, "Authorization", "Bearer "+tok); r.status != 200 {
		t.Fatalf("the right token after 3 failures: %d %s, want 200", r.status, r.body)
	}
	clock.Advance(4 * mtime.Second)
	if r := send(t, "GET", ts.URL+"/x", nil); r.status != 429 || r.header.Get("Retry-After") != "6" {
		t.Fatalf("4s later: %d Retry-After %q, want 429 after 6", r.status, r.header.Get("Retry-After"))
	}
	clock.Advance(6 * mtime.Second)
	if r := send(t, "GET", ts.URL+"/x", nil, "Authorization", "Bearer nope"); r.status != 401 {
		t.Fatalf("a failure after the refill: %d %s, want 401", r.status, r.body)
	}
	if r := send(t, "GET", ts.URL+"/x", nil, "Authorization", "Bearer "+tok); r.status != 200 {
		t.Fatalf("after the refill: %d %s", r.status, r.body)
	}
}

// TestCheckBearerAfterFailures: the gRPC listener's check accepts the
// right token whatever the failures of its client, and throttles the
// failing ones.
func TestCheckBearerAfterFailures(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	const tok = "token-0123456789abcdef"
	writeTokens(t, path, tok)
	clock := mtime.NewManualClock(mtime.FromTime(time.Unix(1_700_000_000, 0)))
	g, err := NewGuard(GuardConfig{TokenFile: path, AuthFailures: 2, AuthFailureRefill: 10 * time.Second, Clock: clock,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		token string
		ok    bool
		wait  time.Duration
	}{
		{"nope", false, 0}, {"", false, 0}, {"nope", false, 10 * time.Second}, {tok, true, 0}, {"nope", false, 10 * time.Second}, {tok, true, 0},
	} {
		ok, wait := g.CheckBearer("192.0.2.1", want.token, "Publish")
		if ok != want.ok || wait != want.wait {
			t.Errorf("call %d (token %q): ok %v wait %s, want %v %s", i+1, want.token, ok, wait, want.ok, want.wait)
		}
	}
}

// TestGuardFailuresKeepTheRequestRate: failing attempts do not use up the
// request rate of their address: the right token is still served when
// more failures than the request burst came from the same address.
func TestGuardFailuresKeepTheRequestRate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	const tok = "token-0123456789abcdef"
	writeTokens(t, path, tok)
	clock := mtime.NewManualClock(mtime.FromTime(time.Unix(1_700_000_000, 0)))
	ts := guarded(t, GuardConfig{TokenFile: path, RequestsPerSecond: 1, RequestBurst: 3, Clock: clock})
	for i := 0; i < 10; i++ {
		if r := send(t, "GET", ts.URL+"/x", nil, "Authorization", "Bearer nope"); r.status != 401 && r.status != 429 {
			t.Fatalf("failure %d: %d %s", i+1, r.status, r.body)
		}
	}
	for i := 0; i < 3; i++ {
		if r := send(t, "GET", ts.URL+"/x", nil, "Authorization", "Bearer "+tok); r.status != 200 {
			t.Fatalf("right token %d after 10 failures: %d %s", i+1, r.status, r.body)
		}
	}
	if r := send(t, "GET", ts.URL+"/x", nil, "Authorization", "Bearer "+tok); r.status != 429 || r.code != errcode.RateLimited {
		t.Fatalf("right token past its own burst: %d %s, want 429", r.status, r.body)
	}
}

// TestGuardRequestRateLimit: a client past its request rate is answered
// 429 with Retry-After.
func TestGuardRequestRateLimit(t *testing.T) {
	clock := mtime.NewManualClock(mtime.FromTime(time.Unix(1_700_000_000, 0)))
	ts := guarded(t, GuardConfig{RequestsPerSecond: 2, RequestBurst: 5, Clock: clock})
	for i := 0; i < 5; i++ {
		if r := send(t, "GET", ts.URL+"/x", nil); r.status != 200 {
			t.Fatalf("request %d: %d", i+1, r.status)
		}
	}
	r := send(t, "GET", ts.URL+"/x", nil)
	if r.status != 429 || r.code != errcode.RateLimited || r.header.Get("Retry-After") != "1" {
		t.Fatalf("request 6: %d %s Retry-After %q", r.status, r.body, r.header.Get("Retry-After"))
	}
	clock.Advance(500 * mtime.Millisecond)
	if r := send(t, "GET", ts.URL+"/x", nil); r.status != 200 {
		t.Fatalf("after 500ms: %d", r.status)
	}
	if _, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil {
		t.Error(err)
	}
}

// TestClientRequestsPassTheGuard: the client's bodiless POSTs and DELETEs
// are JSON too, and it sends its token as a bearer token.
func TestClientRequestsPassTheGuard(t *testing.T) {
	type seen struct{ method, contentType, auth string }
	got := make(chan seen, 4)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.Method, r.Header.Get("Content-Type"), r.Header.Get("Authorization")}
		writeJSON(w, http.StatusOK, map[string]string{})
	}))
	defer ts.Close()
	c, err := NewClient(ts.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	c = c.WithToken("tok-0123456789abcdef")
	ctx := t.Context()
	_, _ = c.Cancel(ctx, "x")
	_ = c.DeleteTopic(ctx, "x")
	_, _ = c.List(ctx, "all")
	for _, want := range []seen{
		{"POST", "application/json", "Bearer tok-0123456789abcdef"},
		{"DELETE", "application/json", "Bearer tok-0123456789abcdef"},
		{"GET", "", "Bearer tok-0123456789abcdef"},
	} {
		if s := <-got; s != want {
			t.Errorf("request %+v, want %+v", s, want)
		}
	}
}

// TestGuardForwardedClients: requests a cluster member forwards for its
// clients count against each client's rate, when the member proves the
// address with the token (MarkForwarded); an unproven or wrongly proven
// address counts against the connection's.
func TestGuardForwardedClients(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	const tok = "token-0123456789abcdef"
	writeTokens(t, path, tok)
	clock := mtime.NewManualClock(mtime.FromTime(time.Unix(1_700_000_000, 0)))
	ts := guarded(t, GuardConfig{TokenFile: path, RequestsPerSecond: 1, RequestBurst: 2, Clock: clock})
	member, err := NewGuard(GuardConfig{TokenFile: path, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	// forward sends, as a member would, a request of the client at addr.
	forward := func(addr string, tamper bool) guardReply {
		t.Helper()
		in := httptest.NewRequest("GET", "/x", nil)
		in.RemoteAddr = addr + ":5000"
		out, err := http.NewRequest("GET", ts.URL+"/x", nil)
		if err != nil {
			t.Fatal(err)
		}
		member.MarkForwarded(in, out)
		if out.Header.Get(forwardedForHeader) != addr {
			t.Fatalf("the forward names %q, want %s", out.Header.Get(forwardedForHeader), addr)
		}
		if tamper {
			out.Header.Set(forwardedForHeader, "203.0.113.99")
		}
		return send(t, "GET", out.URL.String(), nil, "Authorization", "Bearer "+tok,
			forwardedForHeader, out.Header.Get(forwardedForHeader), forwardedProofHeader, out.Header.Get(forwardedProofHeader))
	}
	// Two clients behind one member: each has its own burst of 2.
	for _, client := range []string{"198.51.100.1", "198.51.100.2"} {
		for i := 0; i < 2; i++ {
			if r := forward(client, false); r.status != 200 {
				t.Fatalf("client %s request %d: %d %s", client, i+1, r.status, r.body)
			}
		}
		if r := forward(client, false); r.status != 429 {
			t.Fatalf("client %s past its burst: %d, want 429", client, r.status)
		}
	}
	// A changed address fails its proof: the connection's (loopback) rate.
	for i := 0; i < 2; i++ {
		if r := forward("198.51.100.3", true); r.status != 200 {
			t.Fatalf("tampered request %d: %d %s", i+1, r.status, r.body)
		}
	}
	if r := send(t, "GET", ts.URL+"/x", nil, "Authorization", "Bearer "+tok); r.status != 429 {
		t.Fatalf("the connection's own request after two counted against it: %d, want 429", r.status)
	}
}

// TestGuardLargeBodyPrefix: requests under LargeBodyPrefix (Pub/Sub's
// REST surface, whose publish carries up to 10 MB of data) may carry
// bodies up to LargeBodyBytes, with or without a stated length; every
// other request keeps MaxRequestBytes.
func TestGuardLargeBodyPrefix(t *testing.T) {
	g, err := NewGuard(GuardConfig{LargeBodyPrefix: "/v1/projects/", LargeBodyBytes: 16 << 20, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		writeJSON(w, http.StatusOK, map[string]int64{"read": n})
	})))
	defer ts.Close()
	for _, tc := range []struct {
		name    string
		path    string
		size    int
		chunked bool // no Content-Length: the limit applies as the body is read
		want    int
	}{
		{"publish of 12 MiB", "/v1/projects/p/topics/t:publish", 12 << 20, false, 200},
		{"publish of 12 MiB, chunked", "/v1/projects/p/topics/t:publish", 12 << 20, true, 200},
		{"publish over the large limit", "/v1/projects/p/topics/t:publish", 17 << 20, false, 413},
		{"publish over the large limit, chunked", "/v1/projects/p/topics/t:publish", 17 << 20, true, 413},
		{"another request of 12 MiB", "/v1/jobs", 12 << 20, false, 413},
		{"another request of 12 MiB, chunked", "/v1/jobs", 12 << 20, true, 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader = strings.NewReader(strings.Repeat("x", tc.size))
			if tc.chunked {
				body = io.MultiReader(body) // hides the length
			}
			if r := send(t, "POST", ts.URL+tc.path, body, "Content-Type", "application/json"); r.status != tc.want {
				t.Errorf("status %d (%.200s), want %d", r.status, r.body, tc.want)
			}
		})
	}
}
