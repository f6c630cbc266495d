package core

import (
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"
)

func TestRing(t *testing.T) {
	type put struct {
		b int64
		v float64
	}
	for _, tc := range []struct {
		name     string
		n        int
		puts     []put
		from, to int64
		want     [][2]float64
	}{
		{"empty", 4, nil, 0, 100, [][2]float64{}},
		{"last value of a bucket wins", 4, []put{{10, 1}, {10, 2}, {11, 3}}, 0, 100, [][2]float64{{10000, 2}, {11000, 3}}},
		{"skipped buckets are empty", 4, []put{{10, 1}, {12, 3}}, 0, 100, [][2]float64{{10000, 1}, {12000, 3}}},
		{"the ring keeps its last n buckets", 4, []put{{10, 1}, {11, 2}, {12, 3}, {13, 4}, {14, 5}}, 0, 100, [][2]float64{{11000, 2}, {12000, 3}, {13000, 4}, {14000, 5}}},
		{"a jump past the ring clears it", 4, []put{{10, 1}, {11, 2}, {30, 9}}, 0, 100, [][2]float64{{30000, 9}}},
		{"too old a bucket is ignored", 4, []put{{20, 1}, {10, 7}}, 0, 100, [][2]float64{{20000, 1}}},
		{"a late bucket within the ring lands", 4, []put{{20, 1}, {18, 7}}, 0, 100, [][2]float64{{18000, 7}, {20000, 1}}},
		{"from and to bound the points", 4, []put{{10, 1}, {11, 2}, {12, 3}}, 11, 11, [][2]float64{{11000, 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRing(time.Second, tc.n)
			for _, p := range tc.puts {
				r.put(p.b, p.v)
			}
			if got := r.points(tc.from, tc.to); !slices.Equal(got, tc.want) {
				t.Errorf("points %v, want %v", got, tc.want)
			}
		})
	}
}

func TestHistorySeriesCap(t *testing.T) {
	h := newJobHistory()
	now := time.Unix(1_800_000_000, 0)
	for i := range MaxHistorySeries {
		if !h.add(now, "step", string(rune('a'+i%26))+string(rune('a'+i/26)), 1) {
			t.Fatalf("series %d refused below the cap", i)
		}
	}
	if h.add(now, "one", "too-many", 1) {
		t.Errorf("series %d accepted beyond the cap", MaxHistorySeries+1)
	}
	var bytes int
	for _, sr := range h.series {
		bytes += 8 * (len(sr.fine.vals) + len(sr.coarse.vals))
	}
	if bytes != MaxHistorySeries*HistorySeriesBytes || HistorySeriesBytes != 17_280 || HistoryBytesPerJob != 6_291_456 {
		t.Errorf("history values take %d bytes, cap %d (docs/METRICS.md: 17,280 bytes a series, 6 MiB a job)", bytes, HistoryBytesPerJob)
	}
}

func TestHistogram(t *testing.T) {
	h := newHistogram([]float64{1, 10})
	for _, v := range []float64{0.5, 1, 5, 50} {
		h.observe(v)
	}
	s := h.snapshot()
	if s.Count != 4 || s.Sum != 56.5 || s.Buckets[1] != 2 || s.Buckets[10] != 3 {
		t.Errorf("snapshot %+v", s)
	}
}

// TestHistoryMemoryWithinCap fills the history of a pipeline at the series
// cap (50 steps with 6 series each, the job's 8, and 12 more) with 24 hours
// (1 min samples, then 5 s samples for the last hour) and checks that its
// heap stays within HistoryBytesPerJob, and that the job-wide series of
// the day fit the console's 1 MB payload.
func TestHistoryMemoryWithinCap(t *testing.T) {
	stepMetrics := []string{HistElementsIn, HistElementsOut, HistThroughput, HistSystemLag, HistWatermarkAge, HistBacklogElements}
	jobMetrics := []string{HistSystemLag, HistElementsPerSecond, HistSourceElementsIn, HistDeadLetters, HistWatermarkAge, HistBacklogElements, HistCheckpointDuration, HistCheckpointSizeBytes}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	h := newJobHistory()
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	steps := make([]string, 50)
	for i := range steps {
		steps[i] = fmt.Sprintf("Step%02d/Transform", i)
	}
	var times []time.Time
	for k := range 23 * 60 {
		times = append(times, start.Add(time.Duration(k)*time.Minute))
	}
	for k := range 720 {
		times = append(times, start.Add(23*time.Hour+time.Duration(k)*HistoryFineResolution))
	}
	for k, now := range times {
		v := float64(k) * 1234.5
		for _, st := range steps {
			for _, m := range stepMetrics {
				h.add(now, st, m, v)
			}
		}
		for _, m := range jobMetrics {
			h.add(now, "", m, v)
		}
		for i := range MaxHistorySeries - len(steps)*len(stepMetrics) - len(jobMetrics) {
			h.add(now, "Extra", fmt.Sprint("metric", i), v)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	used := int64(ms.HeapAlloc) - int64(before)
	runtime.KeepAlive(h)
	if len(h.series) != MaxHistorySeries {
		t.Fatalf("%d series", len(h.series))
	}
	t.Logf("history of 50 steps, 24 h: %d series, %d bytes of heap (cap %d)", len(h.series), used, HistoryBytesPerJob)
	if used > HistoryBytesPerJob {
		t.Errorf("the history takes %d bytes of heap, over its documented cap of %d", used, HistoryBytesPerJob)
	}
	// The answer for the job's own series over the day, as the API sends it.
	out := History{Series: []HistorySeries{}}
	all := History{Series: []HistorySeries{}}
	end := start.Add(24 * time.Hour)
	from, to := start.UnixMilli()/60000, end.UnixMilli()/60000
	for k, sr := range h.series {
		s := HistorySeries{Step: k.step, Metric: k.metric, Points: sr.coarse.points(from, to)}
		all.Series = append(all.Series, s)
		if k.step == "Extra" {
			continue
		}
		if k.step == "" {
			out.Series = append(out.Series, s)
		}
	}
	jb, _ := json.Marshal(out)
	ab, _ := json.Marshal(all)
	t.Logf("24 h at 1 min: the job's 7 series %d bytes, all %d series %d bytes", len(jb), len(all.Series), len(ab))
	if len(jb) > 1<<20 {
		t.Errorf("the job's own series of a day take %d bytes, over 1 MB", len(jb))
	}
}
