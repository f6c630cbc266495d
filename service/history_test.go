package service

import (
	"context"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/errcode"

	"github.com/weir-dev/weir/mtime"
)

// historyPoints returns the points of series (step, metric) of job id.
func historyPoints(t *testing.T, s *Service, id, step, metric string, res time.Duration) [][2]float64 {
	t.Helper()
	h, err := s.MetricsHistory(id, HistoryQuery{Step: step, Metric: metric, Resolution: res, From: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Series) == 0 {
		return nil
	}
	return h.Series[0].Points
}

// TestMetricsHistoryTiers drives a streaming job under a manual clock: each
// 5 s of the clock is a fine point, each minute a coarse one; the coarse
// tier survives a restart, the fine one starts again; counters never drop.
func TestMetricsHistoryTiers(t *testing.T) {
	t.Parallel()
	dir, base := t.TempDir(), t.TempDir()
	clock := mtime.NewManualClock(mtime.FromTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)))
	open := func() *Service {
		s, err := Open(context.Background(), Options{DataDir: dir, CheckpointInterval: 20 * time.Millisecond, Clock: clock,
			Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close(context.Background()) })
		<-s.Recovered()
		return s
	}
	s := open()
	j := submit(t, s, "hist", statelessYAML, base)
	// waitPoints waits until the fine tier has n points of Events' counter.
	waitPoints := func(s *Service, res time.Duration, n int) [][2]float64 {
		t.Helper()
		deadline := time.NewTimer(20 * time.Second)
		defer deadline.Stop()
		for {
			changed := s.core.Changes.Next()
			if pts := historyPoints(t, s, j.ID, "Events", HistElementsIn, res); len(pts) >= n {
				return pts
			}
			select {
			case <-changed:
			case <-deadline.C:
				t.Fatalf("the %s tier did not reach %d points: %v", res, n, historyPoints(t, s, j.ID, "Events", HistElementsIn, res))
			}
		}
	}
	waitPoints(s, HistoryFineResolution, 1)
	for i := 2; i <= 13; i++ { // one minute and 5 s
		clock.Advance(mtime.Duration(HistoryFineResolution.Milliseconds()))
		waitPoints(s, HistoryFineResolution, i)
	}
	fine := waitPoints(s, HistoryFineResolution, 13)
	for i := 1; i < len(fine); i++ {
		if fine[i][0]-fine[i-1][0] != 5000 || fine[i][1] < fine[i-1][1] {
			t.Fatalf("fine points not 5 s apart or a counter dropped: %v", fine)
		}
	}
	coarse := waitPoints(s, HistoryCoarseResolution, 2)
	if coarse[1][0]-coarse[0][0] != 60000 {
		t.Errorf("coarse points %v, want one a minute", coarse)
	}
	// The job-wide series are there too.
	for _, m := range []string{HistElementsPerSecond, HistSourceElementsIn} {
		if pts := historyPoints(t, s, j.ID, "-", m, HistoryFineResolution); len(pts) == 0 {
			t.Errorf("no job-wide %s series", m)
		}
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	s = open()
	if got := historyPoints(t, s, j.ID, "Events", HistElementsIn, HistoryCoarseResolution); len(got) < 2 || got[0] != coarse[0] || got[1][1] < coarse[1][1] {
		t.Errorf("coarse tier after the restart %v, before %v", got, coarse)
	}
	clock.Advance(mtime.Duration(HistoryFineResolution.Milliseconds()))
	after := waitPoints(s, HistoryFineResolution, 1)
	if len(after) != 1 || after[0][0] <= fine[len(fine)-1][0] || after[0][1] < fine[len(fine)-1][1] {
		t.Errorf("fine tier after the restart %v (before: last %v): it starts again, and its counter does not drop", after, fine[len(fine)-1])
	}

	for _, q := range []HistoryQuery{{Resolution: 10 * time.Second}, {From: time.Unix(100, 0), To: time.Unix(50, 0)}} {
		if _, err := s.MetricsHistory(j.ID, q); errcode.Of(err) != errcode.InvalidRequest {
			t.Errorf("query %+v: %v, want INVALID_REQUEST", q, err)
		}
	}
	// A step the job does not have is named, not answered as a step that
	// did nothing.
	if _, err := s.MetricsHistory(j.ID, HistoryQuery{Step: "Evnets"}); errcode.Of(err) != errcode.StepNotFound || !strings.Contains(err.Error(), "Events") {
		t.Errorf("history of a misspelt step: %v, want STEP_NOT_FOUND listing Events", err)
	}
	if _, err := s.Cancel(context.Background(), j.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, j.ID, record.StateCancelled)
	// The execution's let-go flushes the history and keeps it for the fine
	// tier's hour (the charts of the job's name go on across an update),
	// then lets it go.
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for {
		changed := s.core.Changes.Next()
		if s.core.HistoryEnded(j.ID) {
			break
		}
		if !s.core.HistoryInMemory(j.ID) {
			t.Fatal("a cancelled job's history left memory at once, before the fine tier's hour")
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatal("a cancelled job's history is never flushed as an ended job's")
		}
	}
	if got := historyPoints(t, s, j.ID, "Events", HistElementsIn, HistoryFineResolution); len(got) == 0 {
		t.Error("a cancelled job's fine tier is empty within its hour")
	}
	clock.Advance(mtime.Duration((HistoryFineResolution * HistoryFinePoints).Milliseconds() + 1000))
	if s.core.HistoryInMemory(j.ID) {
		t.Fatal("a job that ended over an hour ago keeps its history in memory")
	}
	if got := historyPoints(t, s, j.ID, "Events", HistElementsIn, HistoryCoarseResolution); len(got) < 2 || math.IsNaN(got[0][1]) {
		t.Errorf("a cancelled job's coarse tier: %v", got)
	}
}
