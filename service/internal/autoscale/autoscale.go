// Package autoscale is the job service's autoscaler: every
// Options.AutoscaleInterval it measures each running streaming job whose
// options give it a range (max_num_workers, and min_num_workers, 1 by
// default) and whose autoscaling_algorithm is not NONE — how much of its
// input waits (the sources' backlog and its growth), how much it reads,
// how busy its workers are — decides a worker count within the range
// (decide.go: a deterministic step, tested from tables), and applies it
// with the in-flight rescale the service already has (the same job ID, no
// state lost). Every change is a job event with the figures it was decided
// from.
//
// It registers with the core as a core.Flow (Open starts its loop).
//
// It may import service/internal/core, service/record, graph,
// runner/contract, errcode and the standard library.
package autoscale

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"
)

// Autoscale is the autoscaler of one job service.
type Autoscale struct {
	*core.Core
	core.BaseFlow
	// Delays are the rules' delays (Settings without the job's range and
	// hint); New sets the defaults, tests shorten them before Start.
	Delays Settings
	// Sample, when set (tests), replaces the measurement of a job's live
	// execution.
	Sample func(j *record.Job, run *core.Run, now time.Time) (Sample, bool)
	// mu serialises Tick (the loop's and a test's): taken before any lock
	// of the core (UpdateOptions takes the job's name guard under it).
	mu sync.Mutex
	// states are the jobs' memories, by job ID; guarded by mu.
	states map[string]*State
}

// New returns the autoscaler built on c; the caller registers it with c.
func New(c *core.Core) *Autoscale {
	return &Autoscale{Core: c, states: map[string]*State{},
		Delays: Settings{UpDelay: DefaultUpDelay, DownDelay: DefaultDownDelay, Cooldown: DefaultCooldown, DrainTarget: DefaultDrainTarget}}
}

// Open starts the autoscaler's loop (core.Flow).
func (a *Autoscale) Open(context.Context) error {
	a.Spawn(a.loop)
	return nil
}

// Enabled reports whether job j's options make it autoscaled.
func Enabled(o record.JobOptions) bool {
	return o.MaxNumWorkers > 0 && o.AutoscalingAlgorithm != record.AutoscalingNone
}

func (a *Autoscale) loop() {
	t := time.NewTicker(a.Opts.AutoscaleInterval)
	defer t.Stop()
	for {
		select {
		case <-a.Ctx.Done():
			return
		case <-t.C:
			if a.StoreFailed() == nil {
				a.Tick(a.Ctx)
			}
		}
	}
}

// Tick measures every autoscaled job once and applies its decision. The
// loop calls it every interval; tests call it directly.
func (a *Autoscale) Tick(ctx context.Context) {
	a.mu.Lock() // lock order: before the core's locks
	defer a.mu.Unlock()
	jobs, err := a.List(core.StatusActive)
	if err != nil {
		return
	}
	seen := map[string]bool{}
	for _, j := range jobs {
		// A job being replaced keeps its count: its successor takes over.
		if j.Type != record.TypeStreaming || j.State != record.StateRunning || !Enabled(j.Options) || j.ReplacedByJobID != "" {
			continue
		}
		run := a.RunningJob(j.ID)
		if run == nil || !run.Checkpointed {
			continue // no live execution, or one that cannot be rescaled
		}
		seen[j.ID] = true
		now := a.Now()
		s, ok := a.sample(j, run, now)
		if !ok {
			continue
		}
		st := a.states[j.ID]
		if st == nil {
			st = &State{}
			a.states[j.ID] = st
		}
		set := a.Delays
		set.Min, set.Max, set.Hint = max(j.Options.MinNumWorkers, 1), j.Options.MaxNumWorkers, j.Options.WorkerUtilizationHint
		if set.Hint == 0 {
			set.Hint = DefaultHint
		}
		d := st.Step(s, set)
		if d.Workers == s.Workers {
			continue
		}
		a.apply(ctx, j, s.Workers, d)
	}
	for id := range a.states {
		if !seen[id] {
			delete(a.states, id) // ended, or no longer autoscaled
		}
	}
}

// sample samples job j's live execution run at now (through a.Sample
// when set).
func (a *Autoscale) sample(j *record.Job, run *core.Run, now time.Time) (Sample, bool) {
	if a.Sample != nil {
		return a.Sample(j, run, now)
	}
	return Measure(run, now)
}

// Measure samples the live execution run at now: its worker count and idle
// time, what its sources read and the backlog they report. ok is false
// when the execution has no workers yet.
func Measure(run *core.Run, now time.Time) (s Sample, ok bool) {
	res := run.X.Metrics()
	s = Sample{Time: now, Workers: res.Workers, IdleNanos: res.IdleNanos, SinkWaitMillis: res.SinkWaitMillis, Execution: run.Started()}
	for _, st := range run.Prog.Graph.Steps {
		if st.Kind != graph.KindSource {
			continue
		}
		s.Read += res.Step(st.Name).ElementsIn
		if br, ok := run.Prog.Code[st.Name].(contract.BacklogReporter); ok {
			if n, ok := br.BacklogElements(); ok {
				s.Backlog += n
				s.HasBacklog = true
			}
		}
	}
	return s, s.Workers > 0
}

// apply rescales job j from workers to d.Workers and records the decision
// as an event of the job (refused changes too: the job keeps its count).
func (a *Autoscale) apply(ctx context.Context, j *record.Job, workers int, d Decision) {
	f := d.Figures
	details := map[string]any{"from_workers": workers, "to_workers": d.Workers, "reason": d.Reason,
		"backlog": f.Backlog, "backlog_growth_per_s": round(f.BacklogGrowth), "input_rate": round(f.InputRate),
		"processing_rate": round(f.ProcessingRate), "utilization": round(f.Utilization), "capacity_per_worker": round(f.Capacity),
		"predicted_processing_rate": round(f.PredictedRate), "sink_wait": round(f.SinkWait)}
	if f.LastPredicted > 0 {
		details["last_predicted_rate"], details["observed_rate"] = round(f.LastPredicted), round(f.ObservedRate)
	}
	_, err := a.UpdateOptions(ctx, j.ID, record.JobOptions{NumWorkers: d.Workers})
	if c := errcode.Of(err); c == errcode.UpdateInProgress || c == errcode.IllegalTransition || c == errcode.JobTerminated {
		// Another change of the job (an update, a user's rescale, a drain)
		// came first: the next tick measures what it left.
		a.Opts.Logger.Debug("autoscaling deferred", "job_id", j.ID, "job_name", j.Name, "to_workers", d.Workers, "error", err)
		return
	}
	if err != nil {
		details["error"] = err.Error()
		a.Emit(j.ID, record.EventAutoscaled, record.SeverityWarning, fmt.Sprintf("autoscaling from %d to %d workers failed (%v); the job keeps %d: %s", workers, d.Workers, err, workers, d.Reason), details)
		a.Opts.Logger.Warn("autoscaling failed", "job_id", j.ID, "job_name", j.Name, "from_workers", workers, "to_workers", d.Workers, "error", err)
		return
	}
	a.Emit(j.ID, record.EventAutoscaled, record.SeverityInfo, fmt.Sprintf("autoscaled from %d to %d workers: %s", workers, d.Workers, d.Reason), details)
	a.Opts.Logger.Info("autoscaled", "job_id", j.ID, "job_name", j.Name, "from_workers", workers, "to_workers", d.Workers, "reason", d.Reason)
}

// round keeps two decimals of a figure for an event.
func round(v float64) float64 { return float64(int64(v*100+0.5)) / 100 }
