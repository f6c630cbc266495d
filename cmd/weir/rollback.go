package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/weir-dev/weir/client"
)

// newJobsRollbackCommand is `weir jobs rollback NAME`: go back to an
// earlier generation of a job name from its rollback snapshot.
func newJobsRollbackCommand(e *env) *cobra.Command {
	var format, maxStop string
	var wait bool
	var server serverFlag
	var req client.RollbackRequest
	cmd := &cobra.Command{
		Use:   "rollback NAME [--to-generation N] [--validate-only] [--request-id ID]",
		Short: "Go back to an earlier generation of a job: its pipeline runs again as a new generation from the rollback snapshot kept at its replacement",
		Long: `Go back to an earlier generation of a job name. Every in-place update and
replacement keeps the old job's state at the handover as a rollback snapshot
(kept for the server's --rollback-retention, default 24h). A rollback starts
that generation's pipeline from the snapshot as a NEW generation (so its sink
rows win), with its subscriptions rewound to the snapshot's positions: the input
since the snapshot is re-read from the topic's retention and every window it
touches is computed again. The running job is drained (cancelled after
--max-stop-duration). During a parallel replacement's overlap a rollback
instead cancels the new job and keeps the old one running (a real rollback:
the view serves the old job's rows again). --validate-only prints the report and changes nothing.
--wait follows the rollback's phases (the running job draining, the cut-over)
and exits 0 once the rollback job runs (during an overlap: once the flow is
ROLLED_BACK with the old job kept), 1 if the flow failed. --request-id ID
makes the rollback idempotent as a submission's: a retry with the same ID
within 24 hours gets the first answer (the same rollback job, or the same
refusal), never a second rollback; the same ID with another request is
refused (REQUEST_ID_REUSED).`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			if req.ToGeneration < 0 {
				return usageErrorf("--to-generation must be 1 or more, got %d", req.ToGeneration)
			}
			req.MaxStopDuration = maxStop
			c, err := newClient(server)
			if err != nil {
				return err
			}
			res, err := c.Rollback(cmd.Context(), args[0], req)
			if res != nil {
				if format == formatJSON {
					if werr := writeJSON(e.stdout, res); werr != nil {
						return werr
					}
				} else if werr := writeRollback(e.stdout, res); werr != nil {
					return werr
				}
			}
			if err != nil {
				return clientError(cmd.Context(), c, err)
			}
			if wait && res != nil && res.Job != nil && res.Job.Replacement != nil {
				// During a parallel overlap the rollback cancels the new
				// job and answers the kept old one: its flow ending
				// ROLLED_BACK is the rollback done, not a failure.
				success := client.PhaseCutOver
				if res.Job.Replacement.NewJobID != res.Job.ID {
					success = client.PhaseRolledBack
				}
				return followFlow(cmd.Context(), e, c, res.Job, success)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.Int64Var(&req.ToGeneration, "to-generation", 0, "the generation to go back to (default: the one the running job replaced)")
	fl.BoolVar(&req.ValidateOnly, "validate-only", false, "print the report (what is re-read and recomputed) and change nothing")
	fl.StringVar(&maxStop, "max-stop-duration", "", "how long the running job may drain before it is cancelled (default 5m)")
	fl.BoolVar(&wait, "wait", false, "follow the rollback until the rollback job runs (exit 0) or the flow fails (exit 1)")
	fl.StringVar(&req.RequestID, "request-id", "", "make the rollback idempotent: a retry with the same ID within 24 hours gets the first answer, never a second rollback")
	addFormatFlag(cmd, &format)
	addServerFlag(cmd, &server)
	return cmd
}

// writeRollback prints a rollback's report.
func writeRollback(w io.Writer, r *client.RollbackResponse) error {
	var b strings.Builder
	verb := "rolling back"
	if r.ValidateOnly {
		verb = "would roll back"
	}
	if r.Current != nil && r.Snapshot != nil {
		fmt.Fprintf(&b, "%s %s from generation %d (job %s) to generation %d as generation %d, from rollback snapshot %s (taken %s)\n",
			verb, r.Current.Name, r.Current.Generation, r.Current.ID, r.ToGeneration, r.NewGeneration, r.Snapshot.ID,
			r.Snapshot.CreationTime.UTC().Format(time.RFC3339))
	}
	for _, s := range r.Sources {
		if s.Topic == "" {
			fmt.Fprintf(&b, "  source %s: resumes from the snapshot's position\n", s.Step)
			continue
		}
		kept := "retained"
		if !s.Retained {
			kept = fmt.Sprintf("NOT retained (the topic's oldest message is %d)", s.FirstRetainedSeq)
		}
		fmt.Fprintf(&b, "  source %s: subscription %s rewinds to message %d of topic %s; %d message(s) re-read, %s\n",
			s.Step, s.Subscription, s.FromSeq, s.Topic, s.Messages, kept)
	}
	for _, win := range r.Windows {
		fmt.Fprintf(&b, "  step %s: %s\n", win.Step, win.Recomputed)
	}
	if r.Job != nil {
		fmt.Fprintf(&b, "job %s (generation %d) is %s, phase %s\n", r.Job.ID, r.Job.Generation, r.Job.State, phaseOf(r.Job.Replacement))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	return writeReport(w, &b)
}

func phaseOf(rep *client.Replacement) string {
	if rep == nil {
		return "-"
	}
	return string(rep.Phase)
}

// writeGenerations prints how each generation of a name took over (the
// generations part of `weir jobs history`).
func writeGenerations(w io.Writer, h *client.HistoryResponse) error {
	if len(h.Generations) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nGenerations:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GENERATION\tJOB_ID\tHOW\tSTATE\tPHASES\tSTOP_WINDOW\tROLLBACK_SNAPSHOTS")
	for _, g := range h.Generations {
		how := g.How
		if g.RolledBackToGeneration > 0 {
			how = fmt.Sprintf("rollback to generation %d", g.RolledBackToGeneration)
		}
		var phases []string
		for _, p := range g.Phases {
			phases = append(phases, fmt.Sprintf("%s@%s", p.Phase, p.Time.UTC().Format(time.RFC3339)))
		}
		stop := "-"
		if g.StopWindowMillis != nil {
			stop = (time.Duration(*g.StopWindowMillis) * time.Millisecond).String()
		}
		var points []string
		for _, p := range g.RollbackPoints {
			points = append(points, fmt.Sprintf("%s (%s, expires %s)", p.SnapshotID, p.State, p.ExpireTime.UTC().Format(time.RFC3339)))
		}
		id := g.JobID
		if g.JobName != "" {
			// A generation of the name this lineage continues.
			id += " (as " + g.JobName + ")"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Generation, id, how, g.State.Title(),
			dash(strings.Join(phases, " ")), stop, dash(strings.Join(points, ", ")))
		for _, r := range g.Rescales {
			fmt.Fprintf(tw, "\t\t%s at %s\t\t\t\t\n", r.Reason, r.Time.UTC().Format(time.RFC3339))
		}
	}
	return flush(tw)
}
