package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/plan"
)

// planFlags are the flags of `weir plan`.
type planFlags struct {
	format         string
	nameMapping    string
	serviceOptions []string
	snapshot       string
	server         serverFlag
}

func newPlanCommand(e *env) *cobra.Command {
	var f planFlags
	cmd := &cobra.Command{
		Use:   "plan JOB_NAME|OLD.yaml NEW.yaml",
		Short: "Show everything an update would do, before anything runs",
		Long: `Plan prints, changing nothing, what updating OLD (a running job's name or a
pipeline file) to NEW would do:

  state    per stateful step: kept, renamed (through the mapping), changed
           (kept, with other accumulators), dropped on purpose, added
           (starts empty) or refused (with the reason and the fix); with a
           running job, the keys each step holds state for now;
  sinks    per output: columns added, removed, widened or converted, a
           changed key, mode or layout, and what readers will see (a
           refused change names the fix);
  sources  per source: where it reads from after the change, which
           depends on the way of updating (--service-options, as for
           weir run --update: in place, stop-and-replace with or without
           weir_replace_rewind, parallel).

The state part is the compatibility check of weir check; the verdict line
says whether the update would proceed. --snapshot ID plans against the graph
of a job snapshot (what --create-from-snapshot would take over) instead of
OLD's running graph; OLD must then name the snapshot's job.

With --format json the plan is {"strategy", "compatible", "steps": [...],
"sinks": [...], "sources": [...], "keys_from", "check": <weir check's report>}.

Exit codes: 0 the update can proceed, 1 the job or snapshot was not found,
2 usage, 3 invalid pipeline, 5 no weir server answers, 6 the update would
be refused (the compatibility check fails, or a sink would refuse NEW's
rows).`,
		Args: exactArgs("JOB_NAME|OLD.yaml", "NEW.yaml"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPlan(cmd.Context(), e, args[0], args[1], f)
		},
	}
	fl := cmd.Flags()
	addFormatFlag(cmd, &f.format)
	addServerFlag(cmd, &f.server)
	fl.StringVar(&f.nameMapping, "transform-name-mapping", "", `JSON object mapping old step names (or prefixes) to new ones; "" drops a step's state on purpose`)
	fl.StringSliceVar(&f.serviceOptions, "service-options", nil, "the update's service options (update_strategy_parallel_job_update, parallel_replace_job_min_parallel_pipelines_duration=..., weir_replace_rewind=false, ...): they choose how sources resume")
	fl.StringVar(&f.snapshot, "snapshot", "", "plan against the graph of this job snapshot instead of the running job's")
	return cmd
}

func runPlan(ctx context.Context, e *env, oldArg, newPath string, f planFlags) error {
	if err := checkFormat(f.format); err != nil {
		return err
	}
	mapping, err := compat.ParseMapping(f.nameMapping)
	if err != nil {
		return usageErrorf("--transform-name-mapping: %w", err)
	}
	popts, err := plan.ForServiceOptions(f.serviceOptions)
	if err != nil {
		return usageErrorf("--service-options: %w", err)
	}
	popts.Check = compat.Options{Mapping: mapping}
	old, jobName, err := planOld(ctx, oldArg, f, &popts, e.jinja)
	if err != nil {
		return err
	}
	p, err := loadNewPipeline(newPath, jobName, e.jinja, true, old, mapping)
	if err != nil {
		return err
	}
	pl := plan.Make(old, p.Graph(), popts)
	if f.format == formatJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		err = enc.Encode(pl)
	} else {
		err = pl.WriteText(e.stdout)
	}
	if err != nil {
		return withCode(ExitFailure, fmt.Errorf("writing the plan: %w", err))
	}
	if refused := planRefusals(pl); refused > 0 {
		return withCode(ExitIncompatible, fmt.Errorf("%s cannot update %s: %d refused change(s), listed in the plan", newPath, oldArg, refused))
	}
	return nil
}

// planRefusals counts what would refuse the update: the check's errors
// and the sinks that would refuse NEW's rows.
func planRefusals(p plan.Plan) int {
	n := len(p.Check.Errors)
	for _, s := range p.Sinks {
		if s.Action == plan.Refused {
			n++
		}
	}
	return n
}

// planOld returns OLD's graph: a pipeline file's, a snapshot's, or the
// running job's, with the keys its steps hold.
func planOld(ctx context.Context, arg string, f planFlags, opts *plan.Options, jinja map[string]any) (*graph.Pipeline, string, error) {
	_, statErr := os.Stat(arg)
	isJob := statErr != nil && jobNameRE.MatchString(arg) && filepath.Ext(arg) == ""
	if f.snapshot != "" {
		if !isJob {
			return nil, "", usageErrorf("--snapshot plans against a job snapshot: give the snapshot's job name as the first argument, not a file")
		}
		c, err := newClient(f.server)
		if err != nil {
			return nil, "", err
		}
		s, err := c.GetSnapshot(ctx, f.snapshot)
		if err != nil {
			return nil, "", clientError(ctx, c, err)
		}
		if s.JobName != arg {
			return nil, "", usageErrorf("snapshot %s is of job %s, not %s", s.ID, s.JobName, arg)
		}
		if len(s.Graph) == 0 {
			return nil, "", withCode(ExitFailure, fmt.Errorf("snapshot %s (%s) records no graph", s.ID, s.State))
		}
		g, err := graph.Parse(s.Graph)
		if err != nil {
			return nil, "", withCode(ExitFailure, fmt.Errorf("reading the graph of snapshot %s: %w", s.ID, err))
		}
		if len(s.Steps) > 0 {
			opts.Keys, opts.Windows = map[string]int64{}, map[string]plan.OpenWindows{}
			for _, st := range s.Steps {
				opts.Keys[st.Name] = st.Keys
				opts.Windows[st.Name] = plan.OpenWindows{N: st.OpenWindows}
			}
			opts.KeysFrom = "snapshot " + s.ID
		}
		return g, arg, nil
	}
	if !isJob {
		g, _, err := resolveOld(ctx, nil, arg, jinja)
		return g, "", err
	}
	g, j, err := (&serverGraphs{server: f.server}).runningJob(ctx, arg)
	if err != nil {
		return nil, "", err
	}
	if j.Metrics != nil {
		keys, windows := map[string]int64{}, map[string]plan.OpenWindows{}
		for _, st := range j.Metrics.Steps {
			if st.Keys != nil {
				keys[st.Name] = *st.Keys
			}
			if st.OpenWindows != nil {
				windows[st.Name] = plan.OpenWindows{N: *st.OpenWindows, Estimated: st.OpenWindowsEstimated}
			}
		}
		opts.Keys, opts.Windows, opts.KeysFrom = keys, windows, "the running job "+j.ID+"'s metrics"
	}
	return g, arg, nil
}

// serverPlan reads the plan a server answered a validate-only update
// with (nil: none) into the type that prints it.
func serverPlan(p *client.Plan) *plan.Plan {
	if p == nil {
		return nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil
	}
	var out plan.Plan
	if err := json.Unmarshal(b, &out); err != nil {
		return nil
	}
	return &out
}

// updatePlan is the plan `weir run --update --validate-only` prints after
// the server's report: what the update of f.jobName to path would do. A
// plan that cannot be made (the job ended meanwhile, the file does not
// load as a graph) is left out with a note on stderr: the server's report
// above already answers whether the update would proceed.
func updatePlan(ctx context.Context, e *env, path string, f runFlags) *plan.Plan {
	pf := planFlags{nameMapping: f.nameMapping, serviceOptions: f.serviceOptions, server: f.server}
	mapping, err := compat.ParseMapping(f.nameMapping)
	if err != nil {
		return nil
	}
	popts, err := plan.ForServiceOptions(pf.serviceOptions)
	if err != nil {
		return nil
	}
	popts.Check = compat.Options{Mapping: mapping, AllowSourceChange: f.allowSource}
	old, _, err := planOld(ctx, f.jobName, pf, &popts, e.jinja)
	if err != nil {
		fmt.Fprintf(e.stderr, "note: no plan of the update: %v\n", err)
		return nil
	}
	p, err := loadNewPipeline(path, f.jobName, e.jinja, true, old, popts.Check.Mapping)
	if err != nil {
		fmt.Fprintf(e.stderr, "note: no plan of the update: %v\n", err)
		return nil
	}
	pl := plan.Make(old, p.Graph(), popts)
	return &pl
}
