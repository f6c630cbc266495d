package benchcmd

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-dev/weir/bench"
	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"github.com/weir-dev/weir/nexmark"
)

// changeFlags are the flags of `weir bench nexmark` for its unbounded
// runs in the job service (--unbounded, --change).
type changeFlags struct {
	unbounded    bool
	languages    []string
	changes      []string
	rateFraction float64
	maxRate      float64
	measureFor   time.Duration
	duration     time.Duration
	sample       time.Duration
	windowSize   time.Duration
	windowPeriod time.Duration
}

// active reports whether the flags ask for unbounded runs.
func (c changeFlags) active() bool { return c.unbounded || len(c.changes) > 0 }

// changeHelp is the part of `weir bench nexmark --help` about --unbounded
// and --change.
const changeHelp = `

--unbounded runs YAML queries (q0, q1, q2, q5, q7, q8, q11) unbounded as jobs of an
in-process job service instead (all of them when --query is all); --language go
runs the Go SDK's versions (package nexmark's, as the job of a Go program
served by that service; their windows whole seconds; q3, q4, q6 and q9 too,
whose Go versions emit as auctions close), --language yaml,go both, one
after the other (--max-rate then applies to each). Each job's
maximum rate is measured first by running it for --measure-duration with its
source unthrottled (the events it read per second over the run's second
half: what it kept up, where a job whose sinks hold it back reads in bursts;
or given by --max-rate), then the job runs again, afresh, for --duration with its Nexmark
source rate-limited to --rate-fraction of it (rounded down to a rate whose
events are whole microseconds apart, as the generator spaces them; wall-clock
event times; a source resumed after a pause catches up on what fell due
meanwhile), its results stamped and written to a topic of the embedded broker, with a checkpoint every second (the sink publishes what a
checkpoint covers when it commits). It reports the events read per second
(sampled every --sample from the live execution) and the p50/p99 latency of
the results: arrival on the topic less the result's timestamp, which is the
event's time for q0-q3, the end of the result's window for q4, q5, q7, q8
and q11 (a windowed result cannot exist before its window ends), and the
auction's close for q6 and q9. The first --workers count is
the job's worker count at the start (and the measuring run's).

--change update,rescale,snapshot (implies --unbounded; --query defaults to
q5, the counting stage of q5 in YAML, with --window sliding windows every
--window-period) makes each change at evenly spaced points of the run: an
in-place update (a compatible change of the pipeline: the tag its results
carry), a rescale (1 worker to 2, or more to 1) and a job snapshot (until
READY). Per change it reports the throughput before (median over the half
spacing before it), the dip (lowest sample after it as a percentage of before,
and the time from its start until, after that lowest sample, the throughput
was back within 10% of before: three samples in a row at 90% or more; to the
sample's resolution), the p50/p99
latency in the half spacing before and after its start, and the results that
arrived after it (a change without results after it fails the run). Beside
the dip it reports the same lowest sample over the window before the change
(the job's stalls without a change) and the backlog: the largest shortfall of
the events read against the throughput before, summed from the change's start
(from the window's start for "before"), in milliseconds of that throughput —
how long a full stall would have lost as many events; a catch-up pays it back
— and when after the change it peaked (PEAK AT: from then on, within the
window, the job never fell further behind).`

// addChangeFlags adds the flags of the unbounded runs to cmd.
func addChangeFlags(cmd *cobra.Command, f *changeFlags) {
	fl := cmd.Flags()
	fl.BoolVar(&f.unbounded, "unbounded", false, "run the queries unbounded as jobs of an in-process job service, at --rate-fraction of their measured maximum rate, and report throughput and result latency")
	fl.StringSliceVar(&f.languages, "language", []string{"yaml"}, "the unbounded runs' queries: yaml (YAML pipelines), go (the Go SDK's, as a Go program's job) or both (yaml,go)")
	fl.StringSliceVar(&f.changes, "change", nil, "changes to make during an unbounded run: update, rescale, snapshot (comma-separated; implies --unbounded)")
	fl.Float64Var(&f.rateFraction, "rate-fraction", 0.7, "the unbounded run's rate as a fraction of the measured maximum rate")
	fl.Float64Var(&f.maxRate, "max-rate", 0, "the maximum rate (events/s) to take --rate-fraction of, instead of measuring it (one query only; 0: measure)")
	fl.DurationVar(&f.measureFor, "measure-duration", 10*time.Second, "length of the run that measures the job's maximum rate (its source unthrottled)")
	fl.DurationVar(&f.duration, "duration", 60*time.Second, "length of each unbounded run")
	fl.DurationVar(&f.sample, "sample", 100*time.Millisecond, "throughput sampling interval of the unbounded runs")
	fl.DurationVar(&f.windowSize, "window", 2*time.Second, "size of q5's sliding windows in the unbounded runs")
	fl.DurationVar(&f.windowPeriod, "window-period", time.Second, "period of q5's sliding windows in the unbounded runs")
}

// changeRun is one unbounded run: a query in a language.
type changeRun struct {
	query string
	goSDK bool
}

// changeRuns returns the unbounded runs of spec in the languages asked
// for: per query, each language's version. A query named in spec must
// have a version that emits while its input is unbounded in every
// language asked for; "all" runs every query that has one, in each
// language that has it (q5 alone with --change).
func changeRuns(spec string, f changeFlags, langs []bool) ([]changeRun, error) {
	has := func(goSDK bool, q string) bool {
		if goSDK {
			return slices.Contains(bench.ChangeSDKQueries(), q)
		}
		_, ok := bench.NexmarkYAMLSteps(q, 0, 0)
		return ok && slices.Contains(bench.NexmarkYAMLStreamingQueries(), q)
	}
	var qs []string
	switch {
	case spec == "all" && len(f.changes) > 0:
		qs = []string{"q5"}
	case spec == "all":
		for _, q := range nexmark.Queries() {
			qs = append(qs, q.Name)
		}
	default:
		for _, q := range strings.Split(spec, ",") {
			q = strings.TrimSpace(q)
			for _, goSDK := range langs {
				if !has(goSDK, q) {
					list := bench.NexmarkYAMLStreamingQueries()
					if goSDK {
						list = bench.ChangeSDKQueries()
					}
					return nil, fmt.Errorf("%s has no %s version that emits while its input is unbounded; --unbounded and --change run %s", q, languageName(goSDK), strings.Join(list, ", "))
				}
			}
			qs = append(qs, q)
		}
	}
	var runs []changeRun
	for _, q := range qs {
		for _, goSDK := range langs {
			if has(goSDK, q) {
				runs = append(runs, changeRun{q, goSDK})
			}
		}
	}
	return runs, nil
}

// runNexmarkUnbounded runs `weir bench nexmark --unbounded/--change`.
func runNexmarkUnbounded(ctx context.Context, e *cli.Env, f nexmarkFlags) error {
	c := f.change
	for _, k := range c.changes {
		if k != bench.ChangeUpdate && k != bench.ChangeRescale && k != bench.ChangeSnapshot {
			return cli.UsageErrorf("--change: unknown change %q (want update, rescale or snapshot)", k)
		}
	}
	var sdk []bool
	for _, l := range c.languages {
		switch strings.TrimSpace(l) {
		case "yaml":
			sdk = append(sdk, false)
		case "go":
			sdk = append(sdk, true)
		default:
			return cli.UsageErrorf("--language: unknown language %q (want yaml or go)", l)
		}
	}
	runs, err := changeRuns(f.queries, c, sdk)
	if err != nil {
		return cli.UsageErrorf("--query: %w", err)
	}
	switch {
	case c.rateFraction <= 0 || c.rateFraction > 1:
		return cli.UsageErrorf("--rate-fraction must be in (0, 1], got %g", c.rateFraction)
	case c.maxRate < 0, c.maxRate > 0 && runs[0].query != runs[len(runs)-1].query:
		return cli.UsageErrorf("--max-rate must be positive and needs a single query (its rate in every --language)")
	case c.duration <= 0 || c.sample <= 0 || c.windowSize <= 0 || c.windowPeriod <= 0 || c.measureFor <= 0:
		return cli.UsageErrorf("--duration, --sample, --window, --window-period and --measure-duration must be positive")
	}
	if slices.Contains(sdk, true) {
		if err := bench.CheckSDKWindows(c.windowSize, c.windowPeriod); err != nil {
			return cli.UsageErrorf("--language go: --window and --window-period: %w", err)
		}
	}
	workers := 1
	if len(f.workers) > 0 {
		workers = f.workers[0]
	}
	var outs []bench.ChangeOutcome
	for _, run := range runs {
		out, err := runNexmarkChangeOnce(ctx, run.query, run.goSDK, workers, c)
		if err != nil {
			return cli.WithCode(cli.ExitFailure, fmt.Errorf("benchmark nexmark %s (%s) unbounded: %w", run.query, languageName(run.goSDK), err))
		}
		outs = append(outs, out)
	}
	if f.format == cli.FormatJSON {
		return cli.WriteJSON(e.Stdout, outs)
	}
	return writeChangeReport(e.Stdout, outs)
}

// runNexmarkChangeOnce measures query q's maximum rate (unless given) and
// runs it unbounded at the fraction of it, with the changes.
func runNexmarkChangeOnce(ctx context.Context, q string, goSDK bool, workers int, c changeFlags) (bench.ChangeOutcome, error) {
	run := func(rate float64, d time.Duration, changes []string) (bench.ChangeOutcome, error) {
		dir, err := os.MkdirTemp("", "weir-nexmark-change-")
		if err != nil {
			return bench.ChangeOutcome{}, fmt.Errorf("creating the data directory: %w", err)
		}
		defer os.RemoveAll(dir)
		return bench.RunNexmarkChange(ctx, bench.ChangeConfig{Query: q, SDK: goSDK, Rate: rate, Duration: d, Changes: changes, Workers: workers,
			Sample: c.sample, WindowSize: c.windowSize, WindowPeriod: c.windowPeriod, Dir: dir})
	}
	maxRate, from := c.maxRate, "--max-rate"
	if maxRate == 0 {
		from = fmt.Sprintf("the job unthrottled for %s", c.measureFor)
		m, err := run(0, c.measureFor, nil)
		if err != nil {
			return bench.ChangeOutcome{}, fmt.Errorf("measuring the maximum rate: %w", err)
		}
		// What the job kept up over the second half of the run: a job
		// whose sinks hold its input back reads in bursts at a higher
		// rate, which the median of the samples would take.
		maxRate = m.SustainedEventsPerSecond
		if maxRate < 1 {
			return bench.ChangeOutcome{}, fmt.Errorf("the job read nothing over the second half of its %s unthrottled (its sinks held it back, waiting for a checkpoint to commit, longer than that): give --max-rate, or a longer --measure-duration", c.measureFor)
		}
	}
	out, err := run(representableRate(c.rateFraction*maxRate), c.duration, c.changes)
	out.MaxRate, out.RateFraction, out.MaxRateFrom = maxRate, c.rateFraction, from
	return out, err
}

// writeChangeReport prints the unbounded runs as text: a summary per
// query, and a table of its changes.
func writeChangeReport(w io.Writer, outs []bench.ChangeOutcome) error {
	var b strings.Builder
	b.WriteString("nexmark unbounded: queries as jobs of an in-process job service (YAML pipelines; Go: the Go SDK's, a Go program's job),\n" +
		"Nexmark source rate-limited with wall-clock event times, " +
		"results to a topic of the embedded broker,\na checkpoint every second. Latency: a result's arrival on the topic less its timestamp\n" +
		"(the event's time; for a windowed query, q4, q5, q7, q8 or q11, the end of its window; for q6 and q9, the auction's close).\n")
	for _, o := range outs {
		name := o.Query
		if o.Language != "" {
			name += " (" + languageName(o.Language == "go") + ")"
		}
		fmt.Fprintf(&b, "\n%s: max %.0f events/s (%s) x %.2f -> %.0f events/s (whole microseconds apart) for %.1f s, %d worker(s) at the start",
			name, o.MaxRate, o.MaxRateFrom, o.RateFraction, o.Rate, o.DurationSeconds, o.Workers)
		if o.Query == "q5" {
			fmt.Fprintf(&b, ", sliding windows %gs every %gs", o.WindowSizeSeconds, o.WindowPeriodSeconds)
		}
		fmt.Fprintf(&b, "\n  read %.0f events/s (median of %d ms samples), %d results, latency p50 %.0f ms, p99 %.0f ms, sources waiting for the sink %.0f%% of the time\n",
			o.EventsPerSecond, o.SampleMillis, o.Results, o.LatencyP50Millis, o.LatencyP99Millis, 100*o.SinkWaitShare)
		if len(o.Changes) == 0 {
			continue
		}
		b.WriteString("\n")
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  CHANGE\tAT S\tTOOK MS\tBEFORE EV/S\tMIN % BEFORE/AFTER\tDIP MS\tBACKLOG MS BEFORE/AFTER\tPEAK AT MS\tLAT P50/P99 MS BEFORE\tAROUND\tFIRST RESULT MS\tDETAIL")
		for _, c := range o.Changes {
			dip := fmt.Sprintf("%.0f", c.DipMillis)
			if c.DipMillis < 0 {
				dip = "not back"
			}
			fmt.Fprintf(tw, "  %s\t%.1f\t%.0f\t%.0f\t%.0f/%.0f\t%s\t%.0f/%.0f\t%.0f\t%.0f/%.0f\t%.0f/%.0f\t%.0f\t%s\n", c.Kind, c.AtSeconds, c.TookMillis,
				c.BeforeEventsPerSecond, c.BaselineMinPercent, c.DipMinPercent, dip, c.BaselineBacklogMillis, c.BacklogMillis, c.BacklogPeakMillis,
				c.LatencyBeforeP50Millis, c.LatencyBeforeP99Millis, c.LatencyAroundP50Millis, c.LatencyAroundP99Millis,
				c.FirstResultAfterMillis, c.Detail)
		}
		if err := tw.Flush(); err != nil {
			return cli.WithCode(cli.ExitFailure, fmt.Errorf("formatting output: %w", err))
		}
	}
	return cli.WriteReport(w, &b)
}

// languageName names the language of a query's version.
func languageName(goSDK bool) string {
	if goSDK {
		return "Go"
	}
	return "YAML"
}

// representableRate is the highest rate at or below r (events per second,
// at least 1) that the Nexmark generator keeps exactly: it spaces events
// in whole microseconds, so 70% of 318k events/s runs at 200k (5 µs).
func representableRate(r float64) float64 {
	r = max(r, 1)
	return 1e6 / math.Ceil(1e6/r)
}
