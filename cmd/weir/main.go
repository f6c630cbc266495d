// Command weir is the weir CLI (docs/ARCHITECTURE.md, "Contracts"): it serves the job service
// and the HTTP API (`weir server`), runs pipelines in-process or submits
// and updates them as jobs (`weir run`), manages jobs (`weir jobs`), topics
// and subscriptions (`weir topics`, `weir subscriptions`), checks whether a
// new pipeline can take over a running one's state (`weir check`), shows
// what an update would do (`weir plan`), prints
// graphs (`weir graph`), benchmarks the engine (`weir bench`), rehearses
// and compares outputs (`weir rehearse`, `weir diff`) and takes, lists and
// deletes job snapshots (`weir snapshots`).
//
// It may import client (every command that talks to a server), cluster
// (its option errors), api (the
// server's defaults), cmd/weir/internal/cli (exit codes and what every
// command shares), cmd/weir/internal/serverconn (the --server flags and
// the client they designate), cmd/weir/internal/benchcmd (weir bench),
// cmd/weir/internal/diffcmd (weir diff), cmd/weir/internal/rehearsecmd
// (weir rehearse, and the trace budget weir server's --rehearse-trace-*
// flags give), compat, diff, duration, errcode, graph, io/files (the
// byte size of --max-sink-buffer), io/pubsub, plan, runner, sandbox,
// server, service, service/record, serviceopt, weir, yamlpipe,
// github.com/spf13/cobra, github.com/spf13/pflag, github.com/goccy/go-yaml
// (--format yaml) and the standard library. It must not import weirx (Go
// programs embed weir, not the other way round).
//
// main only wires the process to the command tree in root.go; each command
// group lives in its own file, or in its own package under
// cmd/weir/internal (bench, diff, rehearse), and every failure maps to a
// named exit code.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	tuneGC()
	tuneProcs()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
