package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"strings"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/errcode"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/weir-dev/weir/service"
)

// Server serves the API of one job service.
type Server struct {
	svc    *service.Service
	pubsub PubSub // nil: topic and subscription routes answer 503
	// release hands the data directory over (WithRelease); nil: POST
	// /v1/process:release answers NOT_RELEASABLE.
	release func(ctx context.Context) error
	logger  *slog.Logger
	mux     *http.ServeMux
	// routes are the METHOD PATH patterns served (routes.go), pathForms
	// the /ACTION aliases of their NAME:ACTION routes.
	routes, pathForms []string
	// limits bound what clients create (WithLimits); creating serialises
	// each kind's creations with their check.
	limits   Limits
	creating creations
	// collectors are further metrics of the process (WithCollector).
	collectors []prometheus.Collector
	// streams ends the event follow streams (EndStreams).
	streams    context.Context
	endStreams context.CancelFunc
}

// NewServer returns the API of svc. logger receives request errors
// (default slog.Default()); opts add optional parts (WithPubSub).
func NewServer(svc *service.Service, logger *slog.Logger, opts ...ServerOption) *Server {
	if logger == nil {
		logger = slog.Default()
	}
	s := &Server{svc: svc, logger: logger, mux: http.NewServeMux()}
	s.streams, s.endStreams = context.WithCancel(context.Background())
	for _, o := range opts {
		o(s)
	}
	reg := prometheus.NewRegistry()
	// The Go runtime's and the process's own (go_*, process_*: memory, CPU,
	// goroutines, GC, open files) beside the jobs'.
	reg.MustRegister(newCollector(svc, s.pubsub), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, c := range s.collectors {
		reg.MustRegister(c)
	}
	s.handleFunc("POST /v1/jobs", s.submit)
	s.handleFunc("GET /v1/jobs", s.list)
	s.handleFunc("GET /v1/jobs/{ref}", s.get)
	s.handleActions("jobs", "job", nil, namedAction{"drain", s.drainJob}, namedAction{"cancel", s.cancelJob},
		namedAction{"snapshot", s.snapshotJob}, namedAction{"rollback", s.rollbackJob})
	s.registerPubSub()
	s.registerUpdate()
	s.registerProcess()
	s.registerSnapshots()
	s.registerManifests()
	s.registerSchedules()
	s.registerEvents()
	s.registerHistory()
	s.registerTables()
	s.registerPartitions()
	s.handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slogAdapter{logger}}))
	s.handleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	// Not a route: the answer to every request no route matches.
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		code, msg := errcode.NotFound, fmt.Sprintf("no API route %s %s (see the routes in the api package documentation: /v1/jobs, /v1/topics, /v1/subscriptions, /metrics, /healthz)", r.Method, r.URL.Path)
		for _, c := range []string{"/v1/jobs", "/v1/topics", "/v1/subscriptions", "/v1/snapshots", "/v1/tables"} {
			if r.URL.Path == c || strings.HasPrefix(r.URL.Path, c+"/") {
				code, msg = errcode.MethodNotAllowed, fmt.Sprintf("%s is not allowed on %s", r.Method, r.URL.Path)
			}
		}
		s.writeError(w, service.NewError(code, "%s", msg))
	})
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Println(v ...any) { a.l.Error(fmt.Sprint(v...), "component", "metrics") }

// StatusOf returns the HTTP status of an error code, as the registry in
// package errcode records it (500 for an unregistered code).
func StatusOf(c errcode.Code) int { return c.Status() }

func (s *Server) writeError(w http.ResponseWriter, err error) {
	code := service.ErrorCode(err)
	status := StatusOf(code)
	if status >= 500 {
		s.logger.Error("API request failed", "code", code, "error", err)
	}
	writeJSON(w, status, ErrorBody{Error: ErrorDetail{Code: code, Message: err.Error()}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error": {"code": "INTERNAL", "message": "encoding the reply failed"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// decode reads a JSON request body into dst, refusing unknown fields,
// trailing data and bodies over MaxRequestBytes (REQUEST_TOO_LARGE), with
// messages that name the problem.
func decode(r *http.Request, dst any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxRequestBytes+1))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) || len(body) > MaxRequestBytes {
		return tooLarge()
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return service.NewError(errcode.InvalidRequest, "the request body did not arrive within the server's body read timeout: %w", err)
	}
	if err != nil {
		return service.NewError(errcode.InvalidRequest, "reading the request body: %w", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return service.NewError(errcode.InvalidRequest, "the request body is empty: send a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			return service.NewError(errcode.InvalidRequest, "the request body is not valid JSON: %v (at byte %d)", syn, syn.Offset)
		case errors.As(err, &typ):
			return service.NewError(errcode.InvalidRequest, "field %q of the request body must be %s, not a JSON %s", jsonPath(typ.Field), typeName(typ.Type), typ.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			field := strings.TrimPrefix(err.Error(), "json: unknown field ")
			return service.NewError(errcode.InvalidRequest, "unknown field %s in the request body (known fields: %s)", field, strings.Join(jsonFields(reflect.TypeOf(dst)), ", "))
		case errors.Is(err, io.ErrUnexpectedEOF):
			return service.NewError(errcode.InvalidRequest, "the request body is not valid JSON: it ends early")
		}
		return service.NewError(errcode.InvalidRequest, "the request body is not valid JSON: %v", err)
	}
	if dec.More() {
		return service.NewError(errcode.InvalidRequest, "the request body has data after its JSON object")
	}
	return nil
}

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "an integer"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Bool:
		return "a boolean"
	}
	return t.String()
}

// jsonFields lists the JSON field names of a struct type, with nested
// objects' fields as parent.child.
func jsonFields(t reflect.Type) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonFields(f.Type)...) // an embedded struct's fields are the body's own
			continue
		}
		if name == "" || name == "-" {
			continue
		}
		out = append(out, name)
		if f.Type.Kind() == reflect.Struct {
			for _, sub := range jsonFields(f.Type) {
				out = append(out, name+"."+sub)
			}
		}
	}
	return out
}

// jsonPath is the JSON path of a field encoding/json names by its Go path:
// an embedded struct's Go name (SubmitRequest.name) is no part of the
// body's JSON, whose names are lower case.
func jsonPath(field string) string {
	parts := strings.Split(field, ".")
	out := parts[:0]
	for _, p := range parts {
		if p != "" && (p[0] < 'A' || p[0] > 'Z') {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return field
	}
	return strings.Join(out, ".")
}

// submitBody is the body of POST /v1/jobs: a submission, or with
// validate_only only its checks (200 with the report and notes; nothing
// changes).
type submitBody struct {
	SubmitRequest
	ValidateOnly bool `json:"validate_only,omitempty"`
}

func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	var body submitBody
	if err := decode(r, &body); err != nil {
		s.writeError(w, err)
		return
	}
	req := body.SubmitRequest
	if body.ValidateOnly {
		res, err := s.svc.ValidateSubmit(r.Context(), serviceSubmit(req))
		if err != nil {
			s.writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, UpdateResponse{Report: wireCompatReport(res.Report), Notes: res.Notes})
		return
	}
	// The service admits the job against --max-jobs (core.Tx.Admit), as
	// every other way a job is created.
	j, err := s.svc.Submit(r.Context(), serviceSubmit(req))
	if err != nil {
		s.writeError(w, err)
		return
	}
	w.Header().Set("Location", "/v1/jobs/"+j.ID)
	writeJSON(w, http.StatusCreated, submitResponse(j))
}

// submitResponse is the reply naming job j: with the strategy of the
// replacement flow j is the new job of (a submission with
// create_or_update_job or parallel_replace_job_* starts one).
func submitResponse(j *record.Job) SubmitResponse {
	out := SubmitResponse{ID: j.ID, Name: j.Name, State: wireState(j.State), Error: j.Error}
	if r := j.Replacement; r != nil && j.ID == r.NewJobID {
		out.Replacement = r.Strategy
	}
	return out
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k := range q {
		if k != "status" {
			s.writeError(w, service.NewError(errcode.InvalidRequest, "unknown query parameter %q (known: status)", k))
			return
		}
	}
	st, err := service.ParseStatus(q.Get("status"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	jobs, err := s.svc.List(st)
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := JobList{Jobs: []client.Summary{}}
	for _, j := range jobs {
		out.Jobs = append(out.Jobs, wireSummary(j.Summary()))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	ref := r.PathValue("ref")
	if name, action, ok := strings.Cut(ref, ":"); ok {
		s.writeError(w, service.NewError(errcode.MethodNotAllowed, "%s:%s needs POST, not GET", name, action))
		return
	}
	j, err := s.svc.Get(ref)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if j.Active() {
		if m, err := s.svc.DescribeMetrics(j.ID); err == nil && m != nil {
			j.Metrics = m
		}
	}
	writeJSON(w, http.StatusOK, wireJob(*j))
}

// drainJob serves POST /v1/jobs/{ref}:drain.
func (s *Server) drainJob(w http.ResponseWriter, r *http.Request, ref string) {
	s.changeJob(w, r, ref, s.svc.Drain)
}

// cancelJob serves POST /v1/jobs/{ref}:cancel.
func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request, ref string) {
	s.changeJob(w, r, ref, s.svc.Cancel)
}

// changeJob asks the service to change job ref (change: drain or cancel)
// and answers the job's summary.
func (s *Server) changeJob(w http.ResponseWriter, r *http.Request, ref string, change func(context.Context, string) (*record.Job, error)) {
	j, err := change(r.Context(), ref)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, wireSummary(j.Summary()))
}
