package benchcmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/weir-dev/weir/bench"
	"github.com/weir-dev/weir/cmd/weir/internal/cli"
)

// This file is --compare BASE for the benchmarks whose figures are read
// from their own --format json output (weir bench nexmark, weir bench
// state): each build runs the whole benchmark as a child process, in
// alternated rounds, and every figure gets a verdict.

// FigureCompareReport is what `--compare BASE --format json` prints for
// those benchmarks.
type FigureCompareReport struct {
	// Benchmark is the benchmark's name ("nexmark"); Args what each build
	// ran.
	Benchmark string   `json:"benchmark"`
	Args      []string `json:"args"`
	// Base is what --compare named; BaseBinary the binary that ran it and
	// BaseCommit the commit it was built from (for a git revision).
	Base       string `json:"base"`
	BaseBinary string `json:"base_binary"`
	BaseCommit string `json:"base_commit,omitempty"`
	Binary     string `json:"binary"`
	Rounds     int    `json:"rounds"`
	// LoadBefore and LoadAfter are the one-minute load averages around the
	// rounds (0 where the platform does not expose it).
	LoadBefore float64                  `json:"load_before"`
	LoadAfter  float64                  `json:"load_after"`
	CPUs       int                      `json:"cpus"`
	Figures    []bench.FigureComparison `json:"figures"`
	// Notes are differences in what the builds computed (a query's result
	// count), which a rate's verdict does not show.
	Notes []string            `json:"notes,omitempty"`
	Runs  []bench.FigureRound `json:"runs"`
}

// compareFlags are the flags of a benchmark's --compare.
type compareFlags struct {
	compare      string
	rounds       int
	failIfSlower bool
}

// addCompareFlags adds --compare, --rounds and --fail-if-slower to cmd.
func addCompareFlags(cmd *cobra.Command, f *compareFlags) {
	fl := cmd.Flags()
	fl.StringVar(&f.compare, "compare", "", "compare with BASE, a weir binary or a git revision to build, in alternated rounds")
	fl.IntVar(&f.rounds, "rounds", 3, "rounds of a --compare (each runs this binary, then the base)")
	fl.BoolVar(&f.failIfSlower, "fail-if-slower", false, "with --compare, exit 1 when a figure is slower than the base")
}

// check refuses --rounds and --fail-if-slower without --compare, and
// rounds below 1.
func (f compareFlags) check(cmd *cobra.Command) error {
	if f.compare == "" {
		if cmd.Flags().Changed("rounds") || f.failIfSlower {
			return cli.UsageErrorf("--rounds and --fail-if-slower need --compare")
		}
		return nil
	}
	if f.rounds < 1 {
		return cli.UsageErrorf("--rounds must be at least 1, got %d", f.rounds)
	}
	return nil
}

// figureCompare is one benchmark's comparison: the arguments each build
// runs (the benchmark with --format json) and how its output is read.
type figureCompare struct {
	benchmark string
	args      []string
	flags     compareFlags
	format    string
	// title describes the run for the table's first line.
	title string
	// figures reads one run's output.
	figures func(out []byte) ([]bench.Figure, error)
	// notes compares the two builds' outputs of the first round; nil: none.
	notes func(this, base []byte) []string
}

// runFigureCompare runs c's benchmark by this binary and the base's,
// alternately, c.flags.rounds times, and prints the comparison.
func runFigureCompare(ctx context.Context, e *cli.Env, c figureCompare) error {
	exe, err := os.Executable()
	if err != nil {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("finding the weir binary: %w", err))
	}
	base, err := resolveCompareBase(ctx, e, c.flags.compare)
	if err != nil {
		return err
	}
	defer base.cleanup()
	var first [2][]byte
	run := func(ctx context.Context, side bench.Side, round int) ([]bench.Figure, error) {
		bin, out, err := base.run(ctx, e, exe, side, round, c.flags.rounds, c.args)
		if err != nil {
			return nil, err
		}
		if round == 0 {
			first[side] = out
		}
		figs, err := c.figures(out)
		if err != nil {
			return nil, fmt.Errorf("reading the figures of %s: %w (output %q)", bin, err, out)
		}
		return figs, nil
	}
	rep := FigureCompareReport{Benchmark: c.benchmark, Args: c.args, Base: c.flags.compare, BaseBinary: base.binary,
		BaseCommit: base.commit, Binary: exe, Rounds: c.flags.rounds, CPUs: runtime.NumCPU()}
	rep.LoadBefore, _ = bench.LoadAverage()
	rounds, err := bench.RunCompareOf(ctx, c.flags.rounds, run, func(this, base []bench.Figure) bench.FigureRound {
		return bench.FigureRound{This: this, Base: base}
	})
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return err
		}
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("benchmark %s --compare: %w", c.benchmark, err))
	}
	rep.LoadAfter, _ = bench.LoadAverage()
	rep.Runs = rounds
	var skipped []string
	if rep.Figures, skipped, err = bench.SummarizeFigures(rounds); err != nil {
		return cli.WithCode(cli.ExitFailure, err)
	}
	if c.notes != nil {
		rep.Notes = c.notes(first[bench.SideThis], first[bench.SideBase])
	}
	for _, f := range skipped {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%s: measured by one build only (the other predates it), not compared", f))
	}
	if c.format == cli.FormatJSON {
		err = cli.WriteJSON(e.Stdout, rep)
	} else {
		baseName := rep.BaseBinary
		if rep.BaseCommit != "" {
			baseName = fmt.Sprintf("%s (commit %.12s)", rep.Base, rep.BaseCommit)
		}
		title := fmt.Sprintf("%s: %s; this build (%s) against the base %s, %d alternated round(s); load average %.2f → %.2f on %d CPUs",
			c.benchmark, c.title, rep.Binary, baseName, rep.Rounds, rep.LoadBefore, rep.LoadAfter, rep.CPUs)
		err = writeFigureTable(e.Stdout, title, rep.Figures, rep.Rounds, rep.Notes)
	}
	if err != nil {
		return err
	}
	if c.flags.failIfSlower {
		return slowerThan(c.flags.compare, rep.Figures)
	}
	return nil
}
