package api

import (
	"net/http"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/service/record"
)

// The SQL tables the server's jobs write: GET /v1/tables, GET
// /v1/tables/{name}, POST /v1/tables/{name}:merge (weir tables).

func (s *Server) registerTables() {
	s.handleFunc("GET /v1/tables", s.listTables)
	s.handleFunc("GET /v1/tables/{name}", s.getTable)
	s.handleActions("tables", "table", nil, namedAction{"merge", s.mergeTable})
}

func (s *Server) listTables(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, err)
		return
	}
	ts, err := s.svc.SQLTables(r.Context())
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := client.TableList{Tables: make([]client.Table, 0, len(ts))}
	for _, t := range ts {
		out.Tables = append(out.Tables, tableOf(t))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getTable(w http.ResponseWriter, r *http.Request) {
	if s.refuseAction(w, r) {
		return
	}
	if err := noQuery(r); err != nil {
		s.writeError(w, err)
		return
	}
	t, err := s.svc.SQLTable(r.Context(), r.PathValue("name"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, tableOf(t))
}

// mergeTable serves POST /v1/tables/{name}:merge (an empty body, or {}).
func (s *Server) mergeTable(w http.ResponseWriter, r *http.Request, name string) {
	var req struct{}
	if r.ContentLength != 0 {
		if err := decode(r, &req); err != nil {
			s.writeError(w, err)
			return
		}
	}
	m, err := s.svc.MergeSQLTable(r.Context(), name)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, tableMergeOf(m))
}

// tableOf is the wire form of a table (its DSN stays on the server: it may
// hold a password).
func tableOf(t record.SQLTable) client.Table {
	out := client.Table{Name: t.Name, Layout: t.Layout, Driver: t.Driver, Jobs: t.Jobs, View: t.View, Error: t.Error,
		Members: make([]client.TableMember, 0, len(t.Members))}
	if out.Jobs == nil {
		out.Jobs = []string{}
	}
	for _, m := range t.Members {
		out.Members = append(out.Members, client.TableMember{Table: m.Table, Role: m.Role, Generation: m.Generation, Rows: m.Rows, Columns: m.Columns})
	}
	for _, m := range t.Merges {
		out.Merges = append(out.Merges, tableMergeOf(m))
	}
	return out
}

func tableMergeOf(m record.SQLTableMerge) client.TableMerge {
	return client.TableMerge{At: m.At, DurationMillis: m.Duration.Milliseconds(), Rows: m.Rows, Members: m.Members, Principal: m.Principal}
}
