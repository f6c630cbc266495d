package server

import (
	"strings"
	"testing"

	"github.com/weir-dev/weir/errcode"
)

// TestBrowserProtections sends, over real HTTP to a running process, what
// a web page of another site could: a text/plain or form POST, a request
// with a foreign Origin, and a request under a foreign Host name (DNS
// rebinding). Each is refused before it reaches the service; the
// loopback default without a token is not an exception.
func TestBrowserProtections(t *testing.T) {
	p := openServing(t, Config{Listen: "127.0.0.1:0", AllowedHosts: []string{"weir.internal"}})
	url := p.Address()
	host := strings.TrimPrefix(url, "http://")
	job := `{"name": "x", "pipeline": "pipeline: {}", "base_dir": "/"}`
	for _, tc := range []struct {
		name, method, path, body string
		headers                  []string
		status                   int
		code                     errcode.Code
	}{
		{"text/plain POST", "POST", "/v1/jobs", job, []string{"Content-Type", "text/plain"}, 415, errcode.UnsupportedMediaType},
		{"form POST", "POST", "/v1/jobs/x:cancel", "a=b", []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, errcode.UnsupportedMediaType},
		{"multipart POST", "POST", "/v1/topics", "--b--", []string{"Content-Type", "multipart/form-data; boundary=b"}, 415, errcode.UnsupportedMediaType},
		{"POST without a content type", "POST", "/v1/jobs/x:cancel", "", nil, 415, errcode.UnsupportedMediaType},
		{"DELETE without a content type", "DELETE", "/v1/topics/orders", "", nil, 415, errcode.UnsupportedMediaType},
		{"foreign Origin", "POST", "/v1/jobs", job, []string{"Content-Type", "application/json", "Origin", "https://evil.example"}, 403, errcode.ForbiddenOrigin},
		{"foreign Origin, GET", "GET", "/v1/jobs", "", []string{"Origin", "http://evil.example:7070"}, 403, errcode.ForbiddenOrigin},
		{"null Origin", "GET", "/v1/jobs", "", []string{"Origin", "null"}, 403, errcode.ForbiddenOrigin},
		{"Origin of another port", "GET", "/v1/jobs", "", []string{"Origin", "http://127.0.0.1:1"}, 403, errcode.ForbiddenOrigin},
		{"foreign Host (DNS rebinding)", "GET", "/v1/jobs", "", []string{"Host", "evil.example:7070"}, 403, errcode.InvalidHost},
		{"foreign Host, metrics", "GET", "/metrics", "", []string{"Host", "rebind.evil.example"}, 403, errcode.InvalidHost},
		{"same Origin", "GET", "/v1/jobs", "", []string{"Origin", url}, 200, ""},
		{"JSON with charset", "POST", "/v1/topics", `{"name": "orders"}`, []string{"Content-Type", "application/json; charset=utf-8"}, 201, ""},
		{"localhost Host", "GET", "/v1/jobs", "", []string{"Host", "localhost:" + host[strings.LastIndex(host, ":")+1:]}, 200, ""},
		{"allowed Host", "GET", "/v1/jobs", "", []string{"Host", "weir.internal:7070"}, 200, ""},
		{"JSON DELETE", "DELETE", "/v1/topics/orders", "", []string{"Content-Type", "application/json"}, 204, ""},
	} {
		r := call(t, tc.method, url+tc.path, tc.body, tc.headers...)
		if r.status != tc.status || r.code != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, r.status, r.body, tc.status, tc.code)
		}
		for h, want := range map[string]string{
			"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store",
		} {
			if got := r.header.Get(h); got != want {
				t.Errorf("%s: %s %q, want %q", tc.name, h, got, want)
			}
		}
		if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s: Content-Security-Policy %q", tc.name, csp)
		}
	}
}
