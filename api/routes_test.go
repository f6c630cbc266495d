package api

import (
	"net/http/httptest"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

var (
	docRouteLine = regexp.MustCompile(`^//\t(GET|POST|PUT|PATCH|DELETE)\s+(/\S*)`)
	routeParam   = regexp.MustCompile(`\{[^}]*\}`)
)

// normRoute is a route without its query and with its parameters unnamed:
// "GET /v1/jobs/{id_or_name}/events[?after=SEQ]" is "GET /v1/jobs/{}/events".
func normRoute(method, path string) string {
	if i := strings.IndexAny(path, "?["); i >= 0 {
		path = path[:i]
	}
	return method + " " + routeParam.ReplaceAllString(path, "{}")
}

// docRoutes reads the route table of doc.go: the indented lines of the
// package documentation that start with a method.
func docRoutes(t *testing.T) (routes map[string]string, text string) {
	t.Helper()
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	routes = map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if m := docRouteLine.FindStringSubmatch(line); m != nil {
			routes[normRoute(m[1], m[2])] = m[1] + " " + m[2]
		}
	}
	if len(routes) == 0 {
		t.Fatal("doc.go has no route table")
	}
	return routes, string(b)
}

// TestRouteTable: the route table of the package documentation names
// every route the server registers (NAME:ACTION routes one by one), and
// only those; every route it names reaches a handler of its own, not the
// answer to unknown routes.
func TestRouteTable(t *testing.T) {
	s := NewServer(nil, nil)
	doc, text := docRoutes(t)
	served := map[string]bool{}
	for _, p := range s.routes {
		method, path, _ := strings.Cut(p, " ")
		served[normRoute(method, path)] = true
	}
	var missing, extra []string
	for r := range served {
		if _, ok := doc[r]; !ok {
			missing = append(missing, r)
		}
	}
	for r, line := range doc {
		if !served[r] {
			extra = append(extra, line)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	for _, r := range missing {
		t.Errorf("the server serves %s, which doc.go's route table does not list", r)
	}
	for _, r := range extra {
		t.Errorf("doc.go's route table lists %s, which the server does not serve", r)
	}
	if len(s.pathForms) > 0 && !strings.Contains(strings.Join(strings.Fields(text), " "), "also answers at .../{name}/ACTION") {
		t.Errorf("the server serves the /ACTION forms of its actions (%v), which doc.go does not say", s.pathForms)
	}
	for r := range doc {
		method, path, _ := strings.Cut(r, " ")
		path = strings.ReplaceAll(path, "{}", "x")
		if _, pattern := s.mux.Handler(httptest.NewRequest(method, path, nil)); pattern == "/" || pattern == "" {
			t.Errorf("%s reaches no route of its own (pattern %q)", r, pattern)
		}
	}
}
