package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"

	"github.com/spf13/cobra"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/yamlpipe"
)

// checkFlags are the flags of `weir check`, named after the Dataflow options.
type checkFlags struct {
	format            string
	nameMapping       string
	allowSourceChange bool
}

// runningGraphs looks up the graph a running job was started with, so that
// `weir check JOB_NAME NEW.yaml` can check against it. serverGraphs asks a
// weir server (the graph a job stores is client.Job.Graph, canonical JSON
// for graph.Parse); with none (nil), a job name as OLD exits with
// ExitNeedsServer.
type runningGraphs interface {
	// RunningGraph returns the graph of the active job named name. It
	// blocks until the service answers or ctx is done.
	RunningGraph(ctx context.Context, name string) (*graph.Pipeline, error)
}

// jobNameRE is Dataflow's job name rule (docs/ARCHITECTURE.md, "Vocabulary").
var jobNameRE = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

func newCheckCommand(e *env) *cobra.Command {
	jobs := &serverGraphs{}
	cmd := newCheckCommandWith(e, jobs)
	addServerFlag(cmd, &jobs.server)
	return cmd
}

// serverGraphs implements runningGraphs with the API of the weir server
// at server (--server, else $WEIR_SERVER, else the default address).
type serverGraphs struct {
	server serverFlag
}

// RunningGraph returns the canonical graph of the active job named name.
// Errors carry the CLI's exit codes: ExitServerUnreachable when no server
// answers, ExitFailure for an unknown or finished job.
func (s *serverGraphs) RunningGraph(ctx context.Context, name string) (*graph.Pipeline, error) {
	g, _, err := s.runningJob(ctx, name)
	return g, err
}

// runningJob returns the graph of the active job named name and the job
// as the server answers it (with its live metrics), in one request.
func (s *serverGraphs) runningJob(ctx context.Context, name string) (*graph.Pipeline, *client.Job, error) {
	c, err := newClient(s.server)
	if err != nil {
		return nil, nil, err
	}
	j, err := c.Get(ctx, name)
	if err != nil {
		return nil, nil, clientError(ctx, c, err)
	}
	if !j.Active() {
		return nil, nil, withCode(ExitFailure, fmt.Errorf("job %s is not running: its latest job %s is %s (check against the pipeline file instead)", name, j.ID, j.State))
	}
	if len(j.Graph) == 0 {
		return nil, nil, withCode(ExitFailure, fmt.Errorf("job %s (%s) has no stored graph yet (state %s): retry once it runs", name, j.ID, j.State))
	}
	g, err := graph.Parse(j.Graph)
	if err != nil {
		return nil, nil, withCode(ExitFailure, fmt.Errorf("reading the stored graph of job %s (%s): %w", name, j.ID, err))
	}
	return g, j, nil
}

// newCheckCommandWith builds `weir check`; jobs resolves OLD when it is a
// running job's name (nil: no job service).
func newCheckCommandWith(e *env, jobs runningGraphs) *cobra.Command {
	var f checkFlags
	cmd := &cobra.Command{
		Use:   "check OLD.yaml NEW.yaml",
		Short: "Check offline whether a new pipeline can update a running one",
		Long: `Check compares the pipeline a job runs (OLD) with a new version (NEW) and
prints the compatibility report an update (weir run --update) would act on,
changing nothing.

Steps are matched by name, after --transform-name-mapping renames them. The
update is refused when a stateful step (Combine, GroupByKey, stateful ParDo)
has no match, when what it stores changed (its key, for YAML the group_by
fields and their types; its accumulator or state; the elements it buffers),
when the window type, trigger or accumulation mode of its input changed, when
side inputs were added to or removed from a step, when the mapping names an
unknown step or maps two steps to one, and when a source reads something
else (unless --allow-source-change). Changing only numbers of the windowing
(window size, allowed lateness, a trigger's count or delay) passes with a
warning: windows already buffered keep their old boundaries.

--transform-name-mapping is a JSON object of step-name prefixes, matched on
'/' boundaries (the longest wins): '{"Parse":"Ingest"}' renames Parse/Validate
to Ingest/Validate but not ParseX. Mapping a step to "" drops its state on
purpose; the report lists what is dropped.

With --format json the report is
  {"compatible": bool, "errors": [{"step", "code", "reason", "fix"}],
   "warnings": [...], "dropped_state": [...], "matches": [...]}
with the stable codes listed in the documentation of package compat.

Paths in the pipeline files are resolved against the current directory.
OLD may also be the name of a running job of the weir server at --server
($WEIR_SERVER, default http://127.0.0.1:7070): the check then reads the graph
the job stores, and loads NEW as that job would (Pub/Sub steps are built
without contacting the broker).

Exit codes: 0 compatible, 1 the job was not found or is not running, 2 usage,
3 invalid pipeline, 5 no weir server answers, 6 incompatible.`,
		Args: exactArgs("OLD.yaml", "NEW.yaml"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCheck(cmd.Context(), e, jobs, args[0], args[1], f)
		},
	}
	fl := cmd.Flags()
	addFormatFlag(cmd, &f.format)
	fl.StringVar(&f.nameMapping, "transform-name-mapping", "", `JSON object mapping old step names (or prefixes) to new ones; "" drops a step's state on purpose`)
	fl.BoolVar(&f.allowSourceChange, "allow-source-change", false, "accept sources that read something else, dropping the old sources' read positions")
	return cmd
}

func runCheck(ctx context.Context, e *env, jobs runningGraphs, oldArg, newPath string, f checkFlags) error {
	if err := checkFormat(f.format); err != nil {
		return err
	}
	mapping, err := compat.ParseMapping(f.nameMapping)
	if err != nil {
		return usageErrorf("--transform-name-mapping: %w", err)
	}
	old, jobName, err := resolveOld(ctx, jobs, oldArg, e.jinja)
	if err != nil {
		return err
	}
	p, loadErr := loadNewPipeline(newPath, jobName, e.jinja, false, old, mapping)
	if loadErr != nil {
		// As the server does for an update: a pipeline that does not load
		// for a run may load for its graph, and then the check says what
		// the change breaks before the load error does.
		gp, err := loadNewPipeline(newPath, jobName, e.jinja, true, old, mapping)
		if err != nil {
			return loadErr
		}
		p = gp
	}
	e.logger.Info("checking compatibility", "old", oldArg, "new", newPath, "mapping", mapping.String())
	r := compat.Check(old, p.Graph(), compat.Options{Mapping: mapping, AllowSourceChange: f.allowSourceChange})
	if loadErr != nil && r.Compatible {
		return loadErr
	}
	if f.format == formatJSON {
		err = writeReportJSON(e.stdout, r)
	} else {
		err = r.WriteText(e.stdout)
	}
	if err != nil {
		return withCode(ExitFailure, err)
	}
	if !r.Compatible {
		return withCode(ExitIncompatible, fmt.Errorf("%s cannot update %s: %d incompatible change(s), listed in the report", newPath, oldArg, len(r.Errors)))
	}
	return nil
}

// writeReportText prints a server's compatibility report as `weir check`
// prints its own (package compat's text form; the two share their JSON
// form, which carries the server's report over).
func writeReportText(w io.Writer, r client.CompatReport) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("reading the server's compatibility report: %w", err)
	}
	var rep compat.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("reading the server's compatibility report: %w", err)
	}
	return rep.WriteText(w)
}

// writeReportJSON prints r as indented JSON, leaving '<', '>' and '&' (of
// coder identities such as weir:coder:list<...>) unescaped.
func writeReportJSON(w io.Writer, r compat.Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("writing the compatibility report: %w", err)
	}
	return nil
}

// resolveOld returns the graph OLD names: a pipeline file or, when arg is
// not a file but a job name, the graph of that running job (jobName is
// then arg).
func resolveOld(ctx context.Context, jobs runningGraphs, arg string, jinja map[string]any) (g *graph.Pipeline, jobName string, err error) {
	if _, statErr := os.Stat(arg); statErr != nil && jobNameRE.MatchString(arg) && filepath.Ext(arg) == "" {
		if jobs == nil {
			return nil, "", withCode(ExitNeedsServer, fmt.Errorf("%q is not a pipeline file; checking against the running job of that name needs the job service, which weir check cannot ask yet", arg))
		}
		g, err := jobs.RunningGraph(ctx, arg)
		if err != nil {
			code := ExitFailure // unless the lookup says otherwise (an unreachable server)
			var ee *exitError
			if errors.As(err, &ee) {
				code = ee.Code
			}
			return nil, "", withCode(code, fmt.Errorf("finding the graph of job %s: %w", arg, err))
		}
		return g, arg, nil
	}
	p, err := inspectPipeline(arg, jinja, true)
	if err != nil {
		return nil, "", err
	}
	return p.Graph(), "", nil
}

// inspectPipeline loads a pipeline file only to look at its graph (graph,
// check, --validate-only): its Pub/Sub steps load without a server, as
// loadNewPipeline does for a job, under a job name derived from the file.
func inspectPipeline(path string, jinja map[string]any, graphOnly bool) (*weir.Pipeline, error) {
	name := jobNameFromFile(path)
	if name == "" {
		name = "inspect"
	}
	return loadNewPipeline(path, name, jinja, graphOnly, nil, nil)
}

// loadNewPipeline loads NEW: as loadPipeline does when OLD is a file, and as
// job jobName would run it otherwise, so that the Pub/Sub steps a job may
// have (which need a broker) load too. The pipeline is only inspected:
// its Pub/Sub steps get no broker connection (a nil *pubsub.Broker, which
// building a step does not touch) and its SQL sinks without a dsn default
// to a scratch directory, removed afterwards. graphOnly skips the SQL
// sinks' table checks (yamlpipe's GraphOnly). prior, when known, is OLD's
// graph (its steps renamed by mapping): a Combine keeps its accumulator
// slots where OLD stores them, as the server does for an update (an
// output moved in NEW is then no change of what is stored).
// nextGeneration is the generation a checked NEW pipeline loads as when
// it follows OLD: one after any a job may have run as (sinks compare
// generations only for equality).
const nextGeneration = 1 << 40

func loadNewPipeline(path, jobName string, jinja map[string]any, graphOnly bool, prior *graph.Pipeline, mapping compat.Mapping) (*weir.Pipeline, error) {
	if jobName == "" {
		if jobName = jobNameFromFile(path); jobName == "" {
			jobName = "inspect"
		}
	}
	wd, err := cli.WorkingDir()
	if err != nil {
		return nil, withCode(ExitFailure, err)
	}
	scratch, err := os.MkdirTemp("", "weir-check-")
	if err != nil {
		return nil, withCode(ExitFailure, fmt.Errorf("creating a scratch directory: %w", err))
	}
	defer os.RemoveAll(scratch)
	job := &yamlpipe.JobEnv{Name: jobName, ID: "check", Generation: 1, DataDir: scratch, Broker: (*pubsub.Broker)(nil)}
	if prior != nil {
		// NEW would run as a later generation than any OLD ran as: a
		// staged sink then checks its rows against the table's newest
		// member, as the update's new staging table will (a widening, a
		// declared conversion), not as a restart of OLD's own.
		job.Generation = nextGeneration
	}
	slots, stored := compat.CombineSlotsByStep(prior, mapping)
	p, err := yamlpipe.LoadFile(path, yamlpipe.Options{BaseDir: wd, Job: job, JinjaVariables: jinja, GraphOnly: graphOnly, JinjaSandbox: jinjaSandbox(),
		PriorCombineSlots: slots, PriorCombineStored: stored})
	if err != nil {
		if errors.Is(err, yamlpipe.ErrSchemaChange) {
			// As the server says it of an update it refuses.
			err = fmt.Errorf("%w (%s)", err, errcode.SQLSchemaChangeRefused)
		}
		return nil, withCode(ExitInvalidPipeline, err)
	}
	return validPipeline(path, p)
}
