package api

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/service"
)

// Defaults of GuardConfig (see docs/SECURITY.md).
const (
	// DefaultRequestsPerSecond is the sustained request rate allowed per
	// client IP; DefaultRequestBurst the requests it may send at once.
	DefaultRequestsPerSecond = 200
	DefaultRequestBurst      = 400
	// DefaultAuthFailures is how many failed authentications a client IP
	// may make before its failing attempts are answered 429 RATE_LIMITED
	// instead of 401; one more is allowed every DefaultAuthFailureRefill. A
	// request with a valid token is never refused for failures.
	DefaultAuthFailures      = 10
	DefaultAuthFailureRefill = 6 * time.Second
	// DefaultBodyReadTimeout bounds the reading of a request body (an 8 MiB
	// body needs at least 140 KB/s).
	DefaultBodyReadTimeout = time.Minute
	// MinTokenLength is the shortest token a token file may hold.
	MinTokenLength = 16
	// maxClients bounds the rate limiters' tables: past it, the clients
	// whose buckets are full again are forgotten.
	maxClients = 10000
)

// GuardConfig configures a Guard. Zero values take the documented defaults.
type GuardConfig struct {
	// TokenFile holds the bearer tokens the API accepts, one a line (blank
	// lines and lines starting with # are ignored; several lines let a
	// rotation overlap). It is read again whenever it changes (checked on
	// every request). "" serves without authentication: only for a loopback
	// listen address, which trusts every local user (the caller decides).
	TokenFile string
	// Exempt are the paths served without a token: an exact path
	// ("/healthz"), or a prefix ending in "/".
	Exempt []string
	// ListenHost is the host of the listen address (a name or an IP; "" or
	// an unspecified IP for every interface): a Host header naming it is
	// accepted.
	ListenHost string
	// AllowedHosts are further host names the Host header may carry
	// (--allowed-hosts), without port.
	AllowedHosts []string
	// RequestsPerSecond and RequestBurst limit each client IP's requests
	// (defaults DefaultRequestsPerSecond, DefaultRequestBurst); a negative
	// RequestsPerSecond turns the limit off.
	RequestsPerSecond float64
	RequestBurst      int
	// AuthFailures and AuthFailureRefill limit each client IP's failed
	// authentications (defaults DefaultAuthFailures, DefaultAuthFailureRefill):
	// past them its failing attempts are answered 429 without a log line
	// each. Only failing attempts are limited: a request with a valid token
	// is served whatever the failures of its address (behind a reverse
	// proxy, other users').
	AuthFailures      int
	AuthFailureRefill time.Duration
	// BodyReadTimeout bounds the reading of a request's body from its
	// first byte after the headers (default DefaultBodyReadTimeout): a
	// body trickling in is cut off. The headers' bound is the
	// http.Server's ReadHeaderTimeout.
	BodyReadTimeout time.Duration
	// LargeBodyPrefix and LargeBodyBytes let the requests whose path starts
	// with LargeBodyPrefix carry bodies of up to LargeBodyBytes instead of
	// MaxRequestBytes: Pub/Sub's REST surface, whose publish holds up to
	// 10 MB of data (13.4 MB as JSON's base64). Their handler bounds
	// them itself.
	LargeBodyPrefix string
	LargeBodyBytes  int64
	// Clock drives the rate limits (default mtime.WallClock).
	Clock mtime.Clock
	// Logger receives failed authentications (warn) and token file reloads.
	Logger *slog.Logger
}

// Guard protects an API handler (Wrap): bearer-token authentication,
// per-client rate limits, the Host and Origin checks against DNS rebinding
// and cross-site requests, JSON-only state-changing requests, the body size
// limit and the security headers of every reply. See docs/SECURITY.md.
type Guard struct {
	cfg      GuardConfig
	log      *slog.Logger
	tokens   *tokenFile // nil: no authentication
	requests *limiter   // nil: no request rate limit
	failures *limiter
}

// NewGuard returns the guard cfg describes; with a token file, the file
// must hold at least one token of MinTokenLength characters or more.
func NewGuard(cfg GuardConfig) (*Guard, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = mtime.WallClock{}
	}
	if cfg.RequestsPerSecond == 0 {
		cfg.RequestsPerSecond = DefaultRequestsPerSecond
	}
	if cfg.RequestBurst <= 0 {
		cfg.RequestBurst = DefaultRequestBurst
	}
	if cfg.AuthFailures <= 0 {
		cfg.AuthFailures = DefaultAuthFailures
	}
	if cfg.AuthFailureRefill <= 0 {
		cfg.AuthFailureRefill = DefaultAuthFailureRefill
	}
	if cfg.BodyReadTimeout <= 0 {
		cfg.BodyReadTimeout = DefaultBodyReadTimeout
	}
	for _, e := range cfg.Exempt {
		if !strings.HasPrefix(e, "/") {
			return nil, fmt.Errorf("--auth-exempt %q: want a path starting with /", e)
		}
	}
	g := &Guard{cfg: cfg, log: cfg.Logger,
		failures: newLimiter(cfg.Clock, float64(time.Second)/float64(cfg.AuthFailureRefill), cfg.AuthFailures)}
	if cfg.RequestsPerSecond > 0 {
		g.requests = newLimiter(cfg.Clock, cfg.RequestsPerSecond, cfg.RequestBurst)
	}
	if cfg.TokenFile != "" {
		g.tokens = &tokenFile{path: cfg.TokenFile, log: cfg.Logger}
		if _, err := g.tokens.load(); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// Authenticates says whether the guard asks for a token.
func (g *Guard) Authenticates() bool { return g.tokens != nil }

// Wrap returns h behind the guard.
func (g *Guard) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cache-Control", "no-store")
		client := g.clientOf(r)
		if !g.hostAllowed(r.Host) {
			g.refuse(w, service.NewError(errcode.InvalidHost, "Host %q is not this server's: use the listen address, a loopback name (localhost, 127.0.0.1), or start the server with --allowed-hosts %s", r.Host, hostOnly(r.Host)))
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r.Host) {
			g.refuse(w, service.NewError(errcode.ForbiddenOrigin, "Origin %q is not this server (%s): the API does not serve other sites' pages", o, r.Host))
			return
		}
		// The request rate is limited per address; with tokens, requests
		// that carry a valid one and those served without one (exempt
		// paths) have buckets of their own, and failing ones only the
		// failure limit, so that no one without the token uses up the
		// rate of those with it.
		bucket := client
		if g.tokens != nil {
			if g.exempt(r.URL.Path) {
				bucket = client + " (without a token)"
			} else if !g.authenticate(w, r, client) {
				return
			}
		}
		if g.requests != nil {
			if wait := g.requests.take(bucket); wait > 0 {
				g.rateLimited(w, wait, "too many requests from %s: at most %g a second (burst %d)", client, g.cfg.RequestsPerSecond, g.cfg.RequestBurst)
				return
			}
		}
		switch r.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
				g.refuse(w, service.NewError(errcode.UnsupportedMediaType, "%s %s needs Content-Type: application/json, not %q", r.Method, r.URL.Path, r.Header.Get("Content-Type")))
				return
			}
		}
		limit := int64(MaxRequestBytes)
		if g.cfg.LargeBodyPrefix != "" && strings.HasPrefix(r.URL.Path, g.cfg.LargeBodyPrefix) {
			limit = max(limit, g.cfg.LargeBodyBytes)
		}
		if r.ContentLength > limit {
			g.refuse(w, tooLargeOver(limit))
			return
		}
		if r.ContentLength != 0 {
			rc := http.NewResponseController(w)
			if err := rc.SetReadDeadline(time.Now().Add(g.cfg.BodyReadTimeout)); err == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
			}
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		h.ServeHTTP(w, r)
	})
}

// deadlineBody is a request body read under a deadline, which it lifts
// once the body is read to its end (the connection's background read after the body
// would otherwise hit it and cancel the request's context).
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	// Only at the end: after a timeout the deadline must stay, or the
	// server's discarding of the rest of the body would wait forever.
	if err == io.EOF && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

func tooLarge() error { return tooLargeOver(MaxRequestBytes) }

// tooLargeOver is REQUEST_TOO_LARGE for a body over limit bytes.
func tooLargeOver(limit int64) error {
	return service.NewError(errcode.RequestTooLarge, "the request body is larger than %d bytes", limit)
}

// authenticate checks r's bearer token: a valid one passes whatever the
// failures of client; a failing attempt takes one of client's failures and
// is answered 401, or 429 once they are spent.
func (g *Guard) authenticate(w http.ResponseWriter, r *http.Request, client string) bool {
	reason := "no bearer token"
	if tok, ok := bearer(r); ok {
		if g.tokens.accepts(tok) {
			return true
		}
		reason = "wrong bearer token"
	}
	if wait := g.failures.take(client); wait > 0 {
		g.rateLimited(w, wait, "too many failed authentications from %s", client)
		return false
	}
	g.log.Warn("API authentication failed", "client", client, "method", r.Method, "path", r.URL.Path, "reason", reason)
	w.Header().Set("WWW-Authenticate", `Bearer realm="weir"`)
	g.refuse(w, service.NewError(errcode.Unauthenticated, "%s: send Authorization: Bearer TOKEN (the CLI reads --token, --token-file or $WEIR_TOKEN; see docs/SECURITY.md)", reason))
	return false
}

func (g *Guard) rateLimited(w http.ResponseWriter, wait time.Duration, format string, args ...any) {
	secs := int((wait + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	g.refuse(w, service.NewError(errcode.RateLimited, format+"; retry after %ds", append(args, secs)...))
}

func (g *Guard) refuse(w http.ResponseWriter, err error) {
	code := service.ErrorCode(err)
	writeJSON(w, StatusOf(code), ErrorBody{Error: ErrorDetail{Code: code, Message: err.Error()}})
}

func (g *Guard) exempt(path string) bool {
	for _, e := range g.cfg.Exempt {
		if path == e || strings.HasSuffix(e, "/") && strings.HasPrefix(path, e) {
			return true
		}
	}
	return false
}

// hostAllowed says whether a Host header names this server: an IP literal
// (DNS rebinding needs a name), a loopback name, the listen host or one of
// the allowed hosts.
func (g *Guard) hostAllowed(host string) bool {
	h := hostOnly(host)
	switch {
	case h == "":
		return false
	case net.ParseIP(h) != nil, h == "localhost", strings.HasSuffix(h, ".localhost"):
		return true
	case strings.EqualFold(h, strings.TrimSuffix(g.cfg.ListenHost, ".")):
		return true
	}
	for _, a := range g.cfg.AllowedHosts {
		if strings.EqualFold(h, strings.TrimSuffix(a, ".")) {
			return true
		}
	}
	return false
}

// hostOnly is the host of a Host header, lower case, without port,
// brackets or trailing dot.
func hostOnly(host string) string {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	return strings.ToLower(strings.TrimSuffix(strings.Trim(h, "[]"), "."))
}

// sameOrigin says whether an Origin header is the host the request was
// sent to.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false
	}
	return strings.EqualFold(u.Host, host)
}

// bearer returns the token of an Authorization: Bearer header.
func bearer(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// A cluster member forwards its clients' requests to the leader (package
// server). So that the leader's per-address limits count each client, not
// the member, the member names the client's address in a header, proven
// by an HMAC of the address, the method and the path keyed with the hash of
// the server's first token (every member reads the same token file). A
// header whose proof does not verify under any accepted token is ignored:
// nobody without the token can pose as another address.
const (
	forwardedForHeader   = "X-Weir-Forwarded-For"
	forwardedProofHeader = "X-Weir-Forwarded-Proof"
)

// forwardProof is the proof of a forwarded request's client address.
func forwardProof(key [sha256.Size]byte, ip, method, path string) string {
	m := hmac.New(sha256.New, key[:])
	m.Write([]byte(ip + "\n" + method + "\n" + path))
	return hex.EncodeToString(m.Sum(nil))
}

// MarkForwarded sets on out, a request this server forwards to its
// cluster's leader, the address of in's client with its proof; without a
// token (nothing to prove it with) it only removes such headers.
func (g *Guard) MarkForwarded(in, out *http.Request) {
	out.Header.Del(forwardedForHeader)
	out.Header.Del(forwardedProofHeader)
	if g.tokens == nil {
		return
	}
	hashes, err := g.tokens.load()
	if err != nil || len(hashes) == 0 {
		return
	}
	ip := g.clientOf(in)
	out.Header.Set(forwardedForHeader, ip)
	out.Header.Set(forwardedProofHeader, forwardProof(hashes[0], ip, out.Method, out.URL.Path))
}

// clientOf is the address r's limits count: its connection's, or the
// client a cluster member forwarded it for, when the member proved it.
func (g *Guard) clientOf(r *http.Request) string {
	ip := clientIP(r)
	fwd, proof := r.Header.Get(forwardedForHeader), r.Header.Get(forwardedProofHeader)
	if fwd == "" || proof == "" || g.tokens == nil || net.ParseIP(fwd) == nil {
		return ip
	}
	hashes, err := g.tokens.load()
	if err != nil {
		return ip
	}
	for _, h := range hashes {
		if hmac.Equal([]byte(proof), []byte(forwardProof(h, fwd, r.Method, r.URL.Path))) {
			return fwd
		}
	}
	return ip
}

// clientIP is the IP of the connection (proxies' headers are not trusted).
func clientIP(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}

// tokenFile is the token file, read again when it changes.
type tokenFile struct {
	path string
	log  *slog.Logger

	mu     sync.Mutex
	info   os.FileInfo // guarded by mu: the file read last
	hashes [][sha256.Size]byte
}

// load reads the file when it changed since the last read and returns the
// accepted tokens' hashes; a file that cannot be read or holds no token
// keeps the last good tokens (and logs why), except at the first read.
func (t *tokenFile) load() ([][sha256.Size]byte, error) {
	fi, err := os.Stat(t.path)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err == nil && t.info != nil && os.SameFile(fi, t.info) && fi.ModTime().Equal(t.info.ModTime()) && fi.Size() == t.info.Size() {
		return t.hashes, nil
	}
	hashes, rerr := readTokens(t.path)
	if err == nil {
		err = rerr
	}
	if err != nil {
		if t.info == nil {
			return nil, err
		}
		t.log.Error("re-reading the auth token file failed: keeping the previous tokens", "file", t.path, "error", err)
		return t.hashes, nil
	}
	if t.info != nil {
		t.log.Info("the auth token file changed: re-read it", "file", t.path, "tokens", len(hashes))
	}
	t.info, t.hashes = fi, hashes
	return hashes, nil
}

func readTokens(path string) ([][sha256.Size]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the auth token file: %w", err)
	}
	var out [][sha256.Size]byte
	for i, line := range bytes.Split(b, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		if len(line) < MinTokenLength {
			return nil, fmt.Errorf("auth token file %s, line %d: a token of %d characters, want at least %d (generate one with --generate-auth-token)", path, i+1, len(line), MinTokenLength)
		}
		out = append(out, sha256.Sum256(line))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("auth token file %s holds no token", path)
	}
	return out, nil
}

// accepts compares tok with every token in constant time (of the hashes:
// the length of a token leaks nothing either).
func (t *tokenFile) accepts(tok string) bool {
	hashes, err := t.load()
	if err != nil {
		return false
	}
	got := sha256.Sum256([]byte(tok))
	ok := 0
	for _, h := range hashes {
		ok |= subtle.ConstantTimeCompare(got[:], h[:])
	}
	return ok == 1
}

// limiter is a token bucket per client: rate tokens a second, up to burst.
type limiter struct {
	clock mtime.Clock
	rate  float64 // tokens per second
	burst float64

	mu      sync.Mutex
	buckets map[string]*bucket // guarded by mu
}

type bucket struct {
	tokens float64
	last   mtime.Time
}

func newLimiter(clock mtime.Clock, rate float64, burst int) *limiter {
	return &limiter{clock: clock, rate: rate, burst: float64(burst), buckets: map[string]*bucket{}}
}

// refill returns key's bucket, refilled to now. Call with mu held.
func (l *limiter) refill(key string) *bucket {
	now := l.clock.Now()
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= maxClients {
			for k, o := range l.buckets {
				if o.tokens+float64(now-o.last)/1000*l.rate >= l.burst {
					delete(l.buckets, k)
				}
			}
		}
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[key] = b
	}
	if now > b.last {
		b.tokens = min(l.burst, b.tokens+float64(now-b.last)/1000*l.rate)
		b.last = now
	}
	return b
}

// take takes a token of key; when there is none it returns how long until
// there is one (and takes nothing).
func (l *limiter) take(key string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refill(key)
	if b.tokens >= 1 {
		b.tokens--
		return 0
	}
	return l.until(b)
}

func (l *limiter) until(b *bucket) time.Duration {
	return time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
}

// TokenEnv is client.TokenEnv.
const TokenEnv = client.TokenEnv

// ErrNoToken is client.ErrNoToken.
var ErrNoToken = client.ErrNoToken

// ClientToken is client.ClientToken.
func ClientToken(token, tokenFile string) (tok string, found bool, err error) {
	return client.ClientToken(token, tokenFile)
}

// ReadToken is client.ReadToken: the first token of a token file (the
// format of GuardConfig.TokenFile).
func ReadToken(path string) (string, error) { return client.ReadToken(path) }
