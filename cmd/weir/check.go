package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"

	"github.com/spf13/cobra"

	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/graph"
)

// ExitIncompatible: `weir check` found that the new pipeline cannot take
// over the running one's state; the report says why. Nothing was changed.
// (It belongs with the other exit codes in root.go.)
const ExitIncompatible = 6

// checkFlags are the flags of `weir check`, named after the Dataflow options.
type checkFlags struct {
	format            string
	nameMapping       string
	allowSourceChange bool
}

// runningGraphs looks up the graph a running job was started with, so that
// `weir check JOB_NAME NEW.yaml` can check against it. The job service
// implements it (the graph a job stores is service.Job.Graph, canonical
// JSON for graph.Parse); until it is wired in, a job name as OLD exits with
// ExitNeedsServer.
type runningGraphs interface {
	// RunningGraph returns the graph of the active job named name. It
	// blocks until the service answers or ctx is done.
	RunningGraph(ctx context.Context, name string) (*graph.Pipeline, error)
}

// jobNameRE is Dataflow's job name rule (DESIGN.md §1).
var jobNameRE = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

func newCheckCommand(e *env) *cobra.Command {
	return newCheckCommandWith(e, nil)
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
OLD may also be the name of a running job (not available yet: checking
against a job's stored graph needs the job service's support).

Exit codes: 0 compatible, 2 usage, 3 invalid pipeline, 4 needs a weir server,
6 incompatible.`,
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
	old, err := resolveOld(ctx, jobs, oldArg)
	if err != nil {
		return err
	}
	p, err := loadPipeline(newPath)
	if err != nil {
		return err
	}
	e.logger.Info("checking compatibility", "old", oldArg, "new", newPath, "mapping", mapping.String())
	r := compat.Check(old, p.Graph(), compat.Options{Mapping: mapping, AllowSourceChange: f.allowSourceChange})
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
// not a file but a job name, the graph of that running job.
func resolveOld(ctx context.Context, jobs runningGraphs, arg string) (*graph.Pipeline, error) {
	if _, statErr := os.Stat(arg); statErr != nil && jobNameRE.MatchString(arg) && filepath.Ext(arg) == "" {
		if jobs == nil {
			return nil, withCode(ExitNeedsServer, fmt.Errorf("%q is not a pipeline file; checking against the running job of that name needs the job service, which weir check cannot ask yet", arg))
		}
		g, err := jobs.RunningGraph(ctx, arg)
		if err != nil {
			return nil, withCode(ExitFailure, fmt.Errorf("finding the graph of job %s: %w", arg, err))
		}
		return g, nil
	}
	p, err := loadPipeline(arg)
	if err != nil {
		return nil, err
	}
	return p.Graph(), nil
}
