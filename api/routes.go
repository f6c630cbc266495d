package api

import (
	"net/http"
	"strings"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/service"
)

// Every route the Server serves is registered through handle or
// handleActions, which record it in Server.routes: TestRouteTable holds
// the route table of the package documentation (doc.go) to that record,
// both ways.

// action serves one NAME:ACTION of a collection for the name.
type action func(w http.ResponseWriter, r *http.Request, name string)

// namedAction is one action of a collection: POST /v1/COLLECTION/{name}:NAME.
type namedAction struct {
	name  string
	serve action
}

// handle registers h for pattern (METHOD PATH) and records the route.
func (s *Server) handle(pattern string, h http.Handler) {
	s.mux.Handle(pattern, h)
	s.routes = append(s.routes, pattern)
}

// handleFunc is handle for a handler function.
func (s *Server) handleFunc(pattern string, h http.HandlerFunc) { s.handle(pattern, h) }

// handleActions serves POST /v1/COLLECTION/{name}:ACTION for each of acts
// and, as an alias, POST /v1/COLLECTION/{name}/ACTION. what names the
// collection's items in messages ("job"); wrap, when not nil, wraps both
// handlers (the Pub/Sub collections answer 503 without a broker). An
// unknown action is NOT_FOUND naming the known ones; a POST of a name
// without an action is METHOD_NOT_ALLOWED.
func (s *Server) handleActions(collection, what string, wrap func(http.HandlerFunc) http.HandlerFunc, acts ...namedAction) {
	names := make([]string, len(acts))
	for i, a := range acts {
		names[i] = a.name
	}
	dispatch := func(w http.ResponseWriter, r *http.Request, name, act string) {
		for _, a := range acts {
			if a.name == act {
				a.serve(w, r, name)
				return
			}
		}
		s.writeError(w, service.NewError(errcode.NotFound, "unknown %s action %q: use %s", what, act, orList(names)))
	}
	base := "/v1/" + collection + "/"
	colon := func(w http.ResponseWriter, r *http.Request) {
		name, act, ok := strings.Cut(r.PathValue("name"), ":")
		if !ok {
			examples := make([]string, len(names))
			for i, n := range names {
				examples[i] = base + name + ":" + n
			}
			s.writeError(w, service.NewError(errcode.MethodNotAllowed, "POST %s%s needs an action: %s", base, name, orList(examples)))
			return
		}
		dispatch(w, r, name, act)
	}
	path := func(w http.ResponseWriter, r *http.Request) {
		dispatch(w, r, r.PathValue("name"), r.PathValue("action"))
	}
	if wrap != nil {
		colon, path = wrap(colon), wrap(path)
	}
	s.mux.HandleFunc("POST "+base+"{name}", colon)
	s.mux.HandleFunc("POST "+base+"{name}/{action}", path)
	for _, n := range names {
		s.routes = append(s.routes, "POST "+base+"{name}:"+n)
		s.pathForms = append(s.pathForms, "POST "+base+"{name}/"+n)
	}
}

// handleGetAction serves GET /v1/COLLECTION/{name}, with get, and GET
// /v1/COLLECTION/{name}:ACTION with act.
func (s *Server) handleGetAction(collection string, get http.HandlerFunc, act namedAction) {
	pattern := "GET /v1/" + collection + "/{name}"
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if name, ok := strings.CutSuffix(r.PathValue("name"), ":"+act.name); ok {
			act.serve(w, r, name)
			return
		}
		get(w, r)
	})
	s.routes = append(s.routes, pattern, pattern+":"+act.name)
}

// orList joins items as "a, b or c".
func orList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}
