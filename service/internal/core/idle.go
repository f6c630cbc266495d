package core

import "time"

// Idle jobs (docs/JOBS.md, "Checkpoints and recovery"): a job that
// processed nothing since its last checkpoint skips the periodic one until
// Options.IdleCheckpointInterval has passed. Checkpoint records the
// activity and time it was taken at (Run.idleActivity, Run.idleAt);
// supervise asks idle before each periodic checkpoint.

// idle reports whether jr's periodic checkpoint at now can be skipped:
// nothing was read, emitted, rejected or dropped since its last
// checkpoint (which then persisted everything a new one would), and that
// one is younger than IdleCheckpointInterval. A sink whose commit failed
// is retried regardless (sinkRetryDue).
func (s *Core) idle(jr *Run, now time.Time) bool {
	at := jr.idleAt.Load()
	if at == 0 || jr.sinkFault.Load() != nil {
		return false
	}
	if now.Sub(time.Unix(0, at)) >= s.Opts.IdleCheckpointInterval {
		return false
	}
	return jr.X.Activity() == jr.idleActivity.Load()
}
