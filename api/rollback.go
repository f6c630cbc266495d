package api

import (
	"net/http"

	"github.com/weir-dev/weir/service"
)

// rollbackJob serves POST /v1/jobs/{name}:rollback.
func (s *Server) rollbackJob(w http.ResponseWriter, r *http.Request, name string) {
	var req RollbackRequest
	if r.ContentLength != 0 {
		if err := decode(r, &req); err != nil {
			s.writeError(w, err)
			return
		}
	}
	maxStop, err := service.ParseRollbackMaxStop(req.MaxStopDuration)
	if err != nil {
		s.writeError(w, err)
		return
	}
	res, err := s.svc.Rollback(r.Context(), service.RollbackRequest{Name: name, ToGeneration: req.ToGeneration,
		ValidateOnly: req.ValidateOnly, MaxStop: maxStop, RequestID: req.RequestID})
	if err != nil && res == nil {
		s.writeError(w, err)
		return
	}
	out := RollbackResponse{RollbackResult: wireRollbackResult(*res)}
	status := http.StatusOK
	if err != nil {
		code := service.ErrorCode(err)
		status = StatusOf(code)
		out.Error = &ErrorDetail{Code: code, Message: err.Error()}
	}
	writeJSON(w, status, out)
}
