package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// This file compares two builds of weir on the same benchmark: the runs of
// the two binaries alternate (this, base, this, base, ...) so that a change
// in the machine's load during the comparison hits both about equally, and
// every figure is reported as the median of each side, the ratio of this
// build to the base and the spread of the per-round ratios.

// Side is one of the two builds of a comparison.
type Side int

// The two sides of a comparison.
const (
	// SideThis is the build under test (the running binary).
	SideThis Side = iota
	// SideBase is the build it is compared against.
	SideBase
)

// String returns "this" or "base".
func (s Side) String() string {
	if s == SideBase {
		return "base"
	}
	return "this"
}

// CompareRunner runs the whole benchmark once with the build of side (in
// round round, counted from 0) and returns its measurements, one per
// variant.
type CompareRunner func(ctx context.Context, side Side, round int) ([]Measurement, error)

// CompareTolerance is the margin a comparison's verdict allows around a
// ratio of 1: a figure is faster only when every round's ratio exceeds
// 1+CompareTolerance, slower only when every round's ratio is below
// 1−CompareTolerance, and the same otherwise.
const CompareTolerance = 0.02

// Verdict is what a comparison concludes about one figure.
type Verdict string

// Verdicts of a figure.
const (
	// VerdictFaster: every round's ratio is above 1+CompareTolerance.
	VerdictFaster Verdict = "faster"
	// VerdictSlower: every round's ratio is below 1−CompareTolerance.
	VerdictSlower Verdict = "slower"
	// VerdictSame: the spread of the ratios reaches 1 (within the tolerance).
	VerdictSame Verdict = "same"
)

// CompareRound is what both builds measured in one round.
type CompareRound struct {
	This []Measurement `json:"this"`
	Base []Measurement `json:"base"`
}

// FigureComparison is one figure of one variant compared between the two
// builds. Every figure is higher-is-better.
type FigureComparison struct {
	// Variant is the benchmark variant ("sdk-w1"); Figure names the
	// measure ("events/s", "events/CPU-s", "vs baseline", or the same of
	// the warm run: "warm events/s", ...).
	Variant string `json:"variant"`
	Figure  string `json:"figure"`
	// This and Base are the medians of each build over the rounds.
	This float64 `json:"this"`
	Base float64 `json:"base"`
	// Ratio is the median of the per-round ratios this/base; MinRatio and
	// MaxRatio are their spread.
	Ratio    float64 `json:"ratio"`
	MinRatio float64 `json:"min_ratio"`
	MaxRatio float64 `json:"max_ratio"`
	Verdict  Verdict `json:"verdict"`
}

// Comparison figures of a variant.
const (
	FigureEventsPerSec    = "events/s"
	FigureEventsPerCPUSec = "events/CPU-s"
	FigureVsBaseline      = "vs baseline"
	// The warm figures are those of the variant's second run in its
	// process; a base build that runs each variant once has none, and they
	// are then left out of the comparison.
	FigureWarmEventsPerSec    = warmFigure + FigureEventsPerSec
	FigureWarmEventsPerCPUSec = warmFigure + FigureEventsPerCPUSec
	FigureWarmVsBaseline      = warmFigure + FigureVsBaseline
)

// warmFigure prefixes the name of a first-run figure to name the same
// figure of the warm run.
const warmFigure = "warm "

// RunCompare runs rounds rounds of the benchmark, each running this build
// then the base (A B A B ...), and returns every round's measurements.
// It stops at the first failed run.
func RunCompare(ctx context.Context, rounds int, run CompareRunner) ([]CompareRound, error) {
	if rounds < 1 {
		return nil, fmt.Errorf("rounds must be at least 1, got %d", rounds)
	}
	if run == nil {
		return nil, errors.New("bench compare: no runner")
	}
	out := make([]CompareRound, 0, rounds)
	for r := range rounds {
		var round CompareRound
		for _, side := range []Side{SideThis, SideBase} {
			ms, err := run(ctx, side, r)
			if err != nil {
				return nil, fmt.Errorf("round %d, %s build: %w", r+1, side, err)
			}
			if side == SideThis {
				round.This = ms
			} else {
				round.Base = ms
			}
		}
		out = append(out, round)
	}
	return out, nil
}

// figureOf returns figure of m, and whether m has it.
func figureOf(m Measurement, figure string) (float64, bool) {
	switch figure {
	case FigureEventsPerSec:
		return m.EventsPerSec, m.EventsPerSec > 0
	case FigureEventsPerCPUSec:
		v := m.EventsPerCPUSecond()
		return v, v > 0
	case FigureVsBaseline:
		return m.RatioToBaseline, m.Name != string(KindBaseline) && m.RatioToBaseline > 0
	}
	if first, ok := strings.CutPrefix(figure, warmFigure); ok {
		return figureOf(m.warmRun(), first)
	}
	return 0, false
}

// Summarize compares the builds figure by figure over rounds: for every
// variant of the first round (in its order) and every figure it has, the
// median of each side, the median and spread of the per-round ratios and
// the verdict. Every round of both sides must hold the same variants.
func Summarize(rounds []CompareRound) ([]FigureComparison, error) {
	if len(rounds) == 0 {
		return nil, errors.New("bench compare: no rounds to summarize")
	}
	find := func(ms []Measurement, name string) (Measurement, bool) {
		for _, m := range ms {
			if m.Name == name {
				return m, true
			}
		}
		return Measurement{}, false
	}
	var out []FigureComparison
	for _, ref := range rounds[0].This {
		for _, figure := range []string{FigureEventsPerSec, FigureEventsPerCPUSec, FigureVsBaseline,
			FigureWarmEventsPerSec, FigureWarmEventsPerCPUSec, FigureWarmVsBaseline} {
			if _, ok := figureOf(ref, figure); !ok {
				continue
			}
			if b, ok := find(rounds[0].Base, ref.Name); ok && strings.HasPrefix(figure, warmFigure) {
				if _, ok := figureOf(b, figure); !ok {
					continue // a base build without warm runs
				}
			}
			var this, base, ratios []float64
			for r, round := range rounds {
				a, okA := find(round.This, ref.Name)
				b, okB := find(round.Base, ref.Name)
				if !okA || !okB {
					return nil, fmt.Errorf("bench compare: round %d has no %s measurement of both builds", r+1, ref.Name)
				}
				if figure == FigureEventsPerCPUSec && (a.ProcessCPUSeconds > 0) != (b.ProcessCPUSeconds > 0) {
					// A build from before the workload's CPU time was
					// reported apart (its CPUSeconds are the whole
					// process's) is compared by whole processes on both
					// sides.
					a.CPUSeconds = max(a.CPUSeconds, a.ProcessCPUSeconds)
					b.CPUSeconds = max(b.CPUSeconds, b.ProcessCPUSeconds)
				}
				va, okA := figureOf(a, figure)
				vb, okB := figureOf(b, figure)
				if !okA || !okB {
					return nil, fmt.Errorf("bench compare: round %d: %s %s was not measured by both builds (this %g, base %g)", r+1, ref.Name, figure, va, vb)
				}
				this, base, ratios = append(this, va), append(base, vb), append(ratios, va/vb)
			}
			fc := FigureComparison{
				Variant: ref.Name, Figure: figure,
				This: median(this), Base: median(base),
				Ratio: median(ratios), MinRatio: slices.Min(ratios), MaxRatio: slices.Max(ratios),
			}
			fc.Verdict = verdict(fc.MinRatio, fc.MaxRatio)
			out = append(out, fc)
		}
	}
	return out, nil
}

// verdict judges a figure by the spread of its per-round ratios.
func verdict(minRatio, maxRatio float64) Verdict {
	switch {
	case minRatio > 1+CompareTolerance:
		return VerdictFaster
	case maxRatio < 1-CompareTolerance:
		return VerdictSlower
	}
	return VerdictSame
}
