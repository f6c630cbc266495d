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
