// Package benchcmd is the weir CLI's `weir bench` command tree (windowed-sum,
// pubsub-sql, nexmark, update, snapshot, state, skew, and --compare of two
// builds) and the hidden child commands its benchmarks re-execute the
// binary with, so that each variant runs in a process of its own. The
// workloads themselves are package bench's.
//
// It may import weir (the SDK root package), cmd/weir/internal/cli, bench,
// nexmark, runner, runner/contract, state, yamlpipe, github.com/spf13/cobra,
// github.com/spf13/pflag and the standard library; only package main
// (cmd/weir) imports it.
package benchcmd

import (
	"github.com/spf13/cobra"

	"github.com/weir-dev/weir/cmd/weir/internal/cli"
)

// Commands returns `weir bench` with its subcommands, and the hidden
// top-level child commands the benchmarks start.
func Commands(e *cli.Env) []*cobra.Command {
	bench := newBenchCommand(e)
	bench.AddCommand(newBenchUpdateCommand(e), newBenchSnapshotCommand(e), newBenchStateCommand(e), newBenchSkewCommand(e), newBenchIdleCommand(e), newBenchFailoverCommand(e))
	return []*cobra.Command{bench, newBenchChildUpdateCommand(e), newBenchChildPublishCommand(e), newBenchChildSnapshotCommand(e), newBenchChildCommand(e)}
}
