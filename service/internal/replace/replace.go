package replace

import (
	"context"
	"time"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/duration"
	"github.com/weir-dev/weir/serviceopt"
)

// checkReplaceInterval refuses a same-name replacement of old that comes
// less than Options.MinReplaceInterval after old started (REPLACE_TOO_SOON).
func (s *Replace) checkReplaceInterval(old *record.Job) error {
	min := s.Opts.MinReplaceInterval
	if min <= 0 {
		return nil
	}
	started := old.CreateTime
	for _, c := range old.History {
		if c.State == record.StateRunning {
			started = c.Time
			break
		}
	}
	if left := started.Add(min).Sub(s.Now()); left > 0 {
		return errcode.Errorf(errcode.ReplaceTooSoon, "job %s (%s) started %s ago; a replacement of the same name may start %s after the previous job started (the server's --min-replace-interval, which guards against duplicate replacements from retries): retry in %s, or update it in place",
			old.Name, old.ID, duration.Format(s.Now().Sub(started).Round(time.Second)), duration.Format(min), duration.Format(left.Round(time.Second)))
	}
	return nil
}

// replacementTarget finds the job a replacement replaces: the running job
// of req.Name (a same-name replacement) or the job plan names
// (parallel_replace_job_name or _id), which must be RUNNING.
func (s *Replace) replacementTarget(req core.UpdateRequest, plan serviceopt.Plan) (*record.Job, error) {
	ref := req.Name
	switch {
	case plan.ReplaceJobID != "":
		ref = plan.ReplaceJobID
	case plan.ReplaceJobName != "":
		ref = plan.ReplaceJobName
	}
	old, err := s.Resolve(ref)
	if err != nil {
		if errcode.Of(err) == errcode.JobNotFound {
			return nil, errcode.Errorf(errcode.NoRunningJob, "no running job named %s to replace", ref)
		}
		return nil, err
	}
	if plan.ReplaceJobID == "" && !s.HasRunningJob(old.Name) || old.State != record.StateRunning {
		if old.State == record.StateUpdated {
			return nil, errcode.Errorf(errcode.JobAlreadyUpdated, "job %s (%s) has already been updated into job %s", old.Name, old.ID, old.ReplacedByJobID)
		}
		return nil, errcode.Errorf(errcode.NoRunningJob, "no running job named %s to replace: job %s is %s (a replacement drains a RUNNING job)", old.Name, old.ID, old.State)
	}
	if old.SDK == record.SDKGo {
		return nil, errcode.Errorf(errcode.IllegalTransition, "job %s (%s) is a Go program's: replace it by starting the program's new build", old.Name, old.ID)
	}
	if old.Type != record.TypeStreaming {
		return nil, errcode.Errorf(errcode.IllegalTransition, "job %s (%s) is a batch job: only a streaming job is replaced (a batch job finishes by itself)", old.Name, old.ID)
	}
	if plan.SameName() {
		if err := s.checkReplaceInterval(old); err != nil {
			return nil, err
		}
	}
	return old, nil
}

// Replace performs a replacement (stop-and-replace or parallel) of plan.
// Every check runs before anything changes.
func (s *Replace) Replace(ctx context.Context, req core.UpdateRequest, plan serviceopt.Plan) (*core.UpdateResult, error) {
	if _, err := s.AdmitChange(req.Name, req.Mapping, &req.Options); err != nil {
		return nil, err
	}
	if req.BaseDir == "" {
		return nil, errcode.Errorf(errcode.InvalidRequest, "base_dir must be an absolute directory (the client's working directory)")
	}
	if req.PipelineFile == "" {
		req.PipelineFile = "pipeline.yaml"
	}
	old, err := s.replacementTarget(req, plan)
	if err != nil {
		return nil, err
	}
	switch {
	case plan.Strategy == serviceopt.StrategyParallel:
		return s.parallelReplace(ctx, req, plan, old)
	}
	return s.stopAndReplace(ctx, req, plan, old)
}

// validated is the answer to a validate-only replacement of old whose
// every check passed: nothing was recorded, started or drained; note says
// what would have happened.
func validated(old *record.Job, note string) *core.UpdateResult {
	sum := old.Summary()
	return &core.UpdateResult{Report: core.CompatibleReport(), Replaced: &sum, Notes: []string{note}}
}
