package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/service"
)

// listTimeLayout is how tables print times (UTC).
const listTimeLayout = "2006-01-02 15:04:05"

func newJobsCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List, describe, drain and cancel the jobs of a weir server",
		Long: `Jobs manages the jobs of a running weir server (--server, $WEIR_SERVER, default
http://127.0.0.1:7070). Every command takes job IDs or job names; a name means
the name's active job (or, when none is active, its latest job).

Drain stops reading the sources, fires every open window (final panes have
is_last: true) and ends the job as DRAINED. Cancel stops the job at once:
work not covered by a committed checkpoint is discarded, and messages read
from a subscription since then stay unacknowledged there, so a later job
reads them again.

Exit codes: 0 success, 1 a job was not found or could not change state,
2 usage, 5 no weir server answers.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				var names []string
				for _, sub := range cmd.Commands() {
					if sub.IsAvailableCommand() {
						names = append(names, sub.Name())
					}
				}
				return usageErrorf("unknown jobs command %q (want one of %s)", args[0], strings.Join(names, ", "))
			}
			return cmd.Help()
		},
	}
	cmd.AddCommand(newJobsListCommand(e), newJobsDescribeCommand(e), newJobsHistoryCommand(e), newJobsRollbackCommand(e), newJobsUpdateOptionsCommand(e), newJobsLogsCommand(e),
		newJobsActionCommand(e, "drain", "Drain streaming jobs: stop reading, fire every open window, end as DRAINED"),
		newJobsActionCommand(e, "cancel", "Cancel jobs: stop at once, discarding work after the last checkpoint"))
	return cmd
}

func newJobsListCommand(e *env) *cobra.Command {
	var status string
	return showCommand(e, showSpec[[]client.Summary]{
		use:     "list",
		short:   "List jobs (JOB_ID NAME TYPE CREATION_TIME STATE), newest first",
		offline: true,
		args:    exactArgs(),
		check: func(*cobra.Command, []string) error {
			if _, err := service.ParseStatus(status); err != nil {
				return usageErrorf("--status %q: want active, terminated or all", status)
			}
			return nil
		},
		fetch: func(ctx context.Context, c *client.Client, _ []string) ([]client.Summary, error) {
			return c.List(ctx, status)
		},
		text: func(w io.Writer, jobs []client.Summary) error {
			return writeTable(w, "JOB_ID\tNAME\tTYPE\tCREATION_TIME\tSTATE", jobs, func(j client.Summary) string {
				return fmt.Sprintf("%s\t%s\t%s\t%s\t%s", j.ID, j.Name, j.Type, j.CreateTime.UTC().Format(listTimeLayout), j.State.Title())
			})
		},
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&status, "status", "all", "which jobs: active, terminated or all")
		},
	})
}

func newJobsDescribeCommand(e *env) *cobra.Command {
	var showGraph bool
	return showCommand(e, showSpec[*client.Job]{
		use:     "describe ID|NAME [--show-graph]",
		short:   "Describe a job: state and its history, options, condition, lineage, per-step counters, watermarks, backlog",
		offline: true,
		args:    exactArgs("ID|NAME"),
		fetch: func(ctx context.Context, c *client.Client, args []string) (*client.Job, error) {
			return c.Get(ctx, args[0])
		},
		text: func(w io.Writer, j *client.Job) error { return describeJob(w, j, showGraph) },
		flags: func(fs *pflag.FlagSet) {
			fs.BoolVar(&showGraph, "show-graph", false, "also print the job's pipeline graph (canonical JSON); --format json always includes it")
		},
	})
}

func newJobsActionCommand(e *env, action, short string) *cobra.Command {
	var format string
	var server serverFlag
	var wait bool
	cmd := &cobra.Command{
		Use:   action + " ID|NAME...",
		Short: short,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErrorf("%s takes one or more job IDs or names", cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			c, err := newClient(server)
			if err != nil {
				return err
			}
			call := c.Drain
			if action == "cancel" {
				call = c.Cancel
			}
			var firstErr error
			done := []*client.Summary{}
			for _, ref := range args {
				j, err := call(cmd.Context(), ref)
				if err != nil {
					err = clientError(cmd.Context(), c, err)
					if exitCode(cmd.Context(), err) == ExitServerUnreachable {
						return err
					}
					fmt.Fprintf(e.stderr, "weir: %s %s: %v\n", action, ref, err)
					if firstErr == nil {
						firstErr = err
					}
					continue
				}
				done = append(done, j)
				if format == formatText {
					fmt.Fprintf(e.stdout, "%s %s (%s): %s\n", j.ID, j.Name, j.Type, j.State.Title())
				}
			}
			if format == formatJSON {
				if err := writeJSON(e.stdout, done); err != nil {
					return err
				}
			}
			if wait {
				// Follow each job to its end: DRAINED (drain) or CANCELLED
				// (cancel) is success, any other end a failure.
				want := client.StateDrained
				if action == "cancel" {
					want = client.StateCancelled
				}
				for _, sum := range done {
					j, err := c.Get(cmd.Context(), sum.ID)
					if err != nil {
						err = clientError(cmd.Context(), c, err)
					} else if j, err = followJob(cmd.Context(), e, c, j, nil, true); err == nil && j.State != want {
						err = withCode(ExitFailure, fmt.Errorf("job %s (%s) ended %s, not %s: %s", j.ID, j.Name, j.State, want, j.Error))
					}
					if err != nil {
						fmt.Fprintf(e.stderr, "weir: %s %s: %v\n", action, sum.ID, err)
						if firstErr == nil {
							firstErr = err
						}
					}
				}
			}
			if firstErr != nil {
				// Each failure was printed; exit with the first one's code.
				return withCode(exitCode(cmd.Context(), firstErr), errAlreadyReported)
			}
			return nil
		},
	}
	addFormatFlag(cmd, &format)
	addServerFlag(cmd, &server)
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until each job has ended, with its states on stderr: exit 0 when it ended "+map[string]string{"drain": "DRAINED", "cancel": "CANCELLED"}[action])
	return cmd
}

// describeJob prints a job for humans.
func describeJob(w io.Writer, j *client.Job, showGraph bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("Job ID", j.ID)
	row("Name", j.Name)
	row("Type", string(j.Type))
	row("State", j.State.Title()+" ("+j.State.String()+")")
	row("State time", formatTime(j.StateTime))
	row("Create time", formatTime(j.CreateTime))
	row("Generation", fmt.Sprint(j.Generation))
	if j.SDK == client.SDKGo {
		row("Pipeline", "Go program "+j.Program)
	}
	row("Options", formatOptions(j.Options))
	if c := j.Condition; c != nil {
		row("Condition", fmt.Sprintf("%s since %s: %s", c.Code, formatTime(c.Since), c.Message))
	}
	lineage := []string{}
	if j.ReplacesJobID != "" {
		lineage = append(lineage, "replaces job "+j.ReplacesJobID)
	}
	if j.ReplacedByJobID != "" {
		lineage = append(lineage, "replaced by job "+j.ReplacedByJobID)
	}
	if j.CreatedFromSnapshotID != "" {
		lineage = append(lineage, "created from snapshot "+j.CreatedFromSnapshotID)
	}
	if len(lineage) == 0 {
		lineage = append(lineage, "first job of its name")
		if j.Generation > 1 {
			lineage[0] = fmt.Sprintf("generation %d of its name (see weir jobs history %s)", j.Generation, j.Name)
		}
	}
	row("Lineage", strings.Join(lineage, "; "))
	if r := j.Replacement; r != nil {
		row("Replacement", describeReplacement(r))
	}
	if subs := describeSubscriptions(j); subs != "" {
		row("Subscriptions", subs)
	}
	if j.InputStart != "" {
		row("Input start", j.InputStart+": partial before it ("+j.InputStartNote+")")
	}
	if j.Error != "" {
		row("Error", j.Error)
	}
	switch {
	case !j.Checkpointing && j.CheckpointNote != "":
		row("Checkpoints", "none: "+j.CheckpointNote)
	case j.LastCheckpoint != nil:
		row("Checkpoints", fmt.Sprintf("last %d at %s", j.LastCheckpoint.Epoch, formatTime(j.LastCheckpoint.Time)))
	default:
		row("Checkpoints", "none yet")
	}
	delivery := j.Delivery
	if j.DeliveryNote != "" {
		delivery += " (" + j.DeliveryNote + ")"
	}
	row("Delivery", delivery)
	row("Dead letters", fmt.Sprint(j.DeadLetters))
	if j.LastDeadLetter != "" {
		row("Last dead letter", j.LastDeadLetter)
	}
	if m := j.Metrics; m != nil {
		wm := watermarkText(m.DataWatermark, m.DataWatermarkAgeSeconds)
		if wm != "" {
			row("Data watermark", wm)
		}
		row("System lag", seconds(m.SystemLagSeconds))
		if m.BacklogElements != nil {
			row("Backlog", fmt.Sprintf("%d elements", *m.BacklogElements))
		} else {
			row("Backlog", "unknown (no source reports one)")
		}
		if c := describeCatchUp(m.Steps); c != "" {
			row("Catch-up", c)
		}
		if m.SinkBufferedBytes != nil {
			row("Sinks", fmt.Sprintf("%s held for the next checkpoint; the sources waited %s for them",
				cli.Bytes(*m.SinkBufferedBytes), seconds(m.SinkWaitSeconds)))
		}
	}
	if err := flush(tw); err != nil {
		return err
	}
	if m := j.Metrics; m != nil {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "STEP\tELEMENTS_IN\tELEMENTS_OUT\tREJECTS\tDROPPED_LATE\tWATERMARK\tTHROUGHPUT/S\tSYSTEM_LAG\tBACKLOG")
		for _, s := range m.Steps {
			wm, backlog := s.Watermark, "-"
			if wm == "" {
				wm = "-"
			}
			if s.BacklogElements != nil {
				backlog = fmt.Sprint(*s.BacklogElements)
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%.1f\t%s\t%s\n", s.Name, s.ElementsIn, s.ElementsOut, s.Rejects,
				s.DroppedLateElements, wm, s.ThroughputPerSecond, seconds(s.SystemLagSeconds), backlog)
		}
		if err := flush(tw); err != nil {
			return err
		}
		if err := writeRejectReasons(w, m.Steps); err != nil {
			return err
		}
		if err := writeKeyedState(w, m.Steps); err != nil {
			return err
		}
		if err := writeUserMetrics(w, m.Steps); err != nil {
			return err
		}
	}
	if len(j.History) > 0 {
		fmt.Fprintln(w, "\nState history:")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, h := range j.History {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", formatTime(h.Time), h.State, h.Reason)
		}
		if err := flush(tw); err != nil {
			return err
		}
	}
	if showGraph && len(j.Graph) > 0 {
		var buf bytes.Buffer
		if err := json.Indent(&buf, j.Graph, "", "  "); err == nil {
			fmt.Fprintf(w, "\nGraph (canonical JSON):\n%s\n", strings.TrimSpace(buf.String()))
		}
	}
	return nil
}

// describeCatchUp renders the progress of the steps that re-read their
// topic (a replacement's re-read, catch_up in the JSON), "" when none does.
func describeCatchUp(steps []client.StepMetrics) string {
	var parts []string
	for _, s := range steps {
		c := s.CatchUp
		if c == nil {
			continue
		}
		gone := ""
		if c.ExpiredMessages > 0 {
			gone = fmt.Sprintf("; %d messages of the re-read were gone from the topic's retention", c.ExpiredMessages)
		}
		if c.CaughtUp {
			parts = append(parts, fmt.Sprintf("%s caught up (read seq %d, re-read through seq %d%s)", s.Name, c.ReadSequence, c.HoldUntil, gone))
		} else if gone != "" {
			parts = append(parts, fmt.Sprintf("%s re-reading: seq %d of %d (its watermark is held until then, so no pane fires%s)", s.Name, c.ReadSequence, c.HoldUntil, gone))
		} else {
			parts = append(parts, fmt.Sprintf("%s re-reading: seq %d of %d (its watermark is held until then, so no pane fires)", s.Name, c.ReadSequence, c.HoldUntil))
		}
	}
	return strings.Join(parts, "; ")
}

// describeSubscriptions renders the subscriptions a replacement gave j's
// steps (job.subscriptions), saying which named subscription a step reads
// one in place of; "" when it has none.
func describeSubscriptions(j *client.Job) string {
	if len(j.Subscriptions) == 0 {
		return ""
	}
	named := map[string]string{}
	if g, err := graph.Parse(j.Graph); err == nil {
		for _, st := range g.Steps {
			if st.Kind == graph.KindSource && st.Source != nil {
				if sub, ok := strings.CutPrefix(st.Source.Identity, "subscription/"); ok {
					named[st.Name] = sub
				}
			}
		}
	}
	steps := make([]string, 0, len(j.Subscriptions))
	for step := range j.Subscriptions {
		steps = append(steps, step)
	}
	sort.Strings(steps)
	parts := make([]string, len(steps))
	for i, step := range steps {
		parts[i] = fmt.Sprintf("%s reads %s (created by the service)", step, j.Subscriptions[step])
		if sub := named[step]; sub != "" {
			parts[i] = fmt.Sprintf("%s reads %s (created by the service) in place of the named subscription %s, which it does not read", step, j.Subscriptions[step], sub)
		}
	}
	return strings.Join(parts, "; ")
}

// formatOptions renders a job's options, the unset bounds left out.
func formatOptions(o client.JobOptions) string {
	parts := []string{fmt.Sprintf("num_workers=%d", o.NumWorkers)}
	if o.MinNumWorkers > 0 {
		parts = append(parts, fmt.Sprintf("min_num_workers=%d", o.MinNumWorkers))
	}
	if o.MaxNumWorkers > 0 {
		parts = append(parts, fmt.Sprintf("max_num_workers=%d", o.MaxNumWorkers))
	}
	if o.WorkerUtilizationHint > 0 {
		parts = append(parts, fmt.Sprintf("worker_utilization_hint=%g", o.WorkerUtilizationHint))
	}
	if o.AutoscalingAlgorithm != "" {
		parts = append(parts, "autoscaling_algorithm="+o.AutoscalingAlgorithm)
	}
	return strings.Join(parts, " ")
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// watermarkText is a data watermark as describe shows it: with its age,
// or how far it is ahead of the clock (event times stamped ahead, within
// a source's max_future_skew).
func watermarkText(wm string, age *float64) string {
	switch {
	case wm == "" || age == nil:
		return wm
	case *age < 0:
		return fmt.Sprintf("%s (%s ahead of now)", wm, seconds(-*age))
	}
	return fmt.Sprintf("%s (age %s)", wm, seconds(*age))
}

func seconds(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(time.Millisecond).String()
}

// flush writes out a table, a failure as a failed write to stdout.
func flush(tw *tabwriter.Writer) error {
	return outputErr(tw.Flush())
}

func newJobsHistoryCommand(e *env) *cobra.Command {
	return showCommand(e, showSpec[*client.HistoryResponse]{
		use:     "history NAME",
		short:   "Show every job of a name: how each generation replaced the one before (update, stop-and-replace, parallel, rollback), phases, stop windows, rollback snapshots, refused update attempts",
		offline: true,
		args:    exactArgs("NAME"),
		fetch: func(ctx context.Context, c *client.Client, args []string) (*client.HistoryResponse, error) {
			return c.History(ctx, args[0])
		},
		text: writeHistory,
	})
}

// writeHistory prints a name's jobs (oldest first) with their lineage,
// then its refused or validate-only update attempts.
func writeHistory(w io.Writer, h *client.HistoryResponse) error {
	err := writeTable(w, "JOB_ID\tGENERATION\tCREATION_TIME\tSTATE\tREPLACES\tREPLACED_BY", h.Jobs, func(j *client.Job) string {
		return fmt.Sprintf("%s\t%d\t%s\t%s\t%s\t%s", j.ID, j.Generation, j.CreateTime.UTC().Format(time.RFC3339), j.State.Title(),
			dash(j.ReplacesJobID), dash(j.ReplacedByJobID))
	})
	if err != nil {
		return err
	}
	if err := writeGenerations(w, h); err != nil { // rollback.go
		return err
	}
	for _, a := range h.Attempts {
		verdict := "refused"
		if a.Report.Compatible {
			verdict = "validated (compatible)"
		}
		fmt.Fprintf(w, "\nupdate attempt at %s on job %s: %s\n", a.Time.UTC().Format(time.RFC3339), a.RunningJobID, verdict)
		if err := writeReportText(w, a.Report); err != nil {
			return withCode(ExitFailure, fmt.Errorf("writing output: %w", err))
		}
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newJobsUpdateOptionsCommand(e *env) *cobra.Command {
	var opts client.JobOptions
	return showCommand(e, showSpec[*client.OptionsResponse]{
		use:   "update-options ID|NAME --num-workers N",
		short: "Change a running job's options in flight; a new --num-workers rescales it (same job, no restart)",
		args:  exactArgs("ID|NAME"),
		check: func(cmd *cobra.Command, _ []string) error {
			for _, name := range []string{"num-workers", "min-num-workers", "max-num-workers", "worker-utilization-hint", "autoscaling-algorithm"} {
				if cmd.Flags().Changed(name) {
					return nil
				}
			}
			return usageErrorf("give the new --num-workers, or the autoscaling range and target (--min-num-workers, --max-num-workers, --worker-utilization-hint, --autoscaling-algorithm)")
		},
		fetch: func(ctx context.Context, c *client.Client, args []string) (*client.OptionsResponse, error) {
			return c.UpdateOptions(ctx, args[0], opts)
		},
		text: func(w io.Writer, r *client.OptionsResponse) error {
			_, err := fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.ID, r.Name, r.State.Title(), formatOptions(r.Options))
			return err
		},
		flags: func(fl *pflag.FlagSet) {
			fl.IntVar(&opts.NumWorkers, "num-workers", 0, "the job's new number of workers: key groups move between workers, state stays")
			fl.IntVar(&opts.MinNumWorkers, "min-num-workers", 0, "fewest workers the autoscaler may give the job")
			fl.IntVar(&opts.MaxNumWorkers, "max-num-workers", 0, "most workers the autoscaler may give the job (a streaming job with a maximum is autoscaled)")
			fl.Float64Var(&opts.WorkerUtilizationHint, "worker-utilization-hint", 0, "utilisation of the workers the autoscaler aims at, 0.1..0.9 (default 0.8)")
			fl.StringVar(&opts.AutoscalingAlgorithm, "autoscaling-algorithm", "", "THROUGHPUT_BASED (the default) or NONE (no autoscaling)")
		},
	})
}

// describeReplacement is the Replacement line of `weir jobs describe`: the
// flow a job takes part in (as the old or the new job), its phase and
// since when, and what it measured.
func describeReplacement(r *client.Replacement) string {
	out := fmt.Sprintf("%s of job %s by job %s: %s since %s", r.Strategy, r.OldJobID, r.NewJobID, r.Phase, formatTime(r.PhaseTime))
	if r.StopWindowMillis != nil {
		out += fmt.Sprintf("; stop window %d ms", *r.StopWindowMillis)
	}
	if r.DrainTimedOut {
		out += "; the drain timed out"
	}
	if r.Phase == client.PhasePreparing && r.Parallel != nil && r.Parallel.Progress != nil && r.Parallel.Progress.WaitingForOldMessage {
		out += fmt.Sprintf("; waiting for job %s's next message to fix the cut-over time", r.OldJobID)
	}
	if !r.Rewind && (r.Strategy == client.StrategyStopAndReplace || r.Strategy == client.StrategyParallel) {
		out += "; weir_replace_rewind=false"
	}
	if r.Parallel != nil && r.Parallel.Gate != nil {
		g := r.Parallel.Gate
		if g.Report != "" {
			out += "; " + g.Report
		} else {
			out += fmt.Sprintf("; parity gate %s (%d consecutive complete windows within %d differing rows)", g.Outcome, g.Windows, g.Budget)
		}
	}
	return out + " (--format json: replacement)"
}

// writeKeyedState writes the keyed steps' keys, open windows (of
// aggregations) and state sizes (a running job's); nothing when no step
// reports a state size.
func writeKeyedState(w io.Writer, steps []client.StepMetrics) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := false
	for _, s := range steps {
		if s.StateBytes == nil {
			continue
		}
		if !header {
			fmt.Fprintln(w, "\nKeyed state (as the last checkpoint stored it):")
			fmt.Fprintln(tw, "  STEP\tKEYS\tOPEN WINDOWS\tSTATE")
			header = true
		}
		keys, windows, size := "-", "-", cli.Bytes(*s.StateBytes)
		if s.Keys != nil {
			keys = fmt.Sprint(*s.Keys)
		}
		if s.OpenWindows != nil {
			windows = fmt.Sprint(*s.OpenWindows)
			if s.OpenWindowsEstimated {
				windows = "~" + windows + " (estimated)"
			}
		}
		if s.StateBytesEstimated {
			size = "~" + size + " (estimated)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", s.Name, keys, windows, size)
	}
	return flush(tw)
}

// writeRejectReasons writes the steps' rejects by reason, one line a step
// and reason, most first; nothing when no step rejected anything.
func writeRejectReasons(w io.Writer, steps []client.StepMetrics) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := false
	for _, s := range steps {
		reasons := slices.SortedFunc(maps.Keys(s.RejectsByReason), func(a, b string) int {
			return cmp.Or(cmp.Compare(s.RejectsByReason[b], s.RejectsByReason[a]), cmp.Compare(a, b))
		})
		for _, r := range reasons {
			if !header {
				fmt.Fprintln(w, "\nRejects by reason:")
				header = true
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\n", s.Name, r, s.RejectsByReason[r])
		}
	}
	return flush(tw)
}

// writeUserMetrics prints the steps' user-defined metrics (the Go SDK's
// Counter and Distribution), when any step has one.
func writeUserMetrics(w io.Writer, steps []client.StepMetrics) error {
	var rows []string
	for _, s := range steps {
		for _, um := range s.UserMetrics {
			switch {
			case um.Value != nil:
				rows = append(rows, fmt.Sprintf("%s\t%s\t%s\t%s\tvalue %d", s.Name, um.Namespace, um.Name, um.Kind, *um.Value))
			case um.Count != nil && um.Sum != nil && um.Min != nil && um.Max != nil:
				rows = append(rows, fmt.Sprintf("%s\t%s\t%s\t%s\tcount %d, sum %d, min %d, max %d", s.Name, um.Namespace, um.Name, um.Kind,
					*um.Count, *um.Sum, *um.Min, *um.Max))
			}
		}
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nUser metrics (this execution):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  STEP\tNAMESPACE\tNAME\tKIND\tVALUE")
	for _, r := range rows {
		fmt.Fprintln(tw, "  "+r)
	}
	return flush(tw)
}
