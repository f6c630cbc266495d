package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/cmd/weir/internal/cli"
)

func newSchedulesCommand(e *env) *cobra.Command {
	return groupCommand("schedules", "Run a batch pipeline once per partition of time, switch its version, roll it back",
		`Schedules runs a bounded (batch) pipeline on a weir server (--server,
$WEIR_SERVER, default http://127.0.0.1:7070) once per partition of time:
--every D cuts time into periods of D from --start (default: the period
holding now), --cron EXPR into the stretches between the expression's times
(five fields, UTC; or @daily, @hourly, @weekly, @monthly). A partition is
due at its end plus --delay. When one is due the server pins its input as a
manifest of the schedule's name — the --files patterns with the partition's
fields filled in ({partition}, {YYYY} {MM} {DD} {HH} {mm} {ss} of its start,
UTC) — and runs the pipeline on it as a partition run of job --job-name
(weir run --manifest NAME --partition P): SQL sinks stage the rows and
publish them in one transaction with a publication log entry.

One run at a time, oldest due partition first. A partition whose files are
not there yet waits (checked every minute); a failed run is retried after
--retry-backoff, doubled for each further attempt, against the same
manifest, up to --max-attempts, then left failed (weir schedules retry).

Versions: 'switch' makes a new pipeline run from a partition on (the old
version keeps the partitions before it); 'rollback' retires the newest
version: the one before it runs every partition it had not published, from
the first missing output. No partition is published twice.

Exit codes: 0 success, 1 refused (SCHEDULE_EXISTS, SCHEDULE_CONFLICT,
SCHEDULE_NOT_FOUND), 2 usage, 3 an invalid pipeline or a path outside the
server's --file-roots, 5 no weir server answers.`,
		newSchedulesCreateCommand(e), newSchedulesListCommand(e), newSchedulesDescribeCommand(e),
		newSchedulesSwitchCommand(e), newSchedulesRollbackCommand(e),
		newScheduleActionCommand(e, "pause", "Stop a schedule's new runs (a run in progress ends as it would)",
			func(ctx context.Context, c *client.Client, name string) (*client.Schedule, error) {
				return c.PauseSchedule(ctx, name)
			}),
		newScheduleActionCommand(e, "resume", "Let a paused schedule's runs start again (due partitions catch up in order)",
			func(ctx context.Context, c *client.Client, name string) (*client.Schedule, error) {
				return c.ResumeSchedule(ctx, name)
			}),
		newSchedulesRetryCommand(e),
		newScheduleActionCommand(e, "delete", "Delete a schedule (published rows, manifests and jobs stay; a run in progress goes on)",
			func(ctx context.Context, c *client.Client, name string) (*client.Schedule, error) {
				return c.DeleteSchedule(ctx, name)
			}))
}

// pipelineArg reads pipeline file path for a schedule: its rendered text
// and the directory it resolves relative paths from.
func pipelineArg(e *env, path string) (src, base string, err error) {
	if path == "" {
		return "", "", usageErrorf("--pipeline is required: the pipeline file each partition runs")
	}
	b, err := readPipelineFile(path, e.jinja)
	if err != nil {
		return "", "", err
	}
	wd, err := cli.WorkingDir()
	if err != nil {
		return "", "", withCode(ExitFailure, err)
	}
	return string(b), wd, nil
}

// absTemplate makes a file template absolute against the current
// directory (its {fields} are left as they are).
func absTemplate(flag, t string) (string, error) {
	abs, err := filepath.Abs(t)
	if err != nil {
		return "", usageErrorf("%s %s: %v", flag, t, err)
	}
	return abs, nil
}

// parseStart reads --start: RFC 3339, or a date (midnight UTC).
func parseStart(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04", "2006-01-02T15", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, usageErrorf("--start %q is not a time: give RFC 3339 (2026-12-01T00:00:00Z) or a date (2026-12-01, UTC)", s)
}

func newSchedulesCreateCommand(e *env) *cobra.Command {
	var pipeline, start, jobName string
	var files, sides []string
	var numWorkers int
	var req client.CreateScheduleRequest
	return showCommand(e, showSpec[*client.Schedule]{
		use:   "create NAME --pipeline P.yaml (--every D | --cron EXPR | --file-sets) --files PATTERN... [flags]",
		short: "Create a schedule: run P.yaml once per partition of time on its pinned files",
		long: `Create records schedule NAME. The pipeline must be bounded (file sources) and
load on the server; it is sent as text, with the current directory for its
relative paths. --files (repeatable) are the partition's input patterns,
made absolute against the current directory, with {partition} and the
start's {YYYY} {MM} {DD} {HH} {mm} {ss} (UTC) filled in per partition:

  weir schedules create sales --pipeline sales.yaml --every 24h --start 2026-12-01 \
      --delay 1h --files '/data/in/{partition}/*.jsonl' --side-input regions=/data/ref/regions.csv

Partition IDs come from --partition-template (default: {YYYY}-{MM}-{DD} for
whole days, {YYYY}-{MM}-{DD}T{HH} for hours, else minutes).

With --file-sets a partition is a set of files, not a range of time: every
value of {partition} that --files match on disk is one partition, run once,
in the order the sets are found ({partition} is a path segment, or part of
one between literal text). A set is due once its --ready-file exists (a
template with {partition}, as '/data/in/{partition}/_SUCCESS'), or, without
one, once its files are unchanged for --delay:

  weir schedules create drops --pipeline sales.yaml --file-sets \
      --files '/data/drops/{partition}/*.jsonl' --ready-file '/data/drops/{partition}/_SUCCESS'`,
		args: exactArgs("NAME"),
		check: func(cmd *cobra.Command, args []string) error {
			src, base, err := pipelineArg(e, pipeline)
			if err != nil {
				return err
			}
			req.Name, req.JobName, req.Pipeline, req.PipelineFile, req.BaseDir = args[0], jobName, src, pipeline, base
			if n := btoi(req.Every != "") + btoi(req.Cron != "") + btoi(req.FileSets); n != 1 {
				return usageErrorf("give --every DURATION, --cron EXPR or --file-sets (one of them)")
			}
			if req.ReadyFile != "" {
				if !req.FileSets {
					return usageErrorf("--ready-file makes a file set due: give --file-sets with it")
				}
				abs, err := absTemplate("--ready-file", req.ReadyFile)
				if err != nil {
					return err
				}
				req.ReadyFile = abs
			}
			if len(files) == 0 {
				return usageErrorf("--files is required: the partition's input files or globs, with {partition} or {YYYY} {MM} {DD} {HH} {mm}")
			}
			req.Files = nil
			for _, f := range files {
				abs, err := absTemplate("--files", f)
				if err != nil {
					return err
				}
				req.Files = append(req.Files, abs)
			}
			for _, s := range sides {
				name, path, ok := strings.Cut(s, "=")
				if !ok || name == "" || path == "" {
					return usageErrorf("--side-input %q: want NAME=FILE", s)
				}
				abs, err := absTemplate("--side-input", path)
				if err != nil {
					return err
				}
				if req.SideInputs == nil {
					req.SideInputs = map[string]string{}
				}
				if _, dup := req.SideInputs[name]; dup {
					return usageErrorf("--side-input %s is given twice", name)
				}
				req.SideInputs[name] = abs
			}
			if start != "" {
				t, err := parseStart(start)
				if err != nil {
					return err
				}
				req.Start = &t
			}
			if cmd.Flags().Changed("num-workers") {
				req.Options.NumWorkers = numWorkers
			}
			return nil
		},
		fetch: func(ctx context.Context, c *client.Client, _ []string) (*client.Schedule, error) {
			return c.CreateSchedule(ctx, req)
		},
		text: func(w io.Writer, s *client.Schedule) error {
			var err error
			if s.FileSets {
				_, err = fmt.Fprintf(w, "Created schedule %s: job %s, %s: a partition per value of {partition} in %s, run as it arrives\n",
					s.Name, s.JobName, cadenceText(s), strings.Join(s.Files, ", "))
			} else {
				_, err = fmt.Fprintf(w, "Created schedule %s: job %s, %s, partitions %s; first partition %s, due %s\n",
					s.Name, s.JobName, cadenceText(s), s.PartitionTemplate, s.NextPartition, formatTime(s.NextDue))
			}
			if err != nil {
				return outputErr(err)
			}
			return nil
		},
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&pipeline, "pipeline", "", "the pipeline file each partition runs (bounded: file sources)")
			fs.StringVar(&req.Every, "every", "", "partition length (24h, 1h, 15m), partitions aligned to --start")
			fs.StringVar(&req.Cron, "cron", "", "cron expression (UTC) whose times bound the partitions, as '0 2 * * *' or @daily")
			fs.BoolVar(&req.FileSets, "file-sets", false, "partitions are file sets: each value of {partition} in --files found on disk is one, run once as it arrives")
			fs.StringVar(&req.ReadyFile, "ready-file", "", "with --file-sets: the file whose existence makes a file set due, a template with {partition} (default: its files unchanged for --delay)")
			fs.StringVar(&start, "start", "", "start of the first partition (RFC 3339 or a date; default: the partition holding now)")
			fs.StringVar(&req.Delay, "delay", "", "how long after its end a partition is due (its input complete), as 1h (default 0s)")
			fs.StringArrayVar(&files, "files", nil, "input file pattern of a partition, with {partition} or {YYYY} {MM} {DD} {HH} {mm} (repeatable)")
			fs.StringArrayVar(&sides, "side-input", nil, "side input NAME=FILE of a partition, a template too (repeatable)")
			fs.StringVar(&req.PartitionTemplate, "partition-template", "", "partition ID from the start's UTC fields, as {YYYY}-{MM}-{DD}")
			fs.StringVar(&jobName, "job-name", "", "job name of the partition runs (default: the schedule's name)")
			fs.IntVar(&numWorkers, "num-workers", 0, "workers of each partition run")
			fs.IntVar(&req.MaxAttempts, "max-attempts", 0, "attempts of a partition before it is left failed (default 3)")
			fs.StringVar(&req.RetryBackoff, "retry-backoff", "", "pause before a failed partition's second attempt, doubled after (default 1m, at most 1h)")
		},
	})
}

// cadenceText says how s cuts time.
func cadenceText(s *client.Schedule) string {
	switch {
	case s.FileSets && s.ReadyFile != "":
		return "file sets, each due once " + s.ReadyFile + " exists"
	case s.FileSets:
		return "file sets, each due once its files are unchanged for " + s.Delay
	case s.Cron != "":
		return "cron " + s.Cron
	}
	return "every " + s.Every
}

// runCounts counts s's runs by status.
func runCounts(s *client.Schedule) map[string]int {
	n := map[string]int{}
	for _, r := range s.Runs {
		n[r.Status]++
	}
	return n
}

// currentVersion is s's newest version not rolled back.
func currentVersion(s *client.Schedule) int {
	for i := len(s.Versions) - 1; i >= 0; i-- {
		if !s.Versions[i].RolledBack {
			return s.Versions[i].Version
		}
	}
	return 0
}

func newSchedulesListCommand(e *env) *cobra.Command {
	return showCommand(e, showSpec[[]*client.Schedule]{
		use:   "list",
		short: "List schedules (NAME JOB CADENCE VERSION NEXT_PARTITION NEXT_DUE PUBLISHED RUNNING FAILED STATE)",
		args:  exactArgs(),
		fetch: func(ctx context.Context, c *client.Client, _ []string) ([]*client.Schedule, error) {
			return c.ListSchedules(ctx)
		},
		text: func(w io.Writer, all []*client.Schedule) error {
			return writeTable(w, "NAME\tJOB\tCADENCE\tVERSION\tNEXT_PARTITION\tNEXT_DUE\tPUBLISHED\tRUNNING\tFAILED\tSTATE", all, func(s *client.Schedule) string {
				n := runCounts(s)
				st := "active"
				if s.Paused {
					st = "paused"
				}
				return fmt.Sprintf("%s\t%s\t%s\t%d\t%s\t%s\t%d\t%d\t%d\t%s", s.Name, s.JobName, cadenceText(s), currentVersion(s),
					s.NextPartition, formatTime(s.NextDue), n["published"], n["running"], n["failed"], st)
			})
		},
	})
}

func newSchedulesDescribeCommand(e *env) *cobra.Command {
	return showCommand(e, showSpec[*client.Schedule]{
		use:   "describe NAME",
		short: "Describe a schedule: its cadence, versions, and every partition's run (status, attempts, job, manifest)",
		args:  exactArgs("NAME"),
		fetch: func(ctx context.Context, c *client.Client, args []string) (*client.Schedule, error) {
			return c.GetSchedule(ctx, args[0])
		},
		text: writeScheduleText,
	})
}

// writeScheduleText prints schedule s for people.
func writeScheduleText(w io.Writer, s *client.Schedule) error {
	st := "active"
	if s.Paused {
		st = "paused"
	}
	if err := writeFields(w, func(row func(k, v string)) {
		row("Name", s.Name)
		row("Job name", s.JobName)
		row("Cadence", cadenceText(s))
		row("Start", formatTime(s.Start))
		row("Delay", s.Delay)
		if !s.FileSets {
			row("Partition template", s.PartitionTemplate)
		}
		row("Files", strings.Join(s.Files, ", "))
		for k, v := range s.SideInputs {
			row("Side input "+k, v)
		}
		row("Attempts", fmt.Sprintf("at most %d, backoff %s doubling", s.MaxAttempts, s.RetryBackoff))
		row("State", st)
		if s.FileSets {
			row("Next partition", "the next file set found on disk")
		} else {
			row("Next partition", fmt.Sprintf("%s (due %s)", s.NextPartition, formatTime(s.NextDue)))
		}
	}); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(w, "\nVersions:"); err != nil {
		return outputErr(err)
	}
	if err := writeTable(w, "VERSION\tFROM_PARTITION\tPIPELINE\tCREATED\tSTATE", s.Versions, func(v client.ScheduleVersion) string {
		state := "active"
		if v.RolledBack {
			state = "rolled back " + formatTime(*v.RolledBackTime)
		}
		return fmt.Sprintf("%d\t%s\t%s\t%s\t%s", v.Version, v.FromPartition, v.PipelineFile, formatTime(v.CreateTime), state)
	}); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(w, "\nRuns:"); err != nil {
		return outputErr(err)
	}
	return writeTable(w, "PARTITION\tSTATUS\tVERSION\tATTEMPTS\tJOB\tMANIFEST_DIGEST\tNEXT_ATTEMPT\tERROR", s.Runs, func(r client.ScheduleRun) string {
		next, job, digest, msg := "-", "-", "-", "-"
		if r.NextAttempt != nil {
			next = formatTime(*r.NextAttempt)
		}
		if r.JobID != "" {
			job = r.JobID
		}
		if r.ManifestDigest != "" {
			digest = shortDigest(r.ManifestDigest)
		}
		if r.Error != "" {
			msg = strings.ReplaceAll(r.Error, "\n", " ")
		}
		return fmt.Sprintf("%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s", r.Partition, r.Status, r.Version, r.Attempts, job, digest, next, msg)
	})
}

func newSchedulesSwitchCommand(e *env) *cobra.Command {
	var pipeline string
	var req client.SwitchScheduleRequest
	var pf parityFlags
	return showCommand(e, showSpec[*client.Schedule]{
		use:   "switch NAME --pipeline NEW.yaml [--from-partition P] [--require-parity [--parity-partitions N] [--parity-budget N]]",
		short: "Run a new pipeline version from partition P on (default: the first not published or running)",
		long: `Switch makes NEW.yaml the schedule's next version, run from partition P on;
the partitions before P keep the versions that ran or will run them. P must
be neither published nor running (SCHEDULE_CONFLICT): the old version stops
after its last published partition and the new one starts at P.

With --require-parity the switch waits for evidence: NEW first runs as a
shadow run (staged, never published, job name NAME's job name plus
"-parity") on each of the latest --parity-partitions published partitions,
reading the same pinned input manifest, and its staged rows are compared
with the rows that partition published (weir diff at the full key: rows,
values, per-key totals). Only when every one agrees (within --parity-budget
differences) does the switch happen; otherwise the schedule is unchanged,
the comparison is on stderr, and the exit code is 7 (8 when a comparison
could not be made). Parity compares WriteToSql outputs on SQLite and
PostgreSQL and file outputs (by the group_by of the Combine the file sink
reads, or --parity-key). A PostgreSQL database is reached at the address
the server names without its password: the password comes from PGPASSWORD
or ~/.pgpass, as for psql, or give the whole URL with --parity-dsn.`,
		args: exactArgs("NAME"),
		check: func(_ *cobra.Command, _ []string) error {
			if pf.partitions < 1 || pf.budget < 0 {
				return usageErrorf("--parity-partitions must be at least 1 and --parity-budget at least 0")
			}
			if pf.dsn != "" && !strings.HasPrefix(pf.dsn, "postgres://") && !strings.HasPrefix(pf.dsn, "postgresql://") {
				return usageErrorf("--parity-dsn %q: want a postgres://USER:PASSWORD@HOST:PORT/DB URL", pf.dsn)
			}
			src, base, err := pipelineArg(e, pipeline)
			if err != nil {
				return err
			}
			req.Pipeline, req.PipelineFile, req.BaseDir = src, pipeline, base
			return nil
		},
		fetch: func(ctx context.Context, c *client.Client, args []string) (*client.Schedule, error) {
			if pf.require {
				if err := checkParity(ctx, e, c, args[0], req, pf); err != nil {
					return nil, err
				}
			}
			return c.SwitchSchedule(ctx, args[0], req)
		},
		clientErr: func(ctx context.Context, c *client.Client, err error) error {
			var ee *exitError
			if errors.As(err, &ee) {
				return err
			}
			return clientError(ctx, c, err)
		},
		text: func(w io.Writer, s *client.Schedule) error {
			v := s.Versions[len(s.Versions)-1]
			if _, err := fmt.Fprintf(w, "Schedule %s: version %d (%s) runs from partition %s\n", s.Name, v.Version, v.PipelineFile, v.FromPartition); err != nil {
				return outputErr(err)
			}
			return nil
		},
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&pipeline, "pipeline", "", "the new pipeline file")
			fs.StringVar(&req.FromPartition, "from-partition", "", "the first partition the new pipeline runs")
			fs.BoolVar(&pf.require, "require-parity", false, "switch only if NEW, shadow-run on the latest published partitions, reproduces what they published")
			fs.IntVar(&pf.partitions, "parity-partitions", 1, "with --require-parity: how many of the latest published partitions to shadow-run and compare")
			fs.Int64Var(&pf.budget, "parity-budget", 0, "with --require-parity: differences per partition still counted as parity")
			fs.StringVar(&pf.dsn, "parity-dsn", "", "with --require-parity: the postgres:// URL (with its password) of the database of PostgreSQL outputs (default: the one the server names, without its password)")
			fs.StringSliceVar(&pf.key, "parity-key", nil, "with --require-parity: the key fields of file outputs (default: the group_by of the Combine the file sink reads)")
		},
	})
}

func newSchedulesRollbackCommand(e *env) *cobra.Command {
	return showCommand(e, showSpec[*client.Schedule]{
		use:   "rollback NAME",
		short: "Return to the previous version at the first partition the current one had not published",
		long: `Rollback retires the schedule's newest version. The version before it runs
every partition the retired one had not published, from the first missing
output; what the retired version published stays (nothing is published
twice). A run of the retired version in progress is cancelled: its rows stay
staged, never published, and its partition runs again with the earlier
version.`,
		args: exactArgs("NAME"),
		fetch: func(ctx context.Context, c *client.Client, args []string) (*client.Schedule, error) {
			return c.RollbackSchedule(ctx, args[0])
		},
		text: func(w io.Writer, s *client.Schedule) error {
			from := s.NextPartition
			if s.FileSets {
				from = "the next file set found"
			}
			for _, r := range s.Runs {
				if r.Status != "published" && r.Status != "running" {
					from = r.Partition
					break
				}
			}
			if _, err := fmt.Fprintf(w, "Schedule %s: back to version %d from partition %s\n", s.Name, currentVersion(s), from); err != nil {
				return outputErr(err)
			}
			return nil
		},
	})
}

func newSchedulesRetryCommand(e *env) *cobra.Command {
	var partition string
	return showCommand(e, showSpec[*client.Schedule]{
		use:   "retry NAME --partition P",
		short: "Start a failed partition again (attempts counted afresh, the same manifest)",
		args:  exactArgs("NAME"),
		check: func(_ *cobra.Command, _ []string) error {
			if partition == "" {
				return usageErrorf("--partition is required: the partition to run again")
			}
			return nil
		},
		fetch: func(ctx context.Context, c *client.Client, args []string) (*client.Schedule, error) {
			return c.RetrySchedulePartition(ctx, args[0], partition)
		},
		text: func(w io.Writer, s *client.Schedule) error {
			if _, err := fmt.Fprintf(w, "Schedule %s: partition %s runs again\n", s.Name, partition); err != nil {
				return outputErr(err)
			}
			return nil
		},
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&partition, "partition", "", "the partition to run again")
		},
	})
}

// newScheduleActionCommand is a command NAME that calls do and prints
// the schedule's state.
func newScheduleActionCommand(e *env, use, short string, do func(ctx context.Context, c *client.Client, name string) (*client.Schedule, error)) *cobra.Command {
	return showCommand(e, showSpec[*client.Schedule]{
		use:   use + " NAME",
		short: short,
		args:  exactArgs("NAME"),
		fetch: func(ctx context.Context, c *client.Client, args []string) (*client.Schedule, error) {
			return do(ctx, c, args[0])
		},
		text: func(w io.Writer, s *client.Schedule) error {
			st := "active"
			if s.Paused {
				st = "paused"
			}
			if use == "delete" {
				st = "deleted"
			}
			if _, err := fmt.Fprintf(w, "Schedule %s: %s\n", s.Name, st); err != nil {
				return outputErr(err)
			}
			return nil
		},
	})
}

// btoi is 1 for true.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
