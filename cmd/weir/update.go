package main

// This file is `weir run --update`: the in-place update (or replacement)
// of a running job of --job-name, and what it prints: the compatibility
// report, the option changes, a pre-flight rehearsal's verdict.

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/plan"
	"github.com/weir-dev/weir/serviceopt"
)

// updated is what `weir run --update --format json` prints.
type updated struct {
	ID             string              `json:"id,omitempty"`
	Name           string              `json:"name"`
	ReplacesJobID  string              `json:"replaces_job_id,omitempty"`
	ValidateOnly   bool                `json:"validate_only,omitempty"`
	PauseMillis    int64               `json:"pause_ms,omitempty"`
	InStore        bool                `json:"in_store,omitempty"`
	Compatibility  client.CompatReport `json:"compatibility"`
	RunningJobLeft string              `json:"running_job_left_untouched,omitempty"`
	// Options are the new job's options; OptionsChanged those that differ
	// from the running job's.
	Options        *client.JobOptions    `json:"options,omitempty"`
	OptionsChanged []client.OptionChange `json:"options_changed,omitempty"`
	Notes          []string              `json:"notes,omitempty"`
	// Plan is, for --validate-only, what the update would do (weir plan).
	Plan *plan.Plan `json:"plan,omitempty"`
	// Rehearsal is the pre-flight rehearsal's verdict
	// (weir_rehearse=required), passed or refused.
	Rehearsal *client.RehearsalVerdict `json:"rehearsal,omitempty"`
}

// updateJob sends the pipeline to the weir server as an in-place update of
// the running job of --job-name and prints the new job's ID, or the
// compatibility report when the update is refused or only validated.
func updateJob(cmd *cobra.Command, e *env, path string, f runFlags) error {
	ctx := cmd.Context()
	src, err := readPipelineFile(path, e.jinja)
	if err != nil {
		return err
	}
	wd, err := cli.WorkingDir()
	if err != nil {
		return withCode(ExitFailure, err)
	}
	c, err := newClient(f.server)
	if err != nil {
		return err
	}
	// Options the user did not give are sent unset (0): the server keeps
	// the running job's values for them.
	opts := f.givenJobOptions(cmd)
	res, err := c.Update(ctx, client.UpdateRequest{
		SubmitRequest: client.SubmitRequest{Name: f.jobName, Pipeline: string(src), PipelineFile: path, BaseDir: wd, Options: opts,
			ServiceOptions: serviceopt.Split(f.serviceOptions), RequestID: f.requestID},
		TransformNameMapping: f.nameMapping, AllowSourceChange: f.allowSource, ValidateOnly: f.validateOnly})
	// A rehearsal that refused the update (PARITY_FAILED) prints its
	// verdict before the refusal.
	var ae *client.Error
	refusedByRehearsal := err != nil && res != nil && res.Rehearsal != nil && errors.As(err, &ae) && ae.Code == errcode.ParityFailed
	if refusedByRehearsal {
		if f.format == formatJSON {
			if werr := writeJSON(e.stdout, updated{Name: f.jobName, ValidateOnly: f.validateOnly, Compatibility: res.Report, Rehearsal: res.Rehearsal}); werr != nil {
				return werr
			}
		} else {
			writeRehearsalVerdict(e.stderr, res.Rehearsal)
		}
		return clientError(ctx, c, err)
	}
	// A refusal for another reason than the check (no running job, a
	// pipeline that does not load) prints that reason only: the check did
	// not run, so there is no report to show.
	if err != nil && (res == nil || !errors.As(err, &ae) || ae.Code != errcode.IncompatibleUpdate) {
		return clientError(ctx, c, err)
	}
	out := updated{Name: f.jobName, ValidateOnly: f.validateOnly, PauseMillis: res.PauseMS, InStore: res.InStore, Compatibility: res.Report,
		Options: res.Options, OptionsChanged: res.OptionsChanged, Notes: res.Notes, Rehearsal: res.Rehearsal}
	if res.Replaced != nil {
		out.ReplacesJobID = res.Replaced.ID
	}
	if res.Job != nil {
		out.ID = res.Job.ID
	} else if res.Replaced != nil {
		out.ReplacesJobID = ""
		out.RunningJobLeft = res.Replaced.ID
	}
	if f.validateOnly {
		out.Plan = serverPlan(res.Plan)
		if out.Plan == nil {
			out.Plan = updatePlan(ctx, e, path, f)
		}
	}
	if f.format == formatJSON {
		if werr := writeJSON(e.stdout, out); werr != nil {
			return werr
		}
	} else {
		for _, n := range res.Notes {
			fmt.Fprintf(e.stderr, "note: %s\n", n)
		}
		switch {
		case res.Job != nil && (out.ReplacesJobID == "" || res.Job.State == client.StatePending || res.Job.Replacement != ""):
			// A new job, or a replacement job (its flow is followed below).
			fmt.Fprintln(e.stdout, res.Job.ID)
		case res.Job != nil && res.InStore:
			fmt.Fprintln(e.stdout, res.Job.ID)
			fmt.Fprintf(e.stderr, "job %s replaced job %s (%s) in the store: the job waited for its connector; it starts at the next retry\n", res.Job.ID, out.ReplacesJobID, f.jobName)
		case res.Job != nil:
			fmt.Fprintln(e.stdout, res.Job.ID)
			fmt.Fprintf(e.stderr, "job %s replaced job %s (%s); the handover paused output for %d ms\n", res.Job.ID, out.ReplacesJobID, f.jobName, res.PauseMS)
		case res.Report.Compatible:
			fmt.Fprintf(e.stdout, "the update of %s is compatible (not applied: --validate-only)\n", f.jobName)
		}
		if res.Report.Compatible {
			writeOptionChanges(e.stderr, res.Options, res.OptionsChanged)
		}
		if res.Rehearsal != nil {
			writeRehearsalVerdict(e.stderr, res.Rehearsal)
		}
		if f.validateOnly {
			// --validate-only is asked for the report: all of it.
			if werr := writeReportText(e.stdout, res.Report); werr != nil {
				return withCode(ExitFailure, fmt.Errorf("writing output: %w", werr))
			}
			if out.Plan != nil {
				fmt.Fprintln(e.stdout)
				if werr := out.Plan.WriteText(e.stdout); werr != nil {
					return withCode(ExitFailure, fmt.Errorf("writing output: %w", werr))
				}
			}
		} else if werr := writeNotableReport(e.stdout, res.Report); werr != nil {
			return werr
		}
	}
	if err := checkedJobError(ctx, c, err, res.Job, f.jobName); err != nil {
		if !res.Report.Compatible && f.format != formatJSON && inPlaceRequest(f.serviceOptions) {
			// Dataflow's answer to an incompatible change: a replacement
			// job, which hands no state over.
			fmt.Fprintf(e.stderr, "hint: a change that cannot update the job in place can replace it by a new job: add --service-options %s,%s=5m (stop-and-replace) or %s,%s=10m (parallel replacement); see docs/JOBS.md\n",
				serviceopt.KeyParallelUpdate, serviceopt.KeyMaxStop, serviceopt.KeyParallelUpdate, serviceopt.KeyMinParallel)
		}
		return err
	}
	if res.Job != nil && f.wait {
		j, err := c.Get(ctx, res.Job.ID)
		if err != nil {
			return clientError(ctx, c, err)
		}
		if j.Replacement != nil {
			return followReplacement(ctx, e, c, j)
		}
	}
	return nil
}

// writeRehearsalVerdict prints a pre-flight rehearsal's verdict on one
// line: its figures and the size of the recorded stretch.
func writeRehearsalVerdict(w io.Writer, v *client.RehearsalVerdict) {
	verdict := "passed"
	if !v.Passed {
		verdict = "refused"
	}
	stretch := cli.Bytes(v.TraceBytes) + " in memory"
	if v.TraceSpilledBytes > 0 {
		stretch = fmt.Sprintf("%s, %s of it spilled to the server's disk", cli.Bytes(v.TraceBytes), cli.Bytes(v.TraceSpilledBytes))
	}
	fmt.Fprintf(w, "rehearsal %s: %d input elements since %s, %d rows compared, %d differences (budget %d, noise %d); recorded stretch %s\n",
		verdict, v.Elements, v.Since.UTC().Format(time.RFC3339), v.RowsCompared, v.Differences, v.Budget, v.Noise, stretch)
}

// writeNotableReport prints a compatibility report when it says something
// beyond "compatible": errors, warnings or dropped state.
func writeNotableReport(w io.Writer, r client.CompatReport) error {
	if r.Compatible && len(r.Warnings) == 0 && len(r.DroppedState) == 0 {
		return nil
	}
	return outputErr(writeReportText(w, r))
}

// writeOptionChanges says which job options an update changed and which it
// kept from the running job.
func writeOptionChanges(w io.Writer, opts *client.JobOptions, changed []client.OptionChange) {
	if opts == nil {
		return
	}
	for _, c := range changed {
		fmt.Fprintf(w, "option %s: %s -> %s\n", c.Option, c.From, c.To)
	}
	if len(changed) == 0 {
		fmt.Fprintf(w, "options unchanged: num_workers=%d", opts.NumWorkers)
		if opts.MinNumWorkers > 0 {
			fmt.Fprintf(w, " min_num_workers=%d", opts.MinNumWorkers)
		}
		if opts.MaxNumWorkers > 0 {
			fmt.Fprintf(w, " max_num_workers=%d", opts.MaxNumWorkers)
		}
		if opts.WorkerUtilizationHint > 0 {
			fmt.Fprintf(w, " worker_utilization_hint=%g", opts.WorkerUtilizationHint)
		}
		fmt.Fprintln(w)
	}
}
