package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/errcode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"github.com/weir-dev/weir/duration"
	"github.com/weir-dev/weir/service"
)

// snapshotWaitInterval is how often --wait asks for a snapshot's state.
const snapshotWaitInterval = 200 * time.Millisecond

func newSnapshotsCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshots",
		Short: "Create, list, describe, delete, export and import job snapshots",
		Long: `Snapshots manages the job snapshots of a weir server (Dataflow's snapshots):
restore points of a running streaming job — its full keyed state (open
windows, panes, timers), source positions, sink progress and graph — taken
as an aligned checkpoint cut while data flows. A snapshot is immutable and
independent of its job: it outlives the job's end, updates and restarts
until it is deleted or expires (--snapshot-ttl, default 7d, 1h to 30d).

States: PENDING → RUNNING → READY | FAILED; DELETED (deleted or expired).
Move a snapshot to another server as a file with
  weir snapshots export ID --output FILE, then weir snapshots import FILE
Start a job from a READY snapshot with
  weir run P.yaml --job-name N --create-from-snapshot ID [--transform-name-mapping JSON]

With --snapshot-sources each Pub/Sub subscription the job reads gets a
subscription snapshot named <snapshot id>--<subscription> at exactly the cut's
position (pubsub_metadata); it is deleted with the job snapshot. Reprocess with
  weir subscriptions seek SUB --snapshot <snapshot id>--SUB

Exit codes: 0 success, 1 failure (unknown snapshot or job, a snapshot that
FAILED with --wait), 2 usage, 5 no weir server answers.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unknown snapshots command %q (want create, list, describe, delete, export or import)", args[0])
			}
			return cmd.Help()
		},
	}
	cmd.AddCommand(newSnapshotsCreateCommand(e), newSnapshotsListCommand(e), newSnapshotsDescribeCommand(e), newSnapshotsDeleteCommand(e),
		newSnapshotsExportCommand(e), newSnapshotsImportCommand(e))
	return cmd
}

func newSnapshotsCreateCommand(e *env) *cobra.Command {
	var format, jobID, ttl, description string
	var server serverFlag
	var sources, wait bool
	cmd := &cobra.Command{
		Use:   "create --job-id ID|NAME",
		Short: "Snapshot a running streaming job (it keeps running)",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			if jobID == "" {
				return usageErrorf("--job-id is required: the ID or name of the job to snapshot")
			}
			if _, err := service.ParseSnapshotTTL(ttl); err != nil {
				return usageErrorf("--snapshot-ttl: %v", err)
			}
			c, err := newClient(server)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			snap, err := c.CreateSnapshot(ctx, client.CreateSnapshotRequest{JobID: jobID, TTL: ttl, Description: description, SnapshotSources: sources})
			if err != nil {
				return clientError(ctx, c, err)
			}
			if wait {
				if snap, err = waitSnapshot(ctx, e, c, snap, format); err != nil {
					return err
				}
			}
			if format == formatJSON {
				if err := writeJSON(e.stdout, snap); err != nil {
					return err
				}
			} else if _, err := fmt.Fprintln(e.stdout, snap.ID); err != nil {
				return withCode(ExitFailure, fmt.Errorf("writing output: %w", err))
			}
			if snap.State == client.SnapshotFailed {
				return withCode(ExitFailure, fmt.Errorf("snapshot %s of job %s FAILED: %s", snap.ID, snap.JobName, snap.FailureReason))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	addFormatFlag(cmd, &format)
	addServerFlag(cmd, &server)
	fl.StringVar(&jobID, "job-id", "", "ID or name of the running streaming job to snapshot")
	fl.BoolVar(&sources, "snapshot-sources", false, "also snapshot each Pub/Sub subscription the job reads, at the cut's position (listed in pubsub_metadata)")
	fl.StringVar(&ttl, "snapshot-ttl", duration.Format(service.DefaultSnapshotTTL), "how long the snapshot is kept: a duration such as 36h or 7d, 1h to 30d")
	fl.StringVar(&description, "description", "", "a description kept with the snapshot")
	fl.BoolVar(&wait, "wait", false, "wait until the snapshot is READY (exit 0) or FAILED (exit 1)")
	return cmd
}

// waitSnapshot waits for snap to be READY, FAILED or DELETED, showing
// progress on stderr: a spinner on a terminal, a line per state change
// otherwise (and nothing with --format json).
func waitSnapshot(ctx context.Context, e *env, c *client.Client, snap *client.Snapshot, format string) (*client.Snapshot, error) {
	tty := isTerminal(e.stderr) && format == formatText
	spin, last, n := `|/-\`, client.SnapshotState(""), 0
	got, err := c.WaitSnapshot(ctx, snap.ID, snapshotWaitInterval, func(s *client.Snapshot) {
		switch {
		case format == formatJSON:
		case tty:
			fmt.Fprintf(e.stderr, "\rsnapshot %s: %s %c", s.ID, s.State, spin[n%len(spin)])
			n++
		case s.State != last:
			fmt.Fprintf(e.stderr, "snapshot %s: %s\n", s.ID, s.State)
		}
		last = s.State
	})
	if tty {
		fmt.Fprintln(e.stderr)
	}
	if err != nil {
		return nil, clientError(ctx, c, err)
	}
	return got, nil
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func newSnapshotsListCommand(e *env) *cobra.Command {
	var jobID string
	var all bool
	return showCommand(e, showSpec[[]*client.Snapshot]{
		use:     "list [--job-id ID|NAME] [--all]",
		short:   "List snapshots (SNAPSHOT_ID JOB_NAME SOURCE_JOB_ID CREATION_TIME STATE EXPIRE_TIME KIND), newest first; KIND rollback: kept by an update or replacement for weir jobs rollback",
		offline: true,
		args:    exactArgs(),
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&jobID, "job-id", "", "only the snapshots of this job (an ID), or of every job of this name")
			fs.BoolVar(&all, "all", false, "include DELETED snapshots")
		},
		fetch: func(ctx context.Context, c *client.Client, _ []string) ([]*client.Snapshot, error) {
			return c.ListSnapshots(ctx, jobID, all)
		},
		text: func(w io.Writer, list []*client.Snapshot) error {
			return writeTable(w, "SNAPSHOT_ID\tJOB_NAME\tSOURCE_JOB_ID\tCREATION_TIME\tSTATE\tEXPIRE_TIME\tKIND", list, func(s *client.Snapshot) string {
				kind := s.Kind
				if kind == "" {
					kind = "user"
				}
				return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s", s.ID, s.JobName, s.SourceJobID,
					s.CreationTime.UTC().Format(listTimeLayout), s.State, s.ExpireTime.UTC().Format(listTimeLayout), kind)
			})
		},
	})
}

func newSnapshotsDescribeCommand(e *env) *cobra.Command {
	return showCommand(e, showSpec[*client.Snapshot]{
		use:     "describe ID",
		short:   "Describe a snapshot: job, state, times, TTL, size, failure reason",
		offline: true,
		args:    exactArgs("ID"),
		fetch: func(ctx context.Context, c *client.Client, args []string) (*client.Snapshot, error) {
			return c.GetSnapshot(ctx, args[0])
		},
		text: describeSnapshot,
	})
}

func newSnapshotsDeleteCommand(e *env) *cobra.Command {
	return showCommand(e, showSpec[*client.Snapshot]{
		use:   "delete ID",
		short: "Delete a snapshot: its data goes at once; describe then answers DELETED",
		args:  exactArgs("ID"),
		fetch: func(ctx context.Context, c *client.Client, args []string) (*client.Snapshot, error) {
			return c.DeleteSnapshot(ctx, args[0])
		},
		text: func(w io.Writer, s *client.Snapshot) error {
			_, err := fmt.Fprintf(w, "snapshot %s deleted\n", s.ID)
			return err
		},
	})
}

// describeSnapshot prints a snapshot for people.
func describeSnapshot(w io.Writer, s *client.Snapshot) error {
	return writeFields(w, func(row func(k, v string)) {
		row("ID", s.ID)
		row("State", string(s.State))
		row("Job", fmt.Sprintf("%s (%s, generation %d)", s.JobName, s.SourceJobID, s.Generation))
		row("Creation time", s.CreationTime.UTC().Format(time.RFC3339))
		row("State time", s.StateTime.UTC().Format(time.RFC3339))
		row("TTL", s.TTL)
		row("Expire time", s.ExpireTime.UTC().Format(time.RFC3339))
		if s.Description != "" {
			row("Description", s.Description)
		}
		if s.SDK != "" {
			row("SDK", s.SDK)
		}
		if s.Epoch > 0 {
			row("Checkpoint epoch", fmt.Sprint(s.Epoch))
		}
		if s.State == client.SnapshotReady {
			row("Disk size", fmt.Sprintf("%d bytes", s.DiskSizeBytes))
		}
		for _, st := range s.Steps {
			row("Aggregation "+st.Name, fmt.Sprintf("%d keys, %d open windows", st.Keys, st.OpenWindows))
		}
		if s.FailureReason != "" {
			row("Failure reason", s.FailureReason)
		}
		if b := s.Broker; b != nil {
			row("Broker", b.ID)
			for _, src := range b.Sources {
				row("Source position", fmt.Sprintf("%s: %s of topic %s, read up to sequence %d (the topic held %d..%d)",
					src.Step, src.Subscription, src.Topic, src.Seq, src.FirstSeq, src.LastSeq))
			}
		}
		for _, m := range s.PubsubMetadata {
			row("Subscription snapshot", fmt.Sprintf("%s of %s (topic %s), expires %s", m.SnapshotName, m.Subscription, m.Topic, m.ExpireTime.UTC().Format(time.RFC3339)))
		}
		if len(s.Positions) > 0 {
			var srcs []string
			for k := range s.Positions {
				srcs = append(srcs, k)
			}
			sort.Strings(srcs)
			row("Sources", strings.Join(srcs, ", "))
		}
	})
}

// fromSnapshotResult is what `weir run --create-from-snapshot --format
// json` prints.
type fromSnapshotResult struct {
	ID            string              `json:"id,omitempty"`
	Name          string              `json:"name"`
	SnapshotID    string              `json:"created_from_snapshot_id"`
	Compatibility client.CompatReport `json:"compatibility"`
	// SourcePositions says where each Pub/Sub source starts.
	SourcePositions []client.SourcePlacement `json:"source_positions,omitempty"`
}

// runFromSnapshot creates job --job-name from snapshot
// --create-from-snapshot and prints its ID, or the compatibility report
// when the check refuses (exit 6; nothing is created).
func runFromSnapshot(cmd *cobra.Command, e *env, path string, f runFlags) error {
	switch {
	case f.jobName == "":
		return usageErrorf("--create-from-snapshot needs --job-name: the name of the new job")
	case f.update:
		return usageErrorf("--create-from-snapshot creates a new job; it does not go with --update")
	}
	ctx := cmd.Context()
	src, err := os.ReadFile(path)
	if err != nil {
		return withCode(ExitInvalidPipeline, fmt.Errorf("reading the pipeline file: %w", err))
	}
	wd, err := cli.WorkingDir()
	if err != nil {
		return withCode(ExitFailure, err)
	}
	c, err := newClient(f.server)
	if err != nil {
		return err
	}
	res, err := c.CreateFromSnapshot(ctx, client.FromSnapshotRequest{
		SubmitRequest: client.SubmitRequest{Name: f.jobName, Pipeline: string(src), PipelineFile: path, BaseDir: wd,
			Options: client.JobOptions{NumWorkers: f.numWorkers, MaxNumWorkers: f.maxNumWorkers}},
		SnapshotID: f.fromSnapshot, TransformNameMapping: f.nameMapping, AllowSourceChange: f.allowSource, ValidateOnly: f.validateOnly,
		SourcePositions: f.sourcePos})
	// As for an update: a refusal for another reason than the check (the
	// pipeline does not load, the name is taken) prints that reason only.
	var ae *client.Error
	if err != nil && (res == nil || !errors.As(err, &ae) || ae.Code != errcode.IncompatibleUpdate) {
		return clientError(ctx, c, err)
	}
	out := fromSnapshotResult{Name: f.jobName, SnapshotID: f.fromSnapshot, Compatibility: res.Report, SourcePositions: res.SourcePositions}
	if res.Job != nil {
		out.ID = res.Job.ID
	}
	if f.format == formatJSON {
		if werr := writeJSON(e.stdout, out); werr != nil {
			return werr
		}
	} else {
		if res.Job != nil {
			fmt.Fprintln(e.stdout, res.Job.ID)
		}
		// Where each Pub/Sub source starts, on stderr: stdout is the ID.
		for _, p := range res.SourcePositions {
			fmt.Fprintln(e.stderr, p.Note)
		}
		if werr := writeNotableReport(e.stdout, res.Report); werr != nil {
			return werr
		}
	}
	if err := checkedJobError(ctx, c, err, res.Job, f.jobName); err != nil {
		return err
	}
	e.logger.Info("job created from a snapshot", "job_id", out.ID, "job_name", f.jobName, "snapshot_id", f.fromSnapshot)
	return nil
}
