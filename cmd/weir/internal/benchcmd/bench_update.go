package benchcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-dev/weir/bench"
	"github.com/weir-dev/weir/cmd/weir/internal/cli"
)

// updateRun is one row of `weir bench update`: an outcome with the child's
// peak memory.
type updateRun struct {
	bench.UpdateOutcome
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
}

func newBenchUpdateCommand(e *cli.Env) *cobra.Command {
	var keys []string
	var rate float64
	var workers int
	var steady time.Duration
	var swaps, repeat int
	var format, publisher string
	var jobs, dedupes, modes, migrates []string
	cmd := &cobra.Command{
		Use:   "update",
		Short: "Pause of an in-place update against stop-and-restore, with N keys of state under steady load",
		Long: `update builds a keyed job with --keys keys of per-key state (a sum per key),
runs it under a steady load (--rate elements/s) with a checkpoint every second
into the Pebble store, then replaces it: "update" pauses it at a checkpoint and
a new execution adopts the keyed state in memory (weir's in-place update);
"restore" stops it the same way and starts a new execution that reads the state
back from the store (stop and restore from checkpoint). The pause is the longest
gap between two consecutive elements entering the pipeline around the swap.
Each run is its own child process.

--job yaml runs the job as the issue asks: a YAML pipeline (ReadFromPubSub ->
Combine count per key -> WriteToSql upsert) in the job service with an
embedded broker, built by publishing one message per key, then fed at --rate;
"update" is the service's in-place update, "restore" stops the service (every
job checkpoints) and opens it again (state read back from the store). The gap
is sampled every millisecond from the elements the live execution has read,
and a baseline gap over as long a stretch without a swap is reported beside it.
--swaps N repeats the swap N times in one run of the yaml job (each after its
own baseline stretch) and reports the pauses' and baselines' p50 and p99
(nearest rank: below 100 swaps the p99 is the largest).
The steady load is published from the job's process (--publisher inline),
whose garbage collector then also pays for the publisher; --publisher process
publishes it from a process of its own over the broker's network port on
127.0.0.1, which takes the publisher's allocations out of the job's process
but, on a small machine, adds a process and a TCP connection on the same CPUs.
--dedupe none,id_field runs the yaml job both without and with id_field on
its source (de-duplication by message ID, whose memory of IDs an in-place
update hands over), alternating, so that the two pauses are measured under
the same conditions; --repeat N runs the whole alternation N times.
--migrate none,init runs the yaml job's in-place update both without and
with a declared state migration, alternating: the new version appends an
accumulator that starts, for every stored key, from a CEL init over the old
ones (twice: {init: "n * 2"}), evaluated when the new execution first
touches the key. After the swaps, with the steady load stopped, a touch pass
publishes one message per key and reports how long the job took to
aggregate them (TOUCH S): with the migration, the pass that migrates every
key, so its keys per second against the pass without is the migration's own
cost, and the pause beside it says what the migration adds to the update's.
--migrate rekey declares a re-key instead (rekey: {from: [key], key: {key:
"key / 2"}}): every stored key moves to half its value and each pair of counts
merges, during the update's handover, so the pause holds the move (run it
with --swaps 1: later swaps find the keys moved already); the step must then
hold half the keys, with no reject.
--job sdk runs the same measurement on a Go SDK pipeline driven directly
through the runner, with a probe step after the source; its per-key totals
are verified (it has no Pub/Sub source: it runs once, without --dedupe).`,
		Args: cli.ExactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cli.CheckFormat(format); err != nil {
				return err
			}
			exe, err := os.Executable()
			if err != nil {
				return cli.WithCode(cli.ExitFailure, fmt.Errorf("finding the weir binary: %w", err))
			}
			if swaps < 1 {
				return cli.UsageErrorf("--swaps: %d is not a positive number", swaps)
			}
			if publisher != publisherProcess && publisher != publisherInline {
				return cli.UsageErrorf("--publisher: %q is neither %s nor %s", publisher, publisherProcess, publisherInline)
			}
			if repeat < 1 {
				return cli.UsageErrorf("--repeat: %d is not a positive number", repeat)
			}
			for _, m := range modes {
				if m != "update" && m != "restore" {
					return cli.UsageErrorf("--mode: %q is neither update nor restore", m)
				}
			}
			for _, d := range dedupes {
				if d != dedupeNone && d != dedupeIDField {
					return cli.UsageErrorf("--dedupe: %q is neither %s nor %s", d, dedupeNone, dedupeIDField)
				}
			}
			for _, m := range migrates {
				if m != migrateNone && m != migrateInit && m != migrateRekey {
					return cli.UsageErrorf("--migrate: %q is none of %s, %s and %s", m, migrateNone, migrateInit, migrateRekey)
				}
			}
			var runs []updateRun
			for _, k := range keys {
				n, err := strconv.ParseInt(strings.TrimSpace(k), 10, 64)
				if err != nil || n < 1 {
					return cli.UsageErrorf("--keys: %q is not a positive number", k)
				}
				for _, job := range jobs {
					if job != "yaml" && job != "sdk" {
						return cli.UsageErrorf("--job: %q is neither yaml nor sdk", job)
					}
					variants := dedupes
					if job == "sdk" {
						variants = []string{dedupeNone}
					}
					for range repeat {
						for _, mode := range modes {
							// A migration is measured at an in-place update
							// of the yaml job only.
							migrations := []string{migrateNone}
							if job == "yaml" && mode == "update" {
								migrations = migrates
							}
							for _, d := range variants {
								for _, m := range migrations {
									r, err := runUpdateChild(cmd.Context(), e, exe, mode, n, rate, workers, steady, swaps, job == "yaml", publisher, d == dedupeIDField, m)
									if err != nil {
										return err
									}
									runs = append(runs, r)
								}
							}
						}
					}
				}
			}
			if format == cli.FormatJSON {
				return cli.WriteJSON(e.Stdout, runs)
			}
			tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "JOB\tDEDUPE\tMIGRATE\tMODE\tKEYS\tSWAPS\tPAUSE MS\tP50\tP99\tBASELINE GAP MS\tP50\tP99\tSWAP MS\tFILL S\tTOUCH S\tTOUCH KEYS/S\tELEMENTS\tPEAK RSS MiB\t")
			for _, r := range runs {
				job, n, p50, p99, base, b50, b99 := "sdk", "1", "-", "-", "-", "-", "-"
				if r.Server {
					ms := func(v float64) string { return fmt.Sprintf("%.1f", v) }
					job, n = "yaml", strconv.Itoa(len(r.PausesMillis))
					p50, p99, base, b50, b99 = ms(r.PauseP50Millis), ms(r.PauseP99Millis), ms(r.BaselineMillis), ms(r.BaselineP50Millis), ms(r.BaselineP99Millis)
				}
				dedupe := dedupeNone
				if r.IDField {
					dedupe = dedupeIDField
				}
				migrate, touch, touchRate := migrateNone, "-", "-"
				switch {
				case r.Migrate:
					migrate = migrateInit
				case r.Rekey:
					migrate = migrateRekey
				}
				if r.TouchSeconds > 0 {
					touch, touchRate = fmt.Sprintf("%.2f", r.TouchSeconds), fmt.Sprintf("%.0f", float64(r.Keys)/r.TouchSeconds)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%.1f\t%s\t%s\t%s\t%s\t%s\t%.1f\t%.1f\t%s\t%s\t%d\t%.0f\t\n", job, dedupe, migrate, r.Mode, r.Keys, n, r.PauseMillis, p50, p99, base, b50, b99, r.SwapMillis, r.FillSeconds, touch, touchRate, r.Elements, float64(r.PeakRSSBytes)/(1<<20))
			}
			return tw.Flush()
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&keys, "keys", []string{"100000", "1000000"}, "keys of state, comma-separated (each runs both modes)")
	fl.Float64Var(&rate, "rate", 50000, "steady load in elements per second")
	fl.IntVar(&workers, "workers", 2, "workers of the job")
	fl.DurationVar(&steady, "steady", 2*time.Second, "steady load before and after the swap")
	fl.IntVar(&swaps, "swaps", 1, "swaps per run of the yaml job, for the pauses' p50 and p99")
	fl.StringVar(&publisher, "publisher", publisherInline, "where the yaml job's steady load is published from: inline (the job's process) or process (a process of its own, whose allocations are not the job's)")
	fl.StringSliceVar(&jobs, "job", []string{"yaml", "sdk"}, "which jobs to measure: yaml (a YAML job in the job service) and/or sdk (a Go SDK pipeline on the runner)")
	fl.StringSliceVar(&dedupes, "dedupe", []string{dedupeNone}, "the yaml job's source: none, id_field (de-duplication by message ID), or both, alternated")
	fl.StringSliceVar(&migrates, "migrate", []string{migrateNone}, "the yaml job's in-place update: none, init (a declared state migration, an appended accumulator's CEL init), rekey (a declared re-key, k to k / 2), or several, alternated")
	fl.StringSliceVar(&modes, "mode", []string{"update", "restore"}, "which swaps to measure: update (in place) and/or restore (stop and restore)")
	fl.IntVar(&repeat, "repeat", 1, "how many times to run the whole alternation of modes and --dedupe variants")
	cli.AddFormatFlag(cmd, &format)
	return cmd
}

// The --dedupe and --migrate variants of `weir bench update`.
const (
	dedupeNone    = "none"
	dedupeIDField = "id_field"
	migrateNone   = "none"
	migrateInit   = "init"
	migrateRekey  = "rekey"
)

// runUpdateChild runs one update benchmark in a child process of exe and
// returns its outcome with its peak memory.
func runUpdateChild(ctx context.Context, e *cli.Env, exe, mode string, n int64, rate float64, workers int, steady time.Duration, swaps int, server bool, publisher string, idField bool, migrate string) (updateRun, error) {
	dir, err := os.MkdirTemp("", "weir-bench-update-")
	if err != nil {
		return updateRun{}, cli.WithCode(cli.ExitFailure, err)
	}
	defer os.RemoveAll(dir)
	c := exec.CommandContext(ctx, exe, benchChildCommand+"-update", mode, "--keys", strconv.FormatInt(n, 10),
		"--rate", strconv.FormatFloat(rate, 'f', -1, 64), "--workers", strconv.Itoa(workers), "--steady", steady.String(), "--dir", dir, "--swaps", strconv.Itoa(swaps),
		"--server="+strconv.FormatBool(server), "--publisher", publisher, "--id-field="+strconv.FormatBool(idField), "--migrate="+strconv.FormatBool(migrate == migrateInit),
		"--rekey="+strconv.FormatBool(migrate == migrateRekey))
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, e.Stderr
	e.Logger.Info("running", "mode", mode, "keys", n, "id_field", idField, "migrate", migrate)
	if err := c.Run(); err != nil {
		return updateRun{}, cli.WithCode(cli.ExitFailure, fmt.Errorf("bench update %s with %d keys: %w", mode, n, err))
	}
	var r updateRun
	if err := json.Unmarshal(bytes.TrimSpace(lastLineOf(out.Bytes())), &r.UpdateOutcome); err != nil {
		return updateRun{}, cli.WithCode(cli.ExitFailure, fmt.Errorf("reading the outcome of %s with %d keys: %w", mode, n, err))
	}
	r.PeakRSSBytes = childPeakRSS(c)
	return r, nil
}

// newBenchChildUpdateCommand is the hidden command one run of
// `weir bench update` executes in its own process.
func newBenchChildUpdateCommand(e *cli.Env) *cobra.Command {
	var cfg bench.UpdateConfig
	var server bool
	var cpuProfile, heapProfile, tracePath, publisher string
	cmd := &cobra.Command{
		Use:    benchChildCommand + "-update MODE",
		Short:  "Run one update benchmark in this process (used by weir bench update)",
		Hidden: true,
		Args:   cli.ExactArgs("MODE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Mode = args[0]
			switch publisher {
			case publisherProcess:
				exe, err := os.Executable()
				if err != nil {
					return cli.WithCode(cli.ExitFailure, fmt.Errorf("finding the weir binary: %w", err))
				}
				cfg.Publisher = func(ctx context.Context, url, topic string, keys int64, rate float64) *exec.Cmd {
					return exec.CommandContext(ctx, exe, benchChildCommand+"-publish", "--url", url, "--topic", topic,
						"--keys", strconv.FormatInt(keys, 10), "--rate", strconv.FormatFloat(rate, 'f', -1, 64))
				}
			case publisherInline:
			default:
				return cli.UsageErrorf("--publisher: %q is neither %s nor %s", publisher, publisherProcess, publisherInline)
			}
			run := bench.RunUpdate
			if server {
				run = bench.RunServerUpdate
			}
			if cpuProfile != "" {
				stop, err := bench.StartCPUProfile(cpuProfile)
				if err != nil {
					return cli.WithCode(cli.ExitFailure, err)
				}
				defer stop()
			}
			if tracePath != "" {
				f, err := os.Create(tracePath)
				if err != nil {
					return cli.WithCode(cli.ExitFailure, fmt.Errorf("creating the execution trace: %w", err))
				}
				defer f.Close()
				// The server variant traces the steady load and the swaps
				// only (a trace of building 1M keys would be gigabytes).
				startTrace := func() {
					if err := trace.Start(f); err != nil {
						fmt.Fprintf(e.Stderr, "weir: starting the execution trace: %v\n", err)
					}
				}
				if server {
					cfg.AfterFill = startTrace
				} else {
					startTrace()
				}
				defer trace.Stop()
			}
			var heapErr error
			if heapProfile != "" {
				cfg.BeforeEnd = func() { heapErr = writeHeapProfile(heapProfile) }
			}
			out, err := run(cmd.Context(), cfg)
			if err != nil {
				return cli.WithCode(cli.ExitFailure, err)
			}
			if heapErr != nil {
				return cli.WithCode(cli.ExitFailure, heapErr)
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
	fl.Int64Var(&cfg.Keys, "keys", 100000, "keys of state")
	fl.Float64Var(&cfg.Rate, "rate", 50000, "steady load in elements per second")
	fl.IntVar(&cfg.Workers, "workers", 2, "workers")
	fl.DurationVar(&cfg.Steady, "steady", 2*time.Second, "steady load before and after the swap")
	fl.StringVar(&cfg.Dir, "dir", "", "directory of the state store")
	fl.IntVar(&cfg.Swaps, "swaps", 1, "swaps in this run (server variant)")
	fl.BoolVar(&server, "server", false, "run the YAML job in the job service")
	fl.BoolVar(&cfg.IDField, "id-field", false, "the server variant's source de-duplicates by the messages' id field")
	fl.BoolVar(&cfg.Migrate, "migrate", false, "the server variant's update declares a state migration")
	fl.BoolVar(&cfg.Rekey, "rekey", false, "the server variant's update re-keys the state (key k to k / 2)")
	fl.StringVar(&cpuProfile, "cpu-profile", "", "write a CPU profile of the run to this file")
	fl.StringVar(&tracePath, "trace", "", "write an execution trace of the run (server variant: after the state is built) to this file (inspect with go tool trace)")
	fl.StringVar(&heapProfile, "heap-profile", "", "write a heap profile after the last swap (server variant) to this file")
	fl.StringVar(&publisher, "publisher", publisherInline, "where the server variant's steady load is published from: inline (this process) or process (a process of its own, whose allocations are not the job's)")
	return cmd
}

// The places the update benchmark's steady load can be published from.
const (
	publisherProcess = "process"
	publisherInline  = "inline"
)

// newBenchChildPublishCommand is the hidden command that publishes the
// update benchmark's steady load from a process of its own, until its
// stdin closes; it then prints what the broker acknowledged.
func newBenchChildPublishCommand(e *cli.Env) *cobra.Command {
	var url, topic string
	var keys int64
	var rate float64
	cmd := &cobra.Command{
		Use:    benchChildCommand + "-publish",
		Short:  "Publish the update benchmark's steady load (used by weir bench update)",
		Hidden: true,
		Args:   cli.ExactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := context.WithCancel(cmd.Context())
			defer stop()
			go func() {
				_, _ = io.Copy(io.Discard, cmd.InOrStdin())
				stop()
			}()
			out, err := bench.RunPublisher(ctx, url, topic, keys, rate, e.Stdout)
			if err != nil {
				return cli.WithCode(cli.ExitFailure, err)
			}
			return cli.WriteJSON(e.Stdout, out)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&url, "url", "", "the broker's NATS URL")
	fl.StringVar(&topic, "topic", "", "the topic to publish to")
	fl.Int64Var(&keys, "keys", 100000, "keys the messages cycle through")
	fl.Float64Var(&rate, "rate", 50000, "messages per second")
	return cmd
}

// writeHeapProfile writes the heap profile (in-use and allocated since
// start) to path, after a collection, so that in-use is what is live now
// (not as of whichever collection ran last).
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("creating the heap profile: %w", err)
	}
	runtime.GC()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("writing the heap profile: %w", err)
	}
	return f.Close()
}

// lastLineOf returns the last non-empty line of b.
func lastLineOf(b []byte) []byte {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	return lines[len(lines)-1]
}
