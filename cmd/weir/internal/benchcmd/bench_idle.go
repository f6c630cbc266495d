package benchcmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-dev/weir/bench"
	"github.com/weir-dev/weir/cmd/weir/internal/cli"
)

// idleRow is one row of `weir bench idle`: a job count's medians over the
// rounds.
type idleRow struct {
	Jobs int `json:"jobs"`
	// CoreShares are every round's shares of one core; Median theirs.
	CoreShares []float64 `json:"core_shares"`
	Median     float64   `json:"median_core_share"`
	// PerJob is (Median - the 0-job median) / Jobs: one idle job's share of
	// a core (the target: under 0.001).
	PerJob               float64 `json:"per_job_core_share"`
	CheckpointsPerJobSec float64 `json:"checkpoints_per_job_per_sec"`
	Goroutines           int     `json:"goroutines"`
	HeapMiB              float64 `json:"heap_mib"`
}

func newBenchIdleCommand(e *cli.Env) *cobra.Command {
	var jobs, rounds int
	var dur time.Duration
	var format, profile string
	cmd := &cobra.Command{
		Use:   "idle",
		Short: "Idle cost: the CPU a job service spends on streaming jobs that receive nothing",
		Long: `idle starts a job service with an embedded broker in a child process, submits
--jobs streaming jobs that each read a topic nobody publishes to (a windowed
Combine upserted into SQLite, checkpoints at the default interval), waits for
them to settle and measures the process's CPU time over --duration. It does
the same with no job (the baseline), --rounds times alternated, and reports
the medians: the share of a core the process used, and per job the share
above the baseline (the target: under 0.1% of a core).`,
		Args: cli.ExactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cli.CheckFormat(format); err != nil {
				return err
			}
			if jobs < 1 || rounds < 1 || dur <= 0 {
				return cli.UsageErrorf("--jobs and --rounds must be at least 1 and --duration positive")
			}
			exe, err := os.Executable()
			if err != nil {
				return cli.WithCode(cli.ExitFailure, fmt.Errorf("finding the weir binary: %w", err))
			}
			rows := []idleRow{{Jobs: 0}, {Jobs: jobs}}
			var cps [2][]float64
			for r := range rounds {
				for i := range rows {
					e.Logger.Info("running", "round", r+1, "jobs", rows[i].Jobs)
					prof := ""
					if profile != "" && rows[i].Jobs > 0 && r == 0 {
						prof = profile
					}
					res, err := runIdleChild(cmd, e, exe, rows[i].Jobs, dur, prof)
					if err != nil {
						return err
					}
					rows[i].CoreShares = append(rows[i].CoreShares, res.CoreShare())
					rows[i].Goroutines, rows[i].HeapMiB = res.Goroutines, float64(res.HeapBytes)/(1<<20)
					if res.Jobs > 0 {
						cps[i] = append(cps[i], float64(res.Checkpoints)/float64(res.Jobs)/res.Wall.Seconds())
					}
				}
			}
			for i := range rows {
				rows[i].Median = median(rows[i].CoreShares)
				if rows[i].Jobs > 0 {
					rows[i].PerJob = (rows[i].Median - rows[0].Median) / float64(rows[i].Jobs)
					rows[i].CheckpointsPerJobSec = median(cps[i])
				}
			}
			if format == cli.FormatJSON {
				return cli.WriteJSON(e.Stdout, rows)
			}
			tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "JOBS\tCORE %\tPER JOB CORE %\tCHECKPOINTS/JOB/S\tGOROUTINES\tHEAP MiB\t")
			for _, r := range rows {
				fmt.Fprintf(tw, "%d\t%.2f\t%.4f\t%.2f\t%d\t%.1f\t\n", r.Jobs, 100*r.Median, 100*r.PerJob, r.CheckpointsPerJobSec, r.Goroutines, r.HeapMiB)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			_, err = fmt.Fprintf(e.Stdout, "medians of %d round(s) of %s, alternated; target: per job under 0.1%% of a core\n", rounds, dur)
			return err
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&jobs, "jobs", 100, "idle streaming jobs")
	fl.IntVar(&rounds, "rounds", 3, "rounds, alternating the baseline and the jobs (the medians are reported)")
	fl.DurationVar(&dur, "duration", 20*time.Second, "how long the CPU time is measured once the jobs run")
	fl.StringVar(&profile, "cpu-profile", "", "write the first round's CPU profile of the jobs' process, over the measured stretch, to FILE")
	cli.AddFormatFlag(cmd, &format)
	cmd.AddCommand(newBenchIdleChildCommand(e))
	return cmd
}

// runIdleChild runs one measurement in a fresh process.
func runIdleChild(cmd *cobra.Command, e *cli.Env, exe string, jobs int, dur time.Duration, profile string) (bench.IdleResult, error) {
	dir, err := os.MkdirTemp("", "weir-bench-idle-")
	if err != nil {
		return bench.IdleResult{}, cli.WithCode(cli.ExitFailure, err)
	}
	defer os.RemoveAll(dir)
	c := exec.CommandContext(cmd.Context(), exe, "bench", "idle", "child", "--jobs", strconv.Itoa(jobs), "--duration", dur.String(),
		"--dir", dir, "--cpu-profile", profile)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, e.Stderr
	if err := c.Run(); err != nil {
		return bench.IdleResult{}, cli.WithCode(cli.ExitFailure, fmt.Errorf("bench idle, %d jobs: %w", jobs, err))
	}
	var res bench.IdleResult
	if err := json.Unmarshal(bytes.TrimSpace(lastLineOf(out.Bytes())), &res); err != nil {
		return bench.IdleResult{}, cli.WithCode(cli.ExitFailure, fmt.Errorf("reading the outcome of %d jobs: %w", jobs, err))
	}
	return res, nil
}

// newBenchIdleChildCommand is the hidden command one measurement of
// `weir bench idle` runs in its own process.
func newBenchIdleChildCommand(e *cli.Env) *cobra.Command {
	var cfg bench.IdleConfig
	var profile string
	cmd := &cobra.Command{
		Use:    "child",
		Short:  "Run one idle measurement in this process (used by weir bench idle)",
		Hidden: true,
		Args:   cli.ExactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if profile != "" {
				f, err := os.Create(profile)
				if err != nil {
					return cli.WithCode(cli.ExitFailure, err)
				}
				defer f.Close()
				cfg.Profile = f
			}
			res, err := bench.RunIdle(cmd.Context(), cfg)
			if err != nil {
				return cli.WithCode(cli.ExitFailure, err)
			}
			b, err := json.Marshal(res)
			if err != nil {
				return cli.WithCode(cli.ExitFailure, err)
			}
			_, err = fmt.Fprintln(e.Stdout, string(b))
			return err
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&cfg.Jobs, "jobs", 100, "jobs")
	fl.DurationVar(&cfg.Duration, "duration", 20*time.Second, "measurement")
	fl.StringVar(&cfg.Dir, "dir", "", "directory")
	fl.StringVar(&profile, "cpu-profile", "", "CPU profile file")
	return cmd
}
