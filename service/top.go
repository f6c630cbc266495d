package service

import (
	"context"

	"github.com/weir-dev/weir/service/internal/autoscale"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/internal/inplace"
	"github.com/weir-dev/weir/service/internal/replace"
	"github.com/weir-dev/weir/service/internal/rewind"
	"github.com/weir-dev/weir/service/internal/rollback"
	"github.com/weir-dev/weir/service/internal/schedules"
	"github.com/weir-dev/weir/service/internal/snapshots"
	"github.com/weir-dev/weir/service/internal/tables"
	"github.com/weir-dev/weir/service/record"
)

// Service is the job service: the core (records, executions, checkpoints,
// events, metrics, faults, restart; package core) and the flows built on
// it (snapshots, in-place update, stop-and-replace and parallel
// replacement, rollback), each in its own package. Its methods are safe
// for concurrent use. Its locks and their order are described in the
// package doc.
type Service struct {
	core     *core.Core
	snaps    *snapshots.Snapshots
	inplace  *inplace.InPlace
	replace  *replace.Replace
	rollback *rollback.Rollback
	// autoscale is the autoscaler (tests shorten its delays).
	autoscale *autoscale.Autoscale
	// tables serves weir tables and records staged merges.
	tables *tables.Tables
	// schedules runs the schedules of partition runs.
	schedules *schedules.Schedules
	// requests holds the per-request-ID guards (lock order 0, see
	// route.go): taken before the name's guard, never while holding one.
	requests core.NameGuards
}

// Options configure a Service (package core's, which owns them).
type Options = core.Options

// Open opens (creating if needed) the data directory and resumes every job
// that was RUNNING or DRAINING when the service last stopped, from its last
// checkpoint.
//
// Open returns once the registry is read: the jobs resume in the background,
// a few at a time, while the service already answers; a job not yet
// resumed reads with condition RESUMING. Recovered tells when every one
// has resumed.
func Open(ctx context.Context, opts Options) (*Service, error) {
	return open(ctx, opts, core.Hooks{})
}

// open is Open with the hooks tests set before recovery starts.
func open(ctx context.Context, opts Options, hooks core.Hooks) (*Service, error) {
	c, err := core.Open(ctx, opts, hooks)
	if err != nil {
		return nil, err
	}
	s := &Service{core: c, snaps: snapshots.New(c)}
	rw := rewind.New(c)
	s.inplace = inplace.New(c, s.snaps)
	s.replace = replace.New(c, s.snaps, rw)
	s.rollback = rollback.New(c, s.snaps, s.replace)
	s.autoscale = autoscale.New(c)
	s.tables = tables.New(c)
	s.schedules = schedules.New(c)
	if opts.ScheduleInterval > 0 {
		s.schedules.Interval = opts.ScheduleInterval
	}
	// The re-read narrows the windows the replacement flows give a job's
	// sinks, so it comes after them.
	c.Register(s.snaps, s.replace, rw, s.autoscale, s.tables, s.schedules)
	if err := c.Start(); err != nil {
		return nil, err
	}
	return s, nil
}

// Submit validates and starts a new job. It returns once the job is
// created and its execution started (the job is then RUNNING), or FAILED
// when the execution could not start.
//
// Its service options may make it something else (replace.go): with
// create_or_update_job it updates the name's running job when there is
// one, and with parallel_replace_job_name or _id it replaces that job
// under the new name.
func (s *Service) Submit(ctx context.Context, req SubmitRequest) (*record.Job, error) {
	res, err := s.once(ctx, req.RequestID, "submit", req, func() (*UpdateResult, error) {
		return s.route(ctx, UpdateRequest{SubmitRequest: req}, false)
	})
	if res != nil && res.Job != nil && err == nil {
		return res.Job, nil
	}
	return nil, err
}

// ValidateSubmit runs every check of submission req — the name, the
// options, the pipeline, and what its service options make of it (a
// replacement's every check) — and changes nothing. The result's notes
// say what the submission would do.
func (s *Service) ValidateSubmit(ctx context.Context, req SubmitRequest) (*UpdateResult, error) {
	if err := s.core.RefuseIfStoreFailed(); err != nil {
		return nil, err
	}
	return s.route(ctx, UpdateRequest{SubmitRequest: req, ValidateOnly: true}, false)
}

// Update checks req's pipeline against the running (or draining) job of
// req.Name and, when compatible, replaces it: the old job takes a final
// checkpoint and ends UPDATED (replaced_by_job_id), the new job (new ID,
// same name, next generation, replaces_job_id) starts from that checkpoint
// with every matched step's state, timers and open windows, and sources
// continue exactly where the checkpoint left them. The handover (the old
// job's state transition, the new job's record and checkpoint, state
// namespace rebinds for renamed steps) is one atomic write. When the check
// fails, nothing changes: the running job keeps running, the attempt is
// recorded, and the error (code INCOMPATIBLE_UPDATE) comes with the report.
//
// The update goes through five phases, each a method with its own lock
// discipline: prepareUpdate (prepare and check), pauseForUpdate (pause),
// handOver (hand over), persistHandover (persist) and finishHandover
// (finish). The name's guard is held throughout, the old execution's cpMu
// from the pause on, the new execution's from its start; the registry lock only
// for the store writes. Reads of the service answer meanwhile.
//
// Its service options may make it a replacement instead (replace.go).
func (s *Service) Update(ctx context.Context, req UpdateRequest) (*UpdateResult, error) {
	if err := renderRequestJinja(ctx, &req, s.core.Opts.Access); err != nil {
		return nil, err
	}
	res, err := s.once(ctx, req.RequestID, "update", req, func() (*UpdateResult, error) {
		return s.route(ctx, req, true)
	})
	return withRendered(res, req), err
}
