package benchcmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/weir-dev/weir/bench"
)

// skewRun is one row of `weir bench skew`: a hot-key share's medians over
// the rounds, beside the even partition's.
type skewRun struct {
	HotShare float64 `json:"hot_share"`
	HotRows  int64   `json:"hot_rows"`
	// ElapsedMillis are every round's times; MedianMillis their median.
	ElapsedMillis []float64 `json:"elapsed_ms"`
	MedianMillis  float64   `json:"median_ms"`
	RowsPerSec    float64   `json:"rows_per_sec"`
	// RatioToEven is MedianMillis over the even partition's (the issue's
	// target: at most 2).
	RatioToEven float64 `json:"ratio_to_even"`
	// PeakHeapBytes and PeakRSSBytes are the largest over the rounds.
	PeakHeapBytes int64 `json:"peak_heap_bytes"`
	PeakRSSBytes  int64 `json:"peak_rss_bytes"`
	InputBytes    int64 `json:"input_bytes"`
}

func newBenchSkewCommand(e *cli.Env) *cobra.Command {
	var cfg bench.SkewConfig
	var shares []string
	var rounds int
	var format string
	cmd := &cobra.Command{
		Use:   "skew",
		Short: "Skew: a partition run with most rows on one key against an even one of the same size (time and memory)",
		Long: `skew writes a bounded partition of --rows rows {key, amount} to a JSON lines
file and runs ReadFromJson -> Combine (sum and count per key) -> WriteToJson
over it, as a batch migration's partition run does, once per --hot-share
(the share of the rows on one key; 0 is the even partition, over --keys
keys), each in its own child process, --rounds times alternated. Every run's
output is checked against the input (keys, totals, counts). It reports per
share the median time, rows/s, the ratio to the even partition's median (the
target is at most 2), the peak live heap (sampled every 10 ms) and the
child's peak resident set.`,
		Args: cli.ExactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cli.CheckFormat(format); err != nil {
				return err
			}
			var hs []float64
			for _, s := range shares {
				v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
				if err != nil || v < 0 || v >= 1 {
					return cli.UsageErrorf("--hot-share: %q is not a share in [0, 1)", s)
				}
				hs = append(hs, v)
			}
			if len(hs) == 0 || hs[0] != 0 {
				hs = append([]float64{0}, hs...) // the even partition is the baseline
			}
			if rounds < 1 || cfg.Rows < 1 || cfg.Keys < 1 || cfg.Workers < 1 {
				return cli.UsageErrorf("--rounds, --rows, --keys and --workers must be at least 1")
			}
			exe, err := os.Executable()
			if err != nil {
				return cli.WithCode(cli.ExitFailure, fmt.Errorf("finding the weir binary: %w", err))
			}
			runs := make([]skewRun, len(hs))
			for r := range rounds {
				for i, share := range hs {
					c := cfg
					c.HotShare = share
					e.Logger.Info("running", "round", r+1, "hot_share", share, "rows", c.Rows)
					out, rss, err := runSkewChild(cmd, e, exe, c)
					if err != nil {
						return err
					}
					run := &runs[i]
					run.HotShare, run.HotRows, run.InputBytes = share, out.HotRows, out.InputBytes
					run.ElapsedMillis = append(run.ElapsedMillis, out.ElapsedMillis)
					run.PeakHeapBytes = max(run.PeakHeapBytes, out.PeakHeapBytes)
					run.PeakRSSBytes = max(run.PeakRSSBytes, rss)
				}
			}
			for i := range runs {
				runs[i].MedianMillis = median(runs[i].ElapsedMillis)
				runs[i].RowsPerSec = float64(cfg.Rows) / (runs[i].MedianMillis / 1000)
				runs[i].RatioToEven = runs[i].MedianMillis / runs[0].MedianMillis
			}
			if format == cli.FormatJSON {
				return cli.WriteJSON(e.Stdout, runs)
			}
			tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "HOT SHARE\tHOT ROWS\tMEDIAN MS\tROWS/S\tRATIO TO EVEN\tPEAK HEAP MiB\tPEAK RSS MiB\t")
			for _, r := range runs {
				fmt.Fprintf(tw, "%.2f\t%d\t%.0f\t%.0f\t%.2f\t%.1f\t%.1f\t\n", r.HotShare, r.HotRows, r.MedianMillis, r.RowsPerSec,
					r.RatioToEven, float64(r.PeakHeapBytes)/(1<<20), float64(r.PeakRSSBytes)/(1<<20))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			_, err = fmt.Fprintf(e.Stdout, "%d rows, %d keys, %d workers, %d round(s) alternated; target: ratio to even ≤ 2\n", cfg.Rows, cfg.Keys, cfg.Workers, rounds)
			return err
		},
	}
	fl := cmd.Flags()
	fl.Int64Var(&cfg.Rows, "rows", 1_000_000, "rows of the partition")
	fl.Int64Var(&cfg.Keys, "keys", 10_000, "keys the rows not on the hot key spread over")
	fl.IntVar(&cfg.Workers, "workers", 2, "workers of the job")
	fl.StringSliceVar(&shares, "hot-share", []string{"0", "0.8"}, "shares of the rows on one key, comma-separated (0, the even partition, is always run first)")
	fl.IntVar(&rounds, "rounds", 3, "rounds, alternating the shares (the medians are reported)")
	cli.AddFormatFlag(cmd, &format)
	cmd.AddCommand(newBenchSkewChildCommand(e))
	return cmd
}

// median returns the median of xs (the mean of the middle two for an even
// count).
func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// runSkewChild runs one measurement in a fresh process, so that its
// memory is the run's alone.
func runSkewChild(cmd *cobra.Command, e *cli.Env, exe string, cfg bench.SkewConfig) (bench.SkewOutcome, int64, error) {
	dir, err := os.MkdirTemp("", "weir-bench-skew-")
	if err != nil {
		return bench.SkewOutcome{}, 0, cli.WithCode(cli.ExitFailure, fmt.Errorf("creating a directory for the partition: %w", err))
	}
	defer os.RemoveAll(dir)
	c := exec.CommandContext(cmd.Context(), exe, "bench", "skew", "child", "--rows", strconv.FormatInt(cfg.Rows, 10),
		"--keys", strconv.FormatInt(cfg.Keys, 10), "--hot-share", strconv.FormatFloat(cfg.HotShare, 'g', -1, 64),
		"--workers", strconv.Itoa(cfg.Workers), "--dir", dir)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, e.Stderr
	if err := c.Run(); err != nil {
		return bench.SkewOutcome{}, 0, cli.WithCode(cli.ExitFailure, fmt.Errorf("bench skew, hot share %v: %w", cfg.HotShare, err))
	}
	var o bench.SkewOutcome
	if err := json.Unmarshal(bytes.TrimSpace(lastLineOf(out.Bytes())), &o); err != nil {
		return bench.SkewOutcome{}, 0, cli.WithCode(cli.ExitFailure, fmt.Errorf("reading the outcome of hot share %v: %w", cfg.HotShare, err))
	}
	return o, childPeakRSS(c), nil
}

// newBenchSkewChildCommand is the hidden command one measurement of
// `weir bench skew` runs in its own process.
func newBenchSkewChildCommand(e *cli.Env) *cobra.Command {
	var cfg bench.SkewConfig
	cmd := &cobra.Command{
		Use:    "child",
		Short:  "Run one skew measurement in this process (used by weir bench skew)",
		Hidden: true,
		Args:   cli.ExactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := bench.RunSkew(cmd.Context(), cfg, e.Logger)
			if err != nil {
				return cli.WithCode(cli.ExitFailure, err)
			}
			b, err := json.Marshal(out)
			if err != nil {
				return cli.WithCode(cli.ExitFailure, err)
			}
			_, err = fmt.Fprintln(e.Stdout, string(b))
			return err
		},
	}
	fl := cmd.Flags()
	fl.Int64Var(&cfg.Rows, "rows", 1_000_000, "rows")
	fl.Int64Var(&cfg.Keys, "keys", 10_000, "keys")
	fl.Float64Var(&cfg.HotShare, "hot-share", 0, "the hot key's share")
	fl.IntVar(&cfg.Workers, "workers", 2, "workers")
	fl.StringVar(&cfg.Dir, "dir", "", "directory of the files")
	return cmd
}
