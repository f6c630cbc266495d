package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
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

Exit codes: 0 success, 1 no job has the name or a database cannot be read,
5 no weir server answers.`,
		newPartitionsListCommand(e))
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
