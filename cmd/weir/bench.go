package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/weir-dev/weir/bench"
)

// benchChildCommand is the hidden command a benchmark re-executes this
// binary with, so that each variant runs in its own process.
const benchChildCommand = "bench-child"

func newBenchCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark the engine",
		Long: `Bench runs a benchmark workload in several variants, each in its own child
process, and prints throughput, CPU time and peak memory side by side.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newBenchWindowedSumCommand(e))
	return cmd
}

// windowedSumFlags are the flags of `weir bench windowed-sum`.
type windowedSumFlags struct {
	events   int64
	keys     int64
	workers  []int
	variants []string
	format   string
	// profileDir, when set, receives one CPU profile per variant.
	profileDir string
}

func newBenchWindowedSumCommand(e *env) *cobra.Command {
	var f windowedSumFlags
	cmd := &cobra.Command{
		Use:   "windowed-sum",
		Short: "Per-key sums in 5-minute fixed windows: SDK, YAML and a hand-written loop",
		Long: `windowed-sum generates --events events with keys uniform over --keys, event
time advancing 1 ms per event, and sums an int64 amount per key in 5-minute
fixed windows (default trigger). It runs, each in its own child process:

  baseline   a hand-written single-goroutine loop (map of (window, key) sums)
  sdk-wN     the Go SDK pipeline with N workers, for each N in --workers
  yaml-w1    the equivalent YAML pipeline (CEL filter) with one worker

Every variant must reproduce the generated total and the same window sums, or
the command fails. Targets: sdk-w1 ≥ 25% of baseline; sdk-w2 ≥ 1.5× sdk-w1;
yaml-w1 ≥ 1,000,000 events per CPU-second.

Exit codes: 0 success (targets are reported, not enforced), 1 a variant failed
or computed the wrong result, 2 usage.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runWindowedSum(cmd.Context(), e, f)
		},
	}
	fl := cmd.Flags()
	fl.Int64Var(&f.events, "events", bench.DefaultEvents, "number of events to generate")
	fl.Int64Var(&f.keys, "keys", bench.DefaultKeys, "number of distinct keys")
	fl.IntSliceVar(&f.workers, "workers", []int{1, 2}, "worker counts of the SDK variants")
	fl.StringSliceVar(&f.variants, "variants", nil, "run only these variants (e.g. baseline,sdk-w1); default baseline, sdk-wN for each --workers, yaml-w1")
	fl.StringVar(&f.profileDir, "cpu-profile-dir", "", "write each variant's CPU profile to DIR/VARIANT.prof (inspect with go tool pprof)")
	addFormatFlag(cmd, &f.format)
	return cmd
}

func runWindowedSum(ctx context.Context, e *env, f windowedSumFlags) error {
	if err := checkFormat(f.format); err != nil {
		return err
	}
	cfg := bench.Config{Events: f.events, Keys: f.keys}
	if err := cfg.Validate(); err != nil {
		return usageErrorf("%w", err)
	}
	for _, w := range f.workers {
		if w < 1 {
			return usageErrorf("--workers: each worker count must be at least 1, got %d", w)
		}
	}
	variants := bench.Variants(f.workers)
	if len(f.variants) > 0 {
		variants = variants[:0]
		for _, name := range f.variants {
			v, err := bench.ParseVariant(name)
			if err != nil {
				return usageErrorf("--variants: %w", err)
			}
			variants = append(variants, v)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return withCode(ExitFailure, fmt.Errorf("finding the weir binary to run benchmark children: %w", err))
	}
	logLevel := "warn"
	if e.logger.Enabled(ctx, slog.LevelDebug) {
		logLevel = "debug"
	} else if e.logger.Enabled(ctx, slog.LevelInfo) {
		logLevel = "info"
	}
	if f.profileDir != "" {
		if err := os.MkdirAll(f.profileDir, 0o755); err != nil {
			return withCode(ExitFailure, fmt.Errorf("creating the profile directory: %w", err))
		}
	}
	h := bench.Harness{
		Command: func(ctx context.Context, v bench.Variant, cfg bench.Config) *exec.Cmd {
			args := []string{benchChildCommand, "windowed-sum", v.String(),
				"--events", strconv.FormatInt(cfg.Events, 10), "--keys", strconv.FormatInt(cfg.Keys, 10),
				"--log-level", logLevel}
			if f.profileDir != "" {
				args = append(args, "--cpu-profile", filepath.Join(f.profileDir, v.String()+".prof"))
			}
			return exec.CommandContext(ctx, exe, args...)
		},
		Stderr: e.stderr,
		Logger: e.logger,
	}
	ms, err := h.Run(ctx, cfg, variants)
	if err != nil {
		return withCode(ExitFailure, fmt.Errorf("benchmark windowed-sum: %w", err))
	}
	if f.format == formatJSON {
		return writeJSON(e.stdout, ms)
	}
	return writeBenchTable(e.stdout, cfg, ms)
}

// writeBenchTable prints the measurements side by side, then the targets.
func writeBenchTable(w io.Writer, cfg bench.Config, ms []bench.Measurement) error {
	var b strings.Builder
	if len(ms) > 0 {
		o := ms[0].Outcome
		fmt.Fprintf(&b, "windowed-sum: %d events, %d keys, 5m fixed windows: %d window sums, total %d (verified in every variant)\n\n",
			cfg.Events, cfg.Keys, o.Results, o.Total)
	}
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "VARIANT\tEVENTS/S\tRUN S\tCPU S\tEVENTS/CPU-S\tPEAK RSS MiB\tVS BASELINE\t")
	for _, m := range ms {
		ratio := "-"
		if m.RatioToBaseline > 0 {
			ratio = fmt.Sprintf("%.2f", m.RatioToBaseline)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t%.2f\t%.0f\t%.1f\t%s\t\n", m.Name, m.EventsPerSec, m.Outcome.Elapsed().Seconds(),
			m.CPUSeconds, m.EventsPerCPUSecond(), float64(m.PeakRSSBytes)/(1<<20), ratio)
	}
	if err := tw.Flush(); err != nil {
		return withCode(ExitFailure, fmt.Errorf("formatting output: %w", err))
	}
	if ts := bench.Targets(ms); len(ts) > 0 {
		b.WriteString("\nTargets:\n")
		for _, t := range ts {
			verdict := "met"
			if !t.Met {
				verdict = fmt.Sprintf("MISSED by %.0f%%", 100*(1-t.Got/t.Want))
			}
			fmt.Fprintf(&b, "  %-8s %s: got %s, want %s: %s\n", t.Variant, t.Description, formatFigure(t.Got), formatFigure(t.Want), verdict)
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return withCode(ExitFailure, fmt.Errorf("writing output: %w", err))
	}
	return nil
}

func formatFigure(x float64) string {
	if x >= 1000 {
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

func newBenchChildCommand(e *env) *cobra.Command {
	var cfg bench.Config
	var cpuProfile string
	cmd := &cobra.Command{
		Use:    benchChildCommand + " windowed-sum VARIANT",
		Short:  "Run one benchmark variant in this process (used by weir bench)",
		Hidden: true,
		Args:   exactArgs("WORKLOAD", "VARIANT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] != "windowed-sum" {
				return usageErrorf("unknown benchmark %q (want windowed-sum)", args[0])
			}
			v, err := bench.ParseVariant(args[1])
			if err != nil {
				return withCode(ExitUsage, err)
			}
			if cpuProfile != "" {
				stop, err := startCPUProfile(cpuProfile)
				if err != nil {
					return withCode(ExitFailure, err)
				}
				defer stop()
			}
			if err := bench.RunChild(cmd.Context(), v, cfg, e.stdout, e.logger); err != nil {
				if errors.Is(err, context.Canceled) {
					return err
				}
				return withCode(ExitFailure, fmt.Errorf("benchmark variant %s: %w", v, err))
			}
			return nil
		},
	}
	cmd.Flags().Int64Var(&cfg.Events, "events", bench.DefaultEvents, "number of events to generate")
	cmd.Flags().Int64Var(&cfg.Keys, "keys", bench.DefaultKeys, "number of distinct keys")
	cmd.Flags().StringVar(&cpuProfile, "cpu-profile", "", "write a CPU profile of the run to this file")
	return cmd
}

// startCPUProfile starts writing a CPU profile to path; the returned
// function stops it and closes the file.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("creating the CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting the CPU profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
