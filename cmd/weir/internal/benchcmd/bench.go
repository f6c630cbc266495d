package benchcmd

import (
	"context"
	"errors"
	"fmt"
	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/weir-dev/weir/bench"
)

// benchChildCommand is the hidden command a benchmark re-executes this
// binary with, so that each variant runs in its own process.
const benchChildCommand = "bench-child"

func newBenchCommand(e *cli.Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark the engine",
		Long: `Bench runs a benchmark workload in several variants, each in its own child
process, and prints throughput, CPU time and peak memory side by side.`,
		Args: cli.ExactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newBenchWindowedSumCommand(e), newBenchPubSubSQLCommand(e), newBenchNexmarkCommand(e))
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
	// warm runs each variant a second time in its child (the warm figures).
	warm bool
	// compare, when set, is the base build to compare this one with (a
	// binary or a git revision), in rounds alternated rounds.
	compare      string
	rounds       int
	roundsSet    bool
	failIfSlower bool
}

func newBenchWindowedSumCommand(e *cli.Env) *cobra.Command {
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
the command fails. Targets: sdk-w1 ≥ 50% of baseline; sdk-w2 ≥ 1.5× sdk-w1;
yaml-w1 ≥ 5,000,000 events per CPU-second.

Each child runs its variant twice (unless --warm=false). The first run's
figures are those of a fresh process, whose heap grows into memory never
touched before; PAGE FAULTS counts those first touches, which on a virtual
machine can cost more than the pipeline's own work and make figures differ
between machines of one kind. The second (warm) run reuses the memory, as a
long-running server does; its figures are the WARM columns. Both runs must
compute the same results.

With --compare BASE, the whole benchmark (the variants above) runs in
--rounds alternated rounds, this binary then BASE in each, where BASE is
another weir binary or a git revision of the repository holding the working
directory (checked out in a temporary worktree and built with go build).
It prints, per variant and figure (events/s, events per CPU-second, ratio
to the loop), the median of each build, the median of the per-round ratios
this/base with their range, and a verdict: faster or slower only when every
round's ratio is beyond 1 ± 2%, the same otherwise. --fail-if-slower makes
a slower figure exit 1, for CI.

Exit codes: 0 success (targets are reported, not enforced), 1 a variant failed
or computed the wrong result (or, with --fail-if-slower, a figure is slower
than the base), 2 usage.`,
		Args: cli.ExactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.roundsSet = cmd.Flags().Changed("rounds")
			return runWindowedSum(cmd.Context(), e, f)
		},
	}
	fl := cmd.Flags()
	fl.Int64Var(&f.events, "events", bench.DefaultEvents, "number of events to generate")
	fl.Int64Var(&f.keys, "keys", bench.DefaultKeys, "number of distinct keys")
	fl.IntSliceVar(&f.workers, "workers", []int{1, 2}, "worker counts of the SDK variants")
	fl.StringSliceVar(&f.variants, "variants", nil, "run only these variants (e.g. baseline,sdk-w1); default baseline, sdk-wN for each --workers, yaml-w1")
	fl.StringVar(&f.profileDir, "cpu-profile-dir", "", "write each variant's CPU profile to DIR/VARIANT.prof (inspect with go tool pprof)")
	fl.BoolVar(&f.warm, "warm", true, "run each variant a second time in its process and report that warm run too")
	fl.StringVar(&f.compare, "compare", "", "compare with BASE, a weir binary or a git revision to build, in alternated rounds")
	fl.IntVar(&f.rounds, "rounds", 3, "rounds of a --compare (each runs this binary, then the base)")
	fl.BoolVar(&f.failIfSlower, "fail-if-slower", false, "with --compare, exit 1 when a figure is slower than the base")
	cli.AddFormatFlag(cmd, &f.format)
	return cmd
}

func runWindowedSum(ctx context.Context, e *cli.Env, f windowedSumFlags) error {
	if err := cli.CheckFormat(f.format); err != nil {
		return err
	}
	cfg := bench.Config{Events: f.events, Keys: f.keys}
	if err := cfg.Validate(); err != nil {
		return cli.UsageErrorf("%w", err)
	}
	for _, w := range f.workers {
		if w < 1 {
			return cli.UsageErrorf("--workers: each worker count must be at least 1, got %d", w)
		}
	}
	variants := bench.Variants(f.workers)
	if len(f.variants) > 0 {
		variants = variants[:0]
		for _, name := range f.variants {
			v, err := bench.ParseVariant(name)
			if err != nil {
				return cli.UsageErrorf("--variants: %w", err)
			}
			variants = append(variants, v)
		}
	}
	if f.compare != "" {
		return runWindowedSumCompare(ctx, e, f, cfg, variants)
	}
	if f.roundsSet || f.failIfSlower {
		return cli.UsageErrorf("--rounds and --fail-if-slower need --compare")
	}
	exe, err := os.Executable()
	if err != nil {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("finding the weir binary to run benchmark children: %w", err))
	}
	logLevel := "warn"
	if e.Logger.Enabled(ctx, slog.LevelDebug) {
		logLevel = "debug"
	} else if e.Logger.Enabled(ctx, slog.LevelInfo) {
		logLevel = "info"
	}
	if f.profileDir != "" {
		if err := os.MkdirAll(f.profileDir, 0o755); err != nil {
			return cli.WithCode(cli.ExitFailure, fmt.Errorf("creating the profile directory: %w", err))
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
			if !f.warm {
				args = append(args, "--warm=false")
			}
			return exec.CommandContext(ctx, exe, args...)
		},
		Stderr: e.Stderr,
		Logger: e.Logger,
	}
	ms, err := h.Run(ctx, cfg, variants)
	if err != nil {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("benchmark windowed-sum: %w", err))
	}
	if f.format == cli.FormatJSON {
		return cli.WriteJSON(e.Stdout, ms)
	}
	return writeBenchTable(e.Stdout, cfg, ms)
}

// writeBenchTable prints the measurements side by side, then the targets.
func writeBenchTable(w io.Writer, cfg bench.Config, ms []bench.Measurement) error {
	var b strings.Builder
	if len(ms) > 0 {
		o := ms[0].Outcome
		fmt.Fprintf(&b, "windowed-sum: %d events, %d keys, 5m fixed windows: %d window sums, total %d (verified in every variant)\n\n",
			cfg.Events, cfg.Keys, o.Results, o.Total)
	}
	warm := false
	for _, m := range ms {
		warm = warm || m.WarmEventsPerSec > 0
	}
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', tabwriter.AlignRight)
	head := "VARIANT\tEVENTS/S\tRUN S\tCPU S\tEVENTS/CPU-S\tPEAK RSS MiB\tVS BASELINE\tPAGE FAULTS\t"
	if warm {
		head += "WARM EVENTS/S\tWARM EVENTS/CPU-S\tWARM VS BASELINE\tWARM PAGE FAULTS\t"
	}
	fmt.Fprintln(tw, head)
	ratio := func(r float64) string {
		if r > 0 {
			return fmt.Sprintf("%.2f", r)
		}
		return "-"
	}
	for _, m := range ms {
		fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t%.2f\t%.0f\t%.1f\t%s\t%d\t", m.Name, m.EventsPerSec, m.Outcome.Elapsed().Seconds(),
			m.CPUSeconds, m.EventsPerCPUSecond(), float64(m.PeakRSSBytes)/(1<<20), ratio(m.RatioToBaseline), m.MinorFaults)
		if warm {
			fmt.Fprintf(tw, "%.0f\t%.0f\t%s\t%d\t", m.WarmEventsPerSec, m.WarmEventsPerCPUSecond(), ratio(m.WarmRatioToBaseline), m.WarmMinorFaults)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("formatting output: %w", err))
	}
	writeTargets(&b, bench.Targets(ms))
	return cli.WriteReport(w, &b)
}

// writeTargets appends the "Targets:" section of a benchmark report to b:
// each goal with what was measured and whether it was met (nothing when
// there are no goals).
func writeTargets(b *strings.Builder, ts []bench.Target) {
	if len(ts) == 0 {
		return
	}
	b.WriteString("\nTargets:\n")
	for _, t := range ts {
		verdict := "met"
		if !t.Met {
			verdict = fmt.Sprintf("MISSED by %.0f%%", 100*(1-t.Got/t.Want))
		}
		fmt.Fprintf(b, "  %-8s %s: got %s, want %s: %s\n", t.Variant, t.Description, formatFigure(t.Got), formatFigure(t.Want), verdict)
	}
}

func formatFigure(x float64) string {
	if x >= 1000 {
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

// newBenchChildCommand is the hidden command the benchmarks re-execute
// this binary with: `weir bench-child WORKLOAD VARIANT [flags]` runs one
// variant in this process and prints its outcome as JSON.
func newBenchChildCommand(e *cli.Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:    benchChildCommand + " WORKLOAD VARIANT",
		Short:  "Run one benchmark variant in this process (used by weir bench)",
		Hidden: true,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cli.UsageErrorf("%s needs a workload (windowed-sum or pubsub-to-sql)", benchChildCommand)
			}
			return cli.UsageErrorf("unknown benchmark %q (want windowed-sum or pubsub-to-sql)", args[0])
		},
	}
	cmd.AddCommand(newBenchChildWindowedSumCommand(e), newBenchChildPubSubSQLCommand(e), newBenchChildNexmarkCommand(e))
	return cmd
}

func newBenchChildWindowedSumCommand(e *cli.Env) *cobra.Command {
	var cfg bench.Config
	var cpuProfile string
	var warm bool
	cmd := &cobra.Command{
		Use:   "windowed-sum VARIANT",
		Short: "Run one windowed-sum variant in this process",
		Args:  cli.ExactArgs("VARIANT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := bench.ParseVariant(args[0])
			if err != nil {
				return cli.WithCode(cli.ExitUsage, err)
			}
			if cpuProfile != "" {
				stop, err := bench.StartCPUProfile(cpuProfile)
				if err != nil {
					return cli.WithCode(cli.ExitFailure, err)
				}
				defer stop()
			}
			if err := bench.RunChild(cmd.Context(), v, cfg, warm, e.Stdout, e.Logger); err != nil {
				if errors.Is(err, context.Canceled) {
					return err
				}
				return cli.WithCode(cli.ExitFailure, fmt.Errorf("benchmark variant %s: %w", v, err))
			}
			return nil
		},
	}
	cmd.Flags().Int64Var(&cfg.Events, "events", bench.DefaultEvents, "number of events to generate")
	cmd.Flags().Int64Var(&cfg.Keys, "keys", bench.DefaultKeys, "number of distinct keys")
	cmd.Flags().StringVar(&cpuProfile, "cpu-profile", "", "write a CPU profile of the run to this file")
	cmd.Flags().BoolVar(&warm, "warm", true, "run the variant a second time and report that warm run too")
	return cmd
}

// pubsubSQLFlags are the flags of `weir bench pubsub-to-sql`.
type pubsubSQLFlags struct {
	cfg        bench.PubSubConfig
	runs       int
	variants   []string
	format     string
	tempDir    string
	profileDir string
}

func newBenchPubSubSQLCommand(e *cli.Env) *cobra.Command {
	var f pubsubSQLFlags
	cmd := &cobra.Command{
		Use:   "pubsub-to-sql",
		Short: "Embedded Pub/Sub through a windowed sum into SQLite, against the broker's raw consume rate",
		Long: `pubsub-to-sql pre-publishes --messages JSON messages of 100 bytes ({key, amount,
ts}: keys uniform over --keys, event time advancing 1 ms per message) to a topic
of the embedded JetStream broker (file store in a temporary directory), then
runs, each in its own child process that reopens that store:

  raw                a durable consumer fetching every message and acknowledging
                     each batch cumulatively (AckAll): the broker's own limit
  pipeline           ReadFromPubSub → --window fixed windows → Combine sum and
                     count per key → WriteToSql upsert (SQLite), checkpointing
                     every --checkpoint-interval, drained once all is read
  pipeline-final-cp  the same pipeline with only the final checkpoint, for
                     the checkpoint overhead
  latency            a stateless ReadFromPubSub → WriteToSql append pipeline fed
                     at --latency-rate messages/s for --latency-duration;
                     latency runs from each message's publish time to the end
                     of the commit that made its row visible

The tables are checked against the published messages (every window sum, and
every message counted once) or the command fails. Target: pipeline ≥ 50% of raw.

Exit codes: 0 success (the target is reported, not enforced), 1 a variant
failed or computed the wrong result, 2 usage.`,
		Args: cli.ExactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPubSubSQL(cmd.Context(), e, f)
		},
	}
	fl := cmd.Flags()
	fl.Int64Var(&f.cfg.Messages, "messages", bench.DefaultMessages, "number of messages to pre-publish")
	fl.Int64Var(&f.cfg.Keys, "keys", bench.DefaultKeys, "number of distinct keys")
	fl.DurationVar(&f.cfg.Window, "window", bench.DefaultPubSubWindow, "fixed window size of the pipeline (whole seconds)")
	fl.IntVar(&f.cfg.Workers, "workers", 1, "workers of the pipelines")
	fl.DurationVar(&f.cfg.CheckpointInterval, "checkpoint-interval", bench.DefaultCheckpointInterval, "checkpoint interval of the pipeline and latency variants")
	fl.IntVar(&f.cfg.LatencyRate, "latency-rate", bench.DefaultLatencyRate, "publish rate of the latency variant, messages/s")
	fl.DurationVar(&f.cfg.LatencyDuration, "latency-duration", bench.DefaultLatencyDuration, "how long the latency variant publishes")
	fl.IntVar(&f.runs, "runs", 1, "run every variant this many times (the messages are published once) and report medians")
	fl.StringSliceVar(&f.variants, "variants", nil, "run only these variants (raw, pipeline, pipeline-final-cp, latency, rehearse); default all but rehearse, which holds the messages in memory")
	fl.StringVar(&f.tempDir, "temp-dir", "", "directory for the broker store and tables (about 150 bytes per message); default the system's")
	fl.StringVar(&f.profileDir, "cpu-profile-dir", "", "write each variant's CPU profile to DIR/VARIANT-rN.prof (inspect with go tool pprof)")
	cli.AddFormatFlag(cmd, &f.format)
	return cmd
}

func runPubSubSQL(ctx context.Context, e *cli.Env, f pubsubSQLFlags) error {
	if err := cli.CheckFormat(f.format); err != nil {
		return err
	}
	cfg := f.cfg
	if err := cfg.Validate(); err != nil {
		return cli.UsageErrorf("%w", err)
	}
	if f.runs < 1 {
		return cli.UsageErrorf("--runs must be at least 1, got %d", f.runs)
	}
	variants := bench.PubSubVariants()
	if len(f.variants) > 0 {
		variants = variants[:0]
		for _, name := range f.variants {
			v, err := bench.ParsePubSubVariant(name)
			if err != nil || v == bench.VariantPublish {
				return cli.UsageErrorf("--variants: unknown variant %q (want raw, pipeline, pipeline-final-cp, latency or rehearse)", name)
			}
			variants = append(variants, v)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("finding the weir binary to run benchmark children: %w", err))
	}
	if f.profileDir != "" {
		if err := os.MkdirAll(f.profileDir, 0o755); err != nil {
			return cli.WithCode(cli.ExitFailure, fmt.Errorf("creating the profile directory: %w", err))
		}
	}
	logLevel := childLogLevel(ctx, e)
	h := bench.PubSubHarness{
		Command: func(ctx context.Context, v bench.PubSubVariant, run int, cfg bench.PubSubConfig, dir string) *exec.Cmd {
			args := []string{benchChildCommand, "pubsub-to-sql", string(v),
				"--dir", dir, "--run", strconv.Itoa(run),
				"--messages", strconv.FormatInt(cfg.Messages, 10), "--keys", strconv.FormatInt(cfg.Keys, 10),
				"--window", cfg.Window.String(), "--workers", strconv.Itoa(cfg.Workers),
				"--checkpoint-interval", cfg.CheckpointInterval.String(),
				"--latency-rate", strconv.Itoa(cfg.LatencyRate), "--latency-duration", cfg.LatencyDuration.String(),
				"--log-level", logLevel}
			if f.profileDir != "" && v != bench.VariantPublish {
				args = append(args, "--cpu-profile", filepath.Join(f.profileDir, fmt.Sprintf("%s-r%d.prof", v, run)))
			}
			return exec.CommandContext(ctx, exe, args...)
		},
		TempDir: f.tempDir,
		Stderr:  e.Stderr,
		Logger:  e.Logger,
	}
	rep, err := h.Run(ctx, cfg, variants, f.runs)
	if err != nil {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("benchmark pubsub-to-sql: %w", err))
	}
	if f.format == cli.FormatJSON {
		return cli.WriteJSON(e.Stdout, rep)
	}
	return writePubSubTable(e.Stdout, rep)
}

// childLogLevel is the --log-level to give benchmark children: this
// process's, but no chattier than needed.
func childLogLevel(ctx context.Context, e *cli.Env) string {
	switch {
	case e.Logger.Enabled(ctx, slog.LevelDebug):
		return "debug"
	case e.Logger.Enabled(ctx, slog.LevelInfo):
		return "info"
	}
	return "warn"
}

// writePubSubTable prints every run side by side, then the medians, the
// latency and the target.
func writePubSubTable(w io.Writer, rep *bench.PubSubReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "pubsub-to-sql: %d messages of %d bytes, %d keys, %gs fixed windows, %d worker(s), checkpoints every %gs; %d run(s); load average %.2f → %.2f on %d CPUs\n",
		rep.Messages, rep.MessageBytes, rep.Keys, rep.WindowSeconds, rep.Workers, rep.CheckpointIntervalSeconds, rep.Runs,
		rep.LoadAverage, rep.LoadAverageEnd, rep.CPUs)
	if p := rep.Publish; p != nil {
		fmt.Fprintf(&b, "published in %.1f s (%.0f messages/s); every table verified: %d window sums, total %d, each message counted once\n",
			p.ElapsedSeconds, p.MessagesPerSec, rep.WindowSums, rep.Total)
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "VARIANT\tRUN\tMSGS/S\tRUN S\tCPU S\tMSGS/CPU-S\tPEAK RSS MiB\tCHECKPOINTS\tCP MEAN MS\tCP MAX MS\tP50 MS\tP99 MS\t")
	for _, m := range rep.Measurements {
		opt := func(x float64, ok bool) string {
			if !ok {
				return "-"
			}
			return strconv.FormatFloat(x, 'f', 1, 64)
		}
		rate := opt(m.MessagesPerSec, m.MessagesPerSec > 0)
		if m.MessagesPerSec > 0 {
			rate = strconv.FormatFloat(m.MessagesPerSec, 'f', 0, 64)
		}
		cps := "-"
		if m.Checkpoints > 0 {
			cps = strconv.Itoa(m.Checkpoints)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.2f\t%.2f\t%.0f\t%.1f\t%s\t%s\t%s\t%s\t%s\t\n", m.Name, m.Run, rate, m.ElapsedSeconds, m.CPUSeconds,
			m.MessagesPerCPUSecond(), float64(m.PeakRSSBytes)/(1<<20), cps,
			opt(m.CheckpointMeanMs, m.Checkpoints > 0), opt(m.CheckpointMaxMs, m.Checkpoints > 0),
			opt(m.LatencyP50Ms, m.LatencyP50Ms > 0), opt(m.LatencyP99Ms, m.LatencyP99Ms > 0))
	}
	if err := tw.Flush(); err != nil {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("formatting output: %w", err))
	}
	s := rep.Summary
	fmt.Fprintf(&b, "\nMedians over %d run(s):\n", rep.Runs)
	if s.RawMessagesPerSec > 0 {
		fmt.Fprintf(&b, "  raw consume (fetch + AckAll per batch)   %.0f messages/s, peak RSS %.1f MiB\n", s.RawMessagesPerSec, float64(s.RawPeakRSSBytes)/(1<<20))
	}
	if s.PipelineMessagesPerSec > 0 {
		fmt.Fprintf(&b, "  pipeline (checkpoints every %gs)          %.0f messages/s, peak RSS %.1f MiB, checkpoint mean %.1f ms (max %.1f ms)\n",
			rep.CheckpointIntervalSeconds, s.PipelineMessagesPerSec, float64(s.PipelinePeakRSSBytes)/(1<<20), s.CheckpointMeanMs, s.CheckpointMaxMs)
	}
	if s.PipelineToRaw > 0 {
		fmt.Fprintf(&b, "  pipeline / raw                           %.2f\n", s.PipelineToRaw)
	}
	if s.PipelineFinalCPMessagesPerSec > 0 {
		fmt.Fprintf(&b, "  pipeline, final checkpoint only          %.0f messages/s\n", s.PipelineFinalCPMessagesPerSec)
	}
	if s.CheckpointedToFinalOnly > 0 {
		fmt.Fprintf(&b, "  checkpointed / final-only throughput     %.2f (checkpoint overhead %.0f%%)\n", s.CheckpointedToFinalOnly, 100*(1-s.CheckpointedToFinalOnly))
	}
	if s.RehearseSeconds > 0 {
		fmt.Fprintf(&b, "  rehearse (read once, old twice, new once, compare)  %.2f s", s.RehearseSeconds)
		if s.RehearseToPipeline > 0 {
			fmt.Fprintf(&b, ", %.2f× the pipeline's consume time (target ≤ 3)", s.RehearseToPipeline)
		}
		b.WriteString("\n")
	}
	if s.LatencyP50Ms > 0 {
		fmt.Fprintf(&b, "  latency at %d messages/s, publish → committed row: p50 %.0f ms, p99 %.0f ms, max %.0f ms\n",
			rep.LatencyRate, s.LatencyP50Ms, s.LatencyP99Ms, s.LatencyMaxMs)
	}
	ts := make([]bench.Target, len(rep.Targets))
	for i, t := range rep.Targets {
		ts[i] = bench.Target(t)
	}
	writeTargets(&b, ts)
	return cli.WriteReport(w, &b)
}

func newBenchChildPubSubSQLCommand(e *cli.Env) *cobra.Command {
	var cfg bench.PubSubConfig
	var dir, cpuProfile string
	var run int
	cmd := &cobra.Command{
		Use:   "pubsub-to-sql VARIANT",
		Short: "Run one pubsub-to-sql variant in this process",
		Args:  cli.ExactArgs("VARIANT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := bench.ParsePubSubVariant(args[0])
			if err != nil {
				return cli.WithCode(cli.ExitUsage, err)
			}
			if dir == "" {
				return cli.UsageErrorf("--dir is required")
			}
			if cpuProfile != "" {
				stop, err := bench.StartCPUProfile(cpuProfile)
				if err != nil {
					return cli.WithCode(cli.ExitFailure, err)
				}
				defer stop()
			}
			if err := bench.RunPubSubChild(cmd.Context(), v, run, cfg, dir, e.Stdout, e.Logger); err != nil {
				if errors.Is(err, context.Canceled) {
					return err
				}
				return cli.WithCode(cli.ExitFailure, fmt.Errorf("benchmark variant %s: %w", v, err))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&dir, "dir", "", "shared directory of the broker store")
	fl.IntVar(&run, "run", 0, "run number (names the subscription)")
	fl.Int64Var(&cfg.Messages, "messages", bench.DefaultMessages, "number of messages")
	fl.Int64Var(&cfg.Keys, "keys", bench.DefaultKeys, "number of distinct keys")
	fl.DurationVar(&cfg.Window, "window", bench.DefaultPubSubWindow, "fixed window size")
	fl.IntVar(&cfg.Workers, "workers", 1, "workers of the pipelines")
	fl.DurationVar(&cfg.CheckpointInterval, "checkpoint-interval", bench.DefaultCheckpointInterval, "checkpoint interval")
	fl.IntVar(&cfg.LatencyRate, "latency-rate", bench.DefaultLatencyRate, "publish rate of the latency variant")
	fl.DurationVar(&cfg.LatencyDuration, "latency-duration", bench.DefaultLatencyDuration, "publish duration of the latency variant")
	fl.StringVar(&cpuProfile, "cpu-profile", "", "write a CPU profile of the run to this file")
	return cmd
}
