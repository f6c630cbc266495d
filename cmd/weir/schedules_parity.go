package main

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"github.com/weir-dev/weir/cmd/weir/internal/diffcmd"
	"github.com/weir-dev/weir/diff"
)

// weir schedules switch --require-parity: before a new version owns any
// partition, it runs as a shadow run (staged, never published) on the
// schedule's latest published partitions, against the same pinned input
// manifests, and its staged output is compared with what was published
// (weir diff, at the full key). The switch happens only when every
// compared partition agrees; otherwise nothing changes and the command
// exits 7 with the comparison.

// parityFlags are switch's parity-gate flags.
type parityFlags struct {
	require    bool
	partitions int
	budget     int64
}

// parityJobName is the job name of a schedule's parity shadow runs: apart
// from its partition runs, so a shadow run never holds their name.
func parityJobName(jobName string) string { return jobName + "-parity" }

// checkParity runs req's pipeline as shadow runs of the latest
// pf.partitions published partitions of schedule name and compares each
// with its published rows. The comparisons are printed on e's stderr. It
// returns an exit error with ExitRehearsalDiffers when one differs, or
// ExitRehearsalFailed when a comparison could not be made.
func checkParity(ctx context.Context, e *env, c *client.Client, name string, req client.SwitchScheduleRequest, pf parityFlags) error {
	sch, err := c.GetSchedule(ctx, name)
	if err != nil {
		return clientError(ctx, c, err)
	}
	var published []client.ScheduleRun
	for _, r := range sch.Runs {
		if r.Status == "published" {
			published = append(published, r)
		}
	}
	if len(published) == 0 {
		return withCode(ExitRehearsalFailed, fmt.Errorf("--require-parity: schedule %s has published no partition yet, so there is nothing to compare the new version with: switch without it, or wait for a partition", name))
	}
	sort.Slice(published, func(i, j int) bool { return published[i].Start.Before(published[j].Start) })
	if len(published) > pf.partitions {
		published = published[len(published)-pf.partitions:]
	} else if len(published) < pf.partitions {
		fmt.Fprintf(e.stderr, "parity: schedule %s has published %d partition(s), fewer than --parity-partitions %d: comparing those\n", name, len(published), pf.partitions)
	}
	var opts client.JobOptions
	if n := len(sch.Versions); n > 0 {
		opts = sch.Versions[n-1].Options
	}
	// The comparisons go to stderr: stdout is the switch's result.
	quiet := &cli.Env{Stdout: e.stderr, Stderr: e.stderr, Logger: e.logger, Jinja: e.jinja}
	shadowName := parityJobName(sch.JobName)
	for _, r := range published {
		fmt.Fprintf(e.stderr, "parity: running the new version on partition %s as a shadow run (job name %s)\n", r.Partition, shadowName)
		resp, err := c.Submit(ctx, client.SubmitRequest{Name: shadowName, Pipeline: req.Pipeline, PipelineFile: req.PipelineFile, BaseDir: req.BaseDir,
			Options: opts, Manifest: sch.Name, Partition: r.Partition, Shadow: true})
		if err != nil {
			return clientError(ctx, c, fmt.Errorf("--require-parity: starting the shadow run of partition %s: %w", r.Partition, err))
		}
		j, err := c.Get(ctx, resp.ID)
		if err != nil {
			return clientError(ctx, c, err)
		}
		if j, err = followJob(ctx, e, c, j, nil, false); err != nil {
			return err
		}
		if j.State != client.StateDone {
			return withCode(ExitRehearsalFailed, fmt.Errorf("--require-parity: the shadow run %s of partition %s ended %s: %s; the schedule is unchanged", j.ID, r.Partition, j.State, j.Error))
		}
		parts, err := c.ListPartitions(ctx, shadowName)
		if err != nil {
			return clientError(ctx, c, err)
		}
		var staged *client.Partition
		for i := range parts {
			if parts[i].JobID != j.ID || parts[i].Partition != r.Partition {
				continue
			}
			if parts[i].Driver == "files" {
				// A file output has no declared key to compare by.
				fmt.Fprintf(e.stderr, "parity: partition %s: the file output %s is not compared (parity compares WriteToSql outputs); compare it with %s\n",
					r.Partition, parts[i].Table, "weir diff '"+parts[i].TargetSource+"' '"+parts[i].Source+"' --key FIELDS")
				continue
			}
			staged = &parts[i]
		}
		switch {
		case staged == nil:
			return withCode(ExitRehearsalFailed, fmt.Errorf("--require-parity: the shadow run %s of partition %s staged no SQL output to compare (parity compares WriteToSql outputs)", j.ID, r.Partition))
		case staged.Source == "" || staged.TargetSource == "":
			return withCode(ExitRehearsalFailed, fmt.Errorf("--require-parity: partition %s is staged in %s (%s), whose database the server does not name to clients; compare it by hand with weir diff POSTGRES_URL#%s POSTGRES_URL#%s --partition %s",
				r.Partition, staged.Table, staged.Driver, staged.Target, staged.Table, r.Partition))
		}
		fmt.Fprintf(e.stderr, "parity: partition %s: published %s against the new version's %s\n", r.Partition, staged.TargetSource, staged.Source)
		err = diffcmd.Run(ctx, quiet, staged.TargetSource, staged.Source, diffcmd.Flags{Format: formatText, Window: "window_start,window_end",
			Budget: pf.budget, MaxDetails: 20, InputCount: -1, MemoryRows: diff.DefaultMemoryRows, Partition: r.Partition})
		var ee *exitError
		switch {
		case errors.As(err, &ee) && ee.Code == ExitRehearsalDiffers:
			return withCode(ExitRehearsalDiffers, fmt.Errorf("the new version's output differs from what partition %s published: the schedule is unchanged (its staging table %s stays for a look)", r.Partition, staged.Table))
		case err != nil:
			return err
		}
	}
	return nil
}
