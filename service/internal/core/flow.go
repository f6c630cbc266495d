package core

import (
	"context"

	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/service/record"
	"github.com/weir-dev/weir/yamlpipe"
)

// Flow is what a flow built on the core (snapshots, an in-place update, a
// replacement, a re-read) registers with it (Core.Register), so that the
// core never calls a flow by name: it calls every registered flow at
// these points, in the order they were registered. A flow that has
// nothing to do at a point embeds BaseFlow.
type Flow interface {
	// Open is called once by Core.Start, before the jobs found active
	// resume: a flow repairs what a stop cut short. An error fails Start.
	Open(ctx context.Context) error
	// Claim is called for each job found active at Start, before the core
	// resumes it. A flow that returns true resumes the job itself (a
	// replacement job waiting for its flow), and the core does not start
	// it. The caller holds the job name's guard.
	Claim(j *record.Job) bool
	// Resumed is called once job j, found active at Start, has been
	// started again (it may have failed to: its record says). The caller
	// holds the job name's guard.
	Resumed(j *record.Job)
	// Environment adds what the flow needs to env, the environment job j's
	// YAML pipeline is loaded in, at every load (a first start, a restart,
	// a rescale, an update's check): what decides how its connectors are
	// built.
	Environment(j *record.Job, env *yamlpipe.JobEnv)
	// Program configures prog, job j's YAML pipeline as the load built it,
	// through its step code's capabilities (runner/contract: a re-read,
	// the windows its sinks own), before anything of it runs; at every
	// load for a run (not for a compatibility check's graph).
	Program(j *record.Job, prog *contract.Program)
	// Execution adjusts opts, the options of job j's next execution run,
	// before it starts (every start: restarts, rescales, updates). run's
	// program is built; nothing of it runs yet.
	Execution(j *record.Job, run *Run, opts *runner.Options)
	// Decorate adds to j, a record read for a client, what the store
	// does not keep (a flow's progress), and returns it.
	Decorate(j *record.Job) *record.Job
}

// BaseFlow implements every method of Flow by doing nothing.
type BaseFlow struct{}

// Open does nothing.
func (BaseFlow) Open(context.Context) error { return nil }

// Claim claims no job.
func (BaseFlow) Claim(*record.Job) bool { return false }

// Resumed does nothing.
func (BaseFlow) Resumed(*record.Job) {}

// Environment adds nothing.
func (BaseFlow) Environment(*record.Job, *yamlpipe.JobEnv) {}

// Program configures nothing.
func (BaseFlow) Program(*record.Job, *contract.Program) {}

// Execution changes nothing.
func (BaseFlow) Execution(*record.Job, *Run, *runner.Options) {}

// Decorate returns j as it is.
func (BaseFlow) Decorate(j *record.Job) *record.Job { return j }

// Register adds flows to the core, to be called at the points of Flow.
// It is called before Start, from the goroutine that opened the core.
func (s *Core) Register(flows ...Flow) { s.flows = append(s.flows, flows...) }

// decorate runs every flow's Decorate on j.
func (s *Core) decorate(j *record.Job) *record.Job {
	for _, f := range s.flows {
		if j == nil {
			return nil
		}
		j = f.Decorate(j)
	}
	return j
}
