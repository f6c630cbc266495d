package benchcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/weir-dev/weir/bench"
)

// stateRun is one row of `weir bench state`: an outcome with the child's
// peak memory and the target for its job.
type stateRun struct {
	bench.StateOutcome
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
	// TargetHeapBytesPerKey is the goal for the heap per key (≤ 200 bytes
	// for YAML, ≤ 100 for the SDK, none for a stateful step: 0);
	// TargetMet says whether it is reached.
	TargetHeapBytesPerKey float64 `json:"target_heap_bytes_per_key"`
	TargetMet             bool    `json:"target_met"`
}

// stateTarget is the heap-per-key goal of a job, in bytes.
func stateTarget(job string) float64 {
	switch job {
	case "yaml":
		return 200
	case "sdk":
		return 100
	}
	return 0
}

func newBenchStateCommand(e *cli.Env) *cobra.Command {
	var keys, jobs []string
	var workers int
	var format, heapProfile, cpuProfile string
	var cmp compareFlags
	cmd := &cobra.Command{
		Use:   "state",
		Short: "State size per key: live heap and checkpoint bytes of a count-and-sum job, checkpoint time full and at 1% changed",
		Long: `state runs a streaming job that holds N distinct keys of a count-and-sum per
key (a string key "key-i", two int64 accumulators, the global window, so
nothing is ever emitted) with checkpoints into a Pebble state store, one
child process per job and key count. The source emits each key once, then
idles. It measures:

  heap B/key      live heap (HeapAlloc after two GCs) while the job holds
                  the keys, minus the same before it started, over N; also
                  after the full checkpoint
  held            the keys the keyed step reports holding
  cp B/key        the state store directory's growth on disk after the
                  checkpoint covering every key, over N; and the
                  checkpoint's own key+value bytes per key
  full cp ms      time to take, write (synced) and commit that checkpoint
  1% cp ms        the same after 1% of the keys received one more element
  1000 keys cp ms the same after 1,000 keys received one more element
                  (the same work whatever the keys held)
  1% again ms     the same after 1% of the keys changed once more: the
                  first 1% checkpoint waits for the store to flush the
                  full one from memory (hundreds of MB at millions of
                  keys); this one is the steady state's
  restore ms      the job stopped and the state store opened again (a
                  restart): time for a new execution to start from the
                  last checkpoint with every key loaded; restore keys/s
                  is the keys over it (the keys held must match)

--job sdk is a Go SDK pipeline (Generate -> CombinePerKey); --job yaml is the
YAML pipeline Generate -> MapToFields -> Combine (count, sum by key) loaded
with yamlpipe and run in-process, its unbounded Generate capped at N
elements by the benchmark; --job stateful is the SDK pipeline with a
StatefulParDo that holds the count and sum in a value cell instead (its
restore decodes each key's cells). The targets shown are issue 25's: heap
≤ 200 B/key for YAML, ≤ 100 B/key for the SDK (none for stateful).

--compare BASE runs the same benchmark by this binary and by BASE (a weir
binary, or a git revision, built for the occasion) in --rounds alternated
rounds, and prints per job and key count each build's median heap B/key,
after-checkpoint and restored B/key, checkpoint disk B/key, full, 1% and
1000-key checkpoint ms (all better lower) and restore keys/s, with the
spread of the per-round ratios and a verdict (faster or slower only when
every round's ratio is beyond 1 ± 2%). --fail-if-slower exits 1 when a
figure is worse.`,
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
			for _, j := range jobs {
				if j != "sdk" && j != "yaml" && j != "stateful" {
					return cli.UsageErrorf("--job: %q is not sdk, yaml or stateful", j)
				}
			}
			if workers < 1 {
				return cli.UsageErrorf("--workers must be at least 1")
			}
			if err := cmp.check(cmd); err != nil {
				return err
			}
			if cmp.compare != "" {
				if heapProfile != "" || cpuProfile != "" {
					return cli.UsageErrorf("--heap-profile and --cpu-profile cannot be combined with --compare")
				}
				return runStateCompare(cmd.Context(), e, cmp, format, keys, jobs, workers)
			}
			exe, err := os.Executable()
			if err != nil {
				return cli.WithCode(cli.ExitFailure, fmt.Errorf("finding the weir binary: %w", err))
			}
			for _, dir := range []string{heapProfile, cpuProfile} {
				if dir == "" {
					continue
				}
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return cli.WithCode(cli.ExitFailure, fmt.Errorf("creating the profiles' directory: %w", err))
				}
			}
			var runs []stateRun
			for _, job := range jobs {
				for _, n := range counts {
					r, err := runStateChild(cmd, e, exe, job, n, workers, heapProfile, cpuProfile)
					if err != nil {
						return err
					}
					runs = append(runs, r)
				}
			}
			if format == cli.FormatJSON {
				return cli.WriteJSON(e.Stdout, runs)
			}
			tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "JOB\tKEYS\tHELD\tHEAP B/KEY\tAFTER CP B/KEY\tTARGET\tCP DISK B/KEY\tCP ENTRY B/KEY\tFULL CP MS\t1% KEYS\t1% CP MS\t1% ENTRIES\t1000 KEYS CP MS\t1% AGAIN MS\tRESTORE MS\tRESTORE KEYS/S\tRESTORED B/KEY\tPEAK RSS MiB\t")
			for _, r := range runs {
				target := "-"
				if r.TargetHeapBytesPerKey > 0 {
					target = fmt.Sprintf("≤ %.0f missed", r.TargetHeapBytesPerKey)
					if r.TargetMet {
						target = fmt.Sprintf("≤ %.0f met", r.TargetHeapBytesPerKey)
					}
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.0f\t%s\t%.1f\t%.1f\t%.1f\t%d\t%.1f\t%d\t%.1f\t%.1f\t%.0f\t%.0f\t%.0f\t%.0f\t\n", r.Job, r.Keys, r.KeysHeld,
					r.HeapBytesPerKey, r.HeapBytesPerKeyAfterCheckpoint, target, r.CheckpointBytesPerKey,
					r.CheckpointEntryBytesPerKey, r.FullCheckpointMillis, r.ChangedKeys, r.ChangedCheckpointMillis,
					r.ChangedCheckpointEntries, r.FixedChangedCheckpointMillis, r.ChangedAgainCheckpointMillis, r.RestoreMillis, r.RestoreKeysPerSec, r.HeapBytesPerKeyAfterRestore, float64(r.PeakRSSBytes)/(1<<20))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(runs) > 0 {
				r := runs[0]
				fmt.Fprintf(e.Stdout, "GOMAXPROCS %d, %s, load average %.2f at the first run\n", r.GOMAXPROCS, r.GoVersion, r.LoadAverage)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&keys, "keys", []string{"100000", "1000000"}, "distinct keys held, comma-separated (one run each)")
	fl.StringSliceVar(&jobs, "job", []string{"sdk", "yaml"}, "jobs to measure: sdk, yaml, stateful (comma-separated)")
	fl.IntVar(&workers, "workers", 2, "workers of the job")
	fl.StringVar(&heapProfile, "heap-profile", "", "directory to write heap profiles to (state-JOB-KEYS-held.pprof, -after-cp.pprof)")
	fl.StringVar(&cpuProfile, "cpu-profile", "", "directory to write CPU profiles of the full checkpoint and of the restore to (state-JOB-KEYS-full-cp.pprof, -restore.pprof)")
	addCompareFlags(cmd, &cmp)
	cli.AddFormatFlag(cmd, &format)
	cmd.AddCommand(newBenchStateChildCommand(e))
	return cmd
}

// runStateCompare runs the same `weir bench state` by this build and the
// base, in alternated rounds.
func runStateCompare(ctx context.Context, e *cli.Env, cmp compareFlags, format string, keys, jobs []string, workers int) error {
	args := []string{"bench", "state", "--format", "json", "--keys", strings.Join(keys, ","), "--job", strings.Join(jobs, ","),
		"--workers", strconv.Itoa(workers), "--log-level", childLogLevel(ctx, e)}
	return runFigureCompare(ctx, e, figureCompare{
		benchmark: "state", args: args, flags: cmp, format: format,
		title: fmt.Sprintf("jobs %s at %s keys, %d worker(s)", strings.Join(jobs, ","), strings.Join(keys, ","), workers),
		figures: func(out []byte) ([]bench.Figure, error) {
			var runs []stateRun
			if err := json.Unmarshal(out, &runs); err != nil {
				return nil, err
			}
			var figs []bench.Figure
			for _, r := range runs {
				v := fmt.Sprintf("%s %d", r.Job, r.Keys)
				lower := func(name string, x float64) bench.Figure {
					return bench.Figure{Variant: v, Name: name, Value: x, LowerIsBetter: true}
				}
				figs = append(figs, lower("heap B/key", r.HeapBytesPerKey), lower("after cp B/key", r.HeapBytesPerKeyAfterCheckpoint),
					lower("restored B/key", r.HeapBytesPerKeyAfterRestore), lower("cp disk B/key", r.CheckpointBytesPerKey),
					lower("full cp ms", r.FullCheckpointMillis), lower("1% cp ms", r.ChangedCheckpointMillis),
					lower("1000 keys cp ms", r.FixedChangedCheckpointMillis),
					bench.Figure{Variant: v, Name: "restore keys/s", Value: r.RestoreKeysPerSec},
					lower("peak RSS MiB", float64(r.PeakRSSBytes)/(1<<20)))
				if r.ChangedAgainCheckpointMillis > 0 { // not measured by a base built before it
					again := lower("1% again cp ms", r.ChangedAgainCheckpointMillis)
					again.Optional = true
					figs = append(figs, again)
				}
			}
			if len(figs) == 0 {
				return nil, errors.New("no runs measured")
			}
			return figs, nil
		},
		notes: func(this, base []byte) []string {
			var a, b []stateRun
			if json.Unmarshal(this, &a) != nil || json.Unmarshal(base, &b) != nil || len(a) != len(b) {
				return nil
			}
			var notes []string
			for i := range a {
				if a[i].KeysHeld != b[i].KeysHeld {
					notes = append(notes, fmt.Sprintf("%s %d: this build held %d keys, the base %d", a[i].Job, a[i].Keys, a[i].KeysHeld, b[i].KeysHeld))
				}
			}
			return notes
		},
	})
}

// runStateChild runs one measurement in a fresh process, so that its heap
// is the job's alone.
func runStateChild(cmd *cobra.Command, e *cli.Env, exe, job string, n int64, workers int, profileDir, cpuDir string) (stateRun, error) {
	dir, err := os.MkdirTemp("", "weir-bench-state-")
	if err != nil {
		return stateRun{}, cli.WithCode(cli.ExitFailure, fmt.Errorf("creating a directory for the state store: %w", err))
	}
	defer os.RemoveAll(dir)
	c := exec.CommandContext(cmd.Context(), exe, "bench", "state", "child", "--job", job, "--keys", strconv.FormatInt(n, 10),
		"--workers", strconv.Itoa(workers), "--dir", dir)
	if profileDir != "" {
		c.Args = append(c.Args, "--heap-profile", filepath.Join(profileDir, fmt.Sprintf("state-%s-%d", job, n)))
	}
	if cpuDir != "" {
		c.Args = append(c.Args, "--cpu-profile", filepath.Join(cpuDir, fmt.Sprintf("state-%s-%d", job, n)))
	}
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, e.Stderr
	e.Logger.Info("running", "job", job, "keys", n)
	if err := c.Run(); err != nil {
		return stateRun{}, cli.WithCode(cli.ExitFailure, fmt.Errorf("bench state, %s job with %d keys: %w", job, n, err))
	}
	var r stateRun
	if err := json.Unmarshal(bytes.TrimSpace(lastLineOf(out.Bytes())), &r.StateOutcome); err != nil {
		return stateRun{}, cli.WithCode(cli.ExitFailure, fmt.Errorf("reading the outcome of the %s job with %d keys: %w", job, n, err))
	}
	r.PeakRSSBytes = childPeakRSS(c)
	r.TargetHeapBytesPerKey = stateTarget(job)
	r.TargetMet = r.TargetHeapBytesPerKey > 0 && r.HeapBytesPerKey <= r.TargetHeapBytesPerKey
	return r, nil
}

// newBenchStateChildCommand is the hidden command one measurement of
// `weir bench state` runs in its own process.
func newBenchStateChildCommand(e *cli.Env) *cobra.Command {
	var cfg bench.StateConfig
	cmd := &cobra.Command{
		Use:    "child",
		Short:  "Run one state measurement in this process (used by weir bench state)",
		Hidden: true,
		Args:   cli.ExactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.Dir == "" {
				return cli.UsageErrorf("--dir is required")
			}
			out, err := bench.RunState(cmd.Context(), cfg)
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
	fl.StringVar(&cfg.Job, "job", "sdk", "sdk, yaml or stateful")
	fl.Int64Var(&cfg.Keys, "keys", 100000, "distinct keys held")
	fl.IntVar(&cfg.Workers, "workers", 2, "workers")
	fl.StringVar(&cfg.Dir, "dir", "", "directory of the state store")
	fl.StringVar(&cfg.HeapProfile, "heap-profile", "", "path prefix of the heap profiles")
	fl.StringVar(&cfg.CPUProfile, "cpu-profile", "", "path prefix of the full checkpoint's and the restore's CPU profiles")
	return cmd
}
