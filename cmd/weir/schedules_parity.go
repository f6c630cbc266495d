package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"github.com/weir-dev/weir/cmd/weir/internal/diffcmd"
	"github.com/weir-dev/weir/diff"
	"github.com/weir-dev/weir/graph"
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
	// key is --parity-key: the key of file outputs whose pipeline does
	// not declare one (empty: the group_by of the Combine the sink reads).
	key []string
	// dsn is --parity-dsn: the URL of PostgreSQL outputs' database, with
	// its password (empty: the server's, without it).
	dsn string
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
		g, err := graph.Parse(j.Graph)
		if err != nil {
			return withCode(ExitRehearsalFailed, fmt.Errorf("--require-parity: the graph of the shadow run %s: %w", j.ID, err))
		}
		// What the shadow run staged for this partition: its SQL tables,
		// and its file outputs with the key to compare them by.
		type comparison struct {
			staged client.Partition
			key    []string
		}
		var cmps []comparison
		for _, p := range parts {
			if p.JobID != j.ID || p.Partition != r.Partition {
				continue
			}
			if p.Driver != "files" {
				cmps = append(cmps, comparison{staged: p})
				continue
			}
			key := pf.key
			if len(key) == 0 {
				key = diffcmd.FileSinkKey(g, p.Target)
			}
			if len(key) == 0 {
				return withCode(ExitRehearsalFailed, fmt.Errorf("--require-parity: partition %s: the file output %s has no key the pipeline declares (its sink does not read a Combine directly): give --parity-key FIELDS, or compare it by hand with weir diff '%s' '%s' --key FIELDS",
					r.Partition, p.Target, p.TargetSource, p.Source))
			}
			cmps = append(cmps, comparison{staged: p, key: key})
		}
		if len(cmps) == 0 {
			return withCode(ExitRehearsalFailed, fmt.Errorf("--require-parity: the shadow run %s of partition %s staged no output to compare (parity compares WriteToSql and file outputs)", j.ID, r.Partition))
		}
		for _, cmp := range cmps {
			staged := cmp.staged
			source, target := staged.Source, staged.TargetSource
			if staged.Driver == "postgres" && pf.dsn != "" {
				source, target = pf.dsn+"#"+staged.Table, pf.dsn+"#"+staged.Target
			}
			if source == "" || target == "" {
				return withCode(ExitRehearsalFailed, fmt.Errorf("--require-parity: partition %s is staged in %s (%s), whose database the server does not name to clients; give its URL with --parity-dsn, or compare it by hand with weir diff POSTGRES_URL#%s POSTGRES_URL#%s --partition %s",
					r.Partition, staged.Table, staged.Driver, staged.Target, staged.Table, r.Partition))
			}
			// The address, never the password of --parity-dsn.
			fmt.Fprintf(e.stderr, "parity: partition %s: published %s against the new version's %s\n", r.Partition, diffcmd.Redact(target), diffcmd.Redact(source))
			df := diffcmd.Flags{Format: formatText, Window: "window_start,window_end", Key: strings.Join(cmp.key, ","),
				Budget: pf.budget, MaxDetails: 20, InputCount: -1, MemoryRows: diff.DefaultMemoryRows}
			if staged.Driver != "files" {
				// A file output's published version holds this partition
				// only; a published table holds every partition's rows.
				df.Partition = r.Partition
			}
			err = diffcmd.Run(ctx, quiet, target, source, df)
			var ee *exitError
			switch {
			case errors.As(err, &ee) && ee.Code == ExitRehearsalDiffers:
				return withCode(ExitRehearsalDiffers, fmt.Errorf("the new version's output differs from what partition %s published: the schedule is unchanged (its staged output %s stays for a look)", r.Partition, staged.Table))
			case err != nil:
				return err
			}
		}
	}
	return nil
}
