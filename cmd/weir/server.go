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
	"github.com/spf13/pflag"

	"github.com/weir-dev/weir/duration"

	"github.com/weir-dev/weir/api"
	"github.com/weir-dev/weir/cluster"
	"github.com/weir-dev/weir/cmd/weir/internal/rehearsecmd"
	"github.com/weir-dev/weir/io/files"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/server"
	"github.com/weir-dev/weir/service"
)

// serverFlags are the flags of `weir server`.
type serverFlags struct {
	dataDir            string
	listen             string
	checkpointInterval time.Duration
	idleCheckpoint     time.Duration
	minReplaceInterval string
	rollbackRetention  string
	natsURL            string
	nats               server.NATSCredentials
	cluster            string
	clusterLease       time.Duration
	clusterReplicas    int
	clusterBaseEvery   int64
	advertiseURL       string
	clusterTLSCA       string
	authTokenFile      string
	generateAuthToken  bool
	authExempt         []string
	allowedHosts       []string
	rateLimit          float64
	maxJobs            int
	maxTopics          int
	maxSubscriptions   int
	maxConns           int
	maxConnsPerAddr    int
	readHeaderTimeout  time.Duration
	idleTimeout        time.Duration
	pubsubGRPCListen   string
	pubsubProject      string
	pubsubGRPCTLSCert  string
	pubsubGRPCTLSKey   string
	fileRoots          []string
	allowedSQLHosts    []string
	tlsCert, tlsKey    string

	// storageRetryInterval is --storage-retry-interval.
	storageRetryInterval time.Duration
	natsUnreachable      time.Duration

	// rehearseTraceMemory and rehearseTraceDir are
	// --rehearse-trace-memory and --rehearse-trace-dir.
	rehearseTraceMemory, rehearseTraceDir string
	// maxSinkBuffer is --max-sink-buffer, a byte size ("" for the default).
	maxSinkBuffer string
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
--listen 127.0.0.1:0 the port is chosen by the system.

On a loopback address (the default) the API needs no token: every local user
can use it. Any other address (0.0.0.0:P, [::]:P, :P, a host name) needs
--auth-token-file FILE or --generate-auth-token (which writes
DATA-DIR/auth-token once and prints the token once on stderr); clients send
it with --token-file or $WEIR_TOKEN. The token file is read again whenever it
changes. See docs/SECURITY.md.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServer(cmd.Context(), e, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dataDir, "data-dir", service.DefaultDataDir, "directory of the job registry, state and checkpoints")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:7070", "address of the HTTP API")
	fl.DurationVar(&f.checkpointInterval, "checkpoint-interval", service.DefaultCheckpointInterval, "how often every running job takes a checkpoint")
	fl.DurationVar(&f.idleCheckpoint, "idle-checkpoint-interval", 0, "how often a job that processed nothing since its last checkpoint takes one (default 30 checkpoint intervals)")
	fl.StringVar(&f.maxSinkBuffer, "max-sink-buffer", "", "the most a job's Pub/Sub, SQL, JDBC and Iceberg sinks hold between two checkpoints (64MiB, 1GiB, 512MB; default 64MiB): above it the job reads nothing until the next checkpoint commits what they hold, and a sink_backpressure event says so")
	fl.StringVar(&f.rollbackRetention, "rollback-retention", "24h", "how long the rollback snapshot of every update and replacement is kept (never less than the new job has run); weir jobs rollback starts from it")
	fl.StringVar(&f.minReplaceInterval, "min-replace-interval", "2m", "shortest time between a job's start and a replacement of it under the same name (stop-and-replace or parallel; guards against duplicates from retries); 0s: none")
	fl.StringVar(&f.natsURL, "nats-url", "", "URL of an external NATS JetStream server to use instead of the embedded broker (nats://user:pass@host:4222 for a password; tls:// for TLS)")
	addNATSFlags(fl, &f.nats)
	fl.DurationVar(&f.natsUnreachable, "nats-unreachable-after", pubsub.DefaultUnreachableAfter, "with --nats-url: how long a running job's Pub/Sub reads ride out a lost connection to NATS (the client reconnects) before the job waits for it under the condition CONNECTOR_UNAVAILABLE, retried every --storage-retry-interval; also how long a starting server waits for a NATS server that does not answer yet")
	fl.StringVar(&f.cluster, "cluster", "", "join the weir cluster of this name over --nats-url (a NATS JetStream cluster: give several URLs, comma-separated): one member leads and runs the jobs, the others keep a replica and take over when it is lost (docs/CLUSTER.md)")
	fl.DurationVar(&f.clusterLease, "cluster-lease", 0, "with --cluster: the leader's lease; a member takes over after the leader did not renew it for this long (default 4s)")
	fl.IntVar(&f.clusterReplicas, "cluster-replicas", 0, "with --cluster: how many NATS servers keep the cluster's log, topics and subscriptions (default 3 on a NATS cluster, 1 on a single NATS server)")
	fl.Int64Var(&f.clusterBaseEvery, "cluster-base-every", 0, "with --cluster: bytes of log the leader appends between two base images of its store, after each of which the log is cut (default 64 MiB)")
	fl.StringVar(&f.advertiseURL, "advertise-url", "", "with --cluster: the API URL the other members forward requests to while this member leads (default the --listen address)")
	fl.StringVar(&f.clusterTLSCA, "cluster-tls-ca", "", "with --cluster: PEM file of the CA that signed the members' API certificates (--tls-cert), trusted when a member forwards a request to an https:// leader, read again when the file changes (default the system's roots)")
	addAuthFlags(fl, &f)
	addPubSubGRPCFlags(fl, &f)
	fl.DurationVar(&f.storageRetryInterval, "storage-retry-interval", service.DefaultStorageRetryInterval, "after the state store failed (a full disk) or a sink's commit failed, how often weir probes and retries; the jobs resume by themselves once it works")
	fl.StringVar(&f.rehearseTraceMemory, "rehearse-trace-memory", "", "memory budget of the recorded stretch of a pre-flight rehearsal (weir_rehearse=required; 64MiB, 1GiB, 512MB; default 256MiB): beyond it, its older part spills to --rehearse-trace-dir")
	fl.StringVar(&f.rehearseTraceDir, "rehearse-trace-dir", "", "an existing directory a pre-flight rehearsal's recorded stretch spills to beyond --rehearse-trace-memory, as an unlinked file (default $TMPDIR); clients cannot choose it")
	return cmd
}

// runServer builds the process (package server), serves until SIGTERM or
// SIGINT (or ctx ends), then stops the API and suspends every job.
func runServer(ctx context.Context, e *env, f serverFlags) error {
	if f.checkpointInterval < 10*time.Millisecond {
		return usageErrorf("--checkpoint-interval %s: want at least 10ms", f.checkpointInterval)
	}
	if f.readHeaderTimeout <= 0 || f.idleTimeout <= 0 {
		return usageErrorf("--read-header-timeout %s, --idle-timeout %s: want positive durations", f.readHeaderTimeout, f.idleTimeout)
	}
	if f.storageRetryInterval < 10*time.Millisecond {
		return usageErrorf("--storage-retry-interval %s: want at least 10ms", f.storageRetryInterval)
	}
	if f.cluster == "" && (f.clusterLease != 0 || f.clusterReplicas != 0 || f.clusterBaseEvery != 0 || f.advertiseURL != "" || f.clusterTLSCA != "") {
		return usageErrorf("--cluster-lease, --cluster-replicas, --cluster-base-every, --advertise-url and --cluster-tls-ca go with --cluster")
	}
	if f.cluster != "" && f.natsURL == "" {
		return usageErrorf("--cluster %s needs --nats-url: the members meet on a NATS JetStream server or cluster", f.cluster)
	}
	if f.clusterLease < 0 || f.clusterReplicas < 0 || f.clusterBaseEvery < 0 {
		return usageErrorf("--cluster-lease %s, --cluster-replicas %d, --cluster-base-every %d: want positive values", f.clusterLease, f.clusterReplicas, f.clusterBaseEvery)
	}
	minReplace, err := duration.Parse(f.minReplaceInterval)
	if err != nil {
		return usageErrorf("--min-replace-interval: %w", err)
	}
	if minReplace == 0 {
		minReplace = -1 // none (0 means the default to the service)
	}
	rollbackRetention, err := duration.Parse(f.rollbackRetention)
	if err != nil || rollbackRetention <= 0 {
		return usageErrorf("--rollback-retention %q: want a positive duration (24h, 7d)", f.rollbackRetention)
	}
	maxSinkBuffer, err := parseMaxSinkBuffer(f.maxSinkBuffer)
	if err != nil {
		return err
	}
	traceMemory, traceDir, err := rehearsecmd.TraceBudget("--rehearse-trace-memory", f.rehearseTraceMemory, "--rehearse-trace-dir", f.rehearseTraceDir)
	if err != nil {
		return err
	}
	// SIGTERM or SIGINT from the start on, not only once serving: a signal
	// that arrives while the server opens (or just after it printed its
	// address) stops it cleanly too, every job checkpointed.
	sigCtx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	p, err := server.Open(sigCtx, server.Config{DataDir: f.dataDir, Listen: f.listen, CheckpointInterval: f.checkpointInterval, IdleCheckpointInterval: f.idleCheckpoint, MaxSinkBuffer: maxSinkBuffer,
		MinReplaceInterval: minReplace, RollbackRetention: rollbackRetention, NATSURL: f.natsURL, NATSCredentials: f.nats, NATSUnreachableAfter: f.natsUnreachable,
		Cluster: f.cluster, ClusterLeaseTTL: f.clusterLease, ClusterReplicas: f.clusterReplicas, ClusterBaseEvery: f.clusterBaseEvery, AdvertiseURL: f.advertiseURL, ClusterTLSCA: f.clusterTLSCA, Logger: e.logger, AuthTokenFile: f.authTokenFile, GenerateAuthToken: f.generateAuthToken,
		AuthExempt: f.authExempt, AllowedHosts: f.allowedHosts, RequestsPerSecond: f.rateLimit, RequestBurst: int(2 * f.rateLimit),
		MaxJobs: nonZero(f.maxJobs), MaxTopics: nonZero(f.maxTopics), MaxSubscriptions: nonZero(f.maxSubscriptions),
		MaxConnections: nonZero(f.maxConns), MaxConnectionsPerAddress: nonZero(f.maxConnsPerAddr),
		ReadHeaderTimeout: f.readHeaderTimeout, IdleTimeout: f.idleTimeout,
		PubSubGRPCListen: f.pubsubGRPCListen, PubSubProject: f.pubsubProject, PubSubGRPCTLSCert: f.pubsubGRPCTLSCert, PubSubGRPCTLSKey: f.pubsubGRPCTLSKey, StorageRetryInterval: f.storageRetryInterval,
		FileRoots: f.fileRoots, AllowedSQLHosts: f.allowedSQLHosts, TLSCertFile: f.tlsCert, TLSKeyFile: f.tlsKey, JinjaSandbox: jinjaSandbox(),
		RehearseTraceMemory: traceMemory, RehearseTraceDir: traceDir})
	if errors.Is(err, server.ErrAuthRequired) || errors.Is(err, server.ErrTLSConfig) || errors.Is(err, server.ErrNATSConfig) ||
		errors.Is(err, server.ErrClusterConfig) || errors.Is(err, cluster.ErrConfig) {
		return withCode(ExitUsage, err)
	}
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
	if tok := p.GeneratedToken(); tok != "" {
		fmt.Fprintf(e.stderr, "weir: generated an auth token in %s (shown this once; clients: --token-file %s or WEIR_TOKEN=...):\n%s\n", p.TokenFile(), p.TokenFile(), tok)
	}
	if err := p.Serve(); err != nil {
		return withCode(ExitFailure, errors.Join(err, p.Close(ctx)))
	}
	fmt.Fprintf(e.stdout, "weir server listening on %s (data dir %s)\n", p.Address(), p.DataDir())
	e.logger.Info("weir server started", "listen", p.Address(), "data_dir", p.DataDir())
	if a := p.PubSubGRPCAddress(); a != "" {
		fmt.Fprintf(e.stderr, "weir: Pub/Sub gRPC API on %s (Google's clients: PUBSUB_EMULATOR_HOST=%s)\n", a, a)
	}
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

// addAuthFlags declares the flags of the API's protections (shared by
// `weir server`; Go programs declare the same names, package weirx).
// addNATSFlags adds the credential and TLS flags of --nats-url.
func addNATSFlags(fl *pflag.FlagSet, c *server.NATSCredentials) {
	fl.StringVar(&c.CredsFile, "nats-creds", "", "with --nats-url: NATS .creds file (user JWT and NKEY seed) to authenticate with")
	fl.StringVar(&c.NKeyFile, "nats-nkey", "", "with --nats-url: file holding an NKEY user seed to authenticate with")
	fl.StringVar(&c.User, "nats-user", "", "with --nats-url: user name to authenticate with (password from --nats-password-file)")
	fl.StringVar(&c.PasswordFile, "nats-password-file", "", "with --nats-user: file holding the password")
	fl.StringVar(&c.TLSCAFile, "nats-tls-ca", "", "with --nats-url: PEM file of the CA that signed the NATS server's certificate (turns TLS on)")
	fl.StringVar(&c.TLSCertFile, "nats-tls-cert", "", "with --nats-url: PEM client certificate for mutual TLS (with --nats-tls-key)")
	fl.StringVar(&c.TLSKeyFile, "nats-tls-key", "", "PEM private key of --nats-tls-cert")
}

func addAuthFlags(fl *pflag.FlagSet, f *serverFlags) {
	fl.StringVar(&f.authTokenFile, "auth-token-file", "", "file of the bearer tokens the API accepts, one a line (read again when it changes); required beyond loopback unless --generate-auth-token")
	fl.BoolVar(&f.generateAuthToken, "generate-auth-token", false, "use DATA-DIR/"+server.AuthTokenFileName+" as the token file, creating it (0600, printed once on stderr) if it does not exist")
	fl.StringSliceVar(&f.authExempt, "auth-exempt", nil, "paths served without a token, comma-separated (e.g. /healthz,/metrics; a prefix ends in /)")
	fl.StringSliceVar(&f.allowedHosts, "allowed-hosts", nil, "host names the Host header may carry besides the listen address and loopback names, comma-separated")
	fl.Float64Var(&f.rateLimit, "rate-limit", api.DefaultRequestsPerSecond, "requests a second allowed per client IP (burst twice that); negative: no limit")
	fl.IntVar(&f.maxJobs, "max-jobs", api.DefaultMaxObjects, "most active jobs clients may submit (LIMIT_EXCEEDED past it); 0: no limit")
	fl.IntVar(&f.maxTopics, "max-topics", api.DefaultMaxObjects, "most topics clients may create (dead-letter topics not counted); 0: no limit")
	fl.IntVar(&f.maxSubscriptions, "max-subscriptions", api.DefaultMaxObjects, "most subscriptions clients may create; 0: no limit")
	fl.IntVar(&f.maxConns, "max-connections", server.DefaultMaxConnections(), "most open connections of the API and Pub/Sub gRPC listeners together, past which new ones are closed at once; the default is the descriptor limit (ulimit -n) less a quarter of it, at least 128, left to the data directory, the broker and sinks, and at most 8192; a higher value is lowered to that; 0: only that bound")
	fl.IntVar(&f.maxConnsPerAddr, "max-connections-per-address", server.DefaultMaxConnectionsPerAddress, "most open connections of one client address (behind a reverse proxy: of the proxy); 0: only --max-connections")
	fl.DurationVar(&f.readHeaderTimeout, "read-header-timeout", server.DefaultReadHeaderTimeout, "a connection's request headers (and TLS handshake) must arrive within this; a silent connection is closed after it")
	fl.DurationVar(&f.idleTimeout, "idle-timeout", server.DefaultIdleTimeout, "a kept-alive connection without a new request is closed after this")
	addAccessFlags(fl, f)
}

// addAccessFlags declares the flags of what submitted pipelines may touch
// and of TLS (shared with Go programs, package weirx, which declares the
// same names).
func addAccessFlags(fl *pflag.FlagSet, f *serverFlags) {
	fl.StringSliceVar(&f.fileRoots, "file-roots", nil, "directories the file paths of submitted pipelines may lead into, comma-separated (default: the current directory and the data directory)")
	fl.StringSliceVar(&f.allowedSQLHosts, "allowed-sql-hosts", nil, "hosts the PostgreSQL dsns of submitted pipelines may name: names, IPs, CIDR prefixes, comma-separated (default localhost,127.0.0.0/8,::1)")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "PEM certificate (chain) to serve the API over HTTPS with, read again when it changes (with --tls-key)")
	fl.StringVar(&f.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
}

// nonZero maps a --max-* flag to server.Config, where 0 is the default:
// the flag's 0 is no limit, as a negative value is.
func nonZero(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// addPubSubGRPCFlags declares the flags of the Pub/Sub gRPC API (shared
// with Go programs, package weirx, which declare the same names).
func addPubSubGRPCFlags(fl *pflag.FlagSet, f *serverFlags) {
	fl.StringVar(&f.pubsubGRPCListen, "pubsub-grpc-listen", server.DefaultPubSubGRPCListen, "address of Google's Pub/Sub v1 gRPC API over the broker (PUBSUB_EMULATOR_HOST for Google's clients); '' turns it off; a busy port is a warning")
	fl.StringVar(&f.pubsubProject, "pubsub-project", "", "the only project ID the Pub/Sub gRPC API accepts (default: any)")
	fl.StringVar(&f.pubsubGRPCTLSCert, "pubsub-grpc-tls-cert", "", "PEM certificate of the Pub/Sub gRPC API (with --pubsub-grpc-tls-key; required beyond loopback)")
	fl.StringVar(&f.pubsubGRPCTLSKey, "pubsub-grpc-tls-key", "", "PEM private key of the Pub/Sub gRPC API")
}

// parseMaxSinkBuffer reads --max-sink-buffer: "" is the default (0), else
// a positive byte size.
func parseMaxSinkBuffer(v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := files.ParseByteSize(v)
	if err != nil || n <= 0 {
		return 0, usageErrorf("--max-sink-buffer %q: want a positive byte size (64MiB, 1GiB, 512MB)", v)
	}
	return n, nil
}
