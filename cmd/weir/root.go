package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/weir-dev/weir/cmd/weir/internal/benchcmd"
	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"github.com/weir-dev/weir/cmd/weir/internal/diffcmd"
	"github.com/weir-dev/weir/cmd/weir/internal/rehearsecmd"
	"io"
	"log/slog"
	"os"
	"strings"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/weir-dev/weir/yamlpipe"
)

// Exit codes (package cli's, where every command package reads them).
// Scripts and tests match on these, so they never change.
const (
	ExitOK                = cli.ExitOK
	ExitFailure           = cli.ExitFailure
	ExitUsage             = cli.ExitUsage
	ExitInvalidPipeline   = cli.ExitInvalidPipeline
	ExitNeedsServer       = cli.ExitNeedsServer
	ExitServerUnreachable = cli.ExitServerUnreachable
	ExitIncompatible      = cli.ExitIncompatible
	ExitRehearsalDiffers  = cli.ExitRehearsalDiffers
	ExitRehearsalFailed   = cli.ExitRehearsalFailed
	ExitInterrupted       = cli.ExitInterrupted
)

// exitError is an error that carries the exit code it maps to.
type exitError = cli.ExitError

// errAlreadyReported is the error of a command that printed its failures
// itself (one line per job); Main prints nothing more.
var errAlreadyReported = errors.New("failures reported above")

// withCode wraps err so that the process exits with code; nil stays nil.
func withCode(code int, err error) error { return cli.WithCode(code, err) }

// usageErrorf returns a usage error (ExitUsage).
func usageErrorf(format string, args ...any) error { return cli.UsageErrorf(format, args...) }

// exitCode returns the exit code for err: ExitInterrupted when the
// command was interrupted, the code err carries if any, ExitFailure
// otherwise.
func exitCode(ctx context.Context, err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return ExitOK
	case ctx.Err() != nil:
		return ExitInterrupted
	case errors.As(err, &ee):
		return ee.Code
	}
	return ExitFailure
}

// env is what commands read and write besides their flags: the standard
// streams and the logger configured by --log-level.
type env struct {
	stdout io.Writer
	stderr io.Writer
	logger *slog.Logger
	// jinja are the --jinja-variables pipeline files are rendered with.
	jinja map[string]any
}

// Main runs the weir CLI with args (without the program name) and returns
// the process exit code. Errors are printed to stderr as "weir: ...".
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if yamlpipe.IsJinjaSandboxChild() {
		// A Jinja render of this binary's own sandbox (jinjaSandbox).
		return yamlpipe.ServeJinjaSandbox(os.Stdin, stdout)
	}
	e := &env{stdout: stdout, stderr: stderr, logger: slog.New(slog.NewTextHandler(stderr, nil))}
	root := newRootCommand(e)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err != nil && !errors.Is(err, errAlreadyReported) {
		fmt.Fprintf(stderr, "weir: %v\n", err)
		var ee *exitError
		if exitCode(ctx, err) == ExitUsage && !(errors.As(err, &ee) && ee.ByServer) {
			fmt.Fprintf(stderr, "Run 'weir --help' for usage.\n")
		}
	}
	return exitCode(ctx, err)
}

// newRootCommand builds the command tree. Nothing is kept in package
// variables: every call builds a fresh tree bound to e.
func newRootCommand(e *env) *cobra.Command {
	var logLevel, jinjaVars string
	var gf gcloudFlags
	// ce is e for the command packages (cli.Env); its logger and Jinja
	// variables follow --log-level and --jinja-variables as e's do.
	ce := &cli.Env{Stdout: e.stdout, Stderr: e.stderr, Logger: e.logger}
	root := &cobra.Command{
		Use:   "weir",
		Short: "weir runs and changes streaming pipelines (Apache Beam / Dataflow semantics)",
		Long: `weir runs long-lived, stateful, event-time pipelines written in YAML or with the Go SDK.

A pipeline whose sources are all bounded runs to completion in this process
with 'weir run'. 'weir server' runs the job service; 'weir run --job-name NAME'
submits a pipeline to it (bounded or not) and 'weir jobs' lists, describes,
drains and cancels its jobs.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unknown command %q", args[0])
			}
			return cmd.Help()
		},
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if f := cmd.Flag("log-level"); f != nil && !f.Changed && cmd.Name() == "server" {
				// A server's log is its operators' record of what happened
				// to jobs (starts, ends, recoveries, updates): info by default.
				logLevel = "info"
			}
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return usageErrorf("--log-level %q: want debug, info, warn or error", logLevel)
			}
			e.logger = slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: lvl}))
			ce.Logger = e.logger
			vars, err := yamlpipe.ParseJinjaVariables(jinjaVars)
			if err != nil {
				return usageErrorf("--jinja-variables: %w", err)
			}
			e.jinja = vars
			ce.Jinja = vars
			gf.note(cmd, e.stderr)
			return nil
		},
	}
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.PersistentFlags().StringVar(&logLevel, "log-level", "warn", "log level of the messages written to stderr: debug, info, warn or error (weir server: info unless this flag is given)")
	addJinjaFlags(root, &jinjaVars)
	addGcloudFlags(root, &gf)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return withCode(ExitUsage, err) })
	root.AddCommand(
		newRunCommand(e),
		newServerCommand(e),
		newJobsCommand(e),
		pubsubCommand(newTopicsCommand(e), collTopics),
		pubsubCommand(newSubscriptionsCommand(e), collSubscriptions),
		newSnapshotsCommand(e),
		newManifestsCommand(e),
		newSchedulesCommand(e),
		newClusterCommand(e),
		newPartitionsCommand(e),
		newTablesCommand(e),
		newCheckCommand(e),
		newPlanCommand(e),
		rehearsecmd.Command(ce),
		diffcmd.Command(ce),
		newTestCommand(e),
		newGraphCommand(e),
		newVersionCommand(e),
	)
	root.AddCommand(benchcmd.Commands(ce)...)
	// After the commands are added: it applies to every flag set of the tree.
	root.SetGlobalNormalizationFunc(normalizeFlagName)
	return root
}

// flagAliases maps the other names of weir's flags, as users paste them
// from Dataflow commands, to weir's name.
func flagAliases() map[string]string {
	return map[string]string{
		"dataflow-service-options": "service-options",
		"additional-experiments":   "service-options",
	}
}

// normalizeFlagName lets every flag be written with '_' for '-'
// (--job_name, --dataflow_service_options, as Dataflow's Python options)
// or in lower camel case (--jobName, --maxNumWorkers, as its Java
// options), and maps flagAliases.
func normalizeFlagName(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	name = strings.ReplaceAll(name, "_", "-")
	if strings.ContainsFunc(name, unicode.IsUpper) {
		var b strings.Builder
		for i, r := range name {
			if unicode.IsUpper(r) {
				if i > 0 && name[i-1] != '-' {
					b.WriteByte('-')
				}
				r = unicode.ToLower(r)
			}
			b.WriteRune(r)
		}
		name = b.String()
	}
	if to, ok := flagAliases()[name]; ok {
		name = to
	}
	return pflag.NormalizedName(name)
}

// exactArgs is cobra.ExactArgs with a usage exit code and the argument's name.
func exactArgs(names ...string) cobra.PositionalArgs { return cli.ExactArgs(names...) }

// addFormatFlag declares --format text|json on cmd, storing the choice in dst.
func addFormatFlag(cmd *cobra.Command, dst *string) { cli.AddFormatFlag(cmd, dst) }

// checkFormat validates a --format text|json value.
func checkFormat(f string) error { return cli.CheckFormat(f) }

// addJinjaFlags declares --jinja-variables (Beam's spelling
// --jinja_variables too): a JSON object of the variables pipeline files
// are rendered with as Jinja templates, by run, check and graph.
func addJinjaFlags(root *cobra.Command, dst *string) {
	const usage = "JSON object of Jinja variables to render pipeline files with, as Beam YAML's --jinja_variables (run, check, graph)"
	root.PersistentFlags().StringVar(dst, "jinja-variables", "", usage)
	root.PersistentFlags().StringVar(dst, "jinja_variables", "", usage)
	_ = root.PersistentFlags().MarkHidden("jinja_variables")
}

// jinjaSandbox renders Jinja templates in a child process of this binary,
// within the render budgets' memory and time (yamlpipe.JinjaSandbox); nil,
// rendering in this process, when the binary cannot be found.
func jinjaSandbox() *yamlpipe.JinjaSandbox {
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	return &yamlpipe.JinjaSandbox{Exe: exe}
}
