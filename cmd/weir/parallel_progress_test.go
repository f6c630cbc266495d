package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/client"
)

// TestParallelProgressLine: what weir run --wait prints of a parallel
// replacement's overlap.
func TestParallelProgressLine(t *testing.T) {
	wm := time.Date(2026, 3, 1, 0, 2, 0, 0, time.UTC)
	cut := time.Date(2026, 3, 1, 0, 3, 0, 0, time.UTC)
	overlap := func(p *client.FlowProgress) *client.Replacement {
		return &client.Replacement{Phase: client.PhaseOverlap, Parallel: &client.ParallelFlow{Progress: p}}
	}
	tests := []struct {
		name string
		r    *client.Replacement
		want string
	}{
		{"stop-and-replace", &client.Replacement{Phase: client.PhaseDrainingOld}, ""},
		{"preparing, waiting for the old job's next message", &client.Replacement{Phase: client.PhasePreparing, OldJobID: "j1",
			Parallel: &client.ParallelFlow{Progress: &client.FlowProgress{WaitingForOldMessage: true}}},
			"parallel: waiting for job j1's next message to fix the cut-over time (it has read none since it started, e.g. after a restart; the new job starts once a message arrives on its topic)"},
		{"preparing, not waiting", &client.Replacement{Phase: client.PhasePreparing, OldJobID: "j1",
			Parallel: &client.ParallelFlow{Progress: &client.FlowProgress{}}}, ""},
		{"not the overlap", &client.Replacement{Phase: client.PhaseDrainingOld, Parallel: &client.ParallelFlow{Progress: &client.FlowProgress{}}}, ""},
		{"before positioning", overlap(&client.FlowProgress{ElapsedMillis: 1500, MinParallelMillis: 600000}),
			"parallel: overlap 1s of at least 10m0s; the cut-over window is not known yet"},
		{"old watermark unknown", overlap(&client.FlowProgress{ElapsedMillis: 61000, MinParallelMillis: 0, CutOverWatermark: &cut}),
			"parallel: overlap 1m1s of at least 0s; old job's watermark unknown, the cut-over needs 2026-03-01T00:03:00Z"},
		{"both", overlap(&client.FlowProgress{ElapsedMillis: 2000, MinParallelMillis: 600000, OldWatermark: &wm, CutOverWatermark: &cut}),
			"parallel: overlap 2s of at least 10m0s; old job's watermark 2026-03-01T00:02:00Z, the cut-over needs 2026-03-01T00:03:00Z"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := parallelProgressLine(tc.r); got != tc.want {
				t.Fatalf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestDescribeReplacementWaiting: weir jobs describe's Replacement row
// says a PREPARING parallel flow waits for the old job's next message.
func TestDescribeReplacementWaiting(t *testing.T) {
	r := &client.Replacement{Strategy: client.StrategyParallel, Phase: client.PhasePreparing, OldJobID: "j1", NewJobID: "j2", Rewind: true,
		Parallel: &client.ParallelFlow{Progress: &client.FlowProgress{WaitingForOldMessage: true}}}
	if got := describeReplacement(r); !strings.Contains(got, "waiting for job j1's next message to fix the cut-over time") {
		t.Fatalf("got %q", got)
	}
	r.Parallel.Progress.WaitingForOldMessage = false
	if got := describeReplacement(r); strings.Contains(got, "waiting") {
		t.Fatalf("got %q", got)
	}
}

// TestProgressPrinterQuiet: `weir run --wait` over a ten-minute overlap
// polled every second prints a progress line only when what it says
// changes (the cut-over window known, the minimum overlap reached, the old
// job's watermark past the cut-over), not one a poll; on a terminal it
// rewrites one line in place.
func TestProgressPrinterQuiet(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	cut := t0.Add(500 * time.Second)
	polls := func(yield func(*client.Replacement)) {
		for i := 0; i < 600; i++ {
			wm := t0.Add(time.Duration(i) * time.Second)
			p := &client.FlowProgress{ElapsedMillis: int64(i) * 1000, MinParallelMillis: 300_000, OldWatermark: &wm}
			if i >= 10 {
				p.CutOverWatermark = &cut
			}
			yield(&client.Replacement{Phase: client.PhaseOverlap, Parallel: &client.ParallelFlow{Progress: p}})
		}
	}
	for _, tc := range []struct {
		tty                 bool
		maxLines, minWrites int
		last                string
	}{{false, 4, 4, "parallel: overlap 8m20s"}, {true, 1, 600, "parallel: overlap 9m59s"}} {
		var b strings.Builder
		pr := &progressPrinter{w: &b, tty: tc.tty}
		polls(pr.show)
		pr.end()
		out := b.String()
		if n := strings.Count(out, "\n"); n > tc.maxLines {
			t.Errorf("tty %v: %d lines for 600 polls, want at most %d:\n%s", tc.tty, n, tc.maxLines, out)
		}
		if n := strings.Count(out, "parallel: overlap"); n < tc.minWrites {
			t.Errorf("tty %v: the progress shown %d times, want at least %d", tc.tty, n, tc.minWrites)
		}
		if !strings.Contains(out, tc.last) {
			t.Errorf("tty %v: the last progress is not shown:\n%.300s", tc.tty, out)
		}
	}
}

// TestPassedPhases: phases a flow went through between two polls are told
// from its record, in order, each once, with how long it lasted.
func TestPassedPhases(t *testing.T) {
	at := func(ms int) *time.Time {
		v := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC).Add(time.Duration(ms) * time.Millisecond)
		return &v
	}
	stop := &client.Replacement{Phase: client.PhaseCutOver, PhaseTime: *at(8), DrainStart: at(0)}
	par := &client.Replacement{Phase: client.PhaseCutOver, PhaseTime: *at(9000), DrainStart: at(5000),
		Parallel: &client.ParallelFlow{OverlapStart: at(1000)}}
	for _, tc := range []struct {
		name    string
		r       *client.Replacement
		printed []client.ReplacementPhase
		want    []string
	}{
		{"a stop-and-replace whose drain took 8 ms", stop, nil, []string{"DRAINING_OLD at 12:00:00.000, for 8ms"}},
		{"the drain seen live", stop, []client.ReplacementPhase{client.PhaseDrainingOld}, nil},
		{"a parallel replacement seen only at its end", par, nil, []string{"OVERLAP at 12:00:01.000, for 4s", "DRAINING_OLD at 12:00:05.000, for 4s"}},
		{"its overlap seen live", par, []client.ReplacementPhase{client.PhaseOverlap}, []string{"DRAINING_OLD at 12:00:05.000, for 4s"}},
		{"now draining", &client.Replacement{Phase: client.PhaseDrainingOld, PhaseTime: *at(5000), DrainStart: at(5000),
			Parallel: &client.ParallelFlow{OverlapStart: at(1000)}}, nil, []string{"OVERLAP at 12:00:01.000, for 4s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			printed := map[client.ReplacementPhase]bool{}
			for _, p := range tc.printed {
				printed[p] = true
			}
			var got []string
			for _, p := range passedPhases(tc.r, printed) {
				got = append(got, p.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
