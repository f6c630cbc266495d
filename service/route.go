package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/weir-dev/weir/duration"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"
	"github.com/weir-dev/weir/serviceopt"
	"github.com/weir-dev/weir/state"
)

// RequestIDRetention is how long a request ID's answer is kept: a retry
// within it gets the first answer.
const RequestIDRetention = 24 * time.Hour

// requestIDRE is the form of a request ID.
var requestIDRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// planOf checks the service options of a request on name (with or without
// --update) and returns what they ask for. Every refusal carries the code
// serviceopt gives it.
func (s *Service) planOf(name string, opts []string, update bool) (serviceopt.Plan, error) {
	plan, err := serviceopt.ParseAndResolve(opts, name, update, s.core.HasRunningJob)
	var oe *serviceopt.Error
	if errors.As(err, &oe) {
		return serviceopt.Plan{}, &Error{Code: oe.Code, Message: oe.Message}
	}
	return plan, err
}

// route performs a submission (update false) or an update (update true)
// as its service options say: a new job, an in-place update, or a
// replacement; create_or_update_job picks an update when the name has a
// running or draining job, a new job otherwise.
func (s *Service) route(ctx context.Context, req UpdateRequest, update bool) (*UpdateResult, error) {
	if err := s.core.RefuseIfStoreFailed(); err != nil {
		return nil, err
	}
	if err := record.ValidateJobName(req.Name); err != nil {
		return nil, err
	}
	plan, err := s.planOf(req.Name, req.ServiceOptions, update)
	if err != nil {
		return nil, err
	}
	for _, n := range plan.Notes {
		s.core.Opts.Logger.Info("service options", "job_name", req.Name, "note", n)
	}
	create := plan.Strategy == serviceopt.StrategyCreate ||
		plan.CreateOrUpdate && !s.core.HasRunningJob(req.Name)
	var res *UpdateResult
	switch {
	case create && req.ValidateOnly:
		if _, err := s.core.AdmitChange(req.Name, req.Mapping, &req.Options); err != nil {
			return nil, err
		}
		if _, err := s.core.Load(&record.Job{Name: req.Name, Pipeline: req.Pipeline, PipelineFile: req.PipelineFile, BaseDir: req.BaseDir}); err != nil {
			return nil, err
		}
		res = &UpdateResult{Report: core.CompatibleReport(), Notes: []string{fmt.Sprintf("no running job named %s: the request would create a new job (not created: validate only)", req.Name)}}
	case create:
		j, err := s.core.SubmitNew(ctx, req.SubmitRequest)
		if err != nil {
			return nil, err
		}
		res = &UpdateResult{Report: core.CompatibleReport(), Job: j}
		if plan.CreateOrUpdate {
			res.Notes = append(res.Notes, fmt.Sprintf("%s: no running job named %s, so a new job was created", serviceopt.KeyCreateOrUpdate, req.Name))
		}
	case plan.Strategy == serviceopt.StrategyInPlace:
		if err := s.replace.RefuseDuringParallel(req.Name); err != nil {
			return nil, err
		}
		verdict, err := s.preflight(ctx, req, plan)
		if err != nil {
			return refusedByRehearsal(verdict), err
		}
		res, err = s.inplace.UpdateInPlace(ctx, req)
		if res != nil && verdict != nil {
			res.Notes = append(res.Notes, rehearsalNote(verdict))
			res.Rehearsal = verdict
		}
		if err != nil {
			if res != nil {
				res.Notes = append(res.Notes, plan.Notes...)
			}
			return res, err
		}
	default:
		verdict, err := s.preflight(ctx, req, plan)
		if err != nil {
			return refusedByRehearsal(verdict), err
		}
		res, err = s.replace.Replace(ctx, req, plan)
		if err != nil {
			return res, err
		}
		if verdict != nil {
			res.Notes = append(res.Notes, rehearsalNote(verdict))
			res.Rehearsal = verdict
		}
	}
	res.Notes = append(plan.Notes, res.Notes...)
	return res, nil
}

// refusedByRehearsal is the answer to an update the pre-flight rehearsal
// refused: its verdict (nil, and no answer, when the rehearsal could not
// run), so that a client shows the figures beside the refusal. The
// compatibility check did not run.
func refusedByRehearsal(v *record.RehearsalVerdict) *UpdateResult {
	if v == nil {
		return nil
	}
	return &UpdateResult{Rehearsal: v}
}

// rehearsalNote words a passed pre-flight rehearsal for an update's notes.
func rehearsalNote(v *record.RehearsalVerdict) string {
	return fmt.Sprintf("%s=required: the new pipeline's outputs matched the running job's on %d input element(s) since %s (%d difference(s) in %d row(s), budget %d)",
		serviceopt.KeyRehearse, v.Elements, v.Since.Format(time.RFC3339), v.Differences, v.RowsCompared, v.Budget)
}

// requestRecord is the stored answer to a request with an ID
// (request/<id>): an ID names one request of any kind. A submission's or
// update's result is in Result, a rollback's in RollbackResult, so that a
// record of the other kind decodes with none (and a different
// fingerprint).
type requestRecord struct {
	ID             string          `json:"id"`
	Kind           string          `json:"kind"`
	Fingerprint    string          `json:"fingerprint"`
	Time           time.Time       `json:"time"`
	JobID          string          `json:"job_id,omitempty"`
	Result         *UpdateResult   `json:"result,omitempty"`
	RollbackResult *RollbackResult `json:"rollback_result,omitempty"`
	Code           errcode.Code    `json:"code,omitempty"`
	Message        string          `json:"message,omitempty"`
}

func requestKey(id string) string { return "request/" + id }

// once runs do at most once per request ID within RequestIDRetention: a
// request with an ID seen before gets the first answer again (the job it
// created, read anew, or the same refusal), and REQUEST_ID_REUSED when it
// is not the same request. Without an ID, do just runs. Answers that a
// retry should not repeat (the server shutting down or failing, another
// update under way, the request's context ending) are not kept.
func (s *Service) once(ctx context.Context, id, kind string, req any, do func() (*UpdateResult, error)) (*UpdateResult, error) {
	return answerOnce(s, ctx, requestKind[UpdateResult]{
		id: id, kind: kind, req: req, what: "request",
		result: func(rec *requestRecord) **UpdateResult { return &rec.Result },
		job:    func(r *UpdateResult) **record.Job { return &r.Job },
		kept:   keptRefusal,
	}, do)
}

// requestKind is what answerOnce needs to know of one kind of request
// with an ID: its ID, kind and request (for the fingerprint), what a log
// line calls it, where its result goes in the record and where the job is
// in the result, and which errors a retry gets again.
type requestKind[R any] struct {
	id, kind string
	req      any
	what     string
	result   func(*requestRecord) **R
	job      func(*R) **record.Job
	kept     func(context.Context, error) bool
}

// answerOnce is once for a result of type R (see once; rollbackOnce).
func answerOnce[R any](s *Service, ctx context.Context, k requestKind[R], do func() (*R, error)) (*R, error) {
	id := k.id
	if id == "" {
		return do()
	}
	if !requestIDRE.MatchString(id) {
		return nil, errcode.Errorf(errcode.InvalidRequest, "request ID %q is invalid: use 1 to 128 letters, digits, '.', '_', ':' or '-' (a UUID works)", id)
	}
	b, err := json.Marshal(struct {
		Kind string `json:"kind"`
		Req  any    `json:"req"`
	}{k.kind, k.req})
	if err != nil {
		return nil, errcode.Internalf("encoding the request: %w", err)
	}
	sum := sha256.Sum256(b)
	fp := hex.EncodeToString(sum[:])
	unlock, err := s.requests.Lock(ctx, id) // lock order 0
	if err != nil {
		return nil, err
	}
	defer unlock()
	if rec, err := s.readRequest(id); err != nil {
		return nil, err
	} else if rec != nil && s.core.Now().Sub(rec.Time) < RequestIDRetention {
		if rec.Fingerprint != fp {
			return nil, errcode.Errorf(errcode.RequestIDReused, "request ID %s was used %s ago for a different request: a retry must repeat the request exactly; use a new ID for a new request", id, duration.Format(s.core.Now().Sub(rec.Time).Round(time.Second)))
		}
		s.core.Opts.Logger.Info(k.what+" retried: answering as the first time", "request_id", id, "job_id", rec.JobID, "code", rec.Code)
		res := *k.result(rec)
		if rec.JobID != "" {
			if j, err := s.core.ReadJob(rec.JobID); err == nil {
				if res == nil {
					res = new(R)
				}
				*k.job(res) = s.core.WithCondition(j)
			}
		}
		if rec.Code != "" {
			return res, &Error{Code: rec.Code, Message: rec.Message}
		}
		return res, nil
	}
	res, err := do()
	if err != nil && !k.kept(ctx, err) {
		return res, err
	}
	rec := requestRecord{ID: id, Kind: k.kind, Fingerprint: fp, Time: s.core.Now()}
	if res != nil {
		kept := *res
		if j := k.job(res); *j != nil {
			rec.JobID = (*j).ID
			*k.job(&kept) = nil
		}
		*k.result(&rec) = &kept
	}
	if err != nil {
		rec.Code, rec.Message = errcode.Of(err), err.Error()
	}
	w := &state.Write{}
	if perr := core.PutJSON(w, requestKey(id), rec); perr != nil {
		return res, errors.Join(err, perr)
	}
	if aerr := s.core.Apply(w); aerr != nil {
		s.core.Opts.Logger.Error("recording the answer to a request ID (a retry runs the "+k.what+" again)", "request_id", id, "error", aerr)
	}
	return res, err
}

// keptRefusal reports whether err is an answer a retry with the same
// request ID gets again: a refusal of the request itself, not a
// failure of the moment.
func keptRefusal(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code {
	case errcode.UpdateInProgress, errcode.ShuttingDown, errcode.StorageUnavailable, errcode.Resuming:
		return false
	}
	k := e.Code.Kind()
	return k == errcode.KindInvalid || k == errcode.KindConflict || k == errcode.KindNotFound
}

func (s *Service) readRequest(id string) (*requestRecord, error) {
	b, err := s.core.Store.Get(requestKey(id))
	if errors.Is(err, state.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, errcode.Internalf("reading request ID %s: %w", id, err)
	}
	var rec requestRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, errcode.Internalf("decoding the record of request ID %s: %w", id, err)
	}
	return &rec, nil
}
