package bench

import (
	"slices"
	"time"
)

// recoverSamples is how many consecutive samples at or above
// recoverFraction of the throughput before a change end its dip.
const (
	recoverSamples  = 3
	recoverFraction = 0.9
)

// ThroughputSample is one sample of a change run: the events the job read
// and the results that arrived per second over the sampling interval that
// ends AtSeconds after the start.
type ThroughputSample struct {
	AtSeconds        float64 `json:"at_s"`
	EventsPerSecond  float64 `json:"events_per_second"`
	ResultsPerSecond float64 `json:"results_per_second"`
}

// ChangeResult is one change of a change run and what the job did around
// it. The window before a change is the half spacing of the changes before
// it; the throughput after it runs until the next change (or the end), the
// latency "around" it over the half spacing that follows its start.
type ChangeResult struct {
	Kind      string  `json:"kind"`
	AtSeconds float64 `json:"at_s"`
	// TookMillis is how long the service's call took (for a snapshot,
	// until the snapshot was READY).
	TookMillis float64 `json:"took_ms"`
	// JobID and Generation are the job after the change (for a snapshot,
	// the snapshotted job).
	JobID      string `json:"job_id"`
	Generation int64  `json:"generation"`
	// ServicePauseMillis is the pause an update reports (service.UpdateResult).
	ServicePauseMillis int64  `json:"service_pause_ms,omitempty"`
	WorkersFrom        int    `json:"workers_from,omitempty"`
	WorkersTo          int    `json:"workers_to,omitempty"`
	SnapshotID         string `json:"snapshot_id,omitempty"`
	Detail             string `json:"detail"`

	// BeforeEventsPerSecond is the median throughput (events read per
	// second) in the window before the change.
	BeforeEventsPerSecond float64 `json:"before_events_per_second"`
	// DipMinPercent is the lowest sample after the change (over the half
	// spacing that follows its start) as a percentage of
	// BeforeEventsPerSecond; BaselineMinPercent is the same over the
	// window before the change, for the stalls the job has without one.
	DipMinPercent      float64 `json:"dip_min_percent"`
	BaselineMinPercent float64 `json:"baseline_min_percent"`
	// BacklogMillis is the largest shortfall of the events read after the
	// change against BeforeEventsPerSecond, summed from the change's
	// start, in milliseconds of that throughput: how long a full stall
	// would have lost as many events (a catch-up above the rate pays the
	// shortfall back). BaselineBacklogMillis is the same over the window
	// before the change, from its start.
	BacklogMillis         float64 `json:"backlog_ms"`
	BaselineBacklogMillis float64 `json:"baseline_backlog_ms"`
	// BacklogPeakMillis is when, from the change's start, the shortfall
	// peaked: the end of the last sample that added to it before it was
	// largest (0 without a shortfall).
	BacklogPeakMillis float64 `json:"backlog_peak_ms"`
	// DipMillis is the time from the change's start until the throughput
	// (over the half spacing after it), after its lowest sample, was back
	// within 10% of before (recoverSamples samples in a row at or
	// above 90%); 0 when it never left, -1 when it did not come back
	// before the next change or the end.
	DipMillis float64 `json:"dip_ms"`
	// Latency of the results (arrival less the result's timestamp), in
	// the windows before and around the change; 0 without results.
	LatencyBeforeP50Millis float64 `json:"latency_before_p50_ms"`
	LatencyBeforeP99Millis float64 `json:"latency_before_p99_ms"`
	LatencyAroundP50Millis float64 `json:"latency_around_p50_ms"`
	LatencyAroundP99Millis float64 `json:"latency_around_p99_ms"`
	// ResultsAfter counts the results that arrived after the change
	// ended, until the next change (or the end); ResultsAfterTagged those
	// of them tagged with the run's current gen (after an update: the new
	// pipeline's).
	ResultsAfter       int64 `json:"results_after"`
	ResultsAfterTagged int64 `json:"results_after_tagged"`
	// FirstResultAfterMillis is the time from the change's end to the
	// first result tagged with the run's current gen that arrived after
	// it (at any time until the run ended); -1 when none did.
	FirstResultAfterMillis float64 `json:"first_result_after_ms"`
}

// ChangeOutcome is the report of RunNexmarkChange (`weir bench nexmark
// --change --format json`).
type ChangeOutcome struct {
	Query string `json:"query"`
	// Language is the query's: "yaml" (a YAML pipeline) or "go" (the Go
	// SDK's, the job of a Go program).
	Language string `json:"language"`
	// MaxRate is the measured maximum rate (events per second) and
	// RateFraction the share of it the run asked for; set by the caller.
	MaxRate      float64 `json:"max_events_per_second,omitempty"`
	RateFraction float64 `json:"rate_fraction,omitempty"`
	// MaxRateFrom says where MaxRate comes from.
	MaxRateFrom string `json:"max_rate_from,omitempty"`
	// Rate is the source's rate, events per second.
	Rate                float64 `json:"rate"`
	Workers             int     `json:"workers"`
	SampleMillis        int64   `json:"sample_ms"`
	WindowSizeSeconds   float64 `json:"window_size_s"`
	WindowPeriodSeconds float64 `json:"window_period_s"`
	DurationSeconds     float64 `json:"duration_s"`
	// EventsPerSecond is the median of the samples.
	EventsPerSecond float64 `json:"events_per_second"`
	// SustainedEventsPerSecond is the events read over the samples of the
	// run's second half, per second: what the job kept up. A job that
	// reads in bursts (its sinks' buffers full, it waits for a
	// checkpoint) has a median above it.
	SustainedEventsPerSecond float64 `json:"sustained_events_per_second"`
	Results                  int64   `json:"results"`
	// SinkWaitShare is the share of its time the job's last execution
	// (the one live at the end) held its sources back because its sinks
	// held more than they may between two checkpoints, summed over its
	// workers (the job's sink_wait_seconds over the execution's age): near
	// 1, the job read as fast as its sink committed, and no faster.
	SinkWaitShare float64 `json:"sink_wait_share"`
	// LatencyP50Millis and LatencyP99Millis are over the whole run.
	LatencyP50Millis float64            `json:"latency_p50_ms"`
	LatencyP99Millis float64            `json:"latency_p99_ms"`
	Changes          []ChangeResult     `json:"changes"`
	Samples          []ThroughputSample `json:"samples"`
}

// report fills out from the samples and results of a run that lasted end;
// r.mu is held.
func (r *changeRun) report(out *ChangeOutcome, end time.Duration) {
	out.DurationSeconds = end.Seconds()
	out.Samples = r.samples
	out.Results = r.outputs
	rates := make([]float64, len(r.samples))
	for i, s := range r.samples {
		rates[i] = s.EventsPerSecond
	}
	out.EventsPerSecond = Percentile(rates, 50)
	out.SustainedEventsPerSecond = sustained(r.samples)
	out.LatencyP50Millis, out.LatencyP99Millis = r.latencies(0, end)
	span := r.cfg.Duration / time.Duration(2*(len(out.Changes)+1))
	gen := 1
	for i := range out.Changes {
		c := &out.Changes[i]
		at := secondsDuration(c.AtSeconds)
		done := at + time.Duration(c.TookMillis*float64(time.Millisecond))
		next := end
		if i+1 < len(out.Changes) {
			next = secondsDuration(out.Changes[i+1].AtSeconds)
		}
		if c.Kind == ChangeUpdate {
			gen++
		}
		c.BeforeEventsPerSecond = Percentile(r.rates(at-span, at), 50)
		c.DipMinPercent, c.DipMillis = dip(r.samples, r.cfg.Sample, at, min(at+span, next), c.BeforeEventsPerSecond)
		c.BaselineMinPercent, _ = dip(r.samples, r.cfg.Sample, at-span, at, c.BeforeEventsPerSecond)
		var peak time.Duration
		c.BacklogMillis, peak = backlog(r.samples, at, min(at+span, next), c.BeforeEventsPerSecond)
		c.BacklogPeakMillis = float64(max(peak-at, 0).Microseconds()) / 1000
		c.BaselineBacklogMillis, _ = backlog(r.samples, at-span, at, c.BeforeEventsPerSecond)
		c.LatencyBeforeP50Millis, c.LatencyBeforeP99Millis = r.latencies(at-span, at)
		c.LatencyAroundP50Millis, c.LatencyAroundP99Millis = r.latencies(at, at+span)
		c.FirstResultAfterMillis = -1
		for _, res := range r.results {
			if res.at > done && res.gen == gen && c.FirstResultAfterMillis < 0 {
				c.FirstResultAfterMillis = float64((res.at - done).Microseconds()) / 1000
			}
			if res.at > done && res.at <= next {
				c.ResultsAfter++
				if res.gen == gen {
					c.ResultsAfterTagged++
				}
			}
		}
	}
}

// sustained returns the events read per second over the second half of
// samples (each sample's rate over the time since the one before).
func sustained(samples []ThroughputSample) float64 {
	if len(samples) < 2 {
		return 0
	}
	half := samples[len(samples)/2-1:]
	var events float64
	for i := 1; i < len(half); i++ {
		events += half[i].EventsPerSecond * (half[i].AtSeconds - half[i-1].AtSeconds)
	}
	secs := half[len(half)-1].AtSeconds - half[0].AtSeconds
	if secs <= 0 {
		return 0
	}
	return events / secs
}

// rates returns the throughput of the samples that end in (from, to].
func (r *changeRun) rates(from, to time.Duration) []float64 {
	var xs []float64
	for _, s := range r.samples {
		if at := secondsDuration(s.AtSeconds); at > from && at <= to {
			xs = append(xs, s.EventsPerSecond)
		}
	}
	return xs
}

// latencies returns the p50 and p99 latency, in milliseconds, of the
// results that arrived in (from, to].
func (r *changeRun) latencies(from, to time.Duration) (p50, p99 float64) {
	var xs []float64
	for _, res := range r.results {
		if res.at > from && res.at <= to {
			xs = append(xs, float64(res.latency.Microseconds())/1000)
		}
	}
	return Percentile(xs, 50), Percentile(xs, 99)
}

// dip measures the throughput samples whose interval ends after at and
// no later than next against before: the lowest as a percentage of it,
// and the time from at until, after the lowest sample, the first of
// recoverSamples samples in a row (fewer at the end) at or above
// recoverFraction of it begins (0 when no sample fell below, -1 when they
// did not come back).
func dip(samples []ThroughputSample, every time.Duration, at, next time.Duration, before float64) (minPercent, millis float64) {
	if before <= 0 {
		return 0, 0
	}
	var win []ThroughputSample
	for _, s := range samples {
		if end := secondsDuration(s.AtSeconds); end > at && end <= next {
			win = append(win, s)
		}
	}
	if len(win) == 0 {
		return 0, -1
	}
	lowest := slices.MinFunc(win, func(a, b ThroughputSample) int {
		switch {
		case a.EventsPerSecond < b.EventsPerSecond:
			return -1
		case a.EventsPerSecond > b.EventsPerSecond:
			return 1
		}
		return 0
	})
	minPercent = 100 * lowest.EventsPerSecond / before
	bad := func(s ThroughputSample) bool { return s.EventsPerSecond < recoverFraction*before }
	if !bad(lowest) {
		return minPercent, 0
	}
	for k := slices.Index(win, lowest) + 1; k < len(win); k++ {
		if !slices.ContainsFunc(win[k:min(k+recoverSamples, len(win))], bad) {
			begin := secondsDuration(win[k].AtSeconds) - every
			return minPercent, float64(max(begin-at, 0).Microseconds()) / 1000
		}
	}
	return minPercent, -1
}

// backlog returns the largest shortfall, in milliseconds of rate, of the
// events read by the samples that end in (from, to] against rate, summed
// from from, and the end of the sample that brought it there (from
// without a shortfall).
func backlog(samples []ThroughputSample, from, to time.Duration, rate float64) (float64, time.Duration) {
	if rate <= 0 {
		return 0, from
	}
	short, worst, peak := 0.0, 0.0, from
	prev := from
	for _, s := range samples {
		end := secondsDuration(s.AtSeconds)
		if end <= from || end > to {
			if end <= from {
				prev = end
			}
			continue
		}
		short += (rate - s.EventsPerSecond) * (end - prev).Seconds()
		if short > worst {
			worst, peak = short, end
		}
		prev = end
	}
	return 1000 * worst / rate, peak
}
