package server

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/weir-dev/weir/api"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/internal/await"
)

// TestWrongTokensDoNotLockOutTheRightOne: while a client sends wrong
// tokens in a loop from the same address (behind a reverse proxy every
// user shares one), a client with the right token makes 20 requests and
// every one is served; the wrong tokens are throttled (429 once the
// failure budget is spent).
func TestWrongTokensDoNotLockOutTheRightOne(t *testing.T) {
	tokFile := filepath.Join(t.TempDir(), "tokens")
	const tok = "0123456789abcdef-right"
	if err := os.WriteFile(tokFile, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := openServing(t, Config{Listen: "0.0.0.0:0", AuthTokenFile: tokFile})
	url := loopbackURL(p) + "/v1/jobs"

	// The attacker spends the address's failure budget first...
	for i := 0; ; i++ {
		r := call(t, "GET", url, "", "Authorization", "Bearer wrong-token-guess")
		if r.status == 429 && r.code == errcode.RateLimited {
			break
		}
		if r.status != 401 || i > api.DefaultAuthFailures {
			t.Fatalf("wrong token %d: %d %s, want 401 then 429", i+1, r.status, r.body)
		}
	}
	// ... and goes on while the right token is used.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	attempts := make(chan int, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		hc := &http.Client{}
		n := 0
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
			req.Header.Set("Authorization", "Bearer wrong-token-guess")
			resp, err := hc.Do(req)
			if err != nil {
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			n++
		}
		attempts <- n
	}()
	ok := 0
	for i := 0; i < 20; i++ {
		r := call(t, "GET", url, "", "Authorization", "Bearer "+tok)
		if r.status == 200 {
			ok++
		} else {
			t.Errorf("request %d with the right token: %d %s", i+1, r.status, r.body)
		}
	}
	stop()
	wg.Wait()
	if ok != 20 {
		t.Errorf("%d of 20 requests with the right token served while wrong tokens were sent (%d attempts)", ok, <-attempts)
	}
	if r := call(t, "GET", url, "", "Authorization", "Bearer wrong-token-guess"); r.status != 429 || r.header.Get("Retry-After") == "" {
		t.Errorf("a wrong token after the loop: %d %s, want 429 with Retry-After", r.status, r.body)
	}
}

// openFDs counts the process's open descriptors; ok is false where
// /proc/self/fd does not list them.
func openFDs() (n int, ok bool) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, false
	}
	return len(ents), true
}

// dialFrom opens a TCP connection to addr from the loopback address src
// (127.0.0.0/8 holds many: each is a client address of its own).
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 30 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dialing from %s: %v", src, err)
	}
	return c
}

// clientFrom is an HTTP client whose connections come from src.
func clientFrom(src string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 30 * time.Second}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 1}}
}

// TestConnectionCaps: idle connections opened up to and past the caps
// (per address, then in all) hold at most the caps' descriptors; past a
// cap new connections are closed by the server, a client of another
// address is served while one address is at its cap, an established
// client keeps being served at the total cap, and once idle connections
// reach the header timeout a new client is served again.
func TestConnectionCaps(t *testing.T) {
	if _, ok := openFDs(); !ok {
		t.Skip("no /proc/self/fd to count descriptors")
	}
	const total, perAddr = 30, 10
	p := openServing(t, Config{Listen: "127.0.0.1:0", MaxConnections: total, MaxConnectionsPerAddress: perAddr,
		ReadHeaderTimeout: 500 * time.Millisecond})
	addr := p.ln.Addr().String()
	url := "http://" + addr + "/healthz"
	get := func(hc *http.Client) (int, bool, error) {
		reused := false
		req, _ := http.NewRequest("GET", url, nil)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}))
		resp, err := hc.Do(req)
		if err != nil {
			return 0, false, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, reused, nil
	}
	// An established client, kept alive across what follows.
	established := clientFrom("127.0.0.2")
	if st, _, err := get(established); err != nil || st != 200 {
		t.Fatalf("before the flood: %d %v", st, err)
	}
	before, _ := openFDs()
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	settled := func(n int) {
		t.Helper()
		if !await.Until(30*time.Second, 10*time.Millisecond, func() bool { return p.conns.seen() >= n }) {
			t.Fatalf("the server saw %d of %d connections", p.conns.seen(), n)
		}
	}
	// One address past its cap.
	for range 3 * perAddr {
		idle = append(idle, dialFrom(t, "127.0.0.1", addr))
	}
	settled(1 + 3*perAddr)
	if open := p.conns.open("127.0.0.1"); open != perAddr {
		t.Errorf("127.0.0.1 holds %d connections, want its cap %d", open, perAddr)
	}
	if st, _, err := get(clientFrom("127.0.0.3")); err != nil || st != 200 {
		t.Errorf("a new client of another address while 127.0.0.1 is at its cap: %d %v", st, err)
	}
	// Many addresses past the total cap.
	for i := 4; i < 10; i++ {
		for range perAddr {
			idle = append(idle, dialFrom(t, "127.0.0."+strconv.Itoa(i), addr))
		}
	}
	settled(2 + 3*perAddr + 6*perAddr)
	if all := p.conns.open(""); all > total {
		t.Errorf("%d connections open, over the cap %d", all, total)
	}
	after, _ := openFDs()
	// The test holds the client end of every idle connection; the server
	// holds at most the cap's.
	if server := after - before - len(idle); server > total+5 {
		t.Errorf("the server opened %d descriptors for %d connections, want at most about the cap %d", server, len(idle), total)
	}
	if st, reused, err := get(established); err != nil || st != 200 || !reused {
		t.Errorf("the established client at the total cap: %d (connection reused %v) %v", st, reused, err)
	}
	// Every idle connection is closed by the server: at once past a cap,
	// at the header timeout within it.
	for i, c := range idle {
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, err := c.Read(make([]byte, 1))
		var ne net.Error
		if err == nil || errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("idle connection %d is still open (%v)", i, err)
		}
	}
	// Then new clients are served again.
	fresh := clientFrom("127.0.0.200")
	var lastErr error
	if !await.Until(30*time.Second, 20*time.Millisecond, func() bool {
		st, _, err := get(fresh)
		lastErr = err
		return err == nil && st == 200
	}) {
		t.Errorf("a new client once the idle connections timed out: %v", lastErr)
	}
}
