package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/weir-dev/weir/client"
)

func newPartitionsCommand(e *env) *cobra.Command {
	return groupCommand("partitions", "Show the publication log of a batch job's partition runs",
		`Partitions shows, for a job name whose partition runs (weir run --job-name
NAME --manifest M --partition P) write SQL tables or files, what each
partition holds in each target table or file, read by a running weir server
(--server, $WEIR_SERVER, default http://127.0.0.1:7070) from the databases
and the file sinks' publication manifests (PATH.manifest.json):

  published  the publication log (weir_publications, or the manifest's log)
             has the partition: its rows, the rows it replaced, its output
             digest and time
  staged     a staging table TABLE__stage_P_JOBID (a file sink's version
             directory PATH.versions/P/JOBID) without a log entry: the run
             failed or was cancelled before publishing; a rerun of the
             partition publishes
  shadow     a shadow run's staging table or version directory (weir run
             --shadow), never published: compare it with weir diff
  running    the run has not ended (or its final commit is pending)

A partition published again from a new manifest keeps its earlier entries
in the log (published); a file sink keeps their version directories until
weir partitions prune NAME --status replaced removes them.

weir partitions prune NAME drops the staging tables and removes the version
directories of the staged and shadow entries (--status narrows, --partition
picks one partition; --dry-run lists them and removes nothing); --status
replaced removes the directories of a file sink's published versions that a
later publication of their partition replaced (the log keeps their entries).
The version a partition reads and running entries are never touched.

Exit codes: 0 success, 1 no job has the name or a database cannot be read
(or written, by prune), 2 usage error, 5 no weir server answers.`,
		newPartitionsListCommand(e), newPartitionsPruneCommand(e))
}

// pruneStatuses checks prune's --status values: staged, shadow or
// replaced, each once at most.
func pruneStatuses(statuses []string) ([]string, error) {
	var out []string
	for _, st := range statuses {
		st = strings.TrimSpace(st)
		switch st {
		case "staged", "shadow", "replaced":
		case "published":
			return nil, usageErrorf("--status %q: published entries are never pruned while a partition reads them; want replaced for the versions later publications replaced", st)
		case "running":
			return nil, usageErrorf("--status %q: running entries are never pruned; want staged, shadow or replaced", st)
		default:
			return nil, usageErrorf("--status %q: want staged, shadow or replaced (comma-separated; default staged,shadow)", st)
		}
		if !slices.Contains(out, st) {
			out = append(out, st)
		}
	}
	return out, nil
}

func newPartitionsPruneCommand(e *env) *cobra.Command {
	var req client.PruneRequest
	var statuses []string
	return showCommand(e, showSpec[client.PruneResult]{
		use:   "prune NAME [--partition P] [--status staged,shadow,replaced] [--dry-run]",
		short: "Drop the staging tables and remove the version directories job NAME's partition runs left without publishing (staged, shadow) or later publications replaced (replaced)",
		long: `Prune removes what weir partitions list shows as staged (a failed or
cancelled run's staging table or version directory) or shadow (a shadow run's),
for job NAME: the staging table is dropped, the version directory under the
file sink's PATH.versions/ removed. With --status replaced it also removes the
version directories of a file sink's published versions that a later
publication of the same partition replaced: the publication log keeps their
entries (marked pruned in PATH.manifest.json), and they are no longer listed
as replaced. The version a partition reads and running entries are never
touched. It prints every entry removed (PARTITION STATUS TABLE JOB); with
--dry-run, every entry it would remove, removing nothing.`,
		args: exactArgs("NAME"),
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&req.Partition, "partition", "", "prune this partition only")
			fs.StringSliceVar(&statuses, "status", nil, "the statuses to prune: staged, shadow, replaced (default staged,shadow)")
			fs.BoolVar(&req.DryRun, "dry-run", false, "list what would be removed, remove nothing")
		},
		check: func(*cobra.Command, []string) error {
			var err error
			req.Statuses, err = pruneStatuses(statuses)
			return err
		},
		fetch: func(ctx context.Context, c *client.Client, args []string) (client.PruneResult, error) {
			return c.PrunePartitions(ctx, args[0], req)
		},
		text: func(w io.Writer, r client.PruneResult) error {
			verb := "Removed"
			if r.DryRun {
				verb = "Would remove (dry run)"
			}
			if len(r.Removed) == 0 {
				_, err := fmt.Fprintf(w, "%s nothing: no entry of the statuses asked for matches.\n", verb)
				return outputErr(err)
			}
			if _, err := fmt.Fprintf(w, "%s %d:\n", verb, len(r.Removed)); err != nil {
				return outputErr(err)
			}
			return writeTable(w, "PARTITION\tSTATUS\tTABLE\tJOB", r.Removed, func(p client.Partition) string {
				return fmt.Sprintf("%s\t%s\t%s\t%s", p.Partition, p.Status, p.Table, p.JobID)
			})
		},
	})
}

func newPartitionsListCommand(e *env) *cobra.Command {
	return showCommand(e, showSpec[[]client.Partition]{
		use:   "list NAME",
		short: "List the partitions of job NAME's partition runs (PARTITION STATUS TABLE JOB ROWS REPLACED OUTPUT_DIGEST PUBLISHED), by partition",
		args:  exactArgs("NAME"),
		fetch: func(ctx context.Context, c *client.Client, args []string) ([]client.Partition, error) {
			return c.ListPartitions(ctx, args[0])
		},
		text: func(w io.Writer, ps []client.Partition) error {
			return writeTable(w, "PARTITION\tSTATUS\tTABLE\tJOB\tROWS\tREPLACED\tOUTPUT_DIGEST\tPUBLISHED", ps, func(p client.Partition) string {
				rows, replaced, digest, at := "-", "-", "-", "-"
				if p.Status == "published" {
					rows, replaced, digest, at = fmt.Sprint(p.Rows), fmt.Sprint(p.Replaced), shortDigest(p.OutputDigest), p.PublishedAt
				}
				return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", p.Partition, p.Status, p.Table, p.JobID, rows, replaced, digest, at)
			})
		},
	})
}

// shortDigest is "sha256:" and the digest's first 12 hex digits.
func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}

// printShadow tells, on stderr, where shadow run j staged its outputs and
// the weir diff command that compares each with its target table.
func printShadow(ctx context.Context, e *env, c *client.Client, j *client.Job) {
	ps, err := c.ListPartitions(ctx, j.Name)
	if err != nil {
		fmt.Fprintf(e.stderr, "shadow run %s: staged, not published (weir partitions list %s: %v)\n", j.ID, j.Name, err)
		return
	}
	for _, p := range ps {
		if p.JobID != j.ID || p.Status != "shadow" {
			continue
		}
		fmt.Fprintf(e.stderr, "shadow run: partition %s staged in %s, not published to %s\n", p.Partition, p.Table, p.Target)
		switch {
		case p.Source != "" && p.Driver == "files":
			fmt.Fprintf(e.stderr, "compare with: weir diff '%s' '%s' --key FIELDS  (the partition's published version, through its publication manifest; FIELDS: the rows' key fields)\n", p.TargetSource, p.Source)
		case p.Source != "":
			fmt.Fprintf(e.stderr, "compare with: weir diff '%s' '%s' --partition %s  (the target holds every partition, in column weir_partition)\n", p.TargetSource, p.Source, p.Partition)
		}
	}
}
