package service

import (
	"context"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/errcode"
)

// rollbackOnce runs do at most once per request ID within
// RequestIDRetention, as once does for submissions and updates: a retry
// gets the first answer again (its job read anew), a different request
// under the same ID REQUEST_ID_REUSED. Answers of the moment (the server
// shutting down, a flow under way, a rollback snapshot still being
// written, the request's context ending) are not kept. The answer is kept
// under the same key as a submission's (requestRecord.RollbackResult).
func (s *Service) rollbackOnce(ctx context.Context, req RollbackRequest, do func() (*RollbackResult, error)) (*RollbackResult, error) {
	return answerOnce(s, ctx, requestKind[RollbackResult]{
		id: req.RequestID, kind: "rollback", req: req, what: "rollback",
		result: func(rec *requestRecord) **RollbackResult { return &rec.RollbackResult },
		job:    func(r *RollbackResult) **record.Job { return &r.Job },
		kept: func(ctx context.Context, err error) bool {
			// ROLLBACK_UNAVAILABLE says "not now" (a flow under way, the
			// snapshot still being written): a retry asks again.
			return keptRefusal(ctx, err) && errcode.Of(err) != errcode.RollbackUnavailable
		},
	}, do)
}

// Rollback goes back to an earlier generation of req.Name (see the top of
// this file): it checks everything first (refusals change nothing), and
// then, unless validate-only, creates the rollback job and drains the
// current one; the call returns once the drain began (the job's record
// follows the flow: replacement.phase). It holds the name's guard (lock
// order 1) and the registry lock for the writes only.
func (s *Service) Rollback(ctx context.Context, req RollbackRequest) (*RollbackResult, error) {
	if err := s.core.RefuseIfStoreFailed(); err != nil {
		return nil, err
	}
	return s.rollbackOnce(ctx, req, func() (*RollbackResult, error) { return s.rollback.Do(ctx, req) })
}
