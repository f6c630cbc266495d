package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// gcloud's habits: the flags and names a command pasted from gcloud or a
// Dataflow launch line carries, accepted so that it does not exit 2.

// gcloudFlags are the global flags gcloud commands carry that mean nothing
// to a weir server: one server is one project, and it runs where it runs.
type gcloudFlags struct {
	project, region string
}

// addGcloudFlags declares --project and --region on every command.
func addGcloudFlags(root *cobra.Command, f *gcloudFlags) {
	pf := root.PersistentFlags()
	pf.StringVar(&f.project, "project", "", "accepted from gcloud and Dataflow command lines and ignored: a weir server is one project")
	pf.StringVar(&f.region, "region", "", "accepted from gcloud and Dataflow command lines and ignored: a weir server runs where it runs")
}

// note prints the one line that says the gcloud flags given were ignored.
func (f gcloudFlags) note(cmd *cobra.Command, w io.Writer) {
	var given []string
	for _, name := range []string{"project", "region"} {
		if fl := cmd.Flag(name); fl != nil && fl.Changed {
			given = append(given, "--"+name)
		}
	}
	if len(given) > 0 {
		fmt.Fprintf(w, "weir: note: %s ignored: a weir server is one project and runs where it runs\n", strings.Join(given, " and "))
	}
}

// Pub/Sub's collections, as in projects/P/topics/T.
const (
	collTopics        = "topics"
	collSubscriptions = "subscriptions"
	collSnapshots     = "snapshots"
)

// pubsubID returns the ID a Pub/Sub resource name stands for: name itself,
// or T of projects/P/COLLECTION/T when COLLECTION is want (any project is
// weir's one project). Another collection is a usage error.
func pubsubID(name, want string) (string, error) {
	if !strings.HasPrefix(name, "projects/") {
		return name, nil
	}
	parts := strings.Split(name, "/")
	if len(parts) != 4 || parts[1] == "" || parts[3] == "" {
		return "", usageErrorf("%q: want projects/PROJECT/%s/ID or ID", name, want)
	}
	if parts[2] != want {
		return "", usageErrorf("%q names %s, want one of the %s (projects/PROJECT/%s/ID)", name, parts[2], want, want)
	}
	return parts[3], nil
}

// acceptPubSubNames lets every command under cmd take full resource names
// (projects/P/topics/T, projects/P/subscriptions/S, projects/P/snapshots/N)
// wherever it takes an ID: in its arguments (of collection argColl; a
// "snapshots" group's are snapshots, its "seek" takes a subscription) and
// in --topic, --subscription and --snapshot.
func acceptPubSubNames(cmd *cobra.Command, argColl string) {
	if cmd.Name() == collSnapshots {
		argColl = collSnapshots
	}
	for _, sub := range cmd.Commands() {
		acceptPubSubNames(sub, argColl)
	}
	run := cmd.RunE
	if run == nil || cmd.HasSubCommands() {
		return
	}
	coll := argColl
	if cmd.Name() == "seek" {
		coll = collSubscriptions
	}
	cmd.RunE = func(c *cobra.Command, args []string) error {
		short := make([]string, len(args))
		for i, a := range args {
			id, err := pubsubID(a, coll)
			if err != nil {
				return err
			}
			short[i] = id
		}
		var ferr error
		c.Flags().Visit(func(f *pflag.Flag) {
			want := map[string]string{"topic": collTopics, "subscription": collSubscriptions, "snapshot": collSnapshots}[f.Name]
			if want == "" || ferr != nil {
				return
			}
			id, err := pubsubID(f.Value.String(), want)
			if err == nil && id != f.Value.String() {
				err = f.Value.Set(id)
			}
			if err != nil {
				ferr = withCode(ExitUsage, fmt.Errorf("--%s: %w", f.Name, err))
			}
		})
		if ferr != nil {
			return ferr
		}
		return run(c, short)
	}
}

// pubsubCommand returns the command group cmd, whose arguments are of
// collection coll, taking full resource names (acceptPubSubNames).
func pubsubCommand(cmd *cobra.Command, coll string) *cobra.Command {
	acceptPubSubNames(cmd, coll)
	return cmd
}

// beamRunFlags are Apache Beam's spellings of a YAML launch line that
// `weir run` accepts beside its own: python -m apache_beam.yaml.main
// --yaml_pipeline_file=P.yaml --runner=R --streaming.
type beamRunFlags struct {
	pipelineFile string
	runner       string
	streaming    bool
}

// beamRunners are the runner names Beam's launch lines carry: weir runs
// the pipeline itself whichever is named.
var beamRunners = []string{"DirectRunner", "PrismRunner", "DataflowRunner", "FlinkRunner", "SparkRunner", "SamzaRunner", "PortableRunner", "weir"}

// addBeamRunFlags declares --yaml-pipeline-file (--yaml_pipeline_file),
// --runner and --streaming.
func addBeamRunFlags(fl *pflag.FlagSet, b *beamRunFlags) {
	fl.StringVar(&b.pipelineFile, "yaml-pipeline-file", "", "the pipeline file, as Beam's --yaml_pipeline_file (instead of the PIPELINE.yaml argument)")
	fl.StringVar(&b.runner, "runner", "", "accepted from Beam launch lines and checked (DirectRunner, PrismRunner, DataflowRunner, FlinkRunner, SparkRunner, SamzaRunner, PortableRunner): weir runs the pipeline")
	fl.BoolVar(&b.streaming, "streaming", false, "accepted from Beam launch lines: weir runs a pipeline with unbounded sources as a streaming job (with --job-name) whatever this says")
}

// args checks `weir run`'s arguments: PIPELINE.yaml, or none with
// --yaml-pipeline-file.
func (b *beamRunFlags) args(cmd *cobra.Command, args []string) error {
	switch {
	case len(args) == 1 && b.pipelineFile != "":
		return usageErrorf("%s: give the pipeline as PIPELINE.yaml or as --yaml-pipeline-file, not both", cmd.CommandPath())
	case len(args) == 0 && b.pipelineFile != "", len(args) == 1:
	default:
		return usageErrorf("%s takes 1 argument (PIPELINE.yaml) or --yaml-pipeline-file, got %d arguments", cmd.CommandPath(), len(args))
	}
	if b.runner != "" && !slices.Contains(beamRunners, b.runner) {
		return usageErrorf("--runner %q: weir runs Beam YAML pipelines given as %s", b.runner, strings.Join(beamRunners, ", "))
	}
	return nil
}

// pipeline returns the pipeline file of args (checked by args), and notes
// on w that weir runs it whatever --runner named.
func (b *beamRunFlags) pipeline(args []string, w io.Writer) string {
	if b.runner != "" && b.runner != "weir" {
		fmt.Fprintf(w, "weir: note: --runner %s: weir runs the pipeline itself\n", b.runner)
	}
	if len(args) == 1 {
		return args[0]
	}
	return b.pipelineFile
}
