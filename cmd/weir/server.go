package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-dev/weir/server"
	"github.com/weir-dev/weir/service"
)

// serverFlags are the flags of `weir server`.
type serverFlags struct {
	dataDir            string
	listen             string
	checkpointInterval time.Duration
	natsURL            string
}

func newServerCommand(e *env) *cobra.Command {
	var f serverFlags
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the job service and its HTTP API",
		Long: `Server runs the weir job service: it owns the data directory, serves the JSON
HTTP API on --listen, and runs jobs submitted with 'weir run --job-name'. It
hosts an embedded NATS JetStream broker (store in DATA-DIR/broker), or uses the
external one at --nats-url.

Every running job takes a checkpoint every --checkpoint-interval. On SIGTERM or
SIGINT the server checkpoints every job and exits 0, leaving them RUNNING: the
next 'weir server' on the same data directory resumes them from that
checkpoint. After a crash (kill -9) they resume from their last checkpoint.

The first line on stdout is "weir server listening on http://ADDR"; with
--listen 127.0.0.1:0 the port is chosen by the system.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServer(cmd.Context(), e, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dataDir, "data-dir", service.DefaultDataDir, "directory of the job registry, state and checkpoints")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:7070", "address of the HTTP API")
	fl.DurationVar(&f.checkpointInterval, "checkpoint-interval", service.DefaultCheckpointInterval, "how often every running job takes a checkpoint")
	fl.StringVar(&f.natsURL, "nats-url", "", "URL of an external NATS JetStream server to use instead of the embedded broker")
	return cmd
}

// runServer builds the process (package server), serves until SIGTERM or
// SIGINT (or ctx ends), then stops the API and suspends every job.
func runServer(ctx context.Context, e *env, f serverFlags) error {
	if f.checkpointInterval < 10*time.Millisecond {
		return usageErrorf("--checkpoint-interval %s: want at least 10ms", f.checkpointInterval)
	}
	// SIGTERM or SIGINT from the start on, not only once serving: a signal
	// that arrives while the server opens (or just after it printed its
	// address) stops it cleanly too, every job checkpointed.
	sigCtx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	p, err := server.Open(sigCtx, server.Config{DataDir: f.dataDir, Listen: f.listen, CheckpointInterval: f.checkpointInterval,
		NATSURL: f.natsURL, Logger: e.logger})
	if err != nil {
		if sigCtx.Err() != nil && ctx.Err() == nil {
			e.logger.Info("stopped by a signal while starting")
			return nil
		}
		return withCode(ExitFailure, err)
	}
	// Closing must not inherit the signal's cancellation: it checkpoints
	// every job.
	ctx = context.WithoutCancel(ctx)
	if err := p.Serve(); err != nil {
		return withCode(ExitFailure, errors.Join(err, p.Close(ctx)))
	}
	fmt.Fprintf(e.stdout, "weir server listening on %s (data dir %s)\n", p.Address(), p.DataDir())
	e.logger.Info("weir server started", "listen", p.Address(), "data_dir", p.DataDir())
	why, runErr := p.Wait(sigCtx)
	if why == server.StopContext && sigCtx.Err() != nil {
		e.logger.Info("shutting down: checkpointing every job")
	}
	if runErr != nil {
		runErr = withCode(ExitFailure, runErr)
	}
	if err := p.Close(ctx); err != nil {
		return errors.Join(runErr, withCode(ExitFailure, err))
	}
	return runErr
}
