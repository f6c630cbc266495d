package benchcmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-dev/weir/bench"
)

// childPeakRSS is the peak resident memory, in bytes, of the benchmark
// child c that has run (0 where the system does not report it).
func childPeakRSS(c *exec.Cmd) int64 {
	if ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss * 1024
	}
	return 0
}

// snapshotRun is one row of `weir bench snapshot`: an outcome with the
// child's peak memory.
type snapshotRun struct {
	bench.SnapshotOutcome
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
}

func newBenchSnapshotCommand(e *cli.Env) *cobra.Command {
	var keys []string
	var rate float64
	var workers int
	var steady, interval time.Duration
	var format string
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Job snapshots at N keys of state: pause against a periodic checkpoint's, READY, export/import, start from it",
		Long: `snapshot runs a YAML job (ReadFromPubSub -> Combine count per key -> WriteToSql
upsert) in the job service with an embedded broker, builds --keys keys of
state by publishing one message per key, then feeds it --rate messages/s with
the service's periodic checkpoint every --checkpoint-interval. Per key count,
in one child process, it measures:

  checkpoint pause   the longest time the job read nothing over a stretch of
                     steady load with periodic checkpoints only
  snapshot pause     the same from the snapshot request until READY
  ready              time from the request to READY, and disk_size_bytes
  export / import    MB/s of the snapshot file (import into a fresh data
                     directory), and the import's peak heap growth
  restore            the service stopped and opened again: time from Open to
                     the job's first element (restore from checkpoint), and
                     the keys over it (restore keys/s)
  from snapshot      the job cancelled and a new job of the name created from
                     the snapshot: time from the request to its first
                     element, and the keys over it

Finally the job started from the snapshot is drained and the table's per-key
counts are checked against the messages published.`,
		Args: cli.ExactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cli.CheckFormat(format); err != nil {
				return err
			}
			var counts []int64
			for _, k := range keys {
				n, err := strconv.ParseInt(strings.TrimSpace(k), 10, 64)
				if err != nil || n < 1 {
					return cli.UsageErrorf("--keys: %q is not a positive number", k)
				}
				counts = append(counts, n)
			}
			if rate <= 0 || workers < 1 || interval < 10*time.Millisecond {
				return cli.UsageErrorf("--rate must be positive, --workers at least 1 and --checkpoint-interval at least 10ms")
			}
			exe, err := os.Executable()
			if err != nil {
				return cli.WithCode(cli.ExitFailure, fmt.Errorf("finding the weir binary: %w", err))
			}
			var runs []snapshotRun
			var failed []string
			for _, n := range counts {
				dir, err := os.MkdirTemp("", "weir-bench-snapshot-")
				if err != nil {
					return cli.WithCode(cli.ExitFailure, err)
				}
				c := exec.CommandContext(cmd.Context(), exe, benchChildCommand+"-snapshot", "--keys", strconv.FormatInt(n, 10),
					"--rate", strconv.FormatFloat(rate, 'f', -1, 64), "--workers", strconv.Itoa(workers), "--steady", steady.String(),
					"--checkpoint-interval", interval.String(), "--dir", dir)
				var out bytes.Buffer
				c.Stdout, c.Stderr = &out, e.Stderr
				e.Logger.Info("running", "keys", n)
				runErr := c.Run()
				os.RemoveAll(dir)
				var r snapshotRun
				if len(bytes.TrimSpace(out.Bytes())) == 0 {
					return cli.WithCode(cli.ExitFailure, fmt.Errorf("bench snapshot with %d keys: %w", n, runErr))
				}
				if err := json.Unmarshal(bytes.TrimSpace(lastLineOf(out.Bytes())), &r.SnapshotOutcome); err != nil {
					return cli.WithCode(cli.ExitFailure, fmt.Errorf("reading the outcome with %d keys: %w", n, err))
				}
				if runErr != nil && r.Error == "" {
					return cli.WithCode(cli.ExitFailure, fmt.Errorf("bench snapshot with %d keys: %w", n, runErr))
				}
				if r.Error != "" {
					failed = append(failed, fmt.Sprintf("%d keys: %s", n, r.Error))
				}
				r.PeakRSSBytes = childPeakRSS(c)
				runs = append(runs, r)
			}
			// A failed check is reported after the figures.
			fail := func() error {
				if len(failed) == 0 {
					return nil
				}
				return cli.WithCode(cli.ExitFailure, fmt.Errorf("bench snapshot: the check failed: %s", strings.Join(failed, "; ")))
			}
			if format == cli.FormatJSON {
				if err := cli.WriteJSON(e.Stdout, runs); err != nil {
					return err
				}
				return fail()
			}
			tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "KEYS\tCP PAUSE MS\tSNAP PAUSE MS (CUT/COPY)\tRATIO\tREADY MS\tDISK MB\tEXPORT MB/S\tIMPORT MB/S\tIMPORT HEAP MiB\tRESTORE FIRST MS\tRESTORE KEYS/S\tFROM SNAP FIRST MS\tFROM SNAP KEYS/S\tVERIFIED\tPEAK RSS MiB\t")
			for _, r := range runs {
				fmt.Fprintf(tw, "%d\t%.1f\t%.1f (%.1f/%.1f)\t%.2f\t%.0f\t%.1f\t%.1f\t%.1f\t%.1f\t%.0f\t%.0f\t%.0f\t%.0f\t%t\t%.0f\t\n", r.Keys, r.CheckpointPauseMillis, r.SnapshotPauseMillis, r.CutPauseMillis, r.CopyPauseMillis,
					r.PauseRatio, r.ReadyMillis, float64(r.DiskSizeBytes)/1e6, r.ExportMBps, r.ImportMBps, float64(r.ImportHeapPeakBytes)/(1<<20),
					r.RestoreFirstMillis, r.RestoreKeysPerSec, r.FromSnapshotFirstMillis, r.FromSnapshotKeysPerSec, r.Verified, float64(r.PeakRSSBytes)/(1<<20))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			return fail()
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&keys, "keys", []string{"100000", "1000000"}, "keys of state, comma-separated (one run each)")
	fl.Float64Var(&rate, "rate", 20000, "steady load in messages per second")
	fl.IntVar(&workers, "workers", 2, "workers of the job")
	fl.DurationVar(&steady, "steady", 2*time.Second, "length of each stretch of steady load")
	fl.DurationVar(&interval, "checkpoint-interval", time.Second, "the service's periodic checkpoint interval")
	cli.AddFormatFlag(cmd, &format)
	return cmd
}

// newBenchChildSnapshotCommand is the hidden command one run of
// `weir bench snapshot` executes in its own process.
func newBenchChildSnapshotCommand(e *cli.Env) *cobra.Command {
	var cfg bench.SnapshotConfig
	cmd := &cobra.Command{
		Use:    benchChildCommand + "-snapshot",
		Short:  "Run one snapshot benchmark in this process (used by weir bench snapshot)",
		Hidden: true,
		Args:   cli.ExactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.Dir == "" {
				return cli.UsageErrorf("--dir is required")
			}
			out, runErr := bench.RunSnapshot(cmd.Context(), cfg)
			if runErr != nil && !errors.Is(runErr, bench.ErrMismatch) {
				return cli.WithCode(cli.ExitFailure, runErr)
			}
			if runErr != nil {
				// The figures were measured: report them with the failed
				// check, and fail.
				out.Error = runErr.Error()
			}
			b, err := json.Marshal(out)
			if err != nil {
				return cli.WithCode(cli.ExitFailure, err)
			}
			if _, err := fmt.Fprintln(e.Stdout, string(b)); err != nil {
				return err
			}
			if runErr != nil {
				return cli.WithCode(cli.ExitFailure, runErr)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.Int64Var(&cfg.Keys, "keys", 100000, "keys of state")
	fl.Float64Var(&cfg.Rate, "rate", 20000, "steady load in messages per second")
	fl.IntVar(&cfg.Workers, "workers", 2, "workers")
	fl.DurationVar(&cfg.Steady, "steady", 2*time.Second, "length of each stretch of steady load")
	fl.DurationVar(&cfg.CheckpointInterval, "checkpoint-interval", time.Second, "periodic checkpoint interval")
	fl.StringVar(&cfg.Dir, "dir", "", "directory of the broker, the data and the snapshot file")
	return cmd
}
