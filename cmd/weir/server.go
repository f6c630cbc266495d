package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-dev/weir/api"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/service"
)

// serverFlags are the flags of `weir server`.
type serverFlags struct {
	dataDir            string
	listen             string
	checkpointInterval time.Duration
	natsURL            string
}

// Shutdown bounds: how long in-flight API requests may take, and how long
// the final checkpoints of every job may take.
const (
	httpShutdownTimeout = 10 * time.Second
	jobsShutdownTimeout = 2 * time.Minute
)

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

// runServer builds the service and its API, serves until ctx is done
// (SIGTERM/SIGINT), then stops the API and suspends every job.
func runServer(ctx context.Context, e *env, f serverFlags) error {
	// The server handles SIGTERM/SIGINT itself (as well as main), so that a
	// program embedding the CLI gets the clean shutdown too.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if f.checkpointInterval < 10*time.Millisecond {
		return usageErrorf("--checkpoint-interval %s: want at least 10ms", f.checkpointInterval)
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return withCode(ExitFailure, fmt.Errorf("listening on %s: %w (is another weir server running? choose another address with --listen)", f.listen, err))
	}
	broker, err := startBroker(ctx, e, f)
	if err != nil {
		ln.Close()
		return err
	}
	defer func() {
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), httpShutdownTimeout)
		defer cancel()
		if err := broker.Shutdown(bctx); err != nil {
			e.logger.Warn("stopping the broker", "error", err)
		}
	}()
	svc, err := service.Open(ctx, service.Options{DataDir: f.dataDir, CheckpointInterval: f.checkpointInterval, Logger: e.logger,
		Broker: broker, DeadLetter: deadLetters{broker}})
	if err != nil {
		ln.Close()
		return withCode(ExitFailure, fmt.Errorf("starting the job service: %w", err))
	}
	srv := &http.Server{Handler: api.NewServer(svc, e.logger, api.WithPubSub(broker)), ReadHeaderTimeout: 10 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	fmt.Fprintf(e.stdout, "weir server listening on http://%s (data dir %s)\n", ln.Addr(), svc.DataDir())
	e.logger.Info("weir server started", "listen", ln.Addr().String(), "data_dir", svc.DataDir())

	var runErr error
	select {
	case <-ctx.Done():
		e.logger.Info("shutting down: checkpointing every job")
	case err := <-serveErr:
		runErr = withCode(ExitFailure, fmt.Errorf("serving the API: %w", err))
	}
	httpCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), httpShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(httpCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		e.logger.Warn("stopping the API", "error", err)
	}
	jobsCtx, cancelJobs := context.WithTimeout(context.WithoutCancel(ctx), jobsShutdownTimeout)
	defer cancelJobs()
	if err := svc.Close(jobsCtx); err != nil {
		return errors.Join(runErr, withCode(ExitFailure, fmt.Errorf("stopping the job service: %w", err)))
	}
	return runErr
}

// startBroker starts the embedded NATS JetStream broker under
// <data-dir>/broker, or connects to --nats-url.
func startBroker(ctx context.Context, e *env, f serverFlags) (*pubsub.Broker, error) {
	if f.natsURL != "" {
		b, err := pubsub.Connect(ctx, f.natsURL, e.logger)
		if err != nil {
			return nil, withCode(ExitFailure, fmt.Errorf("--nats-url: %w", err))
		}
		return b, nil
	}
	b, err := pubsub.StartEmbedded(ctx, pubsub.Options{StoreDir: filepath.Join(f.dataDir, "broker"), Logger: e.logger})
	if err != nil {
		return nil, withCode(ExitFailure, fmt.Errorf("starting the embedded broker: %w", err))
	}
	return b, nil
}

// deadLetters publishes the rejects of server jobs to their dead-letter
// topic, weir.deadletter.<job name>, de-duplicated by source position so a
// replay after a restart publishes a reject once.
type deadLetters struct{ b *pubsub.Broker }

// PublishDeadLetter implements service.DeadLetterPublisher.
func (d deadLetters) PublishDeadLetter(ctx context.Context, jobName, _ string, r runner.Reject) error {
	_, err := d.b.PublishReject(ctx, jobName, r, pubsub.RejectID(r))
	return err
}
