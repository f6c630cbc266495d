package api

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/weir-dev/weir/errcode"

	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/service"
)

// ReleaseRequest is the body of POST /v1/process:release: a new build of
// the Go program that runs the job of Name asks this process to check the
// build's graph against the job's stored graph and, when it passes, to
// checkpoint every job and release the data directory.
type ReleaseRequest struct {
	// Name is the job name.
	Name string `json:"name"`
	// Graph is the new build's canonical graph JSON.
	Graph json.RawMessage `json:"graph"`
	// Program is the new build's executable, recorded with a refused attempt.
	Program string `json:"program,omitempty"`
	// TransformNameMapping is JSON {"Old": "New"}; "" maps a step to deletion.
	TransformNameMapping string `json:"transform_name_mapping,omitempty"`
	AllowSourceChange    bool   `json:"allow_source_change,omitempty"`
	// ValidateOnly runs the check and releases nothing.
	ValidateOnly bool `json:"validate_only,omitempty"`
}

// ReleaseResponse is the reply to a release: the compatibility report
// (absent when the name has no active job), the job checked against, and
// whether the data directory is released (the process then exits). A
// refused check answers 409 with this body plus an error.
type ReleaseResponse struct {
	Report   *compat.Report   `json:"report,omitempty"`
	Replaced *service.Summary `json:"replaced,omitempty"`
	Released bool             `json:"released"`
	Error    *ErrorDetail     `json:"error,omitempty"`
}

// WithRelease enables POST /v1/process:release: once the check passes,
// release must checkpoint every job, close the service and free the data
// directory before it returns; the process exits after the reply.
func WithRelease(release func(ctx context.Context) error) ServerOption {
	return func(s *Server) { s.release = release }
}

func (s *Server) registerProcess() {
	s.mux.HandleFunc("POST /v1/process:release", s.releaseProcess)
}

func (s *Server) releaseProcess(w http.ResponseWriter, r *http.Request) {
	if s.release == nil {
		s.writeError(w, service.NewError(errcode.NotReleasable, "this process does not hand its data directory over (it is a weir server, not a Go program): stop it before starting a program on its data directory"))
		return
	}
	var req ReleaseRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	res, err := s.svc.CheckRelease(service.ReleaseRequest{Name: req.Name, Graph: req.Graph, Program: req.Program,
		Mapping: req.TransformNameMapping, AllowSourceChange: req.AllowSourceChange, ValidateOnly: req.ValidateOnly})
	if err != nil && res == nil {
		s.writeError(w, err)
		return
	}
	out := ReleaseResponse{Replaced: res.Replaced}
	if res.Replaced != nil {
		out.Report = &res.Report
	}
	if err != nil {
		code := service.ErrorCode(err)
		out.Error = &ErrorDetail{Code: code, Message: err.Error()}
		writeJSON(w, StatusOf(code), out)
		return
	}
	if !req.ValidateOnly {
		if err := s.release(r.Context()); err != nil {
			s.writeError(w, service.NewError(errcode.Internal, "releasing the data directory: %w", err))
			return
		}
		out.Released = true
	}
	writeJSON(w, http.StatusOK, out)
}

// Release asks the process at the client's address to release its data
// directory to a new build (POST /v1/process:release). A refused check
// returns the reply (with the report) together with an *Error of code
// INCOMPATIBLE_UPDATE; the process then keeps running untouched. The
// release waits for every job's checkpoint: give the client a timeout
// longer than the process's shutdown bound.
func (c *Client) Release(ctx context.Context, req ReleaseRequest) (*ReleaseResponse, error) {
	var out ReleaseResponse
	replied, err := c.doWithReply(ctx, http.MethodPost, "/v1/process:release", req, &out)
	if err != nil && !(replied && out.Error != nil && out.Report != nil) {
		return nil, err
	}
	return &out, err
}
