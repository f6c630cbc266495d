package api

import (
	"context"
	"net/http"
	"net/url"

	"github.com/weir-dev/weir/service"
)

// RollbackRequest is the body of POST /v1/jobs/{name}:rollback (optional:
// an empty body goes back to the generation the running job replaced).
type RollbackRequest struct {
	// ToGeneration is the generation to go back to (0: the previous one).
	ToGeneration int64 `json:"to_generation,omitempty"`
	// ValidateOnly answers the report and changes nothing.
	ValidateOnly bool `json:"validate_only,omitempty"`
	// MaxStopDuration bounds the running job's drain ("5m"); it is
	// cancelled after. Default 5m.
	MaxStopDuration string `json:"max_stop_duration,omitempty"`
	// RequestID makes the rollback idempotent for 24 hours, as a
	// submission's: a retry gets the first answer, never a second
	// rollback; the same ID with another request is 409 REQUEST_ID_REUSED.
	RequestID string `json:"request_id,omitempty"`
}

// RollbackResponse is the reply of a rollback: the report (what is re-read
// and recomputed) and the rollback job. A refusal after the check (say
// REWIND_BEYOND_RETENTION) answers its status with this body plus an error.
type RollbackResponse struct {
	service.RollbackResult
	Error *ErrorDetail `json:"error,omitempty"`
}

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
	out := RollbackResponse{RollbackResult: *res}
	status := http.StatusOK
	if err != nil {
		code := service.ErrorCode(err)
		status = StatusOf(code)
		out.Error = &ErrorDetail{Code: code, Message: err.Error()}
	}
	writeJSON(w, status, out)
}

// Rollback asks the server to go back to an earlier generation of job
// name. A refusal that comes with a report returns both.
func (c *Client) Rollback(ctx context.Context, name string, req RollbackRequest) (*RollbackResponse, error) {
	var out RollbackResponse
	replied, err := c.doWithReply(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(name)+":rollback", req, &out)
	if err != nil && !(replied && out.Error != nil) {
		return nil, err
	}
	return &out, err
}
