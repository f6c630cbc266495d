package rehearsecmd

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"github.com/weir-dev/weir/cmd/weir/internal/serverconn"
	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/diff"
	"github.com/weir-dev/weir/duration"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/sandbox"
	"github.com/weir-dev/weir/service/record"
)

// rehearseFlags are the flags of `weir rehearse`.
type rehearseFlags struct {
	format      string
	nameMapping string
	events      string
	budget      int64
	maxDetails  int
	workers     int
	conserve    string
	since       string
	until       string
	fromSubSnap string
	fromSnap    string
	traceMemory string
	traceDir    string
	server      serverconn.Flag
}

// Command returns `weir rehearse`.
func Command(e *cli.Env) *cobra.Command {
	var f rehearseFlags
	cmd := &cobra.Command{
		Use:   "rehearse JOB_NAME|OLD.yaml NEW.yaml --events FILE | --since TIME | --from-subscription-snapshot NAME | --from-snapshot ID|FILE [--until TIME]",
		Short: "Run the old and the new pipeline over the same recorded input and compare their outputs",
		Long: `Rehearse runs the pipeline a job runs (OLD, a file or the name of a job of
the weir server) and a new version (NEW) over exactly the same recorded
stretch of input, with the same watermark trace, each in an isolated sandbox
in this process: the recorded sources are replayed, every sink is captured,
nothing is acknowledged or written to any production sink, and no job is
changed. The old pipeline runs twice: where it disagrees with itself (a
processing-time step, randomness), the disagreement is noise, listed apart
and not counted against the new pipeline.

The recorded input (--events) is JSON lines, each an element
  {"element": {...}, "event_time": "2026-03-01T00:01:00Z", "source": "STEP"}
or a watermark move
  {"watermark": "2026-03-01T00:05:00Z", "source": "STEP"}
("source" may be left out when the pipeline has one recorded source).

With --from-snapshot (a READY job snapshot's ID, or a file written by
weir snapshots export), both pipelines start from the snapshot's keyed
state: the old through its own graph, the new through the compatibility
mapping (--transform-name-mapping), exactly as an update would take it over,
so the windows open at the snapshot are compared too. A new pipeline an
update could not take the state over with is refused (exit 8, naming the
incompatibility). The recorded input is then what the old pipeline's
Pub/Sub topics retain after the snapshot's positions (up to --until), or
--events.

Or, with --since (and --until), the recorded input is what the topics of
OLD's ReadFromPubSub sources retain on the server at --server; with
--from-subscription-snapshot, what the snapshot's topic retains after what
the snapshot had acknowledged. Either is read by
stream sequence, nothing delivered or acknowledged; each message is decoded
by each pipeline's own source, and the watermark after each message is the
one OLD's source holds (the newest event time less max_out_of_orderness).

Every output (each sink step, the rejects a job sends to its dead-letter
topic) is compared row by row, keyed by the sink's key (a SQL sink's key,
else the group-by fields of the step feeding it), the window and the pane
(index and timing). Each difference is classed: value_changed,
missing_in_new, extra_in_new, pane_timing_shifted, pane_accumulation_changed,
reject_reason_changed, late_path_changed, and visible_changed: what consumers
see (per key and window the newest pane under upsert, every pane added up
under append) differs though the rows do not.
--conserve IN=OUT checks that the input's field IN adds up to the outputs'
visible field OUT plus the rejected elements' IN (575 = 525 + 50).

--transform-name-mapping renames steps as for an update, so a renamed sink
compares with its old self.

The recorded stretch is read once into a trace the three runs share, kept
encoded in memory up to --trace-memory (default 256MiB); beyond it, its
older part moves to an unlinked file in --trace-dir (default $TMPDIR),
released when the rehearsal ends however it ends. The report says how large
the trace was and how much of it spilled. The sandboxed runs' captured
output rows beyond memory and a snapshot downloaded for --from-snapshot go
to --trace-dir too.

Exit codes: 0 the outputs agree (within --budget, noise excluded);
7 they differ; any other code means the rehearsal did not reach a verdict:
2 usage, 3 invalid pipeline, 5 no weir server answers (OLD is a job name),
1 the job was not found, 8 a sandboxed run failed or the recorded input does
not fit the pipelines' sources.`,
		Args: cli.ExactArgs("JOB_NAME|OLD.yaml", "NEW.yaml"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRehearse(cmd.Context(), e, args[0], args[1], f)
		},
	}
	fl := cmd.Flags()
	cli.AddFormatFlag(cmd, &f.format)
	serverconn.AddFlag(cmd, &f.server)
	fl.StringVar(&f.nameMapping, "transform-name-mapping", "", `JSON object mapping old step names (or prefixes) to new ones`)
	fl.StringVar(&f.events, "events", "", "the recorded input: a JSON lines file of elements with event times and watermark moves")
	fl.StringVar(&f.since, "since", "", "the recorded input: the messages the old pipeline's topics retain, published since this time (RFC 3339, or a duration ago: 30m, 2h); read from the server without acknowledging")
	fl.StringVar(&f.until, "until", "", "with --since, --from-subscription-snapshot or --from-snapshot: up to this time (RFC 3339, or a duration ago); default now")
	fl.StringVar(&f.fromSnap, "from-snapshot", "", "start both pipelines from a READY job snapshot's state (its ID on the server, or an exported snapshot file); the recorded input is what its Pub/Sub sources' topics retain after its positions, or --events")
	fl.StringVar(&f.fromSubSnap, "from-subscription-snapshot", "", "the recorded input: the messages of the snapshot's topic that the subscription snapshot had not acknowledged, read from the server without acknowledging")
	fl.Int64Var(&f.budget, "budget", 0, "differences (noise excluded) still counted as parity")
	fl.IntVar(&f.maxDetails, "max-details", 100, "differences listed one by one (every difference is counted)")
	fl.IntVar(&f.workers, "workers", 1, "workers of each sandboxed run")
	fl.StringVar(&f.conserve, "conserve", "", "IN=OUT: check that the input field IN adds up to the outputs' visible field OUT plus the rejected elements' IN")
	fl.StringVar(&f.traceMemory, "trace-memory", "", "memory budget of the recorded stretch (64MiB, 1GiB, 512MB; default 256MiB): beyond it, its older part spills to --trace-dir")
	fl.StringVar(&f.traceDir, "trace-dir", "", "an existing directory the recorded stretch spills to beyond --trace-memory, as an unlinked file, and where the runs' captured rows beyond memory go (default $TMPDIR)")
	return cmd
}

// TraceBudget reads the memory budget and the spill directory of a
// rehearsal's recorded stretch (sandbox.Trace's MaxMemory and SpillDir)
// from the values of the flags named memFlag and dirFlag (`weir rehearse
// --trace-memory --trace-dir`, `weir server --rehearse-trace-memory
// --rehearse-trace-dir`): a byte size (sandbox.ParseTraceMemory; "": 0,
// the default budget) and a directory that exists and takes files ("": the
// system's temporary directory). A bad value is a usage error naming its
// flag.
func TraceBudget(memFlag, mem, dirFlag, dir string) (maxMemory int64, spillDir string, err error) {
	maxMemory, err = sandbox.ParseTraceMemory(mem)
	if err != nil {
		return 0, "", cli.UsageErrorf("%s %q: %w", memFlag, mem, err)
	}
	if err := sandbox.CheckSpillDir(dir); err != nil {
		return 0, "", cli.UsageErrorf("%s %q: %w", dirFlag, dir, err)
	}
	return maxMemory, dir, nil
}

// rehearsal is the report of `weir rehearse` (--format json).
type rehearsal struct {
	Old    string `json:"old"`
	New    string `json:"new"`
	Events string `json:"events"`
	// Trace is the recorded stretch's account.
	Trace TraceReport `json:"trace"`
	// Snapshot is the job snapshot both pipelines started from
	// (--from-snapshot); nil when they started empty.
	Snapshot *SnapshotReport `json:"snapshot,omitempty"`
	// Verdict is "identical" or "different".
	Verdict      string              `json:"verdict"`
	Conservation []diff.Conservation `json:"conservation"`
	Runs         []SandboxRun        `json:"runs"`
	Report       *diff.Report        `json:"report"`
}

// TraceReport is what the recorded stretch took: its size encoded, its
// memory budget (--trace-memory) and how much of it spilled to disk
// beyond the budget, in which directory.
type TraceReport struct {
	Elements          int64  `json:"elements"`
	Bytes             int64  `json:"bytes"`
	MemoryBudgetBytes int64  `json:"memory_budget_bytes"`
	SpilledBytes      int64  `json:"spilled_bytes"`
	SpillDir          string `json:"spill_dir"`
}

// SandboxRun is one sandboxed run's counts.
type SandboxRun struct {
	Run      string `json:"run"`
	Input    int64  `json:"input"`
	Rejected int64  `json:"rejected"`
	Rows     int64  `json:"rows"`
	// Duplicates counts the recorded messages the run's sources dropped as
	// repeated IDs (id_attribute, id_field), as the job's sources do; they
	// are not in Input.
	Duplicates int64 `json:"duplicates,omitempty"`
}

func runRehearse(ctx context.Context, e *cli.Env, oldArg, newPath string, f rehearseFlags) error {
	if err := cli.CheckFormat(f.format); err != nil {
		return err
	}
	given := 0
	for _, v := range []string{f.events, f.since, f.fromSubSnap} {
		if v != "" {
			given++
		}
	}
	switch {
	case f.fromSnap != "" && (f.since != "" || f.fromSubSnap != ""):
		return cli.UsageErrorf("--from-snapshot reads what came after the snapshot's own positions: give it alone, or with --events (not with --since or --from-subscription-snapshot)")
	case f.fromSnap == "" && given != 1:
		return cli.UsageErrorf("give the recorded input both pipelines run over: --events FILE, --since TIME, --from-subscription-snapshot NAME or --from-snapshot ID (one of them)")
	}
	if f.until != "" && f.events != "" {
		return cli.UsageErrorf("--until needs --since, --from-subscription-snapshot or --from-snapshot")
	}
	now := time.Now()
	var since, until time.Time
	if f.events == "" {
		var err error
		if f.since != "" {
			if since, err = timeOrAgo(f.since, now); err != nil {
				return cli.UsageErrorf("--since: %w", err)
			}
		}
		if f.until != "" {
			if until, err = timeOrAgo(f.until, now); err != nil {
				return cli.UsageErrorf("--until: %w", err)
			}
		}
		if !until.IsZero() && !since.IsZero() && !until.After(since) {
			return cli.UsageErrorf("--until %s is not after --since %s", until.Format(time.RFC3339), since.Format(time.RFC3339))
		}
	}
	if f.budget < 0 || f.workers < 1 || f.maxDetails < 0 {
		return cli.UsageErrorf("--budget and --max-details must be >= 0 and --workers >= 1")
	}
	maxMemory, spillDir, err := TraceBudget("--trace-memory", f.traceMemory, "--trace-dir", f.traceDir)
	if err != nil {
		return err
	}
	var inField, outField string
	if f.conserve != "" {
		var ok bool
		inField, outField, ok = strings.Cut(f.conserve, "=")
		if !ok || inField == "" || outField == "" {
			return cli.UsageErrorf("--conserve %q: want IN=OUT, e.g. amount=total", f.conserve)
		}
	}
	mapping, err := compat.ParseMapping(f.nameMapping)
	if err != nil {
		return cli.UsageErrorf("--transform-name-mapping: %w", err)
	}
	wd, err := cli.WorkingDir()
	if err != nil {
		return cli.WithCode(cli.ExitFailure, err)
	}
	oldName, oldSrc, err := rehearsalOld(ctx, f.server, oldArg)
	if err != nil {
		return err
	}
	newSrc, err := os.ReadFile(newPath)
	if err != nil {
		return cli.WithCode(cli.ExitInvalidPipeline, fmt.Errorf("reading the pipeline file: %w", err))
	}
	// The sandboxes' captured rows beyond memory, like the trace, go to
	// --trace-dir.
	opts := sandbox.Options{BaseDir: wd, JinjaVariables: e.Jinja, Workers: f.workers, Logger: e.Logger, TempDir: spillDir}
	// The explicit old-to-new names of every step of OLD, for the new run.
	oldP, err := sandbox.Load(oldName, oldSrc, opts)
	if err != nil {
		return cli.WithCode(cli.ExitInvalidPipeline, err)
	}
	newP, err := sandbox.Load(newPath, newSrc, opts)
	if err != nil {
		return cli.WithCode(cli.ExitInvalidPipeline, err)
	}
	var start *snapshotStart
	if f.fromSnap != "" {
		if start, err = loadSnapshotStart(ctx, f.server, f.fromSnap, spillDir, oldP, newP, mapping); err != nil {
			return err
		}
		e.Logger.Info("rehearsing from a job snapshot", "snapshot", start.id, "entries", start.state.Entries())
	}
	trace := &sandbox.Trace{MaxMemory: maxMemory, SpillDir: spillDir}
	defer trace.Close()
	source := f.events
	if f.events != "" {
		ef, err := os.Open(f.events)
		if err != nil {
			return cli.WithCode(cli.ExitRehearsalFailed, fmt.Errorf("opening the events file: %w", err))
		}
		err = trace.AppendEvents(ef, filepath.Base(f.events))
		ef.Close()
		if err != nil {
			return cli.WithCode(cli.ExitRehearsalFailed, err)
		}
	} else {
		if source, err = retainedTrace(ctx, f.server, trace, oldP, since, until, f.fromSubSnap, start); err != nil {
			return err
		}
	}
	names := map[string]string{}
	for _, s := range oldP.Graph().Steps {
		if n, _, applied := mapping.Rename(s.Name); applied && n != "" {
			names[s.Name] = n
		}
	}
	e.Logger.Info("rehearsing", "old", oldArg, "new", newPath, "events", f.events, "elements", trace.Elements())
	oldOpts := opts
	newOpts := opts
	newOpts.NameMapping = names
	if start != nil {
		oldOpts.State, oldOpts.StateSteps = start.state, start.oldSteps
		newOpts.State, newOpts.StateSteps = start.state, start.newSteps
	}
	// The three runs read the one recorded trace and share nothing else:
	// they run at once.
	whats := []string{"old", "old (second)", "new"}
	results, err := sandbox.RunAll(ctx, trace,
		sandbox.RunSpec{Path: oldName, Src: oldSrc, Opts: oldOpts},
		sandbox.RunSpec{Path: oldName, Src: oldSrc, Opts: oldOpts},
		sandbox.RunSpec{Path: newPath, Src: newSrc, Opts: newOpts})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var re *sandbox.RunError
		if errors.As(err, &re) {
			return cli.WithCode(cli.ExitRehearsalFailed, fmt.Errorf("the %s run: %w", whats[re.Index], re.Err))
		}
		return cli.WithCode(cli.ExitRehearsalFailed, err)
	}
	for _, r := range results {
		defer r.Close()
	}
	oldRes, old2Res, newRes := results[0], results[1], results[2]
	sides := make([]diff.Side, 3)
	for i, r := range []*sandbox.Result{oldRes, old2Res, newRes} {
		if sides[i], err = r.Side(); err != nil {
			return cli.WithCode(cli.ExitRehearsalFailed, err)
		}
	}
	details := f.maxDetails
	if details == 0 {
		details = -1 // none listed (diff's 0 is its default)
	}
	rep, err := diff.Run(sides[0], sides[1], sides[2], diff.Options{Budget: f.budget, MaxDetails: details})
	if err != nil {
		return cli.WithCode(cli.ExitRehearsalFailed, fmt.Errorf("comparing the outputs: %w", err))
	}
	out := &rehearsal{Old: oldArg, New: newPath, Events: source, Verdict: "identical", Report: rep, Trace: traceReport(trace)}
	if start != nil {
		out.Snapshot = start.report()
	}
	if !rep.Identical() {
		out.Verdict = "different"
	}
	for _, r := range []struct {
		name string
		res  *sandbox.Result
	}{{"old", oldRes}, {"old (second)", old2Res}, {"new", newRes}} {
		out.Runs = append(out.Runs, SandboxRun{Run: r.name, Input: r.res.Input, Rejected: r.res.Rejected, Rows: r.res.Rows.Len(), Duplicates: r.res.Duplicates})
	}
	if inField != "" {
		for _, r := range []struct {
			name string
			res  *sandbox.Result
			new  bool
		}{{"old", oldRes, false}, {"new", newRes, true}} {
			out.Conservation = append(out.Conservation, diff.Conserve(rep, r.new, r.name, inField, outField, r.res.InputSums[inField], r.res.RejectedSums[inField]))
		}
	}
	if f.format == cli.FormatJSON {
		enc := json.NewEncoder(e.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return cli.WithCode(cli.ExitFailure, fmt.Errorf("writing the report: %w", err))
		}
	} else if err := writeRehearsal(e.Stdout, out); err != nil {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("writing the report: %w", err))
	}
	if !rep.Identical() {
		return cli.WithCode(cli.ExitRehearsalDiffers, fmt.Errorf("the new pipeline's outputs differ from the old one's: %d difference(s), budget %d", rep.Total, rep.Budget))
	}
	return nil
}

// traceReport accounts for the recorded stretch t once the runs read it.
func traceReport(t *sandbox.Trace) TraceReport {
	r := TraceReport{Elements: t.Elements(), Bytes: t.Size(), MemoryBudgetBytes: t.MaxMemory, SpilledBytes: t.Spilled(), SpillDir: t.SpillDir}
	if r.MemoryBudgetBytes == 0 {
		r.MemoryBudgetBytes = sandbox.DefaultTraceMemory
	}
	if r.SpillDir == "" {
		r.SpillDir = os.TempDir()
	}
	return r
}

// timeOrAgo reads an RFC 3339 time or a duration before now.
func timeOrAgo(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := duration.Parse(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time nor a duration (30m, 2h, 1d)", s)
	}
	return now.Add(-d), nil
}

// retainedTrace reads, from the server, the messages the topics of the
// old pipeline's Pub/Sub sources retain between since and until (by
// stream sequence: nothing is delivered or acknowledged), appends them to
// trace with each source's watermark moves, and returns a description of
// what was read.
func retainedTrace(ctx context.Context, server serverconn.Flag, trace *sandbox.Trace, oldP *weir.Pipeline, since, until time.Time, fromSnap string, start *snapshotStart) (string, error) {
	steps, topics, subs := sandbox.PubSubSources(oldP)
	if len(steps) == 0 {
		return "", cli.UsageErrorf("--since, --from-subscription-snapshot and --from-snapshot read the topics of the old pipeline's ReadFromPubSub sources, and it has none: give --events")
	}
	c, err := serverconn.NewClient(server)
	if err != nil {
		return "", err
	}
	var snap *client.SubscriptionSnapshot
	if fromSnap != "" {
		if snap, err = c.GetSubscriptionSnapshot(ctx, fromSnap); err != nil {
			return "", serverconn.Error(ctx, c, fmt.Errorf("finding subscription snapshot %s: %w", fromSnap, err))
		}
	}
	if err := start.sameBroker(ctx, c); err != nil {
		return "", err
	}
	var read []string
	for _, step := range steps {
		topic := topics[step]
		if topic == "" {
			s, err := c.GetSubscription(ctx, subs[step])
			if err != nil {
				return "", serverconn.Error(ctx, c, fmt.Errorf("finding the topic of subscription %s (step %s): %w", subs[step], step, err))
			}
			topic = s.Topic
		}
		mt, err := sandbox.NewMessagesTracer(trace, oldP, step)
		if err != nil {
			return "", cli.WithCode(cli.ExitRehearsalFailed, err)
		}
		var msgs []pubsub.Message
		n := 0
		q := client.RetainedQuery{Since: since, Until: until}
		if snap != nil {
			if snap.Topic != topic {
				return "", cli.WithCode(cli.ExitRehearsalFailed, fmt.Errorf("source %s reads topic %s, not the topic of subscription snapshot %s (%s): rehearse it with --since", step, topic, snap.Name, snap.Topic))
			}
			q.After = snap.AckFloor
		}
		if start != nil {
			at, err := start.after(step, topic)
			if err != nil {
				return "", cli.WithCode(cli.ExitRehearsalFailed, err)
			}
			q.After = at
			// The job's source remembers the IDs of the messages it read
			// within its dedupe window before the snapshot's position:
			// the runs do too, so a duplicate across the cut is dropped.
			if err := readSeen(ctx, c, mt, topic, at); err != nil {
				return "", err
			}
		}
		for {
			page, err := c.ReadRetained(ctx, topic, q)
			if err != nil {
				return "", serverconn.Error(ctx, c, fmt.Errorf("reading the retained messages of topic %s: %w", topic, err))
			}
			msgs = msgs[:0]
			for _, m := range page.Messages {
				if snap != nil && ackedIn(snap.Acked, m.Sequence) {
					continue // acknowledged one by one when the snapshot was taken
				}
				pm, err := retainedMessage(topic, m)
				if err != nil {
					return "", err
				}
				msgs = append(msgs, pm)
			}
			// Recorded a page at a time: the trace holds the stretch encoded
			// (on disk beyond its memory budget), never as messages.
			if err := mt.Add(msgs...); err != nil {
				return "", cli.WithCode(cli.ExitRehearsalFailed, err)
			}
			n += len(msgs)
			if page.Done || len(page.Messages) == 0 {
				break
			}
			q = client.RetainedQuery{Until: until, After: page.Next - 1}
		}
		read = append(read, fmt.Sprintf("topic %s (%d messages)", topic, n))
	}
	return strings.Join(read, ", "), nil
}

// retainedMessage is m, a retained message of topic read from the
// server, as the source decodes it.
func retainedMessage(topic string, m client.PulledMessage) (pubsub.Message, error) {
	data := []byte(m.Data)
	if m.DataBase64 != "" {
		var err error
		if data, err = base64.StdEncoding.DecodeString(m.DataBase64); err != nil {
			return pubsub.Message{}, cli.WithCode(cli.ExitRehearsalFailed, fmt.Errorf("message %d of topic %s: %w", m.Sequence, topic, err))
		}
	}
	return pubsub.Message{Topic: topic, Data: data, Attributes: m.Attributes, ID: m.ID, Sequence: m.Sequence, PublishTime: m.PublishTime}, nil
}

// readSeen records in mt, as seen only, the messages of topic published
// within the old pipeline's source's dedupe window before the message at
// stream sequence at (that one included): the IDs the job's source
// remembered at the snapshot, which its resume reads back the same way.
// Nothing when the source has no message IDs, or at is 0.
func readSeen(ctx context.Context, c *client.Client, mt *sandbox.MessagesTracer, topic string, at uint64) error {
	w := mt.DedupeWindow()
	if w <= 0 || at == 0 {
		return nil
	}
	first, err := c.ReadRetained(ctx, topic, client.RetainedQuery{After: at - 1, Limit: 1})
	if err != nil {
		return serverconn.Error(ctx, c, fmt.Errorf("reading the retained messages of topic %s: %w", topic, err))
	}
	if len(first.Messages) == 0 || first.Messages[0].Sequence != at {
		return nil // the position's message is gone (retention), as at a resume
	}
	q := client.RetainedQuery{Since: first.Messages[0].PublishTime.Add(-w)}
	var seen []pubsub.Message
	for {
		page, err := c.ReadRetained(ctx, topic, q)
		if err != nil {
			return serverconn.Error(ctx, c, fmt.Errorf("reading the retained messages of topic %s: %w", topic, err))
		}
		seen = seen[:0]
		last := false
		for _, m := range page.Messages {
			if m.Sequence > at {
				last = true
				break
			}
			pm, err := retainedMessage(topic, m)
			if err != nil {
				return err
			}
			seen = append(seen, pm)
		}
		if err := mt.AddSeen(seen...); err != nil {
			return cli.WithCode(cli.ExitRehearsalFailed, err)
		}
		if last || page.Done || len(page.Messages) == 0 {
			return nil
		}
		q = client.RetainedQuery{After: page.Next - 1}
	}
}

// ackedIn reports whether seq is in one of the acknowledged runs.
func ackedIn(runs []client.SeqRange, seq uint64) bool {
	for _, r := range runs {
		if seq >= r.First && seq <= r.Last {
			return true
		}
	}
	return false
}

// rehearsalOld returns the old pipeline: the file arg, or the pipeline
// the job named arg runs (read from the server; nothing is changed).
func rehearsalOld(ctx context.Context, server serverconn.Flag, arg string) (name string, src []byte, err error) {
	if _, statErr := os.Stat(arg); statErr != nil && record.IsJobName(arg) && filepath.Ext(arg) == "" {
		c, err := serverconn.NewClient(server)
		if err != nil {
			return "", nil, err
		}
		j, err := c.Get(ctx, arg)
		if err != nil {
			err = serverconn.Error(ctx, c, err)
			code := cli.ExitFailure
			var ee *cli.ExitError
			if errors.As(err, &ee) {
				code = ee.Code
			}
			return "", nil, cli.WithCode(code, fmt.Errorf("finding the pipeline of job %s: %w", arg, err))
		}
		if j.Pipeline == "" {
			return "", nil, cli.WithCode(cli.ExitFailure, fmt.Errorf("job %s (%s) runs a Go program, not a YAML pipeline: rehearse its pipeline file instead", arg, j.ID))
		}
		name := j.PipelineFile
		if name == "" {
			name = arg + ".yaml"
		}
		return name, []byte(j.Pipeline), nil
	}
	src, err = os.ReadFile(arg)
	if err != nil {
		return "", nil, cli.WithCode(cli.ExitInvalidPipeline, fmt.Errorf("reading the pipeline file: %w", err))
	}
	return arg, src, nil
}

// writeRehearsal prints the summary a reviewer reads in ten seconds, then
// the drill-down.
func writeRehearsal(w io.Writer, r *rehearsal) error {
	rep := r.Report
	var b strings.Builder
	fmt.Fprintf(&b, "rehearsal of %s against %s over %s: %d elements; old ran twice, new once\n", r.New, r.Old, r.Events, r.Trace.Elements)
	if sn := r.Snapshot; sn != nil {
		fmt.Fprintf(&b, "both started from job snapshot %s (job %s, generation %d): %d state entries of %s\n", sn.ID, sn.Job, sn.Generation, sn.Entries, orNone(strings.Join(sn.Steps, ", ")))
		for _, w := range sn.Warnings {
			fmt.Fprintf(&b, "  the new pipeline takes it over with a warning: %s\n", w)
		}
	}
	if tr := r.Trace; tr.SpilledBytes > 0 {
		fmt.Fprintf(&b, "recorded stretch: %s encoded, %s of it spilled to disk in %s beyond --trace-memory %s\n",
			cli.Bytes(tr.Bytes), cli.Bytes(tr.SpilledBytes), tr.SpillDir, cli.Bytes(tr.MemoryBudgetBytes))
	} else {
		fmt.Fprintf(&b, "recorded stretch: %s encoded, all in memory (--trace-memory %s)\n", cli.Bytes(tr.Bytes), cli.Bytes(tr.MemoryBudgetBytes))
	}
	switch {
	case rep.TotalNoise == 0:
		b.WriteString("noise: none (the old pipeline agrees with itself)\n")
	default:
		fmt.Fprintf(&b, "noise: %d row(s) where the old pipeline disagrees with itself, not counted below\n", rep.TotalNoise)
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nOUTPUT\tMODE\tROWS OLD\tROWS NEW\tIDENTICAL\tVALUE\tMISSING\tEXTRA\tTIMING\tACCUM\tREASON\tLATE\tVISIBLE\tNOISE\tVISIBLE KEYS DIFFERING")
	for _, o := range rep.Outputs {
		c := o.Classes
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.1f%%\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d/%d\n", o.Output, o.Mode, o.RowsOld, o.RowsNew, o.IdenticalPercent,
			c[diff.ValueChanged], c[diff.MissingInNew], c[diff.ExtraInNew], c[diff.PaneTimingShifted], c[diff.PaneAccumulationChanged],
			c[diff.RejectReasonChanged], c[diff.LatePathChanged], c[diff.VisibleChanged], o.Noise, o.Visible.Differing, o.Visible.Keys)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString("\n")
	for _, run := range r.Runs {
		fmt.Fprintf(&b, "%s run: %d elements in, %d rejected, %d rows out", run.Run, run.Input, run.Rejected, run.Rows)
		if run.Duplicates > 0 {
			fmt.Fprintf(&b, " (%d duplicate messages dropped by ID)", run.Duplicates)
		}
		b.WriteString("\n")
	}
	for _, c := range r.Conservation {
		verdict := "balanced"
		if !c.Balanced {
			verdict = "NOT balanced"
		}
		fmt.Fprintf(&b, "conservation (%s) %s: input %s = accepted %s + rejected %s: %s\n", c.Field, c.Run, cli.Number(c.Input), cli.Number(c.Accepted), cli.Number(c.Rejected), verdict)
	}
	fmt.Fprintf(&b, "verdict: %s (%d difference(s), budget %d)\n", strings.ToUpper(r.Verdict), rep.Total, rep.Budget)
	if len(rep.Differences) > 0 {
		fmt.Fprintf(&b, "\ndifferences (%d listed):\n", len(rep.Differences))
		writeDiffs(&b, rep.Differences)
	}
	if len(rep.Noise) > 0 {
		fmt.Fprintf(&b, "\nnoise (the old pipeline against itself, %d listed):\n", len(rep.Noise))
		writeDiffs(&b, rep.Noise)
	}
	if rep.Omitted > 0 {
		fmt.Fprintf(&b, "\n%d more not listed (--max-details)\n", rep.Omitted)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeDiffs(b *strings.Builder, ds []diff.Difference) {
	sorted := append([]diff.Difference(nil), ds...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Output < sorted[j].Output })
	for _, d := range sorted {
		fmt.Fprintf(b, "  %s  %s  key %s  window %s\n", d.Class, d.Output, d.Key, d.Window)
		fmt.Fprintf(b, "    old: %s\n    new: %s\n", paneText(d.Old), paneText(d.New))
		if d.OldVisible != "" || d.NewVisible != "" {
			fmt.Fprintf(b, "    visible: old %s, new %s\n", orNone(d.OldVisible), orNone(d.NewVisible))
		}
	}
}

func paneText(p *diff.Pane) string {
	if p == nil {
		return "(none)"
	}
	if p.Reject != "" {
		return fmt.Sprintf("rejected %s %s", p.Reject, p.Value)
	}
	return fmt.Sprintf("pane %d %s %s", p.Index, p.Timing, p.Value)
}

func orNone(s string) string {
	if s == "" {
		return "(nothing)"
	}
	return s
}
