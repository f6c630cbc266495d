// Package rewind is the job service's re-read of retained input: where the
// new job of a replacement that re-reads (weir_replace_rewind=true, the
// default) starts reading each topic so that every window it emits is
// complete (Point, the rule in rewind.go), and what keeps that guarantee
// while the job catches up, across restarts, rescales and in-place
// updates (catchup.go): the re-read starts its Pub/Sub splits get, the
// windows its sinks own, panes held until the catch-up ends, and events
// for messages the topic no longer held.
//
// It registers with the core as a core.Flow for the environment a job's
// pipeline loads in and the options of its executions.
//
// It may import service/internal/core, service/record, graph, mtime,
// window, state, errcode, serviceopt, runner, runner/contract (the
// subscriptions and positions of Pub/Sub sources it reads the rewind point
// from) and the standard library.
package rewind

import (
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"
)

// Rewind is the re-read flow of one job service.
type Rewind struct {
	*core.Core
	core.BaseFlow
}

// New returns the re-read flow built on c; the caller registers it with c
// (Core.Register), after the flows whose window ownership it narrows.
func New(c *core.Core) *Rewind { return &Rewind{Core: c} }

// Program gives a job that re-reads (a replacement job, or an in-place
// update that carries its catch-up on) its sources' re-read starts and
// narrows the windows its sinks own to those the re-read makes complete,
// on every load: the first start, restarts, rescales and updates
// (core.Flow).
func (s *Rewind) Program(j *record.Job, prog *contract.Program) {
	cu := Of(j)
	if cu == nil {
		return
	}
	keep := rewindKeep(cu.RewindPoint)
	for _, st := range prog.Graph.Steps {
		switch code := prog.Code[st.Name].(type) {
		case contract.ReReadingSource:
			if st.Kind == graph.KindSource {
				code.ReRead(cu.Starts)
			}
		case contract.WindowRestrictedSink:
			if st.Kind == graph.KindSink && keep != nil {
				code.RestrictWindows(keep)
			}
		}
	}
}

// Execution holds a re-reading job's panes while its sources catch up and
// makes its sources report what their re-read found gone (core.Flow).
func (s *Rewind) Execution(j *record.Job, run *core.Run, opts *runner.Options) {
	opts.HoldPanesAtMinWatermark = rewindsInput(j)
	s.reportCatchUpExpired(j, run.Prog, run)
}
