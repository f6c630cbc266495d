package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weir-dev/weir/console"
)

func TestIsPage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		path string
		want bool
	}{
		{"/", true},
		{"/topics", true},
		{"/cluster", true},
		{"/cluster/x", false},
		{"/jobs/abc", true},
		{"/jobs/my-job", true},
		{"/jobs/my-job/update", true},
		{"/jobs/my-job/other", false},
		{"/jobs/", false},
		{"/jobs/a:drain", false},
		{"/lineage/my-job", true},
		{"/lineage/", false},
		{"/lineage/a/b", false},
		{"/console/app.js", true},
		{"/v1/jobs", false},
		{"/metrics", false},
		{"/healthz", false},
		{"/topicsx", false},
	} {
		if got := console.IsPage(tc.path); got != tc.want {
			t.Errorf("IsPage(%q) = %v, want %v", tc.path, got, tc.want)
		}
	}
}

// TestMount sends requests through Mount and checks which handler
// answered, with what type and policy.
func TestMount(t *testing.T) {
	t.Parallel()
	apiH := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Answered-By", "api")
		w.WriteHeader(http.StatusTeapot)
	})
	ts := httptest.NewServer(console.Mount(apiH, console.Handler()))
	defer ts.Close()
	for _, tc := range []struct {
		method, path string
		status       int
		by           string // "api" or "" (the console)
		contentType  string
		contains     string
	}{
		{"GET", "/", 200, "", "text/html", `<script type="module" src="/console/app.js">`},
		{"GET", "/jobs/some-job", 200, "", "text/html", `id="main"`},
		{"GET", "/jobs/some-job/update", 200, "", "text/html", `id="main"`},
		{"GET", "/lineage/some-job", 200, "", "text/html", `id="main"`},
		{"GET", "/topics", 200, "", "text/html", `id="main"`},
		{"HEAD", "/", 200, "", "text/html", ""},
		{"GET", "/console/app.js", 200, "", "text/javascript", "function route()"},
		{"GET", "/console/graph.js", 200, "", "text/javascript", "export function drawGraph"},
		{"GET", "/console/style.css", 200, "", "text/css", ".card"},
		{"GET", "/console/", 404, "", "", ""},
		{"GET", "/console/index.html", 404, "", "", ""},
		{"GET", "/console/missing.js", 404, "", "", ""},
		{"POST", "/", 418, "api", "", ""},
		{"GET", "/v1/jobs", 418, "api", "", ""},
		{"GET", "/jobs/x/other", 418, "api", "", ""},
		{"DELETE", "/jobs/x", 418, "api", "", ""},
	} {
		req, err := http.NewRequest(tc.method, ts.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("X-Answered-By") != tc.by {
			t.Errorf("%s %s: %d by %q, want %d by %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("X-Answered-By"), tc.status, tc.by)
			continue
		}
		if tc.by == "" && resp.Header.Get("Content-Security-Policy") != console.ContentSecurityPolicy {
			t.Errorf("%s %s: Content-Security-Policy %q", tc.method, tc.path, resp.Header.Get("Content-Security-Policy"))
		}
		if ct := resp.Header.Get("Content-Type"); tc.contentType != "" && !strings.HasPrefix(ct, tc.contentType) {
			t.Errorf("%s %s: Content-Type %q, want %s", tc.method, tc.path, ct, tc.contentType)
		}
		if !strings.Contains(string(b), tc.contains) {
			t.Errorf("%s %s: the body does not contain %q", tc.method, tc.path, tc.contains)
		}
	}
}
