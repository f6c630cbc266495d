package core

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/runner/contract"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/state"
)

// Metrics history: a time series per job and step that charts and GET
// /v1/jobs/{id}/metrics:history read. Two tiers, each a ring of fixed
// buckets holding the last value sampled in the bucket:
//
//   - fine: HistoryFineResolution (5 s) buckets for the last
//     HistoryFinePoints (720, one hour), in memory only;
//   - coarse: HistoryCoarseResolution (1 min) buckets for the last
//     HistoryCoarsePoints (1440, 24 hours), in memory and in the registry
//     store (history/<job ID>/<minute>, one record per completed minute,
//     the oldest deleted as a new one lands), so it survives a restart.
//
// A job records at most MaxHistorySeries series; each holds
// HistorySeriesBytes of values, so a job's history stays within
// HistoryBytesPerJob of heap (TestHistoryMemoryWithinCap measures it). The history of a job lives
// in memory while it runs and, once it ends, for the fine tier's hour (the
// MaxEndedHistories that ended last): the charts of a job name go on across
// an update at the fine resolution. Later a terminal job's is read from the
// store (coarse tier).

// History bounds.
const (
	HistoryFineResolution   = 5 * time.Second
	HistoryFinePoints       = 720
	HistoryCoarseResolution = time.Minute
	HistoryCoarsePoints     = 1440
	// MaxHistorySeries bounds the series of one job: a 50-step pipeline
	// records 6 per step and 8 for the job (308).
	MaxHistorySeries = 320
	// HistorySeriesBytes is the size of one series' values (18,432 bytes
	// of heap once Go's allocator rounds the two rings up to its size
	// classes).
	HistorySeriesBytes = (HistoryFinePoints + HistoryCoarsePoints) * 8
	// HistoryBytesPerJob is the documented cap of a job's history in
	// memory: MaxHistorySeries series as allocated, their names and maps.
	HistoryBytesPerJob = 6 << 20
	// MaxEndedHistories bounds the ended jobs whose history stays in memory
	// for the fine tier's hour after their end.
	MaxEndedHistories = 8
	// endedHistoryTTL is how long an ended job's history stays in memory:
	// the fine tier's hour.
	endedHistoryTTL = HistoryFineResolution * HistoryFinePoints
)

// History metric names (the "metric" of a series). Step series carry the
// step's name; job series have step "".
const (
	HistElementsIn        = "elements_in"
	HistElementsOut       = "elements_out"
	HistThroughput        = "throughput_per_second"
	HistSystemLag         = "system_lag_seconds"
	HistWatermarkAge      = "data_watermark_age_seconds"
	HistBacklogElements   = "backlog_elements"
	HistDeadLetters       = "dead_letters"
	HistElementsPerSecond = "elements_per_second"
	// HistSourceElementsIn is the job's source steps' elements_in summed: a
	// counter, whose rate over a window is the job's throughput (bursty
	// input reads 0/s in elements_per_second's one-interval samples).
	HistSourceElementsIn    = "source_elements_in"
	HistCheckpointDuration  = "checkpoint_duration_seconds"
	HistCheckpointSizeBytes = "checkpoint_size_bytes"
)

// ring is one tier of a series: len(vals) buckets of res, the newest
// bucket number last (a bucket is a count of res since the epoch); NaN
// marks an empty bucket.
type ring struct {
	res  time.Duration
	vals []float64
	last int64
}

func newRing(res time.Duration, n int) ring {
	r := ring{res: res, vals: make([]float64, n), last: math.MinInt64}
	for i := range r.vals {
		r.vals[i] = math.NaN()
	}
	return r
}

func (r *ring) bucket(t time.Time) int64 { return t.UnixMilli() / r.res.Milliseconds() }

func (r *ring) idx(b int64) int {
	n := int64(len(r.vals))
	return int(((b % n) + n) % n)
}

// put sets bucket b to v, clearing the buckets skipped since the newest.
func (r *ring) put(b int64, v float64) {
	n := int64(len(r.vals))
	switch {
	case r.last == math.MinInt64:
	case b > r.last:
		for k := r.last + 1; k < b && k <= r.last+n; k++ {
			r.vals[r.idx(k)] = math.NaN()
		}
	case b <= r.last-n:
		return // older than the ring holds
	}
	if b > r.last || r.last == math.MinInt64 {
		r.last = b
	}
	r.vals[r.idx(b)] = v
}

// points returns the non-empty buckets in [from, to] as [unix_ms, value].
func (r *ring) points(from, to int64) [][2]float64 {
	pts := [][2]float64{}
	if r.last == math.MinInt64 {
		return pts
	}
	lo := max(from, r.last-int64(len(r.vals))+1)
	hi := min(to, r.last)
	for b := lo; b <= hi; b++ {
		if v := r.vals[r.idx(b)]; !math.IsNaN(v) {
			pts = append(pts, [2]float64{float64(b * r.res.Milliseconds()), v})
		}
	}
	return pts
}

type seriesKey struct{ step, metric string }

type series struct {
	fine, coarse ring
}

// jobHistory is the in-memory history of one job, kept across its
// executions (restarts of the service read the coarse tier back).
type jobHistory struct {
	mu     sync.Mutex // a leaf
	series map[seriesKey]*series
	// coarseBucket is the coarse bucket being filled (written to the store
	// when a sample lands in a later one).
	coarseBucket int64
	overflow     bool // a series was refused by MaxHistorySeries (logged once)
	// ended is when the job ended (zero while it may run): its history is
	// dropped from memory an hour later (sweepEndedHistories).
	ended  time.Time
	cpDur  histogram
	cpSize histogram
}

func newJobHistory() *jobHistory {
	return &jobHistory{series: map[seriesKey]*series{}, coarseBucket: math.MinInt64,
		cpDur: newHistogram(CheckpointDurationBuckets), cpSize: newHistogram(CheckpointSizeBuckets)}
}

// add records v for (step, metric) at t; false when the job has
// MaxHistorySeries series already. h.mu is held.
func (h *jobHistory) add(t time.Time, step, metric string, v float64) bool {
	k := seriesKey{step, metric}
	sr := h.series[k]
	if sr == nil {
		if len(h.series) >= MaxHistorySeries {
			return false
		}
		sr = &series{fine: newRing(HistoryFineResolution, HistoryFinePoints), coarse: newRing(HistoryCoarseResolution, HistoryCoarsePoints)}
		h.series[k] = sr
	}
	sr.fine.put(sr.fine.bucket(t), v)
	sr.coarse.put(sr.coarse.bucket(t), v)
	return true
}

// coarseRecord is the stored form of one coarse bucket of a job: every
// series' value in that minute.
type coarseRecord struct {
	Values []coarseValue `json:"values"`
}

type coarseValue struct {
	Step   string  `json:"step,omitempty"`
	Metric string  `json:"metric"`
	Value  float64 `json:"value"`
}

func historyPrefix(jobID string) string { return "history/" + jobID + "/" }

func historyKey(jobID string, bucket int64) string {
	return fmt.Sprintf("%s%020d", historyPrefix(jobID), bucket)
}

// coarseWrite adds bucket b of h's coarse tier to w (with the deletion of
// the bucket that falls out of the tier). h.mu is held.
func (h *jobHistory) coarseWrite(w *state.Write, jobID string, b int64) {
	rec := coarseRecord{Values: []coarseValue{}}
	for k, sr := range h.series {
		if sr.coarse.last < b || b <= sr.coarse.last-int64(len(sr.coarse.vals)) {
			continue
		}
		if v := sr.coarse.vals[sr.coarse.idx(b)]; !math.IsNaN(v) {
			rec.Values = append(rec.Values, coarseValue{Step: k.step, Metric: k.metric, Value: v})
		}
	}
	if len(rec.Values) == 0 {
		return
	}
	sort.Slice(rec.Values, func(i, j int) bool {
		a, c := rec.Values[i], rec.Values[j]
		return a.Step < c.Step || a.Step == c.Step && a.Metric < c.Metric
	})
	bs, err := json.Marshal(rec)
	if err != nil {
		return
	}
	w.Put(historyKey(jobID, b), bs)
	w.Delete(historyKey(jobID, b-HistoryCoarsePoints))
}

// loadCoarse reads job id's stored coarse tier into h (a new history).
func (s *Core) loadCoarse(id string, h *jobHistory) {
	_ = s.Store.Scan(historyPrefix(id), func(k string, v []byte) error {
		b, err := strconv.ParseInt(strings.TrimPrefix(k, historyPrefix(id)), 10, 64)
		if err != nil {
			return nil
		}
		var rec coarseRecord
		if json.Unmarshal(v, &rec) != nil {
			return nil
		}
		for _, cv := range rec.Values {
			key := seriesKey{cv.Step, cv.Metric}
			sr := h.series[key]
			if sr == nil {
				if len(h.series) >= MaxHistorySeries {
					continue
				}
				sr = &series{fine: newRing(HistoryFineResolution, HistoryFinePoints), coarse: newRing(HistoryCoarseResolution, HistoryCoarsePoints)}
				h.series[key] = sr
			}
			sr.coarse.put(b, cv.Value)
		}
		return nil
	})
}

// history returns job id's in-memory history, creating it (with its
// stored coarse tier) when create is set; nil otherwise.
func (s *Core) history(id string, create bool) *jobHistory {
	if v, ok := s.histories.Load(id); ok {
		h := v.(*jobHistory)
		h.mu.Lock() // a leaf
		ended := h.ended
		h.mu.Unlock()
		if ended.IsZero() || s.Now().Sub(ended) <= endedHistoryTTL {
			return h
		}
		s.histories.Delete(id) // its hour is over: read from the store
		if !create {
			return nil
		}
	}
	if !create {
		return nil
	}
	h := newJobHistory()
	s.loadCoarse(id, h)
	v, _ := s.histories.LoadOrStore(id, h)
	return v.(*jobHistory)
}

// recordHistory samples jr's metrics at now into its job's history, and
// stores the coarse bucket that now completed, if one did.
func (s *Core) recordHistory(jr *Run, now time.Time) {
	m := jr.MetricsAt(now)
	h := s.history(jr.ID, true)
	h.mu.Lock() // a leaf
	ok := true
	add := func(step, metric string, v float64) { ok = h.add(now, step, metric, v) && ok }
	var eps, sourceIn float64
	for _, st := range m.Steps {
		add(st.Name, HistElementsIn, float64(st.ElementsIn))
		add(st.Name, HistElementsOut, float64(st.ElementsOut))
		add(st.Name, HistThroughput, st.ThroughputPerSecond)
		add(st.Name, HistSystemLag, st.SystemLagSeconds)
		if st.DataWatermarkAgeSeconds != nil {
			add(st.Name, HistWatermarkAge, *st.DataWatermarkAgeSeconds)
		}
		if st.BacklogElements != nil {
			add(st.Name, HistBacklogElements, float64(*st.BacklogElements))
		}
		if g := jr.Prog.Graph.Step(st.Name); g != nil && g.Kind == graph.KindSource {
			eps += st.ThroughputPerSecond
			sourceIn += float64(st.ElementsIn)
		}
	}
	add("", HistSystemLag, m.SystemLagSeconds)
	add("", HistElementsPerSecond, eps)
	add("", HistSourceElementsIn, sourceIn)
	add("", HistDeadLetters, float64(m.DeadLetters))
	if m.DataWatermarkAgeSeconds != nil {
		add("", HistWatermarkAge, *m.DataWatermarkAgeSeconds)
	}
	if m.BacklogElements != nil {
		add("", HistBacklogElements, float64(*m.BacklogElements))
	}
	if d, n, ok := jr.lastCheckpointStats(); ok {
		add("", HistCheckpointDuration, d.Seconds())
		add("", HistCheckpointSizeBytes, float64(n))
	}
	warn := !ok && !h.overflow
	if !ok {
		h.overflow = true
	}
	cb := now.UnixMilli() / HistoryCoarseResolution.Milliseconds()
	var w *state.Write
	if h.coarseBucket != math.MinInt64 && cb > h.coarseBucket {
		w = &state.Write{}
		h.coarseWrite(w, jr.ID, h.coarseBucket)
	}
	h.coarseBucket = cb
	h.mu.Unlock()
	if warn {
		s.Opts.Logger.Warn("metrics history: the job has more series than the cap; the extra series are not recorded",
			"job_id", jr.ID, "job_name", jr.Name, "max_series", MaxHistorySeries)
	}
	if w != nil {
		s.writeHistory(jr.ID, w)
	}
}

// writeHistory writes a coarse bucket in a Tx of its own; a failure is
// logged (the history is an aid, not a record the job depends on).
func (s *Core) writeHistory(id string, w *state.Write) {
	if s.StoreFailed() != nil {
		return
	}
	if err := s.Apply(w); err != nil {
		s.Opts.Logger.Warn("writing the metrics history", "job_id", id, "error", err)
	}
}

// flushHistory stores job id's coarse bucket being filled (the execution
// stops) and, when the job is terminal, lets its in-memory history go:
// reads then come from the stored coarse tier.
func (s *Core) flushHistory(id string, terminal bool) {
	h := s.history(id, false)
	if h == nil {
		return
	}
	h.mu.Lock() // a leaf
	w := &state.Write{}
	if h.coarseBucket != math.MinInt64 {
		h.coarseWrite(w, id, h.coarseBucket)
	}
	if terminal {
		h.ended = s.Now()
	}
	h.mu.Unlock()
	s.writeHistory(id, w)
	if terminal {
		s.sweepEndedHistories(s.Now())
	}
}

// sweepEndedHistories lets the in-memory histories of ended jobs go: those
// that ended more than the fine tier's hour before now, and all but the
// MaxEndedHistories that ended last. It takes the histories' leaves, one
// at a time.
func (s *Core) sweepEndedHistories(now time.Time) {
	type ended struct {
		id string
		at time.Time
	}
	var all []ended
	s.histories.Range(func(k, v any) bool {
		h := v.(*jobHistory)
		h.mu.Lock() // a leaf
		at := h.ended
		h.mu.Unlock()
		if !at.IsZero() {
			all = append(all, ended{k.(string), at})
		}
		return true
	})
	sort.Slice(all, func(a, b int) bool { return all[a].at.After(all[b].at) })
	for i, e := range all {
		if i >= MaxEndedHistories || now.Sub(e.at) > endedHistoryTTL {
			s.histories.Delete(e.id)
		}
	}
}

// HistoryQuery selects a part of a job's metrics history.
type HistoryQuery struct {
	// From and To bound the points (inclusive); zero To means now, zero
	// From means To minus one hour.
	From, To time.Time
	// Step keeps the series of one step ("" keeps all; "-" the job's own).
	Step string
	// Metric keeps one metric ("" keeps all).
	Metric string
	// Resolution is HistoryFineResolution or HistoryCoarseResolution; zero
	// chooses: fine when From is within the fine tier's hour, else coarse.
	Resolution time.Duration
}

// HistorySeries is one series of a job's history.
type HistorySeries struct {
	// Step is the step's name; "" for the job's own series.
	Step   string `json:"step"`
	Metric string `json:"metric"`
	// Points are [unix_ms, value] pairs, oldest first: the last value
	// sampled in each bucket of the resolution, empty buckets left out.
	Points [][2]float64 `json:"points"`
}

// History is the answer of MetricsHistory.
type History struct {
	JobID      string          `json:"job_id"`
	Resolution string          `json:"resolution"`
	From       time.Time       `json:"from"`
	To         time.Time       `json:"to"`
	Series     []HistorySeries `json:"series"`
}

// MetricsHistory returns the metrics history of job ref selected by q. It
// takes no lock but the history's leaf.
func (s *Core) MetricsHistory(ref string, q HistoryQuery) (*History, error) {
	j, err := s.Resolve(ref)
	if err != nil {
		return nil, err
	}
	now := s.Now()
	if q.To.IsZero() {
		q.To = now
	}
	if q.From.IsZero() {
		q.From = q.To.Add(-time.Hour)
	}
	if q.From.After(q.To) {
		return nil, errcode.Errorf(errcode.InvalidRequest, "from (%s) is after to (%s)", q.From.UTC().Format(time.RFC3339), q.To.UTC().Format(time.RFC3339))
	}
	switch q.Resolution {
	case 0:
		q.Resolution = HistoryCoarseResolution
		if !q.From.Before(now.Add(-HistoryFineResolution * HistoryFinePoints)) {
			q.Resolution = HistoryFineResolution
		}
	case HistoryFineResolution, HistoryCoarseResolution:
	default:
		return nil, errcode.Errorf(errcode.InvalidRequest, "resolution %s is not kept: use 5s (the last hour) or 1m (the last 24 hours)", q.Resolution)
	}
	if q.Step != "" && q.Step != "-" {
		if err := hasStep(j, q.Step); err != nil {
			return nil, err
		}
	}
	h := s.history(j.ID, false)
	if h == nil {
		h = newJobHistory()
		s.loadCoarse(j.ID, h)
	}
	out := &History{JobID: j.ID, Resolution: q.Resolution.String(), From: q.From, To: q.To, Series: []HistorySeries{}}
	from, to := q.From.UnixMilli()/q.Resolution.Milliseconds(), q.To.UnixMilli()/q.Resolution.Milliseconds()
	h.mu.Lock() // a leaf
	for k, sr := range h.series {
		switch {
		case q.Step == "-" && k.step != "", q.Step != "" && q.Step != "-" && k.step != q.Step:
			continue
		case q.Metric != "" && k.metric != q.Metric:
			continue
		}
		r := &sr.coarse
		if q.Resolution == HistoryFineResolution {
			r = &sr.fine
		}
		out.Series = append(out.Series, HistorySeries{Step: k.step, Metric: k.metric, Points: r.points(from, to)})
	}
	h.mu.Unlock()
	sort.Slice(out.Series, func(a, b int) bool {
		x, y := out.Series[a], out.Series[b]
		return x.Step < y.Step || x.Step == y.Step && x.Metric < y.Metric
	})
	return out, nil
}

// hasStep says whether job j's pipeline has a step named name: a history
// asked of a step it does not have is STEP_NOT_FOUND, not an empty answer
// (a misspelt name would look like a step that did nothing).
func hasStep(j *record.Job, name string) error {
	g, err := graph.Parse(j.Graph)
	if err != nil {
		return nil // an unreadable graph decides nothing: the history answers what it has
	}
	names := make([]string, 0, len(g.Steps))
	for _, st := range g.Steps {
		if st.Name == name {
			return nil
		}
		names = append(names, st.Name)
	}
	sort.Strings(names)
	return errcode.Errorf(errcode.StepNotFound, "job %s (%s) has no step %q: its steps are %s", j.ID, j.Name, name, strings.Join(names, ", "))
}

// ---- checkpoint histograms ----

// Bucket upper bounds of the checkpoint histograms.
var (
	CheckpointDurationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	CheckpointSizeBuckets     = []float64{1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30}
)

// histogram is a cumulative histogram (Prometheus's meaning).
type histogram struct {
	bounds []float64
	counts []uint64 // per bound, not cumulative; the last is +Inf
	count  uint64
	sum    float64
}

func newHistogram(bounds []float64) histogram {
	return histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i := sort.SearchFloat64s(h.bounds, v)
	h.counts[i]++
	h.count++
	h.sum += v
}

// HistogramSnapshot is a histogram as Prometheus exports it: Buckets maps
// each upper bound to the number of observations at or below it.
type HistogramSnapshot struct {
	Count   uint64
	Sum     float64
	Buckets map[float64]uint64
}

func (h *histogram) snapshot() HistogramSnapshot {
	out := HistogramSnapshot{Count: h.count, Sum: h.sum, Buckets: map[float64]uint64{}}
	var c uint64
	for i, b := range h.bounds {
		c += h.counts[i]
		out.Buckets[b] = c
	}
	return out
}

// CheckpointHistograms are a job's checkpoint duration (seconds) and size
// (bytes) histograms, since the service opened.
type CheckpointHistograms struct {
	Duration HistogramSnapshot
	Size     HistogramSnapshot
}

// CheckpointHistograms returns the checkpoint histograms of every running
// job, by job ID. It takes no lock but the histories' leaves.
func (s *Core) CheckpointHistograms() map[string]CheckpointHistograms {
	out := map[string]CheckpointHistograms{}
	s.running.Range(func(k, _ any) bool {
		id := k.(string)
		if h := s.history(id, false); h != nil {
			h.mu.Lock() // a leaf
			out[id] = CheckpointHistograms{Duration: h.cpDur.snapshot(), Size: h.cpSize.snapshot()}
			h.mu.Unlock()
		} else {
			out[id] = CheckpointHistograms{Duration: newHistogramSnapshot(CheckpointDurationBuckets), Size: newHistogramSnapshot(CheckpointSizeBuckets)}
		}
		return true
	})
	return out
}

func newHistogramSnapshot(bounds []float64) HistogramSnapshot {
	h := newHistogram(bounds)
	return h.snapshot()
}

// checkpointSize is the size of cp's encoded content: state entries, source
// positions and sink parts.
func checkpointSize(cp *contract.Checkpoint) int64 {
	var n int64
	for _, e := range cp.State {
		n += int64(len(e.Step) + 2 + len(e.Key) + len(e.Value))
	}
	for _, ps := range cp.Positions {
		for _, p := range ps {
			n += int64(len(p))
		}
	}
	for _, ps := range cp.SinkParts {
		for _, p := range ps {
			n += int64(len(p))
		}
	}
	return n
}

// observeCheckpoint records a durable checkpoint of jr that took d and
// held size bytes.
func (s *Core) observeCheckpoint(jr *Run, d time.Duration, size int64) {
	jr.cpStats.Store(&cpStat{d: d, size: size})
	h := s.history(jr.ID, true)
	h.mu.Lock() // a leaf
	h.cpDur.observe(d.Seconds())
	h.cpSize.observe(float64(size))
	h.mu.Unlock()
}

type cpStat struct {
	d    time.Duration
	size int64
}

// lastCheckpointStats returns the duration and size of jr's latest
// durable checkpoint.
func (jr *Run) lastCheckpointStats() (time.Duration, int64, bool) {
	st := jr.cpStats.Load()
	if st == nil {
		return 0, 0, false
	}
	return st.d, st.size, true
}

// ---- counters across executions ----

// totals returns the job's counters: those of earlier executions plus
// this one's live ones.
func (jr *Run) Totals() map[string]record.StepCounters {
	out := map[string]record.StepCounters{}
	for k, v := range jr.base {
		v.RejectsByReason = maps.Clone(v.RejectsByReason)
		out[k] = v
	}
	for _, st := range jr.X.Metrics().Steps {
		c := out[st.Name]
		c.ElementsIn += st.ElementsIn
		c.ElementsOut += st.ElementsOut
		c.Rejects += st.Rejects
		c.RejectsByReason = record.AddReasons(c.RejectsByReason, st.RejectsByReason)
		c.DroppedLateElements += st.DroppedLateElements
		out[st.Name] = c
	}
	return out
}

// withBase adds the counters of earlier executions to m's steps.
func (jr *Run) withBase(m *record.JobMetrics) *record.JobMetrics {
	if len(jr.base) == 0 {
		return m
	}
	for i := range m.Steps {
		b := jr.base[m.Steps[i].Name]
		m.Steps[i].ElementsIn += b.ElementsIn
		m.Steps[i].ElementsOut += b.ElementsOut
		m.Steps[i].Rejects += b.Rejects
		m.Steps[i].RejectsByReason = record.AddReasons(maps.Clone(m.Steps[i].RejectsByReason), b.RejectsByReason)
		m.Steps[i].DroppedLateElements += b.DroppedLateElements
	}
	return m
}

// HistoryInMemory reports whether job id's metrics history is held in
// memory (while it has a live execution; a terminal job's is read from
// the store's coarse tier).
func (s *Core) HistoryInMemory(id string) bool { return s.history(id, false) != nil }

// HistoryEnded reports whether job id's metrics history is held in memory
// as an ended job's: flushed, and kept for the fine tier's hour.
func (s *Core) HistoryEnded(id string) bool {
	h := s.history(id, false)
	if h == nil {
		return false
	}
	h.mu.Lock() // a leaf
	defer h.mu.Unlock()
	return !h.ended.IsZero()
}
