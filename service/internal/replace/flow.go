package replace

import (
	"context"
	"sync"

	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/internal/rewind"
	"github.com/weir-dev/weir/service/internal/snapshots"
	"github.com/weir-dev/weir/service/record"
	"github.com/weir-dev/weir/yamlpipe"
)

// Replace is the replacement flows of one job service: stop-and-replace
// (and the rollback, which is one) and parallel replacement.
type Replace struct {
	*core.Core
	core.BaseFlow
	snaps  *snapshots.Snapshots
	rewind *rewind.Rewind
	// cuts maps the jobs of a parallel replacement to the rule that says
	// which windows each writes (parallel_cut.go): job ID -> *cutRule.
	cuts sync.Map
	// parityAt maps the new job of a flow gated on parity to when its
	// driver last compared the jobs' outputs (parallel_gate.go): job ID ->
	// time.Time.
	parityAt sync.Map
	// sql administers the SQL tables behind the façade views.
	sql contract.SQLTableAdmin
}

var _ core.Flow = (*Replace)(nil)

// New returns the replacement flows built on c, keeping rollback
// snapshots through snaps and re-reading through rw; the caller registers
// it with c (Core.Register) before the re-read (rw narrows the windows
// this flow gives a job's sinks).
func New(c *core.Core, snaps *snapshots.Snapshots, rw *rewind.Rewind) *Replace {
	return &Replace{Core: c, snaps: snaps, rewind: rw, sql: yamlpipe.SQLTableAdmin(c.Now)}
}

// Open starts the façade sweep (facade_sweep.go) (core.Flow).
func (s *Replace) Open(context.Context) error {
	s.Spawn(s.sweepLoop)
	return nil
}

// Claim resumes a replacement job waiting for its flow: the flow resumes
// where it was, the old job as its own record says (core.Flow).
func (s *Replace) Claim(j *record.Job) bool {
	if j.State != record.StatePending || j.Replacement == nil || j.Replacement.Phase.Final() {
		return false
	}
	s.Opts.Logger.Info("resuming a replacement flow", "job_id", j.ID, "job_name", j.Name, "phase", j.Replacement.Phase, "old_job_id", j.Replacement.OldJobID)
	s.StartDriver(j.ID)
	return true
}

// Resumed restarts the driver of a parallel flow whose new job resumed
// (core.Flow).
func (s *Replace) Resumed(j *record.Job) {
	if parallelDriven(j) {
		s.Opts.Logger.Info("resuming a parallel replacement flow", "job_id", j.ID, "job_name", j.Name, "phase", j.Replacement.Phase, "old_job_id", j.Replacement.OldJobID)
		s.StartDriver(j.ID)
	}
}

// Environment adds a parallel replacement's façades (core.Flow).
func (s *Replace) Environment(j *record.Job, env *yamlpipe.JobEnv) { s.jobEnv(j, env) }

// Program makes a job's sinks write only the windows it owns (core.Flow).
func (s *Replace) Program(j *record.Job, prog *contract.Program) { s.restrictWindows(j, prog) }

// Decorate adds a parallel flow's progress (core.Flow).
func (s *Replace) Decorate(j *record.Job) *record.Job { return s.withParallelProgress(j) }
