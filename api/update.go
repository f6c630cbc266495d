package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/service"
)

// UpdateRequest is the body of POST /v1/jobs:update: replace the running
// job of Name with a new version of its pipeline (in-place update).
type UpdateRequest struct {
	SubmitRequest
	// TransformNameMapping is JSON {"Old": "New"}; "" maps a step to deletion.
	TransformNameMapping string `json:"transform_name_mapping,omitempty"`
	AllowSourceChange    bool   `json:"allow_source_change,omitempty"`
	// ValidateOnly runs the compatibility check and changes nothing.
	ValidateOnly bool `json:"validate_only,omitempty"`
	// JinjaVariables, when given (even {}), make the server render the
	// pipeline as a Jinja template first; includes and imports are refused
	// (the server reads no file a submitted template names).
	JinjaVariables map[string]any `json:"jinja_variables,omitempty"`
}

// UpdateResponse is the reply to an update: the compatibility report, and
// the new job when the update happened. A refused update answers 409 with
// this body plus an error.
type UpdateResponse struct {
	Report   compat.Report    `json:"report"`
	Job      *SubmitResponse  `json:"job,omitempty"`
	Replaced *service.Summary `json:"replaced,omitempty"`
	PauseMS  int64            `json:"pause_ms,omitempty"`
	// Options are the new job's options (given ones, the running job's for
	// the rest); OptionsChanged those that differ from the running job's.
	Options        *service.JobOptions    `json:"options,omitempty"`
	OptionsChanged []service.OptionChange `json:"options_changed,omitempty"`
	// Notes say what the service options made of the request.
	Notes []string `json:"notes,omitempty"`
	// Graph is the new pipeline's canonical graph, as the check read it
	// (also when it refuses the update): the console's preview draws it.
	Graph json.RawMessage `json:"graph,omitempty"`
	// RenderedPipeline is the pipeline after Jinja rendering, when
	// JinjaVariables were given.
	RenderedPipeline string       `json:"rendered_pipeline,omitempty"`
	Error            *ErrorDetail `json:"error,omitempty"`
}

// HistoryResponse is the reply of GET /v1/history/{name}: every job of a
// name, oldest first, and every refused or validate-only update attempt.
type HistoryResponse struct {
	Name     string            `json:"name"`
	Jobs     []*service.Job    `json:"jobs"`
	Attempts []service.Attempt `json:"attempts"`
	// Generations tells how each job took over from the one before, its
	// replacement phases, stop window, rescales and rollback snapshots.
	Generations []service.GenerationHistory `json:"generations"`
}

func (s *Server) registerUpdate() {
	s.mux.HandleFunc("POST /v1/jobs:update", s.update)
	s.mux.HandleFunc("GET /v1/history/{name}", s.history)
	s.mux.HandleFunc("POST /v1/jobs/{ref}/options", s.updateOptions)
}

// OptionsRequest is the body of POST /v1/jobs/{ref}/options: the job's new
// options (a new num_workers rescales it in flight).
type OptionsRequest struct {
	Options service.JobOptions `json:"options"`
}

func (s *Server) updateOptions(w http.ResponseWriter, r *http.Request) {
	var req OptionsRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	j, err := s.svc.UpdateOptions(r.Context(), r.PathValue("ref"), req.Options)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, j.Summary())
}

// UpdateOptions changes a running job's options; a new worker count
// rescales it in flight (same job ID).
func (c *Client) UpdateOptions(ctx context.Context, ref string, opts service.JobOptions) (*service.Summary, error) {
	var out service.Summary
	if err := c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(ref)+"/options", OptionsRequest{Options: opts}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (s *Server) update(w http.ResponseWriter, r *http.Request) {
	var req UpdateRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	res, err := s.svc.Update(r.Context(), service.UpdateRequest{
		SubmitRequest: req.serviceRequest(),
		Mapping:       req.TransformNameMapping, AllowSourceChange: req.AllowSourceChange, ValidateOnly: req.ValidateOnly,
		JinjaVariables: req.JinjaVariables})
	if err != nil && res == nil {
		s.writeError(w, err)
		return
	}
	out := UpdateResponse{Report: res.Report, Replaced: res.Replaced, PauseMS: res.PauseMillis,
		Options: res.Options, OptionsChanged: res.OptionsChanged, Notes: res.Notes,
		Graph: res.Graph, RenderedPipeline: res.RenderedPipeline}
	if res.Job != nil {
		sr := submitResponse(res.Job)
		out.Job = &sr
	}
	status := http.StatusOK
	if err != nil {
		code := service.ErrorCode(err)
		status = StatusOf(code)
		out.Error = &ErrorDetail{Code: code, Message: err.Error()}
	}
	writeJSON(w, status, out)
}

func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	jobs, attempts, err := s.svc.History(name)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if attempts == nil {
		attempts = []service.Attempt{}
	}
	gens, err := s.svc.LineageHistory(name)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, HistoryResponse{Name: name, Jobs: jobs, Attempts: attempts, Generations: gens})
}

// Update asks the server to replace the running job of req.Name. A refused
// update returns the report together with an *Error (code
// INCOMPATIBLE_UPDATE); the running job is then unchanged.
func (c *Client) Update(ctx context.Context, req UpdateRequest) (*UpdateResponse, error) {
	var out UpdateResponse
	replied, err := c.doWithReply(ctx, http.MethodPost, "/v1/jobs:update", req, &out)
	if err != nil && !(replied && out.Error != nil) {
		return nil, err
	}
	return &out, err
}

// History returns every job of a name and its recorded update attempts.
func (c *Client) History(ctx context.Context, name string) (*HistoryResponse, error) {
	var out HistoryResponse
	if err := c.do(ctx, http.MethodGet, "/v1/history/"+url.PathEscape(name), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
