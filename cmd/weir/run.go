package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/service/record"
	"github.com/weir-dev/weir/serviceopt"
	"github.com/weir-dev/weir/yamlpipe"
)

// runFlags are the flags of `weir run`, named after the Dataflow options.
type runFlags struct {
	format         string
	numWorkers     int
	validateOnly   bool
	jobName        string
	update         bool
	nameMapping    string
	serviceOptions []string
	maxNumWorkers  int
	minNumWorkers  int
	utilization    float64
	autoscaling    string
	fromSnapshot   string
	sourcePos      string
	server         serverFlag
	allowSource    bool
	wait, noWait   bool
	requestID      string
	// manifest and partition bind the job's file sources to an input
	// manifest's partition (manifests.go).
	manifest, partition string
	// shadow stages a partition run's outputs without publishing them.
	shadow bool
}

// unsupportedJobFlags returns the `weir run` flags of docs/ARCHITECTURE.md ("Contracts") that the
// job service does not offer yet.
func unsupportedJobFlags() []string {
	return nil
}

// submits reports whether `weir run` submits to a weir server: when
// --job-name or --server is given. $WEIR_SERVER only says which server
// (it points every command at one): without either flag a bounded
// pipeline runs in this process whatever the environment.
func (f runFlags) submits(cmd *cobra.Command) bool {
	return f.jobName != "" || cmd.Flags().Changed("server")
}

// givenJobOptions are the job options the user gave on cmd's command line
// (--num-workers and the autoscaling options); the others stay unset (0).
func (f runFlags) givenJobOptions(cmd *cobra.Command) client.JobOptions {
	var opts client.JobOptions
	if cmd.Flags().Changed("num-workers") {
		opts.NumWorkers = f.numWorkers
	}
	if cmd.Flags().Changed("max-num-workers") {
		opts.MaxNumWorkers = f.maxNumWorkers
	}
	if cmd.Flags().Changed("min-num-workers") {
		opts.MinNumWorkers = f.minNumWorkers
	}
	if cmd.Flags().Changed("worker-utilization-hint") {
		opts.WorkerUtilizationHint = f.utilization
	}
	if cmd.Flags().Changed("autoscaling-algorithm") {
		opts.AutoscalingAlgorithm = f.autoscaling
	}
	return opts
}

func newRunCommand(e *env) *cobra.Command {
	var f runFlags
	var beam beamRunFlags
	cmd := &cobra.Command{
		Use:   "run PIPELINE.yaml",
		Short: "Run a pipeline",
		Long: `Run loads a YAML pipeline and runs it.

With --job-name NAME (or --server URL) the pipeline is submitted to a weir
server (--server, else $WEIR_SERVER, else http://127.0.0.1:7070) as a job: the
command prints its ID ({"id", "name"} with --format json) and waits for the
job's first durable checkpoint or its end, exiting 1 with the job's error
when it failed; --no-wait returns once the job is created, --wait follows it
to its end (exit 0 on DONE or DRAINED, 1 on FAILED or CANCELLED; for a
partition run, DONE once its final commit has published its staged rows; for a
replacement job, through the replacement's phases: exit 0 at CUT_OVER, 1 at
ROLLED_BACK or FAILED). Paths in the pipeline resolve against the current
directory (sent as the job's base_dir). Without a job name, one is derived
from the file name.

Otherwise a pipeline whose sources are all bounded runs to completion in this
process, $WEIR_SERVER set or not; the command then prints the metrics of
every step and exits 0.

With --update the running (or draining) job of --job-name is replaced in
place by the new pipeline: the compatibility check runs first (name-based,
with --transform-name-mapping '{"Old":"New"}'; "" deletes a step's state on
purpose); when it fails the running job is left untouched and the report
names every incompatible step, the reason and a fix. --update
--validate-only only prints the report.

--max-num-workers (with --min-num-workers, default 1) lets the server
autoscale a streaming job within that range: it measures the backlog and how
busy the workers are, and rescales in flight (--worker-utilization-hint,
0.1..0.9, default 0.8, is the utilisation it aims at;
--autoscaling-algorithm NONE turns it off). Every change is a job event
(weir jobs logs).

--service-options K[=V] (repeatable, or comma-separated; also
--dataflow-service-options and --additional-experiments, as pasted from a
Dataflow command) takes Dataflow's keys verbatim: create_or_update_job
updates the running job of --job-name when there is one and creates a new
job otherwise; update_strategy_in_place_update is the default of --update;
a replacement job is asked for with --update and
update_strategy_parallel_job_update (same name), or with
parallel_replace_job_name=OLD or parallel_replace_job_id=ID (a new name,
without --update), together with
parallel_replace_job_max_stop_duration=D (stop-and-replace) or
parallel_replace_job_min_parallel_pipelines_duration=D (parallel). The CLI
checks every rule before sending anything (exit 2); the server refuses
what depends on its jobs (exit 1 with the code). --request-id ID makes the
submission idempotent for 24 hours: a retry with the same ID gets the
first answer, never a second job. Every flag also accepts '_' for '-'
(--job_name, --dataflow_service_options).

With --create-from-snapshot ID the new job of --job-name starts from a job
snapshot ('weir snapshots'): its state and source positions. The snapshot's
graph is checked against the pipeline first, as for --update (with
--transform-name-mapping and --allow-source-change); a refused check creates
nothing and exits 6.

Exit codes: 0 success, 1 the run failed (or the job failed to start),
2 usage, 3 invalid pipeline, 4 needs the job service (unbounded sources
without --job-name, or a job flag not available yet), 5 no weir server
answers, 6 the update is not compatible (nothing changed).`,
		Args: beam.args,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPipeline(cmd, e, beam.pipeline(args, e.stderr), f)
		},
	}
	fl := cmd.Flags()
	addBeamRunFlags(fl, &beam) // Beam's launch-line spellings (gcloud.go)
	addFormatFlag(cmd, &f.format)
	fl.IntVar(&f.numWorkers, "num-workers", 1, "number of workers (goroutines) that run the pipeline")
	fl.BoolVar(&f.validateOnly, "validate-only", false, "load and validate the pipeline, then exit without running it")
	fl.StringVar(&f.jobName, "job-name", "", "submit the pipeline to the weir server as a job of this name ([a-z]([-a-z0-9]*[a-z0-9])?)")
	addServerFlag(cmd, &f.server)
	fl.BoolVar(&f.update, "update", false, "update the running job of --job-name: in place, or by a replacement job with --service-options update_strategy_parallel_job_update (needs a weir server)")
	fl.BoolVar(&f.wait, "wait", false, "after submitting, wait for the job's end: exit 0 on DONE or DRAINED, 1 on FAILED or CANCELLED (a replacement job: follow its phases, exit 0 at CUT_OVER, 1 at ROLLED_BACK or FAILED)")
	fl.BoolVar(&f.noWait, "no-wait", false, "return as soon as the job is created (default: wait for its first durable checkpoint or its end)")
	fl.StringVar(&f.nameMapping, "transform-name-mapping", "", `JSON object mapping old step names (prefixes) to new ones for --update, e.g. '{"Old":"New"}'; "" deletes a step's state`)
	fl.BoolVar(&f.allowSource, "allow-source-change", false, "with --update: accept a source that reads something else (its old positions are dropped)")
	fl.StringArrayVar(&f.serviceOptions, "service-options", nil, "service option KEY or KEY=VALUE, repeatable or comma-separated; also --dataflow-service-options, --additional-experiments (needs a weir server)")
	fl.StringVar(&f.requestID, "request-id", "", "make the submission idempotent: a retry with the same ID within 24 hours gets the first answer (needs a weir server)")
	fl.IntVar(&f.maxNumWorkers, "max-num-workers", 0, "most workers the server's autoscaler may give the job (needs a weir server)")
	fl.IntVar(&f.minNumWorkers, "min-num-workers", 0, "fewest workers the autoscaler may give the job (default 1)")
	fl.Float64Var(&f.utilization, "worker-utilization-hint", 0, "utilisation of the workers the autoscaler aims at, 0.1..0.9 (default 0.8)")
	fl.StringVar(&f.autoscaling, "autoscaling-algorithm", "", "THROUGHPUT_BASED (the default with --max-num-workers) or NONE (no autoscaling)")
	fl.StringVar(&f.manifest, "manifest", "", "read input manifest NAME (weir manifests create) in every file source instead of its path: the job reads exactly the manifest's files and is refused when one changed (MANIFEST_CHANGED); needs --partition and a weir server")
	fl.BoolVar(&f.shadow, "shadow", false, "with --partition: stage the partition run's SQL outputs and never publish them (the staging table is kept; weir partitions list shows it as shadow; compare it with weir diff)")
	fl.StringVar(&f.partition, "partition", "", "the partition the bounded job runs: the partition of the manifests its file sources read (--manifest, or manifest: NAME in a source)")
	fl.StringVar(&f.fromSnapshot, "create-from-snapshot", "", "start the job from the snapshot with this ID (needs a weir server)")
	fl.StringVar(&f.sourcePos, "source-positions", "", "with --create-from-snapshot: how Pub/Sub positions of another broker (an imported snapshot file's) translate: from-publish-time (suggested), earliest, latest or fail (the default)")
	return cmd
}

func runPipeline(cmd *cobra.Command, e *env, path string, f runFlags) error {
	if err := checkFormat(f.format); err != nil {
		return err
	}
	if f.numWorkers < 1 {
		return usageErrorf("--num-workers must be at least 1, got %d", f.numWorkers)
	}
	// The one rule that depends on the server's jobs (a new name with
	// --update) asks the server whether the name has a running job.
	running := func(name string) bool {
		c, err := newClient(f.server)
		if err != nil {
			return true // unknown: refuse it as a conflict
		}
		j, err := c.Get(cmd.Context(), name)
		var ae *client.Error
		if errors.As(err, &ae) && ae.Code == errcode.JobNotFound {
			return false
		}
		return err != nil || j.State == client.StateRunning || j.State == client.StateDraining
	}
	plan, err := checkServiceOptions(f.serviceOptions, f.jobName, f.update, running)
	if err != nil {
		return err
	}
	if (len(f.serviceOptions) > 0 || f.requestID != "") && f.jobName == "" && !f.validateOnly {
		return withCode(ExitNeedsServer, fmt.Errorf("--service-options and --request-id are job options: submit the pipeline to a weir server with --job-name NAME"))
	}
	// plan.Notes (what the options ignore) are not printed here: they
	// come back in the server's answer, which updateJob prints.
	if f.nameMapping != "" {
		var m map[string]string
		if err := json.Unmarshal([]byte(f.nameMapping), &m); err != nil {
			return usageErrorf("--transform-name-mapping must be a JSON object of step names: %w", err)
		}
	}
	var given []string
	for _, name := range unsupportedJobFlags() {
		if cmd.Flags().Changed(name) {
			given = append(given, "--"+name)
		}
	}
	if len(given) > 0 {
		return withCode(ExitNeedsServer, fmt.Errorf("%s: not available yet (the weir job service does not offer service options in this release); 'weir run --job-name NAME' submits a new job", strings.Join(given, ", ")))
	}
	if f.wait && f.noWait {
		return usageErrorf("--wait and --no-wait exclude each other")
	}
	if f.manifest != "" && f.partition == "" {
		return usageErrorf("--manifest %s needs --partition P: the partition of the manifest the job reads", f.manifest)
	}
	if f.shadow && f.partition == "" {
		return usageErrorf("--shadow needs --partition P: a shadow run is a partition run that stages without publishing")
	}
	if (f.manifest != "" || f.partition != "") && !f.validateOnly {
		if f.jobName == "" {
			return withCode(ExitNeedsServer, fmt.Errorf("--manifest and --partition run a partition of a batch job on a weir server: give --job-name NAME"))
		}
		if f.update || f.fromSnapshot != "" || len(f.serviceOptions) > 0 {
			return usageErrorf("--manifest and --partition start a new batch job: they do not go with --update, --create-from-snapshot or --service-options")
		}
	}
	if f.fromSnapshot != "" {
		return runFromSnapshot(cmd, e, path, f) // snapshots.go
	}
	if f.update || plan.CreateOrUpdate || cmd.Flags().Changed("transform-name-mapping") {
		if f.jobName == "" {
			return usageErrorf("--update needs --job-name: the name of the running job to replace")
		}
		return updateJob(cmd, e, path, f)
	}
	if f.submits(cmd) && !f.validateOnly {
		return submitPipeline(cmd, e, path, f)
	}
	if cmd.Flags().Changed("max-num-workers") && !f.validateOnly {
		return withCode(ExitNeedsServer, fmt.Errorf("--max-num-workers is a job option: submit the pipeline to a weir server with --job-name NAME"))
	}

	if f.validateOnly {
		p, err := inspectPipeline(path, e.jinja, false)
		if err != nil {
			return err
		}
		return printValid(e.stdout, path, p.Graph(), f.format)
	}
	p, err := loadPipelineLogging(path, e.stdout, e.jinja)
	if err != nil {
		return err
	}
	if unbounded := p.Graph().UnboundedSources(); len(unbounded) > 0 {
		return withCode(ExitNeedsServer, fmt.Errorf("%s: source step(s) %s read unbounded input: this pipeline needs a weir server; submit it as a job with 'weir run %s --job-name NAME' (start a server with 'weir server'; $%s only says which server a submission goes to)", path, strings.Join(unbounded, ", "), path, serverEnv))
	}
	e.logger.Info("running pipeline", "file", path, "steps", len(p.Graph().Steps), "workers", f.numWorkers)
	res, err := weir.Run(cmd.Context(), p, weir.RunOptions{NumWorkers: f.numWorkers, Logger: e.logger})
	if err != nil {
		return withCode(ExitFailure, fmt.Errorf("running %s: %w", path, err))
	}
	if res == nil {
		res = &runner.Result{}
	}
	// LogForTesting prints the elements on stdout: the summary goes to stderr.
	summary := e.stdout
	if logsForTesting(p.Graph()) {
		summary = e.stderr
	}
	if f.format == formatJSON {
		return writeJSON(summary, runResultOf(res))
	}
	return writeStepTable(summary, res)
}

// logsForTesting reports whether g has a LogForTesting step.
func logsForTesting(g *graph.Pipeline) bool {
	for _, s := range g.Steps {
		if s.Fn != nil && s.Fn.URN == "weir:yaml:LogForTesting" {
			return true
		}
	}
	return false
}

// runResult is what `weir run --format json` prints for a pipeline run in
// this process: the counters of every step.
type runResult struct {
	Steps []stepCounts `json:"steps"`
}

// stepCounts are the counters of one step in a runResult.
type stepCounts struct {
	Name                string `json:"name"`
	ElementsIn          int64  `json:"elements_in"`
	ElementsOut         int64  `json:"elements_out"`
	Rejects             int64  `json:"rejects"`
	DroppedLateElements int64  `json:"dropped_late_elements"`
}

func runResultOf(res *runner.Result) runResult {
	out := runResult{Steps: make([]stepCounts, 0, len(res.Steps))}
	for _, s := range res.Steps {
		out.Steps = append(out.Steps, stepCounts{Name: s.Name, ElementsIn: s.ElementsIn, ElementsOut: s.ElementsOut,
			Rejects: s.Rejects, DroppedLateElements: s.DroppedLateElements})
	}
	return out
}

// submitPipeline sends the pipeline to the weir server as a new job and
// prints its ID once the job is created.
func submitPipeline(cmd *cobra.Command, e *env, path string, f runFlags) error {
	ctx := cmd.Context()
	src, err := readPipelineFile(path, e.jinja)
	if err != nil {
		return err
	}
	wd, err := cli.WorkingDir()
	if err != nil {
		return withCode(ExitFailure, err)
	}
	name := f.jobName
	if name == "" {
		if name = jobNameFromFile(path); name == "" {
			return usageErrorf("cannot derive a job name from %s: give one with --job-name NAME", path)
		}
	}
	c, err := newClient(f.server)
	if err != nil {
		return err
	}
	// Options the user did not give are sent unset: a new job takes the
	// defaults, and a create-or-update of a running job keeps its values.
	opts := f.givenJobOptions(cmd)
	res, err := c.Submit(ctx, client.SubmitRequest{Name: name, Pipeline: string(src), PipelineFile: path, BaseDir: wd,
		Options: opts, ServiceOptions: serviceopt.Split(f.serviceOptions), RequestID: f.requestID,
		Manifest: f.manifest, Partition: f.partition, Shadow: f.shadow})
	if err != nil {
		return clientError(ctx, c, err)
	}
	// Text prints the ID at once (scripts read it while the job starts);
	// JSON prints the job record as it is when the command returns.
	if f.format != formatJSON {
		if _, err := fmt.Fprintln(e.stdout, res.ID); err != nil {
			return withCode(ExitFailure, fmt.Errorf("writing output: %w", err))
		}
	}
	e.logger.Info("job submitted", "job_id", res.ID, "job_name", res.Name, "server", c.Base())
	j, err := c.Get(ctx, res.ID)
	if err != nil {
		return clientError(ctx, c, err)
	}
	var waitErr error
	switch {
	case res.State == client.StateFailed:
		waitErr = withCode(ExitFailure, fmt.Errorf("job %s (%s) failed to start: %s", res.ID, res.Name, res.Error))
	case j.Replacement != nil && f.wait:
		if waitErr = followReplacement(ctx, e, c, j); f.format == formatJSON {
			if latest, err := c.Get(ctx, j.ID); err == nil {
				j = latest
			}
		}
	case !f.noWait:
		j, waitErr = waitSubmitted(ctx, e, c, j, f.wait)
		if waitErr == nil && f.shadow && j != nil && j.State == client.StateDone && !j.PendingCommit {
			printShadow(ctx, e, c, j)
		}
	}
	if f.format == formatJSON && j != nil {
		if err := writeJSON(e.stdout, j); err != nil {
			return err
		}
	}
	return waitErr
}

// submitWaitPoll is how often `weir run` asks a submitted job's state.
const submitWaitPoll = 100 * time.Millisecond

// waitSubmitted follows a submitted job: by default until its first
// durable checkpoint (or, for a job without checkpoints, until it runs) or
// its end; with toEnd until its end, printing each state it passes on
// stderr. A job that ends FAILED or CANCELLED is an error (exit 1) with
// the job's reason.
func waitSubmitted(ctx context.Context, e *env, c *client.Client, j *client.Job, toEnd bool) (*client.Job, error) {
	var until func(*client.Job) bool
	if !toEnd {
		until = func(j *client.Job) bool {
			return (j.State == client.StateRunning || j.State == client.StateDraining) && (j.LastCheckpoint != nil || !j.Checkpointing)
		}
	}
	last := j
	j, err := followJob(ctx, e, c, j, until, toEnd)
	if err != nil {
		return last, err
	}
	switch j.State {
	case client.StateFailed:
		return j, withCode(ExitFailure, fmt.Errorf("job %s (%s) failed: %s", j.ID, j.Name, j.Error))
	case client.StateCancelled:
		return j, withCode(ExitFailure, fmt.Errorf("job %s (%s) was cancelled", j.ID, j.Name))
	}
	return j, nil
}

// followJob polls job j until until(j) holds (nil: never) or j is
// terminal — DONE or DRAINED once its sinks confirmed the final commit —
// and returns it then; an UPDATED job is followed into its successor.
// With progress, each state j passes is printed on stderr.
func followJob(ctx context.Context, e *env, c *client.Client, j *client.Job, until func(*client.Job) bool, progress bool) (*client.Job, error) {
	t := time.NewTicker(submitWaitPoll)
	defer t.Stop()
	toldCommit := false
	if progress {
		fmt.Fprintf(e.stderr, "job %s (%s): %s\n", j.ID, j.Name, j.State)
	}
	for {
		if j.State == client.StateUpdated && j.ReplacedByJobID != "" {
			next, err := c.Get(ctx, j.ReplacedByJobID)
			if err != nil {
				return nil, clientError(ctx, c, err)
			}
			if progress {
				fmt.Fprintf(e.stderr, "job %s (%s) was updated into job %s: %s\n", j.ID, j.Name, next.ID, next.State)
			}
			j = next
			continue
		}
		// A job that ends DONE or DRAINED has written everything once its
		// sinks confirm the final commit (a partition run's publishes
		// its staged rows then): wait for it too, so that what a user
		// reads after --wait is complete.
		committing := j.PendingCommit && (j.State == client.StateDone || j.State == client.StateDrained)
		if j.State.Terminal() && !committing || until != nil && until(j) {
			if progress && toldCommit {
				fmt.Fprintf(e.stderr, "job %s (%s): its sinks confirmed the final commit\n", j.ID, j.Name)
			}
			if progress && j.State.Terminal() {
				fmt.Fprintf(e.stderr, "job %s (%s) ended %s\n", j.ID, j.Name, j.State)
			}
			return j, nil
		}
		if committing && progress && !toldCommit {
			toldCommit = true
			fmt.Fprintf(e.stderr, "job %s (%s): %s; waiting for its sinks to confirm the final commit\n", j.ID, j.Name, j.State)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
		next, err := c.Get(ctx, j.ID)
		if err != nil {
			return nil, clientError(ctx, c, err)
		}
		if progress && next.State != j.State {
			fmt.Fprintf(e.stderr, "job %s (%s): %s\n", next.ID, next.Name, next.State)
		}
		j = next
	}
}

// jobNameFromFile derives a job name from a pipeline file name:
// "Regional_Totals.yaml" becomes "regional-totals"; "" when nothing valid remains.
func jobNameFromFile(path string) string {
	base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	var b strings.Builder
	for _, r := range strings.ToLower(base) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteRune('-')
		}
	}
	name := strings.TrimRight(strings.TrimLeft(b.String(), "-0123456789"), "-")
	if record.ValidateJobName(name) != nil {
		return ""
	}
	return name
}

// loadPipeline loads a YAML pipeline, resolving paths against the current
// directory; any load or validation error is an invalid pipeline.
func loadPipeline(path string) (*weir.Pipeline, error) { return loadPipelineLogging(path, nil, nil) }

// loadPipelineLogging is loadPipeline with LogForTesting printing to
// logOut (nil: standard output), rendering its Jinja with jinja.
func loadPipelineLogging(path string, logOut io.Writer, jinja map[string]any) (*weir.Pipeline, error) {
	wd, err := cli.WorkingDir()
	if err != nil {
		return nil, withCode(ExitFailure, err)
	}
	p, err := yamlpipe.LoadFile(path, yamlpipe.Options{BaseDir: wd, LogOutput: logOut, JinjaVariables: jinja, JinjaSandbox: jinjaSandbox()})
	if errors.Is(err, yamlpipe.ErrNeedsServer) {
		return nil, withCode(ExitNeedsServer, err)
	}
	if err != nil {
		return nil, withCode(ExitInvalidPipeline, err)
	}
	return validPipeline(path, p)
}

// validPipeline returns p, loaded from path, when it holds no build error
// and its graph is valid; otherwise the first problem, prefixed by path, as
// an invalid-pipeline error.
func validPipeline(path string, p *weir.Pipeline) (*weir.Pipeline, error) {
	if err := p.Err(); err != nil {
		return nil, withCode(ExitInvalidPipeline, fmt.Errorf("%s: %w", path, err))
	}
	if err := p.Graph().Validate(); err != nil {
		return nil, withCode(ExitInvalidPipeline, fmt.Errorf("%s: %w", path, err))
	}
	return p, nil
}

// checkServiceOptions checks --service-options (every rule of package
// serviceopt) with --job-name and --update, and returns what they ask for;
// a refusal is a usage error naming its code, but for the one rule that
// depends on the server's jobs (running says whether a name has a running
// job): "no running job named NEW" exits 1 as the server's answer would.
func checkServiceOptions(opts []string, jobName string, update bool, running func(name string) bool) (serviceopt.Plan, error) {
	plan, err := serviceopt.ParseAndResolve(opts, jobName, update, running)
	var oe *serviceopt.Error
	if errors.As(err, &oe) {
		if oe.Code == errcode.NoRunningJob {
			// The server's answer, not a usage error (exit 1).
			return plan, withCode(ExitFailure, fmt.Errorf("%s (%s)", oe.Message, oe.Code))
		}
		return plan, usageErrorf("--service-options: %s (%s)", oe.Message, oe.Code)
	}
	return plan, err
}

// validation is what --validate-only prints as JSON.
type validation struct {
	Valid bool     `json:"valid"`
	File  string   `json:"file"`
	Steps []string `json:"steps"`
}

func printValid(w io.Writer, path string, g *graph.Pipeline, format string) error {
	v := validation{Valid: true, File: path, Steps: []string{}}
	for _, s := range g.Steps {
		v.Steps = append(v.Steps, s.Name)
	}
	if format == formatJSON {
		return writeJSON(w, v)
	}
	_, err := fmt.Fprintf(w, "%s: valid pipeline of %d steps (not run: --validate-only)\n", path, len(v.Steps))
	return outputErr(err)
}

// writeStepTable prints the run's step metrics as an aligned table.
func writeStepTable(w io.Writer, res *runner.Result) error {
	return writeTable(w, "STEP\tELEMENTS_IN\tELEMENTS_OUT\tREJECTS\tDROPPED_LATE_ELEMENTS", res.Steps, func(s runner.StepMetrics) string {
		return fmt.Sprintf("%s\t%d\t%d\t%d\t%d", s.Name, s.ElementsIn, s.ElementsOut, s.Rejects, s.DroppedLateElements)
	})
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error { return cli.WriteJSON(w, v) }

// checkedJobError turns the outcome of a request that ran the
// compatibility check (an update, a job from a snapshot) into the CLI's
// error: an incompatible pipeline exits 6, other refusals as the server's
// code says, and a job created FAILED exits 1.
func checkedJobError(ctx context.Context, c *client.Client, err error, j *client.SubmitResponse, name string) error {
	if err != nil {
		var ae *client.Error
		if errors.As(err, &ae) && ae.Code == errcode.IncompatibleUpdate {
			return withCode(ExitIncompatible, err)
		}
		return clientError(ctx, c, err)
	}
	if j != nil && j.State == client.StateFailed {
		return withCode(ExitFailure, fmt.Errorf("job %s (%s) failed to start: %s", j.ID, name, j.Error))
	}
	return nil
}

// readPipelineFile reads a pipeline file to send to a server, rendered as
// a Jinja template (Beam's --jinja_variables) when it is one: the job
// stores the rendered text.
func readPipelineFile(path string, jinja map[string]any) ([]byte, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, withCode(ExitInvalidPipeline, fmt.Errorf("reading the pipeline file: %w", err))
	}
	if jinja == nil && !yamlpipe.HasJinja(src) {
		return src, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, withCode(ExitInvalidPipeline, fmt.Errorf("the working directory, where the template's includes resolve from: %w", err))
	}
	out, err := yamlpipe.RenderJinjaWith(context.Background(), path, src, jinja, false, jinjaSandbox(), wd)
	if err != nil {
		return nil, withCode(ExitInvalidPipeline, err)
	}
	return out, nil
}
