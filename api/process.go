package api

import (
	"context"
	"net/http"

	"github.com/weir-dev/weir/errcode"

	"github.com/weir-dev/weir/service"
)

// WithRelease enables POST /v1/process:release: once the check passes,
// release must checkpoint every job, close the service and free the data
// directory before it returns; the process exits after the reply.
func WithRelease(release func(ctx context.Context) error) ServerOption {
	return func(s *Server) { s.release = release }
}

func (s *Server) registerProcess() {
	s.handleFunc("POST /v1/process:release", s.releaseProcess)
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
	out := ReleaseResponse{Replaced: wirePtr(res.Replaced, wireSummary)}
	if res.Replaced != nil {
		rep := wireCompatReport(res.Report)
		out.Report = &rep
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
