package benchcmd

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/bench"
	"github.com/weir-dev/weir/nexmark"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/state"
	"github.com/weir-dev/weir/yamlpipe"
)

// generatorOnly is the pseudo-query of `weir bench nexmark` that runs the
// generator alone, in a loop without the engine.
const generatorOnly = "generator"

// publishedPerCore are the per-core Nexmark figures the issue quotes, in
// events per second per core: Flink 1.13 and Feldera (16 cores); 0 where
// none is published.
var publishedPerCore = map[string]struct{ flink, feldera float64 }{
	"q0":  {155_000, 436_000},
	"q1":  {158_000, 0},
	"q2":  {175_000, 0},
	"q3":  {152_000, 0},
	"q4":  {34_000, 265_000},
	"q5":  {22_000, 412_000},
	"q7":  {12_000, 196_000},
	"q8":  {146_000, 415_000},
	"q9":  {14_240, 0},
	"q11": {39_700, 0},
}

// nexmarkTarget is the events per CPU-second a query should reach (issue
// 25): 450k for q0-q3 and q8, 200k for q4, q5 and q7, and for every query
// at least Flink's published per-core figure; 0 when there is none.
func nexmarkTarget(q string) float64 {
	q = strings.TrimPrefix(q, "yaml-") // a query written in YAML has its Go version's target
	own := 0.0
	switch q {
	case "q0", "q1", "q2", "q3", "q8":
		own = 450_000
	case "q4", "q5", "q7":
		own = 200_000
	}
	return max(own, publishedPerCore[q].flink)
}

// nexmarkFlags are the flags of `weir bench nexmark`.
type nexmarkFlags struct {
	queries string
	events  int64
	workers []int
	seed    int64
	yaml    bool
	format  string
	// checkpointEvery, when positive, runs the Go queries with checkpoints
	// written to a Pebble store at this interval and an exactly-once sink.
	checkpointEvery time.Duration
	// change holds the flags of the unbounded runs (--unbounded, --change).
	change changeFlags
	// cmp holds --compare's flags.
	cmp compareFlags
}

func newBenchNexmarkCommand(e *cli.Env) *cobra.Command {
	var f nexmarkFlags
	cmd := &cobra.Command{
		Use:   "nexmark",
		Short: "Nexmark queries over the generated auction stream, beside Flink's and Feldera's per-core figures",
		Long: `nexmark runs each --query over --events events of the Nexmark generator
(Beam's GeneratorConfig defaults, bounded, as fast as it can), each query and
worker count in its own child process, with a sink that counts and discards
the results. It prints per query the events per second (wall clock), the
events per CPU-second (user + system time of the child, process start
included), and, on the "generator" line, the rate of the generator alone (a
loop without the engine, one goroutine), which dominates q0-q3.

Queries: q0 to q9, q11 and q12 (or all). With --yaml, every query also runs
as a YAML pipeline (yaml-q0, ...: a Nexmark source, Filter and MapToFields
in CEL, WindowInto, Combine and Join; q4's, q6's and q9's winning bids an
SQL query over the auctions joined with their bids in the global window,
so they run bounded only; no sink: the results are the last step's output
count).

--compare BASE runs the same bounded benchmark by this binary and by BASE (a
weir binary, or a git revision, built for the occasion) in --rounds
alternated rounds (this, base, this, base, ...), and prints per query and
worker count each build's median events per second and per CPU-second, the
median and spread of the per-round ratios, and a verdict: faster or slower
only when every round's ratio is beyond 1 ± 2%, same otherwise. A query
whose result count differs between the builds is named under the table.
--fail-if-slower exits 1 when a figure is slower.` + changeHelp + `

Exit codes: 0 success (targets are reported, not enforced), 1 a query failed
(an unbounded run also when a change failed or no result followed it), 2 usage.`,
		Args: cli.ExactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.cmp.check(cmd); err != nil {
				return err
			}
			return runBenchNexmark(cmd.Context(), e, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.queries, "query", "all", "comma-separated queries (q0,q1,...) or all")
	fl.Int64Var(&f.events, "events", 1_000_000, "number of events per query")
	fl.IntSliceVar(&f.workers, "workers", []int{1}, "worker counts to run each query with")
	fl.Int64Var(&f.seed, "seed", 0, "generator seed (0 is Beam's stream)")
	fl.BoolVar(&f.yaml, "yaml", false, "also run the queries written in YAML (yaml-q0, ...), when asked for")
	fl.DurationVar(&f.checkpointEvery, "checkpoint-interval", 0, "checkpoint the Go queries at this interval into a Pebble store in a temporary directory, with an exactly-once counting sink (0: no checkpoints)")
	addChangeFlags(cmd, &f.change)
	addCompareFlags(cmd, &f.cmp)
	cli.AddFormatFlag(cmd, &f.format)
	return cmd
}

// NexmarkResult is one child's measurement (a row of --format json).
type NexmarkResult struct {
	Query   string `json:"query"`
	Workers int    `json:"workers"`
	// Checkpoints is the number of checkpoints written (0 without
	// --checkpoint-interval).
	Checkpoints  int     `json:"checkpoints"`
	Events       int64   `json:"events"`
	Results      int64   `json:"results"`
	RunSeconds   float64 `json:"run_seconds"`
	CPUSeconds   float64 `json:"cpu_seconds"`
	EventsPerSec float64 `json:"events_per_second"`
	PerCPUSecond float64 `json:"events_per_cpu_second"`
}

func runBenchNexmark(ctx context.Context, e *cli.Env, f nexmarkFlags) error {
	if err := cli.CheckFormat(f.format); err != nil {
		return err
	}
	if f.change.active() {
		if f.cmp.compare != "" {
			return cli.UsageErrorf("--compare runs the bounded queries: it cannot be combined with --unbounded or --change")
		}
		return runNexmarkUnbounded(ctx, e, f)
	}
	queries, err := nexmark.LookupQueries(f.queries)
	if err != nil {
		return cli.UsageErrorf("--query: %w", err)
	}
	if f.events < 1 {
		return cli.UsageErrorf("--events must be at least 1, got %d", f.events)
	}
	if f.checkpointEvery < 0 {
		return cli.UsageErrorf("--checkpoint-interval must not be negative, got %s", f.checkpointEvery)
	}
	for _, w := range f.workers {
		if w < 1 {
			return cli.UsageErrorf("--workers: each worker count must be at least 1, got %d", w)
		}
	}
	if f.cmp.compare != "" {
		return runNexmarkCompare(ctx, e, f)
	}
	exe, err := os.Executable()
	if err != nil {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("finding the weir binary to run benchmark children: %w", err))
	}
	var results []NexmarkResult
	run := func(query string, workers int) error {
		r, err := runNexmarkChild(ctx, exe, query, workers, f, e.Stderr)
		if err != nil {
			return cli.WithCode(cli.ExitFailure, fmt.Errorf("benchmark nexmark %s with %d workers: %w", query, workers, err))
		}
		results = append(results, r)
		return nil
	}
	if err := run(generatorOnly, 1); err != nil {
		return err
	}
	for _, q := range queries {
		names := []string{q.Name}
		if _, ok := bench.NexmarkYAMLSteps(q.Name, 0, 0); ok && f.yaml {
			names = append(names, "yaml-"+q.Name)
		}
		for _, name := range names {
			for _, w := range f.workers {
				if err := run(name, w); err != nil {
					return err
				}
			}
		}
	}
	if f.format == cli.FormatJSON {
		return cli.WriteJSON(e.Stdout, results)
	}
	return writeNexmarkTable(e.Stdout, f, results)
}

// runNexmarkCompare runs the same `weir bench nexmark` by this build and
// the base, in alternated rounds: per query and worker count, events per
// second and per CPU-second.
func runNexmarkCompare(ctx context.Context, e *cli.Env, f nexmarkFlags) error {
	workers := make([]string, len(f.workers))
	for i, w := range f.workers {
		workers[i] = strconv.Itoa(w)
	}
	args := []string{"bench", "nexmark", "--format", "json", "--query", f.queries,
		"--events", strconv.FormatInt(f.events, 10), "--workers", strings.Join(workers, ","),
		"--seed", strconv.FormatInt(f.seed, 10), "--checkpoint-interval", f.checkpointEvery.String(),
		"--log-level", childLogLevel(ctx, e)}
	if f.yaml {
		args = append(args, "--yaml")
	}
	read := func(out []byte) ([]NexmarkResult, error) {
		var rs []NexmarkResult
		if err := json.Unmarshal(out, &rs); err != nil {
			return nil, err
		}
		if len(rs) == 0 {
			return nil, errors.New("no queries measured")
		}
		return rs, nil
	}
	return runFigureCompare(ctx, e, figureCompare{
		benchmark: "nexmark", args: args, flags: f.cmp, format: f.format,
		title: fmt.Sprintf("%d events per query, seed %d", f.events, f.seed),
		figures: func(out []byte) ([]bench.Figure, error) {
			rs, err := read(out)
			if err != nil {
				return nil, err
			}
			var figs []bench.Figure
			for _, r := range rs {
				figs = append(figs, bench.Figure{Variant: nexmarkVariant(r), Name: bench.FigureEventsPerSec, Value: r.EventsPerSec},
					bench.Figure{Variant: nexmarkVariant(r), Name: bench.FigureEventsPerCPUSec, Value: r.PerCPUSecond})
			}
			return figs, nil
		},
		notes: func(this, base []byte) []string {
			a, errA := read(this)
			b, errB := read(base)
			if errA != nil || errB != nil {
				return nil
			}
			return nexmarkResultNotes(a, b)
		},
	})
}

// nexmarkVariant names r's query and worker count in a comparison.
func nexmarkVariant(r NexmarkResult) string { return fmt.Sprintf("%s w%d", r.Query, r.Workers) }

// nexmarkResultNotes names each query and worker count whose result count
// differs between this build's results and the base's.
func nexmarkResultNotes(this, base []NexmarkResult) []string {
	results := map[string]int64{}
	for _, r := range base {
		results[nexmarkVariant(r)] = r.Results
	}
	var notes []string
	for _, r := range this {
		if n, ok := results[nexmarkVariant(r)]; ok && n != r.Results && r.Query != generatorOnly {
			notes = append(notes, fmt.Sprintf("%s: this build output %d results, the base %d", nexmarkVariant(r), r.Results, n))
		}
	}
	return notes
}

// runNexmarkChild runs one query in a child process and adds its CPU time.
func runNexmarkChild(ctx context.Context, exe, query string, workers int, f nexmarkFlags, stderr io.Writer) (NexmarkResult, error) {
	var out strings.Builder
	cmd := exec.CommandContext(ctx, exe, benchChildCommand, "nexmark", query,
		"--events", strconv.FormatInt(f.events, 10), "--workers", strconv.Itoa(workers),
		"--seed", strconv.FormatInt(f.seed, 10), "--checkpoint-interval", f.checkpointEvery.String(), "--log-level", "warn")
	cmd.Stdout = &out
	cmd.Stderr = stderr
	if err := cmd.Run(); err != nil {
		return NexmarkResult{}, fmt.Errorf("child process: %w", err)
	}
	var r NexmarkResult
	if err := json.Unmarshal([]byte(out.String()), &r); err != nil {
		return NexmarkResult{}, fmt.Errorf("reading the child's result %q: %w", out.String(), err)
	}
	st := cmd.ProcessState
	r.CPUSeconds = (st.UserTime() + st.SystemTime()).Seconds()
	if r.CPUSeconds > 0 {
		r.PerCPUSecond = float64(r.Events) / r.CPUSeconds
	}
	return r, nil
}

func writeNexmarkTable(w io.Writer, f nexmarkFlags, rs []NexmarkResult) error {
	var b strings.Builder
	mode := "counting sink, no checkpoints"
	if f.checkpointEvery > 0 {
		mode = fmt.Sprintf("checkpoints every %s into Pebble, exactly-once counting sink", f.checkpointEvery)
	}
	fmt.Fprintf(&b, "nexmark: %d events per query (Beam's generator defaults, seed %d), bounded, %s\n\n", f.events, f.seed, mode)
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "QUERY\tWORKERS\tRESULTS\tCHECKPOINTS\tEVENTS/S\tRUN S\tCPU S\tEVENTS/CPU-S\tFLINK/CORE\tFELDERA/CORE\t")
	published := func(x float64) string {
		if x == 0 {
			return "-"
		}
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
	for _, r := range rs {
		p := publishedPerCore[strings.TrimPrefix(r.Query, "yaml-")]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.0f\t%.2f\t%.2f\t%.0f\t%s\t%s\t\n", r.Query, r.Workers, r.Results, r.Checkpoints, r.EventsPerSec,
			r.RunSeconds, r.CPUSeconds, r.PerCPUSecond, published(p.flink), published(p.feldera))
	}
	if err := tw.Flush(); err != nil {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("formatting output: %w", err))
	}
	b.WriteString("\nTargets (events per CPU-second; at least Flink's per-core figure, and 450k for q0-q3 and q8, 200k for q4, q5, q7):\n")
	for _, r := range rs {
		want := nexmarkTarget(r.Query)
		if want == 0 {
			continue
		}
		verdict := "met"
		if r.PerCPUSecond < want {
			verdict = fmt.Sprintf("MISSED by %.0f%%", 100*(1-r.PerCPUSecond/want))
		}
		fmt.Fprintf(&b, "  %s w%d: got %.0f, want %.0f: %s\n", r.Query, r.Workers, r.PerCPUSecond, want, verdict)
	}
	return cli.WriteReport(w, &b)
}

// newBenchChildNexmarkCommand runs one Nexmark query in this process and
// prints its NexmarkResult (without CPU time, which the parent measures).
func newBenchChildNexmarkCommand(e *cli.Env) *cobra.Command {
	var f nexmarkFlags
	var workers int
	var cpuProfile string
	cmd := &cobra.Command{
		Use:   "nexmark QUERY",
		Short: "Run one Nexmark query in this process",
		Args:  cli.ExactArgs("QUERY"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cpuProfile != "" {
				stop, err := bench.StartCPUProfile(cpuProfile)
				if err != nil {
					return cli.WithCode(cli.ExitFailure, err)
				}
				defer stop()
			}
			cfg := nexmark.Config{NumEvents: f.events, Seed: f.seed}
			var r NexmarkResult
			var err error
			if args[0] == generatorOnly {
				r, err = runGeneratorOnly(cfg)
			} else if q, ok := strings.CutPrefix(args[0], "yaml-"); ok {
				r, err = runNexmarkYAML(cmd.Context(), q, workers, cfg)
			} else if f.checkpointEvery > 0 {
				r, err = runNexmarkCheckpointed(cmd.Context(), args[0], workers, cfg, f.checkpointEvery, e.Logger)
			} else {
				r, err = runNexmarkQuery(cmd.Context(), args[0], workers, cfg)
			}
			if err != nil {
				return cli.WithCode(cli.ExitFailure, err)
			}
			return cli.WriteJSON(e.Stdout, r)
		},
	}
	cmd.Flags().Int64Var(&f.events, "events", 1_000_000, "number of events")
	cmd.Flags().Int64Var(&f.seed, "seed", 0, "generator seed")
	cmd.Flags().IntVar(&workers, "workers", 1, "number of workers")
	cmd.Flags().DurationVar(&f.checkpointEvery, "checkpoint-interval", 0, "checkpoint interval (0: no checkpoints)")
	cmd.Flags().StringVar(&cpuProfile, "cpu-profile", "", "write a CPU profile of the run to this file")
	return cmd
}

// runGeneratorOnly generates cfg's events in a loop, touching each so the
// work is not optimized away.
func runGeneratorOnly(cfg nexmark.Config) (NexmarkResult, error) {
	g, err := nexmark.NewGenerator(cfg, nexmark.BaseTime)
	if err != nil {
		return NexmarkResult{}, err
	}
	start := time.Now()
	var bids int64
	for n := int64(0); n < cfg.NumEvents; n++ {
		if ev, _ := g.Event(n); ev.Bid != nil {
			bids++
		}
	}
	el := time.Since(start)
	return NexmarkResult{Query: generatorOnly, Workers: 1, Events: cfg.NumEvents, Results: bids,
		RunSeconds: el.Seconds(), EventsPerSec: float64(cfg.NumEvents) / el.Seconds()}, nil
}

// countingSink counts the elements written to it and discards them.
type countingSink struct{ n atomic.Int64 }

func (c *countingSink) Write(_ context.Context, _ int, elems []contract.Element) error {
	c.n.Add(int64(len(elems)))
	return nil
}

func (c *countingSink) Close(context.Context) error { return nil }

func runNexmarkQuery(ctx context.Context, name string, workers int, cfg nexmark.Config) (NexmarkResult, error) {
	qs, err := nexmark.LookupQueries(name)
	if err != nil {
		return NexmarkResult{}, err
	}
	p := weir.NewPipeline()
	s := p.Root()
	events, err := nexmark.Read(s, "Events", cfg)
	if err != nil {
		return NexmarkResult{}, err
	}
	sink := &countingSink{}
	qs[0].Apply(s, events, cfg, "Discard", sink)
	start := time.Now()
	if _, err := weir.Run(ctx, p, weir.RunOptions{NumWorkers: workers}); err != nil {
		return NexmarkResult{}, fmt.Errorf("running %s: %w", name, err)
	}
	el := time.Since(start)
	return NexmarkResult{Query: name, Workers: workers, Events: cfg.NumEvents, Results: sink.n.Load(),
		RunSeconds: el.Seconds(), EventsPerSec: float64(cfg.NumEvents) / el.Seconds()}, nil
}

// runNexmarkYAML runs query q written in YAML over cfg's events.
func runNexmarkYAML(ctx context.Context, q string, workers int, cfg nexmark.Config) (NexmarkResult, error) {
	d := nexmark.DefaultConfig()
	src, err := bench.NexmarkYAMLPipeline(q, fmt.Sprintf("{numEvents: %d, seed: %d}", cfg.NumEvents, cfg.Seed),
		time.Duration(d.WindowSizeSec)*time.Second, time.Duration(d.WindowPeriodSec)*time.Second)
	if err != nil {
		return NexmarkResult{}, err
	}
	p, err := yamlpipe.Load("nexmark-"+q+".yaml", []byte(src), yamlpipe.Options{})
	if err != nil {
		return NexmarkResult{}, fmt.Errorf("loading the YAML of %s: %w", q, err)
	}
	start := time.Now()
	res, err := weir.Run(ctx, p, weir.RunOptions{NumWorkers: workers})
	if err != nil {
		return NexmarkResult{}, fmt.Errorf("running yaml-%s: %w", q, err)
	}
	el := time.Since(start)
	return NexmarkResult{Query: "yaml-" + q, Workers: workers, Events: cfg.NumEvents, Results: res.Step("Out").ElementsOut,
		RunSeconds: el.Seconds(), EventsPerSec: float64(cfg.NumEvents) / el.Seconds()}, nil
}

// exactlyOnceCounter is a transactional sink that counts and discards: a
// worker's elements count once the checkpoint that covers them commits,
// and an epoch committed again (a replay) adds nothing.
type exactlyOnceCounter struct {
	mu sync.Mutex // guards pending, committed and lastEpoch
	// pending counts what each worker wrote since its last pre-commit.
	pending   map[int]int64
	committed int64
	lastEpoch uint64
}

func (c *exactlyOnceCounter) Write(_ context.Context, worker int, elems []contract.Element) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending[worker] += int64(len(elems))
	return nil
}

func (c *exactlyOnceCounter) PreCommit(_ context.Context, worker int, _ uint64) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.pending[worker]
	c.pending[worker] = 0
	return binary.BigEndian.AppendUint64(nil, uint64(n)), nil
}

func (c *exactlyOnceCounter) Commit(_ context.Context, epoch uint64, parts [][]byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if epoch <= c.lastEpoch {
		return nil
	}
	for i, p := range parts {
		if len(p) == 0 {
			continue // a worker that pre-committed nothing this epoch (one whose input had ended)
		}
		if len(p) != 8 {
			return fmt.Errorf("counting sink: part %d of epoch %d is %d bytes, want 8", i, epoch, len(p))
		}
		c.committed += int64(binary.BigEndian.Uint64(p))
	}
	c.lastEpoch = epoch
	return nil
}

func (c *exactlyOnceCounter) Close(context.Context) error { return nil }

// runNexmarkCheckpointed runs a Go query with checkpoints every interval,
// each written to a Pebble store in a temporary directory before it
// commits, and a final one after the run.
func runNexmarkCheckpointed(ctx context.Context, name string, workers int, cfg nexmark.Config, every time.Duration, logger *slog.Logger) (r NexmarkResult, err error) {
	qs, err := nexmark.LookupQueries(name)
	if err != nil {
		return NexmarkResult{}, err
	}
	dir, err := os.MkdirTemp("", "weir-nexmark-")
	if err != nil {
		return NexmarkResult{}, fmt.Errorf("creating the state directory: %w", err)
	}
	defer os.RemoveAll(dir)
	store, err := state.Open(dir, logger)
	if err != nil {
		return NexmarkResult{}, fmt.Errorf("opening the state store: %w", err)
	}
	defer func() { err = errors.Join(err, store.Close()) }()
	p := weir.NewPipeline()
	s := p.Root()
	events, err := nexmark.Read(s, "Events", cfg)
	if err != nil {
		return NexmarkResult{}, err
	}
	sink := &exactlyOnceCounter{pending: map[int]int64{}}
	qs[0].Apply(s, events, cfg, "Discard", sink)
	if err := p.Err(); err != nil {
		return NexmarkResult{}, err
	}
	start := time.Now()
	x, err := runner.Start(ctx, p.Program(), runner.Options{NumWorkers: workers, Checkpoints: true, Logger: logger})
	if err != nil {
		return NexmarkResult{}, fmt.Errorf("starting %s: %w", name, err)
	}
	checkpoints := 0
	checkpoint := func() error {
		cp, err := x.Checkpoint(ctx)
		if err != nil {
			return fmt.Errorf("taking checkpoint %d: %w", checkpoints+1, err)
		}
		if err := store.WriteCheckpoint("nexmark-"+name, "bench", cp, nil); err != nil {
			return fmt.Errorf("writing checkpoint %d: %w", cp.Epoch, err)
		}
		if err := x.Commit(ctx, cp); err != nil {
			return fmt.Errorf("committing checkpoint %d: %w", cp.Epoch, err)
		}
		checkpoints++
		return nil
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for running := true; running; {
		select {
		case <-tick.C:
			if err := checkpoint(); err != nil {
				x.Cancel()
				return NexmarkResult{}, err
			}
		case <-x.Done():
			running = false
		case <-ctx.Done():
			x.Cancel()
			return NexmarkResult{}, ctx.Err()
		}
	}
	if _, err := x.Wait(); err != nil {
		return NexmarkResult{}, fmt.Errorf("running %s: %w", name, err)
	}
	if err := checkpoint(); err != nil {
		return NexmarkResult{}, fmt.Errorf("final checkpoint: %w", err)
	}
	if err := x.CloseSinks(ctx); err != nil {
		return NexmarkResult{}, err
	}
	el := time.Since(start)
	return NexmarkResult{Query: name, Workers: workers, Events: cfg.NumEvents, Results: sink.committed, Checkpoints: checkpoints,
		RunSeconds: el.Seconds(), EventsPerSec: float64(cfg.NumEvents) / el.Seconds()}, nil
}
