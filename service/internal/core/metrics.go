package core

import (
	"time"

	"github.com/weir-dev/weir/runner/contract"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner"
)

// sampler keeps what the previous metrics sample saw, to compute rates and
// the system lag. It is written by the job's supervisor and read by
// metrics, both under jobRun.smu.
type sampler struct {
	prevAt time.Time
	prev   map[string]runner.StepMetrics
	rate   map[string]float64
	// progressAt is when the step last consumed an element or moved its watermark.
	progressAt map[string]time.Time
	// waitingSince is when an upstream step first produced elements this
	// step has not consumed since its last progress (zero when none).
	waitingSince map[string]time.Time
	producers    map[string][]string
}

func newSampler(g *graph.Pipeline) *sampler {
	sm := &sampler{prev: map[string]runner.StepMetrics{}, rate: map[string]float64{},
		progressAt: map[string]time.Time{}, waitingSince: map[string]time.Time{}, producers: map[string][]string{}}
	for _, st := range g.Steps {
		for _, id := range st.Inputs {
			if c := g.Collection(id); c != nil {
				sm.producers[st.Name] = append(sm.producers[st.Name], c.Producer)
			}
		}
	}
	return sm
}

// observe records a sample taken at now.
//
// System lag is approximated at the resolution of the sampling interval:
// a step is "waiting" from the first sample at which one of its producers
// emitted more elements than at the previous sample while the step itself
// consumed nothing and its watermark stood still; its lag is then now minus
// that moment, and 0 as soon as it makes progress again. Dataflow's exact
// definition (the age of the oldest unprocessed element) needs per-element
// arrival times the runner does not keep.
func (sm *sampler) observe(now time.Time, res *runner.Result) {
	cur := map[string]runner.StepMetrics{}
	for _, st := range res.Steps {
		cur[st.Name] = st
	}
	dt := now.Sub(sm.prevAt).Seconds()
	for name, st := range cur {
		p, seen := sm.prev[name]
		if seen && dt > 0 {
			sm.rate[name] = float64(st.ElementsIn-p.ElementsIn) / dt
		}
		moved := !seen || st.ElementsIn != p.ElementsIn || st.Watermark != p.Watermark
		if moved {
			sm.progressAt[name] = now
			delete(sm.waitingSince, name)
			continue
		}
		for _, prod := range sm.producers[name] {
			if pc, pp := cur[prod], sm.prev[prod]; pc.ElementsOut > pp.ElementsOut {
				if _, ok := sm.waitingSince[name]; !ok {
					sm.waitingSince[name] = sm.prevAt
				}
			}
		}
	}
	sm.prev, sm.prevAt = cur, now
}

// metrics builds the job's metrics from live counters res at now.
func (sm *sampler) metrics(now time.Time, res *runner.Result, code map[string]any, g *graph.Pipeline, deadLetters int64) *record.JobMetrics {
	m := &record.JobMetrics{Time: now, DeadLetters: deadLetters, Steps: []record.StepMetrics{},
		SinkWaitSeconds: float64(res.SinkWaitMillis) / 1000}
	if res.BufferingSinks {
		b := res.SinkBufferedBytes
		m.SinkBufferedBytes = &b
	}
	dataWM := mtime.MaxTimestamp
	haveWM := false
	var backlog, backlogBytes int64
	haveBacklog, haveBytes := false, false
	var sourceRate float64
	for _, st := range res.Steps {
		sm2 := record.StepMetrics{Name: st.Name, ElementsIn: st.ElementsIn, ElementsOut: st.ElementsOut,
			Rejects: st.Rejects, RejectsByReason: st.RejectsByReason, DroppedLateElements: st.DroppedLateElements, UserMetrics: userMetrics(st.User)}
		if sm != nil {
			sm2.ThroughputPerSecond = sm.rate[st.Name]
			if since, ok := sm.waitingSince[st.Name]; ok {
				sm2.SystemLagSeconds = now.Sub(since).Seconds()
			}
		}
		step := g.Step(st.Name)
		if step != nil && step.Kind.IsKeyed() {
			pt := st.PendingTimers
			sm2.PendingTimers = &pt
			keys := st.Keys
			sm2.Keys = &keys
		}
		isSource := step != nil && step.Kind == graph.KindSource
		if st.Watermark > mtime.MinTimestamp || isSource {
			sm2.Watermark = st.Watermark.Format()
			ms := int64(st.Watermark)
			sm2.WatermarkMillis = &ms
			if st.Watermark > mtime.MinTimestamp && st.Watermark < mtime.MaxTimestamp {
				age := now.Sub(st.Watermark.ToTime()).Seconds()
				sm2.DataWatermarkAgeSeconds = &age
			}
		}
		if isSource {
			dataWM = mtime.Min(dataWM, st.Watermark)
			haveWM = true
			sourceRate += sm2.ThroughputPerSecond
			if br, ok := code[st.Name].(contract.BacklogBytesReporter); ok {
				if n, ok := br.BacklogBytes(); ok {
					backlogBytes += n
					haveBytes = true
				}
			}
			if rs, ok := code[st.Name].(contract.ReReadingSource); ok {
				if n := rs.RewindSkipped(); n > 0 {
					sm2.RewindSkippedElements = &n
				}
			}
			if ic, ok := code[st.Name].(contract.IDConflictReporter); ok {
				if n := ic.DuplicateIDConflicts(); n > 0 {
					sm2.DuplicateIDConflicts = &n
				}
			}
			sm2.CatchUp = CatchUpOf(code[st.Name])
			if br, ok := code[st.Name].(contract.BacklogReporter); ok {
				if n, ok := br.BacklogElements(); ok {
					sm2.BacklogElements = &n
					backlog += n
					haveBacklog = true
				}
			}
		}
		m.SystemLagSeconds = max(m.SystemLagSeconds, sm2.SystemLagSeconds)
		m.Steps = append(m.Steps, sm2)
	}
	if haveWM {
		m.DataWatermark = dataWM.Format()
		if dataWM > mtime.MinTimestamp && dataWM < mtime.MaxTimestamp {
			age := now.Sub(dataWM.ToTime()).Seconds()
			m.DataWatermarkAgeSeconds = &age
		}
	}
	if haveBacklog {
		m.BacklogElements = &backlog
		if backlog == 0 || sourceRate > 0 {
			est := 0.0
			if backlog > 0 {
				est = float64(backlog) / sourceRate
			}
			m.EstimatedBacklogProcessingTimeSeconds = &est
		}
	}
	if haveBytes {
		m.BacklogBytes = &backlogBytes
	}
	return m
}

// CatchUpOf returns the progress of a source's code, or nil.
func CatchUpOf(code any) *record.SourceCatchUp {
	cr, ok := code.(contract.ReReadingSource)
	if !ok {
		return nil
	}
	c, ok := cr.CatchUp()
	if !ok {
		return nil
	}
	return &record.SourceCatchUp{ReadSequence: c.ReadSeq, HoldUntil: c.HoldUntil, CaughtUp: !c.Holding, ExpiredMessages: c.Expired}
}

// userMetrics converts a step's user-defined metrics for its record.
func userMetrics(in []contract.UserMetric) []record.UserMetric {
	if len(in) == 0 {
		return nil
	}
	out := make([]record.UserMetric, len(in))
	for i, m := range in {
		um := record.UserMetric{Namespace: m.Namespace, Name: m.Name, Kind: m.Kind}
		if m.Kind == contract.MetricCounter {
			um.Value = &m.Value
		} else {
			um.Count, um.Sum, um.Min, um.Max = &m.Count, &m.Sum, &m.Min, &m.Max
		}
		out[i] = um
	}
	return out
}
