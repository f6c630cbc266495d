package autoscale

import (
	"fmt"
	"math"
	"time"
)

// Settings are the rules one job is scaled by: its range and target
// utilisation (the job's options) and the service's delays.
type Settings struct {
	// Min and Max bound the worker count (Min ≥ 1, Max ≥ Min).
	Min, Max int
	// Hint is the target utilisation of the workers (Dataflow's
	// worker_utilization_hint, 0.1..0.9): a scale-up aims at it, and a
	// scale-down never goes above it.
	Hint float64
	// UpDelay is how long a backlog must grow (or stay above DrainTarget's
	// worth) before a scale-up.
	UpDelay time.Duration
	// DownDelay is how long the job must be quiet (a backlog under a few
	// seconds of input, the workers under the target utilisation) before
	// a scale-down.
	DownDelay time.Duration
	// Cooldown is how long after a change of the worker count nothing is
	// decided: the new count's rates are measured first.
	Cooldown time.Duration
	// DrainTarget is how soon a scale-up aims to have worked off the
	// backlog, on top of keeping up with the input.
	DrainTarget time.Duration
}

// SinkBound is the share of the workers' time waited for the sinks from
// which a job is held back by its sinks, not by its workers: a backlog it
// builds up then is no reason to add workers (they would wait too).
const SinkBound = 0.2

// Defaults of Settings' delays.
const (
	DefaultHint        = 0.8
	DefaultUpDelay     = 20 * time.Second
	DefaultDownDelay   = 10 * time.Minute
	DefaultCooldown    = 20 * time.Second
	DefaultDrainTarget = time.Minute
)

// Sample is what the autoscaler measured of a job's live execution at
// one time; the counters are cumulative since the execution started.
type Sample struct {
	Time    time.Time
	Workers int
	// Read is the elements the job's sources have read.
	Read int64
	// Backlog is the elements waiting to be read (HasBacklog false when no
	// source reports one).
	Backlog    int64
	HasBacklog bool
	// IdleNanos is the time the workers waited with nothing to do, summed.
	IdleNanos int64
	// SinkWaitMillis is the time the workers held their sources back
	// because the sinks held more than they may between two checkpoints,
	// summed (runner.Result.SinkWaitMillis).
	SinkWaitMillis int64
	// Execution tells executions apart: a restart or a rescale starts the
	// counters again.
	Execution time.Time
}

// Figures are the inputs of a decision, as its event reports them.
type Figures struct {
	// InputRate is the elements a second arriving (processing rate plus
	// backlog growth); ProcessingRate those read.
	InputRate, ProcessingRate float64
	// Backlog is the elements waiting, BacklogGrowth its change a second.
	Backlog       int64
	BacklogGrowth float64
	// Utilization is how busy the workers were (0..1).
	Utilization float64
	// Capacity is the elements a second one fully busy worker reads (0:
	// unknown).
	Capacity float64
	// SinkWait is the share of the workers' time their sources waited for
	// the sinks (0..1).
	SinkWait float64
	// PredictedRate is the processing rate the decided count should reach;
	// ObservedRate what the previous change's prediction came to (0: no
	// previous change).
	PredictedRate, ObservedRate, LastPredicted float64
}

// Decision is what one step decided: a new worker count (Workers; equal to
// the sample's when nothing changes) and why.
type Decision struct {
	Workers int
	Reason  string
	Figures Figures
}

// State is one job's autoscaling memory between steps. It is owned by one
// goroutine (the autoscaler's loop); the zero value is ready.
type State struct {
	prev         *Sample
	lastChange   time.Time
	growingSince time.Time
	quietSince   time.Time
	// predicted is the processing rate the last change aimed at.
	predicted float64
}

// Step takes sample s of the job and decides, by the rules of set,
// whether its worker count should change. It reads no clock and does no
// I/O: its time is s.Time.
func (st *State) Step(s Sample, set Settings) Decision {
	keep := Decision{Workers: s.Workers}
	prev := st.prev
	st.prev = &s
	if prev == nil || prev.Execution != s.Execution || prev.Workers != s.Workers {
		// The first sample of an execution (a restart, a rescale): rates
		// are measured from the next one.
		if prev != nil {
			st.lastChange = s.Time
		}
		st.growingSince, st.quietSince = time.Time{}, time.Time{}
		keep.Reason = "measuring"
		return keep
	}
	if s.Workers < set.Min || s.Workers > set.Max {
		// The range changed under the job: into it at once.
		keep.Workers = min(max(s.Workers, set.Min), set.Max)
		keep.Reason = fmt.Sprintf("the worker count %d is outside the range [%d, %d]", s.Workers, set.Min, set.Max)
		return st.changed(keep, s.Time)
	}
	dt := s.Time.Sub(prev.Time).Seconds()
	if dt <= 0 {
		keep.Reason = "no time passed"
		return keep
	}
	f := Figures{ProcessingRate: float64(s.Read-prev.Read) / dt, Backlog: s.Backlog, LastPredicted: st.predicted}
	if s.HasBacklog && prev.HasBacklog {
		f.BacklogGrowth = float64(s.Backlog-prev.Backlog) / dt
	}
	f.InputRate = max(0, f.ProcessingRate+f.BacklogGrowth)
	busy := 1 - float64(s.IdleNanos-prev.IdleNanos)/(dt*1e9*float64(s.Workers))
	f.Utilization = min(max(busy, 0), 1)
	if f.Utilization > 0.05 {
		f.Capacity = f.ProcessingRate / (float64(s.Workers) * f.Utilization)
	}
	f.SinkWait = min(max(float64(s.SinkWaitMillis-prev.SinkWaitMillis)/(dt*1e3*float64(s.Workers)), 0), 1)
	if st.predicted > 0 {
		f.ObservedRate = f.ProcessingRate
	}
	keep.Figures = f
	if !st.lastChange.IsZero() && s.Time.Sub(st.lastChange) < set.Cooldown {
		keep.Reason = "measuring the last change"
		return keep
	}
	// Up: the backlog grows, or holds more than DrainTarget of input, for
	// UpDelay.
	behind := s.HasBacklog && s.Backlog > 0 && (f.BacklogGrowth > 0 ||
		f.ProcessingRate > 0 && float64(s.Backlog)/f.ProcessingRate > set.DrainTarget.Seconds())
	if behind {
		if st.growingSince.IsZero() {
			st.growingSince = prev.Time
		}
	} else {
		st.growingSince = time.Time{}
	}
	if behind && f.SinkWait >= SinkBound {
		// The sinks commit slower than the input comes: the workers wait
		// for them, and more workers would wait as well.
		keep.Reason = fmt.Sprintf("the backlog (%d) grows, but the sources waited for the sinks %.0f%% of the time: the sinks, not the workers, hold the job back",
			s.Backlog, f.SinkWait*100)
		return keep
	}
	if behind && s.Time.Sub(st.growingSince) >= set.UpDelay && s.Workers < set.Max {
		want := f.InputRate + float64(s.Backlog)/set.DrainTarget.Seconds()
		n := s.Workers * 2 // the capacity is unknown: double
		if f.Capacity > 0 {
			n = int(math.Ceil(want / (f.Capacity * set.Hint)))
		}
		n = min(max(n, s.Workers+1), set.Max)
		keep.Workers = n
		keep.Figures.PredictedRate = want
		if f.Capacity > 0 {
			keep.Figures.PredictedRate = min(want, float64(n)*f.Capacity*set.Hint)
		}
		keep.Reason = fmt.Sprintf("the backlog (%d) has grown for %s: %d worker(s) at %.0f%% keep up with %.0f/s and work it off within %s",
			s.Backlog, s.Time.Sub(st.growingSince).Round(time.Second), n, set.Hint*100, f.InputRate, set.DrainTarget)
		return st.changed(keep, s.Time)
	}
	// Down: quiet — little backlog, the workers under the target — for
	// DownDelay, and fewer workers would carry the input at the target.
	quiet := !behind && (!s.HasBacklog || float64(s.Backlog) <= 5*max(f.InputRate, 1)) && f.Utilization < set.Hint
	if !quiet || s.Workers <= set.Min || f.Capacity <= 0 {
		st.quietSince = time.Time{}
		keep.Reason = "steady"
		return keep
	}
	if st.quietSince.IsZero() {
		st.quietSince = prev.Time
	}
	n := max(int(math.Ceil(f.InputRate/(f.Capacity*set.Hint))), set.Min)
	if n >= s.Workers || s.Time.Sub(st.quietSince) < set.DownDelay {
		keep.Reason = "steady"
		return keep
	}
	keep.Workers = n
	keep.Figures.PredictedRate = f.InputRate
	keep.Reason = fmt.Sprintf("quiet for %s (utilisation %.0f%%, backlog %d): %d worker(s) carry %.0f/s at %.0f%%",
		s.Time.Sub(st.quietSince).Round(time.Second), f.Utilization*100, s.Backlog, n, f.InputRate, set.Hint*100)
	return st.changed(keep, s.Time)
}

// changed records that d changes the worker count at t.
func (st *State) changed(d Decision, t time.Time) Decision {
	st.lastChange, st.growingSince, st.quietSince = t, time.Time{}, time.Time{}
	st.predicted = d.Figures.PredictedRate
	return d
}
