// Command weir is the weir CLI: it runs pipelines (`weir run`), prints their
// graphs (`weir graph`) and benchmarks the engine (`weir bench`). Later it
// also serves the job service (`weir server`) and manages jobs, snapshots,
// topics and subscriptions (see DESIGN.md §3).
//
// main only wires the process to the command tree in root.go; each command
// group lives in its own file and every failure maps to a named exit code.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	tuneGC()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
