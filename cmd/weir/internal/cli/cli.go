// Package cli holds what the weir CLI's command packages share: the exit
// codes scripts match on, the error that carries one, usage errors, the
// argument check, --format text|json, the standard streams, logger and
// Jinja variables a command works with (Env) and how a report prints a sum
// (Number) and a byte count (Bytes). Package main and the command packages
// under cmd/weir/internal build on it, so that a command's failure maps to
// the same exit code wherever the command lives.
//
// It may import github.com/spf13/cobra and the standard library; only the
// weir CLI's own packages (cmd/weir and cmd/weir/internal/...) import it.
package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes. Scripts and tests match on these, so they never change.
const (
	// ExitOK: the command did what it was asked.
	ExitOK = 0
	// ExitFailure: the command ran and failed (a pipeline run failed, a
	// benchmark computed the wrong result, output could not be written).
	ExitFailure = 1
	// ExitUsage: the command line is wrong (unknown command or flag, bad
	// flag value, missing argument).
	ExitUsage = 2
	// ExitInvalidPipeline: the pipeline file could not be loaded or is
	// invalid; nothing ran.
	ExitInvalidPipeline = 3
	// ExitNeedsServer: the request needs the job service: a pipeline with
	// unbounded sources run without --job-name, or a job feature the weir
	// server does not offer yet (snapshots, service options).
	ExitNeedsServer = 4
	// ExitServerUnreachable: no weir server answers at the address
	// (--server, $WEIR_SERVER, default http://127.0.0.1:7070); the message
	// says how to start one.
	ExitServerUnreachable = 5
	// ExitIncompatible: the new pipeline cannot take over the running
	// one's state (`weir check`, `weir run --update`); the report says why.
	// Nothing was changed.
	ExitIncompatible = 6
	// ExitRehearsalDiffers: a parity check (`weir rehearse`, `weir diff`)
	// reached a verdict, and the new outputs differ from the old ones
	// beyond the budget (noise excluded). A CI job gates on 0 against it;
	// every other code means the check did not reach a verdict.
	ExitRehearsalDiffers = 7
	// ExitRehearsalFailed: a parity check could not run: a sandboxed run
	// failed, the recorded input does not fit the pipelines' sources, or
	// an output could not be read.
	ExitRehearsalFailed = 8
	// ExitInterrupted: the command was interrupted (SIGINT or SIGTERM).
	ExitInterrupted = 130
)

// ExitError is an error that carries the exit code it maps to.
type ExitError struct {
	// Code is the process's exit code.
	Code int
	// Err is the failure.
	Err error
	// ByServer marks the server's answer to a request: its message says
	// what was wrong, and the usage hint would mislead.
	ByServer bool
}

// Error implements error.
func (e *ExitError) Error() string { return e.Err.Error() }

// Unwrap returns the failure.
func (e *ExitError) Unwrap() error { return e.Err }

// WithCode wraps err so that the process exits with code; nil stays nil.
func WithCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &ExitError{Code: code, Err: err}
}

// UsageErrorf returns a usage error (ExitUsage).
func UsageErrorf(format string, args ...any) error {
	return WithCode(ExitUsage, fmt.Errorf(format, args...))
}

// ExactArgs is cobra.ExactArgs with a usage exit code and the arguments'
// names.
func ExactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			// The usage line shows what goes in a flag instead (weir
			// snapshots create --job-id ID|NAME).
			if len(names) == 0 {
				return UsageErrorf("%s takes no arguments, got %d (%s); usage: %s", cmd.CommandPath(), len(args), strings.Join(args, " "), cmd.UseLine())
			}
			return UsageErrorf("%s takes %d argument(s) (%s), got %d; usage: %s", cmd.CommandPath(), len(names), strings.Join(names, " "), len(args), cmd.UseLine())
		}
		return nil
	}
}

// The --format values every command takes (commands that print resources
// take more: package main's format.go).
const (
	FormatText = "text"
	FormatJSON = "json"
)

// AddFormatFlag declares --format text|json on cmd, storing the choice in
// dst.
func AddFormatFlag(cmd *cobra.Command, dst *string) {
	cmd.Flags().StringVar(dst, "format", FormatText, "output format: text or json")
}

// CheckFormat validates a --format text|json value.
func CheckFormat(f string) error {
	if f != FormatText && f != FormatJSON {
		return UsageErrorf("--format %q: want text or json", f)
	}
	return nil
}

// OutputErr turns a failed write of the command's output into ExitFailure.
func OutputErr(err error) error {
	if err != nil {
		return WithCode(ExitFailure, fmt.Errorf("writing output: %w", err))
	}
	return nil
}

// WriteReport prints the text b holds.
func WriteReport(w io.Writer, b *strings.Builder) error {
	_, err := io.WriteString(w, b.String())
	return OutputErr(err)
}

// WriteJSON prints v as indented JSON.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return OutputErr(enc.Encode(v))
}

// WorkingDir returns the current directory, for resolving paths in
// pipeline files.
func WorkingDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the current directory: %w", err)
	}
	return wd, nil
}

// Env is what a command reads and writes besides its flags: the standard
// streams and the logger --log-level configures (set before the command
// runs, after the command tree is built).
type Env struct {
	Stdout io.Writer
	Stderr io.Writer
	Logger *slog.Logger
	// Jinja are the --jinja-variables pipeline files are rendered with
	// (set with Logger).
	Jinja map[string]any
}

// Number prints a sum without a needless fraction: 42, not 42.000000; a
// fraction or a magnitude beyond 10^15 as %g.
func Number(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return fmt.Sprintf("%d", int64(f))
	}
	return fmt.Sprintf("%g", f)
}

// Bytes prints a byte count in binary units: B, KiB, MiB, GiB or TiB.
func Bytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	f, units := float64(n), []string{"KiB", "MiB", "GiB", "TiB"}
	u := -1
	for f >= 1024 && u < len(units)-1 {
		f /= 1024
		u++
	}
	return fmt.Sprintf("%.1f %s", f, units[u])
}
