package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/runner"
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
	fromSnapshot   string
}

// serverOnlyFlags returns the `weir run` flags that only make sense for a
// job of the job service.
func serverOnlyFlags() []string {
	return []string{"job-name", "update", "transform-name-mapping", "service-options", "max-num-workers", "create-from-snapshot"}
}

// serviceOptionKeys returns the keys --service-options accepts, verbatim
// from Dataflow; those that take a value end with '='.
func serviceOptionKeys() []string {
	return []string{
		"update_strategy_parallel_job_update",
		"update_strategy_in_place_update",
		"parallel_replace_job_name=",
		"parallel_replace_job_id=",
		"parallel_replace_job_min_parallel_pipelines_duration=",
		"parallel_replace_job_max_stop_duration=",
		"parallel_replace_job_cancel_on_drain_timeout=",
		"parallel_replace_job_preallocate_compute_resources=",
		"create_or_update_job",
	}
}

func newRunCommand(e *env) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run PIPELINE.yaml",
		Short: "Run a pipeline",
		Long: `Run loads a YAML pipeline and runs it.

A pipeline whose sources are all bounded runs to completion in this process;
the command then prints the metrics of every step and exits 0. Paths in the
pipeline file are resolved against the current directory.

The job flags (--job-name, --update, --transform-name-mapping,
--service-options, --max-num-workers, --create-from-snapshot) and pipelines
with unbounded sources need a running weir server, which is not available yet.

Exit codes: 0 success, 1 the run failed, 2 usage, 3 invalid pipeline,
4 needs a weir server.`,
		Args: exactArgs("PIPELINE.yaml"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPipeline(cmd, e, args[0], f)
		},
	}
	fl := cmd.Flags()
	addFormatFlag(cmd, &f.format)
	fl.IntVar(&f.numWorkers, "num-workers", 1, "number of workers (goroutines) that run the pipeline")
	fl.BoolVar(&f.validateOnly, "validate-only", false, "load and validate the pipeline, then exit without running it")
	fl.StringVar(&f.jobName, "job-name", "", "name of the job (needs a weir server)")
	fl.BoolVar(&f.update, "update", false, "update the running job of --job-name in place (needs a weir server)")
	fl.StringVar(&f.nameMapping, "transform-name-mapping", "", "JSON object mapping old step names to new ones for --update (needs a weir server)")
	fl.StringArrayVar(&f.serviceOptions, "service-options", nil, "service option KEY or KEY=VALUE, repeatable (needs a weir server)")
	fl.IntVar(&f.maxNumWorkers, "max-num-workers", 0, "most workers the job may scale to (needs a weir server)")
	fl.StringVar(&f.fromSnapshot, "create-from-snapshot", "", "start the job from the snapshot with this ID (needs a weir server)")
	return cmd
}

func runPipeline(cmd *cobra.Command, e *env, path string, f runFlags) error {
	if err := checkFormat(f.format); err != nil {
		return err
	}
	if f.numWorkers < 1 {
		return usageErrorf("--num-workers must be at least 1, got %d", f.numWorkers)
	}
	if err := checkServiceOptions(f.serviceOptions); err != nil {
		return err
	}
	if f.nameMapping != "" {
		var m map[string]string
		if err := json.Unmarshal([]byte(f.nameMapping), &m); err != nil {
			return usageErrorf("--transform-name-mapping must be a JSON object of step names: %w", err)
		}
	}
	var given []string
	for _, name := range serverOnlyFlags() {
		if cmd.Flags().Changed(name) {
			given = append(given, "--"+name)
		}
	}
	if len(given) > 0 {
		return withCode(ExitNeedsServer, fmt.Errorf("%s needs a running weir server (not available yet); without job flags, a pipeline whose sources are all bounded runs in this process", strings.Join(given, ", ")))
	}

	p, err := loadPipeline(path)
	if err != nil {
		return err
	}
	if f.validateOnly {
		return printValid(e.stdout, path, p.Graph(), f.format)
	}
	if unbounded := unboundedSources(p.Graph()); len(unbounded) > 0 {
		return withCode(ExitNeedsServer, fmt.Errorf("%s: source step(s) %s read unbounded input: running this pipeline needs a weir server (not available yet); 'weir run' runs pipelines whose sources are all bounded", path, strings.Join(unbounded, ", ")))
	}
	e.logger.Info("running pipeline", "file", path, "steps", len(p.Graph().Steps), "workers", f.numWorkers)
	res, err := weir.Run(cmd.Context(), p, weir.RunOptions{NumWorkers: f.numWorkers, Logger: e.logger})
	if err != nil {
		return withCode(ExitFailure, fmt.Errorf("running %s: %w", path, err))
	}
	if res == nil {
		res = &runner.Result{}
	}
	if f.format == formatJSON {
		return writeJSON(e.stdout, res)
	}
	return writeStepTable(e.stdout, res)
}

// loadPipeline loads a YAML pipeline, resolving paths against the current
// directory; any load or validation error is an invalid pipeline.
func loadPipeline(path string) (*weir.Pipeline, error) {
	wd, err := workingDir()
	if err != nil {
		return nil, withCode(ExitFailure, err)
	}
	p, err := yamlpipe.LoadFile(path, yamlpipe.Options{BaseDir: wd})
	if err != nil {
		return nil, withCode(ExitInvalidPipeline, err)
	}
	if err := p.Err(); err != nil {
		return nil, withCode(ExitInvalidPipeline, fmt.Errorf("%s: %w", path, err))
	}
	if err := p.Graph().Validate(); err != nil {
		return nil, withCode(ExitInvalidPipeline, fmt.Errorf("%s: %w", path, err))
	}
	return p, nil
}

// unboundedSources returns the names of the source steps of g that produce
// an unbounded collection.
func unboundedSources(g *graph.Pipeline) []string {
	var names []string
	for _, s := range g.Steps {
		if s.Kind != graph.KindSource {
			continue
		}
		bounded := s.Source == nil || s.Source.Bounded
		for _, id := range s.Outputs {
			if c := g.Collection(id); c != nil && !c.Bounded {
				bounded = false
			}
		}
		if !bounded {
			names = append(names, s.Name)
		}
	}
	slices.Sort(names)
	return names
}

// checkServiceOptions reports --service-options values with unknown keys,
// or a missing or unexpected value.
func checkServiceOptions(opts []string) error {
	known := serviceOptionKeys()
	for _, o := range opts {
		key, _, hasValue := strings.Cut(o, "=")
		switch {
		case slices.Contains(known, key+"="):
			if !hasValue {
				return usageErrorf("--service-options %q: %s needs a value (%s=VALUE)", o, key, key)
			}
		case slices.Contains(known, key):
			if hasValue {
				return usageErrorf("--service-options %q: %s takes no value", o, key)
			}
		default:
			return usageErrorf("--service-options %q: unknown option (known: %s)", o, strings.Join(known, ", "))
		}
	}
	return nil
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
	if _, err := fmt.Fprintf(w, "%s: valid pipeline of %d steps (not run: --validate-only)\n", path, len(v.Steps)); err != nil {
		return withCode(ExitFailure, fmt.Errorf("writing output: %w", err))
	}
	return nil
}

// writeStepTable prints the run's step metrics as an aligned table.
func writeStepTable(w io.Writer, res *runner.Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tELEMENTS_IN\tELEMENTS_OUT\tREJECTS\tDROPPED_LATE_ELEMENTS")
	for _, s := range res.Steps {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\n", s.Name, s.ElementsIn, s.ElementsOut, s.Rejects, s.DroppedLateElements)
	}
	if err := tw.Flush(); err != nil {
		return withCode(ExitFailure, fmt.Errorf("writing output: %w", err))
	}
	return nil
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return withCode(ExitFailure, fmt.Errorf("writing output: %w", err))
	}
	return nil
}
