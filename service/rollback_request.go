package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/weir-dev/weir/duration"
	"github.com/weir-dev/weir/state"
)

// rollbackRecord is the stored answer to a rollback with a request ID,
// under the same key as a submission's (request/<id>): an ID names one
// request of any kind. Its result has its own field, so that a record of
// the other kind decodes with none (and a different fingerprint).
type rollbackRecord struct {
	ID          string          `json:"id"`
	Kind        string          `json:"kind"`
	Fingerprint string          `json:"fingerprint"`
	Time        time.Time       `json:"time"`
	JobID       string          `json:"job_id,omitempty"`
	Result      *RollbackResult `json:"rollback_result,omitempty"`
	Code        Code            `json:"code,omitempty"`
	Message     string          `json:"message,omitempty"`
}

// rollbackOnce runs do at most once per request ID within
// RequestIDRetention, as once does for submissions and updates: a retry
// gets the first answer again (its job read anew), a different request
// under the same ID REQUEST_ID_REUSED. Answers of the moment (the server
// shutting down, a flow under way, a rollback snapshot still being
// written, the request's context ending) are not kept.
func (s *Service) rollbackOnce(ctx context.Context, req RollbackRequest, do func() (*RollbackResult, error)) (*RollbackResult, error) {
	id := req.RequestID
	if id == "" {
		return do()
	}
	if !requestIDRE.MatchString(id) {
		return nil, errorf(CodeInvalidRequest, "request ID %q is invalid: use 1 to 128 letters, digits, '.', '_', ':' or '-' (a UUID works)", id)
	}
	const kind = "rollback"
	b, err := json.Marshal(struct {
		Kind string          `json:"kind"`
		Req  RollbackRequest `json:"req"`
	}{kind, req})
	if err != nil {
		return nil, internalf("encoding the request: %w", err)
	}
	sum := sha256.Sum256(b)
	fp := hex.EncodeToString(sum[:])
	unlock, err := s.requests.lock(ctx, id) // lock order 0
	if err != nil {
		return nil, err
	}
	defer unlock()
	rec, err := s.readRollbackRecord(id)
	if err != nil {
		return nil, err
	}
	if rec != nil && s.now().Sub(rec.Time) < RequestIDRetention {
		if rec.Fingerprint != fp {
			return nil, errorf(CodeRequestIDReused, "request ID %s was used %s ago for a different request: a retry must repeat the request exactly; use a new ID for a new request", id, duration.Format(s.now().Sub(rec.Time).Round(time.Second)))
		}
		s.opts.Logger.Info("rollback retried: answering as the first time", "request_id", id, "job_id", rec.JobID, "code", rec.Code)
		res := rec.Result
		if rec.JobID != "" && res != nil {
			if j, err := s.readJob(rec.JobID); err == nil {
				res.Job = s.withCondition(j)
			}
		}
		if rec.Code != "" {
			return res, &Error{Code: rec.Code, Message: rec.Message}
		}
		return res, nil
	}
	res, err := do()
	if err != nil && (!keptRefusal(ctx, err) || ErrorCode(err) == CodeRollbackUnavailable) {
		// ROLLBACK_UNAVAILABLE says "not now" (a flow under way, the
		// snapshot still being written): a retry asks again.
		return res, err
	}
	nr := rollbackRecord{ID: id, Kind: kind, Fingerprint: fp, Time: s.now()}
	if res != nil {
		kept := *res
		if res.Job != nil {
			nr.JobID = res.Job.ID
			kept.Job = nil
		}
		nr.Result = &kept
	}
	if err != nil {
		nr.Code, nr.Message = ErrorCode(err), err.Error()
	}
	w := &state.Write{}
	if perr := putJSON(w, requestKey(id), nr); perr != nil {
		return res, errors.Join(err, perr)
	}
	if aerr := s.apply(w); aerr != nil {
		s.opts.Logger.Error("recording the answer to a request ID (a retry runs the rollback again)", "request_id", id, "error", aerr)
	}
	return res, err
}

func (s *Service) readRollbackRecord(id string) (*rollbackRecord, error) {
	b, err := s.store.Get(requestKey(id))
	if errors.Is(err, state.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, internalf("reading request ID %s: %w", id, err)
	}
	var rec rollbackRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, internalf("decoding the record of request ID %s: %w", id, err)
	}
	return &rec, nil
}
