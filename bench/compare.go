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
// builds. Its ratios are above 1 when this build is better.
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
	// LowerIsBetter says the figure is better lower (Figure): its ratios
	// are base/this.
	LowerIsBetter bool `json:"lower_is_better,omitempty"`
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
	if run == nil {
		return nil, errors.New("bench compare: no runner")
	}
	return RunCompareOf(ctx, rounds, run, func(this, base []Measurement) CompareRound {
		return CompareRound{This: this, Base: base}
	})
}

// RunCompareOf is RunCompare for any benchmark's results T: rounds rounds,
// each running this build then the base, each round's pair of results
// made one R by pair.
func RunCompareOf[T, R any](ctx context.Context, rounds int, run func(ctx context.Context, side Side, round int) (T, error), pair func(this, base T) R) ([]R, error) {
	if rounds < 1 {
		return nil, fmt.Errorf("rounds must be at least 1, got %d", rounds)
	}
	out := make([]R, 0, rounds)
	for r := range rounds {
		var got [2]T
		for _, side := range []Side{SideThis, SideBase} {
			res, err := run(ctx, side, r)
			if err != nil {
				return nil, fmt.Errorf("round %d, %s build: %w", r+1, side, err)
			}
			got[side] = res
		}
		out = append(out, pair(got[SideThis], got[SideBase]))
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

// Figure is one figure a benchmark measured of one of its variants.
type Figure struct {
	Variant string  `json:"variant"`
	Name    string  `json:"figure"`
	Value   float64 `json:"value"`
	// LowerIsBetter marks a figure such as bytes per key or milliseconds:
	// its ratio is base/this, so that a ratio above 1 is better for every
	// figure.
	LowerIsBetter bool `json:"lower_is_better,omitempty"`
	// Optional marks a figure that builds older than it do not measure:
	// when a build lacks it in a round, it is left out of the comparison
	// (SummarizeFigures names it) instead of failing the comparison.
	Optional bool `json:"optional,omitempty"`
}

// FigureRound is what both builds measured in one round, figure by
// figure.
type FigureRound struct {
	This []Figure `json:"this"`
	Base []Figure `json:"base"`
}

// SummarizeFigures compares the builds figure by figure over rounds: for
// every figure of this build's first round (in its order), the median of
// each side, the median and spread of the per-round ratios (this/base, or
// base/this for a lower-is-better figure) and the verdict. Every round of
// both sides must hold every figure of the first, with a positive value,
// but for an Optional figure, which is left out when a build lacks it
// (skipped names those, "VARIANT FIGURE").
func SummarizeFigures(rounds []FigureRound) (_ []FigureComparison, skipped []string, _ error) {
	if len(rounds) == 0 {
		return nil, nil, errors.New("bench compare: no rounds to summarize")
	}
	find := func(fs []Figure, variant, name string) (float64, bool) {
		for _, f := range fs {
			if f.Variant == variant && f.Name == name {
				return f.Value, f.Value > 0
			}
		}
		return 0, false
	}
	out := make([]FigureComparison, 0, len(rounds[0].This))
figures:
	for _, ref := range rounds[0].This {
		var this, base, ratios []float64
		for r, round := range rounds {
			va, okA := find(round.This, ref.Variant, ref.Name)
			vb, okB := find(round.Base, ref.Variant, ref.Name)
			if !okA || !okB {
				if ref.Optional {
					skipped = append(skipped, ref.Variant+" "+ref.Name)
					continue figures
				}
				return nil, nil, fmt.Errorf("bench compare: round %d: %s %s was not measured by both builds (this %g, base %g)", r+1, ref.Variant, ref.Name, va, vb)
			}
			ratio := va / vb
			if ref.LowerIsBetter {
				ratio = vb / va
			}
			this, base, ratios = append(this, va), append(base, vb), append(ratios, ratio)
		}
		fc := FigureComparison{
			Variant: ref.Variant, Figure: ref.Name, LowerIsBetter: ref.LowerIsBetter,
			This: median(this), Base: median(base),
			Ratio: median(ratios), MinRatio: slices.Min(ratios), MaxRatio: slices.Max(ratios),
		}
		fc.Verdict = verdict(fc.MinRatio, fc.MaxRatio)
		out = append(out, fc)
	}
	return out, skipped, nil
}

// Summarize compares the builds figure by figure over rounds
// (SummarizeFigures): for every variant of the first round (in its order)
// every figure it has. Every round of both sides must hold the same
// variants.
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
	figures := make([]FigureRound, len(rounds))
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
				va, _ := figureOf(a, figure)
				vb, _ := figureOf(b, figure)
				figures[r].This = append(figures[r].This, Figure{Variant: ref.Name, Name: figure, Value: va})
				figures[r].Base = append(figures[r].Base, Figure{Variant: ref.Name, Name: figure, Value: vb})
			}
		}
	}
	out, _, err := SummarizeFigures(figures) // no figure of these is optional
	return out, err
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
