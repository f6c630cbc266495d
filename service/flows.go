package service

import (
	"context"

	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"
	"github.com/weir-dev/weir/yamlpipe"
)

// flows registers the service's flows with its core (core.Flow).
type flows struct{ s *Service }

var _ core.Flow = flows{}

// Open starts the façade sweep (facade_sweep.go).
func (f flows) Open(context.Context) error {
	f.s.Spawn(f.s.sweepLoop)
	return nil
}

// Claim resumes a replacement job waiting for its flow: the flow resumes
// where it was (the old job resumes as its own record says).
func (f flows) Claim(j *record.Job) bool {
	if j.State != record.StatePending || j.Replacement == nil || j.Replacement.Phase.Final() {
		return false
	}
	f.s.Opts.Logger.Info("resuming a replacement flow", "job_id", j.ID, "job_name", j.Name, "phase", j.Replacement.Phase, "old_job_id", j.Replacement.OldJobID)
	f.s.startDriver(j.ID)
	return true
}

// Resumed restarts the driver of a parallel flow whose new job resumed.
func (f flows) Resumed(j *record.Job) {
	if parallelDriven(j) {
		f.s.Opts.Logger.Info("resuming a parallel replacement flow", "job_id", j.ID, "job_name", j.Name, "phase", j.Replacement.Phase, "old_job_id", j.Replacement.OldJobID)
		f.s.startDriver(j.ID)
	}
}

// Environment adds the windows a job's sinks own and a parallel
// replacement's façades.
func (f flows) Environment(j *record.Job, env *yamlpipe.JobEnv) {
	f.s.jobEnv(j, env)
}

// Execution changes nothing.
func (flows) Execution(*record.Job, *core.Run, *runner.Options) {}

// Decorate adds a parallel flow's progress.
func (f flows) Decorate(j *record.Job) *record.Job { return f.s.withParallelProgress(j) }
