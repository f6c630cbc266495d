package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/service/record"
	"github.com/weir-dev/weir/state"
)

// ProgramLoader builds the pipeline of a Go program's job for the job that
// job describes (weir.NewJobPipeline(job) and the program's construction
// code). It is called when the job is created, resumed, updated or
// rescaled, and, with an empty job.ID, to compute the graph only. It must
// build the same graph for every call of one build, and should do no I/O
// beyond validation.
type ProgramLoader func(job weir.JobInfo) (*weir.Pipeline, error)

// waitJobPoll is how often WaitJob looks at the job's record.
const waitJobPoll = 100 * time.Millisecond

// loadProgram builds j's pipeline with the program's loader.
func (s *Core) LoadProgram(j *record.Job) (*weir.Pipeline, error) {
	if s.Opts.Program == nil {
		return nil, errcode.Errorf(errcode.InvalidPipeline, "job %s (%s) is a Go program's: its pipeline is built by its program, which resumes it when started on this data directory", j.ID, j.Name)
	}
	p, err := s.Opts.Program(weir.JobInfo{Name: j.Name, ID: j.ID, Generation: j.Generation, DataDir: s.Opts.DataDir, Broker: s.Opts.Broker})
	if err != nil {
		return nil, errcode.Errorf(errcode.InvalidPipeline, "building the pipeline of job %s: %w", j.Name, err)
	}
	if p == nil {
		return nil, errcode.Errorf(errcode.InvalidPipeline, "building the pipeline of job %s: the program returned no pipeline", j.Name)
	}
	if err := p.Err(); err != nil {
		return nil, errcode.Errorf(errcode.InvalidPipeline, "the pipeline of job %s: %w", j.Name, err)
	}
	return p, nil
}

// WaitJob waits until job id is terminal and its execution has let go of
// it (final checkpoint written and committed), and returns its record. It
// returns a SHUTTING_DOWN error once the service closes, and ctx's error
// when ctx ends first. It takes no lock.
func (s *Core) WaitJob(ctx context.Context, id string) (*record.Job, error) {
	t := time.NewTicker(waitJobPoll)
	defer t.Stop()
	for {
		if s.Closing.Load() {
			return nil, errcode.Errorf(errcode.ShuttingDown, "the job service is shutting down")
		}
		j, err := s.ReadJob(id)
		live := s.RunningJob(id) != nil
		switch {
		case errors.Is(err, state.ErrNotFound):
			return nil, errcode.Errorf(errcode.JobNotFound, "no job has the ID %q", id)
		case err != nil:
			return nil, err
		case j.State.Terminal() && !live:
			return j, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for job %s: %w", id, ctx.Err())
		case <-t.C:
		}
	}
}
