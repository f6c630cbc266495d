package console

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed assets
var assets embed.FS

// ContentSecurityPolicy is the policy of the console's replies: scripts,
// styles and API calls of this origin only, no framing, no forms to
// elsewhere, no plugins.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// AssetPrefix is the path under which the console's scripts and styles
// are served.
const AssetPrefix = "/console/"

// IsPage says whether path is one of the console's URLs (a page or an
// asset), which Mount sends to the pages' handler for GET and HEAD.
func IsPage(p string) bool {
	switch {
	case p == "/", p == "/topics", p == "/schedules", p == "/cluster":
		return true
	case strings.HasPrefix(p, "/schedules/"):
		return validSegment(strings.TrimPrefix(p, "/schedules/"))
	case strings.HasPrefix(p, AssetPrefix):
		return true
	case strings.HasPrefix(p, "/lineage/"):
		return validSegment(strings.TrimPrefix(p, "/lineage/"))
	case strings.HasPrefix(p, "/jobs/"):
		ref, rest, _ := strings.Cut(strings.TrimPrefix(p, "/jobs/"), "/")
		return validSegment(ref) && (rest == "" || rest == "update")
	}
	return false
}

// validSegment is a non-empty path segment a job ID or name can be.
func validSegment(s string) bool {
	return s != "" && !strings.ContainsAny(s, "/:")
}

// Handler returns the handler of the console's pages and assets. Every
// page is the same document; its script reads the URL and draws the page.
func Handler() http.Handler {
	sub, subErr := fs.Sub(assets, "assets")
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", ContentSecurityPolicy)
		if subErr != nil {
			http.Error(w, "the console's files are missing from this build", http.StatusInternalServerError)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the console's pages are read with GET", http.StatusMethodNotAllowed)
			return
		}
		if !IsPage(r.URL.Path) {
			http.NotFound(w, r)
			return
		}
		if strings.HasPrefix(r.URL.Path, AssetPrefix) {
			name := strings.TrimPrefix(path.Clean(r.URL.Path), AssetPrefix)
			if name == "" || name == "index.html" || strings.HasSuffix(r.URL.Path, "/") {
				http.NotFound(w, r)
				return
			}
			r2 := r.Clone(r.Context())
			r2.URL.Path = "/" + name
			files.ServeHTTP(w, r2)
			return
		}
		page, err := fs.ReadFile(sub, "index.html")
		if err != nil {
			http.Error(w, "the console's page is missing from this build", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = w.Write(page)
		}
	})
}

// Mount returns a handler that sends GET and HEAD requests for a console
// path (IsPage) to pages and every other request to api.
func Mount(api, pages http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.Method == http.MethodGet || r.Method == http.MethodHead) && IsPage(r.URL.Path) {
			pages.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}
