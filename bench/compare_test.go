package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// fakeRuns is a CompareRunner that records the order of its calls and
// returns, for (side, round), the events/s of each variant from a table.
type fakeRuns struct {
	// eps[side][round] maps variant → events/s.
	eps   [2][]map[string]float64
	calls []string
	// failAt fails the call with this index (-1: none).
	failAt int
}

func (f *fakeRuns) run(_ context.Context, side Side, round int) ([]Measurement, error) {
	f.calls = append(f.calls, fmt.Sprintf("%s%d", side, round))
	if len(f.calls)-1 == f.failAt {
		return nil, errors.New("child exited 1")
	}
	var ms []Measurement
	for _, name := range []string{"baseline", "sdk-w1"} {
		eps, ok := f.eps[side][round][name]
		if !ok {
			continue
		}
		// As many events as a thousand times events/s over a thousand CPU
		// seconds: events/CPU-s == events/s.
		ms = append(ms, Measurement{Name: name, EventsPerSec: eps, CPUSeconds: 1000, Outcome: Outcome{Events: int64(math.Round(eps * 1000))}})
	}
	SetRatios(ms)
	return ms, nil
}

func TestRunCompareAlternates(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rounds    int
		failAt    int
		wantCalls []string
		wantErr   string
	}{
		{name: "one round", rounds: 1, failAt: -1, wantCalls: []string{"this0", "base0"}},
		{name: "three rounds", rounds: 3, failAt: -1, wantCalls: []string{"this0", "base0", "this1", "base1", "this2", "base2"}},
		{name: "a failed base run stops the comparison", rounds: 3, failAt: 3,
			wantCalls: []string{"this0", "base0", "this1", "base1"}, wantErr: "round 2, base build: child exited 1"},
		{name: "no rounds", rounds: 0, failAt: -1, wantErr: "rounds must be at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeRuns{failAt: tc.failAt}
			for side := range f.eps {
				for range tc.rounds {
					f.eps[side] = append(f.eps[side], map[string]float64{"baseline": 10, "sdk-w1": 5})
				}
			}
			rounds, err := RunCompare(context.Background(), tc.rounds, f.run)
			if !slices.Equal(f.calls, tc.wantCalls) {
				t.Errorf("calls %v, want %v", f.calls, tc.wantCalls)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(rounds) != tc.rounds {
				t.Fatalf("%d rounds, want %d", len(rounds), tc.rounds)
			}
			for _, r := range rounds {
				if len(r.This) != 2 || len(r.Base) != 2 {
					t.Errorf("round %+v: want two measurements per side", r)
				}
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	type want struct {
		variant, figure           string
		this, base, ratio, lo, hi float64
		verdict                   Verdict
	}
	for _, tc := range []struct {
		name string
		// this and base: per round, events/s of baseline and sdk-w1.
		this, base [][2]float64
		want       []want
		wantErr    string
	}{
		{
			name: "faster in every round",
			this: [][2]float64{{10, 6}, {10, 6}, {10, 6.6}},
			base: [][2]float64{{10, 3}, {10, 2}, {10, 3}},
			want: []want{
				{"baseline", FigureEventsPerSec, 10, 10, 1, 1, 1, VerdictSame},
				{"baseline", FigureEventsPerCPUSec, 10, 10, 1, 1, 1, VerdictSame},
				{"sdk-w1", FigureEventsPerSec, 6, 3, 2.2, 2, 3, VerdictFaster},
				{"sdk-w1", FigureEventsPerCPUSec, 6, 3, 2.2, 2, 3, VerdictFaster},
				{"sdk-w1", FigureVsBaseline, 0.6, 0.3, 2.2, 2, 3, VerdictFaster},
			},
		},
		{
			name: "slower in every round",
			this: [][2]float64{{10, 4}, {20, 8}},
			base: [][2]float64{{10, 5}, {20, 10}},
			want: []want{
				{"baseline", FigureEventsPerSec, 15, 15, 1, 1, 1, VerdictSame},
				{"baseline", FigureEventsPerCPUSec, 15, 15, 1, 1, 1, VerdictSame},
				{"sdk-w1", FigureEventsPerSec, 6, 7.5, 0.8, 0.8, 0.8, VerdictSlower},
				{"sdk-w1", FigureEventsPerCPUSec, 6, 7.5, 0.8, 0.8, 0.8, VerdictSlower},
				{"sdk-w1", FigureVsBaseline, 0.4, 0.5, 0.8, 0.8, 0.8, VerdictSlower},
			},
		},
		{
			// A busy machine in round 2 slows this build's loop too: the
			// ratio to the loop stays put while events/s straddles 1.
			name: "same within spread",
			this: [][2]float64{{10, 5}, {5, 2.5}, {10, 5.5}},
			base: [][2]float64{{10, 5}, {10, 5}, {10, 5}},
			want: []want{
				{"baseline", FigureEventsPerSec, 10, 10, 1, 0.5, 1, VerdictSame},
				{"baseline", FigureEventsPerCPUSec, 10, 10, 1, 0.5, 1, VerdictSame},
				{"sdk-w1", FigureEventsPerSec, 5, 5, 1, 0.5, 1.1, VerdictSame},
				{"sdk-w1", FigureEventsPerCPUSec, 5, 5, 1, 0.5, 1.1, VerdictSame},
				{"sdk-w1", FigureVsBaseline, 0.5, 0.5, 1, 1, 1.1, VerdictSame},
			},
		},
		{
			name: "within the tolerance is the same",
			this: [][2]float64{{10, 5.05}},
			base: [][2]float64{{10, 5}},
			want: []want{
				{"baseline", FigureEventsPerSec, 10, 10, 1, 1, 1, VerdictSame},
				{"baseline", FigureEventsPerCPUSec, 10, 10, 1, 1, 1, VerdictSame},
				{"sdk-w1", FigureEventsPerSec, 5.05, 5, 1.01, 1.01, 1.01, VerdictSame},
				{"sdk-w1", FigureEventsPerCPUSec, 5.05, 5, 1.01, 1.01, 1.01, VerdictSame},
				{"sdk-w1", FigureVsBaseline, 0.505, 0.5, 1.01, 1.01, 1.01, VerdictSame},
			},
		},
		{
			name:    "a variant missing on one side",
			this:    [][2]float64{{10, 5}},
			base:    [][2]float64{{10, 0}},
			wantErr: "sdk-w1",
		},
		{
			name:    "no rounds",
			wantErr: "no rounds",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeRuns{failAt: -1}
			for side, rows := range [][][2]float64{tc.this, tc.base} {
				for _, row := range rows {
					m := map[string]float64{"baseline": row[0]}
					if row[1] > 0 {
						m["sdk-w1"] = row[1]
					}
					f.eps[side] = append(f.eps[side], m)
				}
			}
			var rounds []CompareRound
			if len(tc.this) > 0 {
				var err error
				if rounds, err = RunCompare(context.Background(), len(tc.this), f.run); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Summarize(rounds)
			var wantFigs []FigureComparison
			for _, w := range tc.want {
				wantFigs = append(wantFigs, FigureComparison{Variant: w.variant, Figure: w.figure, This: w.this, Base: w.base,
					Ratio: w.ratio, MinRatio: w.lo, MaxRatio: w.hi, Verdict: w.verdict})
			}
			checkFigures(t, got, err, wantFigs, tc.wantErr)
		})
	}
}

// TestSummarizeMixedCPU: against a build whose children do not report
// their workload's CPU time, events per CPU-second compare whole
// processes on both sides, not a workload against a whole process.
func TestSummarizeMixedCPU(t *testing.T) {
	this := Measurement{Name: "sdk-w1", EventsPerSec: 1e6, CPUSeconds: 1, ProcessCPUSeconds: 2, Outcome: Outcome{Events: 1e6}}
	base := Measurement{Name: "sdk-w1", EventsPerSec: 1e6, CPUSeconds: 2, Outcome: Outcome{Events: 1e6}}
	got, err := Summarize([]CompareRound{{This: []Measurement{this}, Base: []Measurement{base}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, fc := range got {
		if fc.Figure == FigureEventsPerCPUSec && fc.Ratio != 1 {
			t.Errorf("events/CPU-s ratio %g, want 1 (both whole processes)", fc.Ratio)
		}
	}
}

// A base build that runs each variant once has no warm figures: they are
// left out, and compared when both builds have them.
func TestSummarizeWarmFigures(t *testing.T) {
	warm := Measurement{Name: "sdk-w1", EventsPerSec: 1e6, CPUSeconds: 1, WarmEventsPerSec: 2e6, WarmCPUSeconds: 0.5, Outcome: Outcome{Events: 1e6}}
	once := Measurement{Name: "sdk-w1", EventsPerSec: 1e6, CPUSeconds: 1, Outcome: Outcome{Events: 1e6}}
	figures := func(base Measurement) map[string]float64 {
		t.Helper()
		got, err := Summarize([]CompareRound{{This: []Measurement{warm}, Base: []Measurement{base}}})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, fc := range got {
			out[fc.Figure] = fc.Ratio
		}
		return out
	}
	if got := figures(once); len(got) != 2 || got[FigureEventsPerSec] != 1 || got[FigureEventsPerCPUSec] != 1 {
		t.Errorf("against a base without warm runs: %v, want events/s and events/CPU-s only, ratio 1", got)
	}
	slower := warm
	slower.WarmEventsPerSec, slower.WarmCPUSeconds = 1e6, 1
	got := figures(slower)
	if got[FigureWarmEventsPerSec] != 2 || got[FigureWarmEventsPerCPUSec] != 2 {
		t.Errorf("warm figures against a warm base: %v, want ratio 2 for both", got)
	}
}

// TestSummarizeFigures compares figures of either direction: a lower
// heap per key is better, as a higher rate is.
func TestSummarizeFigures(t *testing.T) {
	round := func(thisRate, baseRate, thisHeap, baseHeap float64) FigureRound {
		return FigureRound{
			This: []Figure{{Variant: "yaml", Name: "keys/s", Value: thisRate}, {Variant: "yaml", Name: "B/key", Value: thisHeap, LowerIsBetter: true}},
			Base: []Figure{{Variant: "yaml", Name: "keys/s", Value: baseRate}, {Variant: "yaml", Name: "B/key", Value: baseHeap, LowerIsBetter: true}},
		}
	}
	// withNew adds to r a figure this build measures and the base, older,
	// does not.
	withNew := func(r FigureRound) FigureRound {
		r.This = append(r.This, Figure{Variant: "yaml", Name: "new ms", Value: 5, LowerIsBetter: true, Optional: true})
		return r
	}
	tests := []struct {
		name        string
		rounds      []FigureRound
		want        []FigureComparison
		wantSkipped []string
		wantErr     string
	}{
		{
			name:   "faster and smaller",
			rounds: []FigureRound{round(3, 2, 100, 200), round(2, 1, 100, 150), round(3, 2, 100, 200)},
			want: []FigureComparison{
				{Variant: "yaml", Figure: "keys/s", This: 3, Base: 2, Ratio: 1.5, MinRatio: 1.5, MaxRatio: 2, Verdict: VerdictFaster},
				{Variant: "yaml", Figure: "B/key", This: 100, Base: 200, Ratio: 2, MinRatio: 1.5, MaxRatio: 2, Verdict: VerdictFaster, LowerIsBetter: true},
			},
		},
		{
			name:   "larger is worse",
			rounds: []FigureRound{round(2, 2, 150, 100), round(2, 2, 120, 100)},
			want: []FigureComparison{
				{Variant: "yaml", Figure: "keys/s", This: 2, Base: 2, Ratio: 1, MinRatio: 1, MaxRatio: 1, Verdict: VerdictSame},
				{Variant: "yaml", Figure: "B/key", This: 135, Base: 100, Ratio: (1/1.5 + 1/1.2) / 2, MinRatio: 1 / 1.5, MaxRatio: 1 / 1.2, Verdict: VerdictSlower, LowerIsBetter: true},
			},
		},
		{
			name:    "a figure missing from the base",
			rounds:  []FigureRound{round(2, 0, 100, 100)},
			wantErr: "yaml keys/s was not measured by both builds",
		},
		{
			name:   "an optional figure the base does not measure",
			rounds: []FigureRound{withNew(round(2, 2, 100, 100)), withNew(round(2, 2, 100, 100))},
			want: []FigureComparison{
				{Variant: "yaml", Figure: "keys/s", This: 2, Base: 2, Ratio: 1, MinRatio: 1, MaxRatio: 1, Verdict: VerdictSame},
				{Variant: "yaml", Figure: "B/key", This: 100, Base: 100, Ratio: 1, MinRatio: 1, MaxRatio: 1, Verdict: VerdictSame, LowerIsBetter: true},
			},
			wantSkipped: []string{"yaml new ms"},
		},
		{name: "no rounds", wantErr: "no rounds"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, skipped, err := SummarizeFigures(tc.rounds)
			checkFigures(t, got, err, tc.want, tc.wantErr)
			if !slices.Equal(skipped, tc.wantSkipped) {
				t.Errorf("skipped %q, want %q", skipped, tc.wantSkipped)
			}
		})
	}
}

// near says a equals b but for float rounding.
func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// checkFigures checks a summary: the error wantErr names, or the figures
// of want, ratios and medians equal but for float rounding.
func checkFigures(t *testing.T, got []FigureComparison, err error, want []FigureComparison, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error %v, want one containing %q", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d figures, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Variant != w.Variant || g.Figure != w.Figure || g.Verdict != w.Verdict || g.LowerIsBetter != w.LowerIsBetter ||
			!near(g.This, w.This) || !near(g.Base, w.Base) || !near(g.Ratio, w.Ratio) || !near(g.MinRatio, w.MinRatio) || !near(g.MaxRatio, w.MaxRatio) {
			t.Errorf("figure %d: got %+v, want %+v", i, g, w)
		}
	}
}
