package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/runner/contract"

	"github.com/weir-dev/weir/api"
	"github.com/weir-dev/weir/console"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/io/pubsub/pubsubgrpc"
	"github.com/weir-dev/weir/io/pubsub/pubsubrest"
	"github.com/weir-dev/weir/service"
	"github.com/weir-dev/weir/state"
	"github.com/weir-dev/weir/yamlpipe"
)

// Defaults of Config.
const (
	DefaultListen = "127.0.0.1:7070"
	// DefaultShutdownTimeout bounds the final checkpoints of every job at
	// shutdown (and at a release).
	DefaultShutdownTimeout = 2 * time.Minute
	// httpShutdownTimeout bounds in-flight API requests at shutdown.
	httpShutdownTimeout = 10 * time.Second
)

// Config configures a Process. Zero values take the documented defaults.
type Config struct {
	// DataDir is the data directory. Default service.DefaultDataDir.
	DataDir string
	// Listen is the API's address; port 0 lets the system choose.
	// Default DefaultListen.
	Listen string
	// CheckpointInterval is the jobs' checkpoint interval. Default
	// service.DefaultCheckpointInterval.
	CheckpointInterval time.Duration
	// IdleCheckpointInterval is how often a job that processed nothing
	// since its last checkpoint takes one; 0: 30 checkpoint intervals.
	IdleCheckpointInterval time.Duration
	// MaxSinkBuffer is the most a job's buffering sinks hold between two
	// checkpoints, in bytes (service.Options); 0: the default, 64 MiB.
	MaxSinkBuffer int64
	// MinReplaceInterval is the job service's minimum time between a job's
	// start and a same-name replacement of it (service.Options). Default
	// service.DefaultMinReplaceInterval; negative: none.
	MinReplaceInterval time.Duration
	// RollbackRetention is how long rollback snapshots are kept
	// (service.Options). Default service.DefaultRollbackRetention.
	RollbackRetention time.Duration
	// StorageRetryInterval is how often the job service retries a failed
	// state store or sink (service.Options). Default
	// service.DefaultStorageRetryInterval.
	StorageRetryInterval time.Duration
	// RehearseTraceMemory and RehearseTraceDir are the memory budget and
	// the spill directory of a pre-flight rehearsal's recorded stretch
	// (service.Options; --rehearse-trace-memory, --rehearse-trace-dir).
	// 0 and "": 256 MiB and the system's temporary directory.
	RehearseTraceMemory int64
	RehearseTraceDir    string
	// NATSURL is an external NATS JetStream server; empty: the embedded
	// broker under DATA_DIR/broker.
	NATSURL string
	// NATSCredentials authenticate the connection to NATSURL and set its
	// TLS (--nats-creds, --nats-nkey, --nats-user, --nats-password-file,
	// --nats-tls-ca, --nats-tls-cert, --nats-tls-key). Their files are out
	// of the pipelines' reach inside any file root.
	NATSCredentials NATSCredentials
	// NATSUnreachableAfter is how long a running job's Pub/Sub reads ride
	// out a lost connection to NATSURL (the client reconnects) before the
	// job waits for it under CONNECTOR_UNAVAILABLE
	// (--nats-unreachable-after); 0: pubsub.DefaultUnreachableAfter.
	NATSUnreachableAfter time.Duration
	// Cluster, when set, makes the process a member of the weir cluster
	// of that name over NATSURL (a NATS JetStream cluster): one member
	// leads and runs every job, the others keep a replica of its state
	// store and forward the API to it, and take over when it is lost
	// (cluster.go).
	Cluster string
	// ClusterLeaseTTL is the leader's lease (default
	// cluster.DefaultLeaseTTL): a member takes over after the leader did
	// not renew it for this long.
	ClusterLeaseTTL time.Duration
	// ClusterReplicas is how many NATS servers keep the cluster's log,
	// bucket, topics and subscriptions; 0: three on a NATS cluster, one
	// on a single NATS server.
	ClusterReplicas int
	// ClusterBaseEvery is how many bytes of log the leader appends between
	// two base images, after each of which the log is cut (0:
	// cluster.DefaultBaseEvery).
	ClusterBaseEvery int64
	// AdvertiseURL is the API URL the other members forward requests to
	// while this member leads; default the listen address's URL (which
	// must then be a concrete address, not 0.0.0.0).
	AdvertiseURL string
	// ClusterTLSCA is a PEM file of the CA that signed the members' API
	// certificates: a member trusts it, instead of the system's roots,
	// when it forwards a request to an https:// leader.
	ClusterTLSCA string
	// Logger receives the process's logs. Default slog.Default().
	Logger *slog.Logger
	// Program builds the pipelines of Go program jobs (service.Options.Program).
	Program service.ProgramLoader
	// Kind is KindServer (default) or KindProgram; a program's process
	// serves POST /v1/process:release.
	Kind string
	// JobName and ProgramPath describe a program in the control file.
	JobName     string
	ProgramPath string
	// Lock is the data directory's lock when the caller already holds it
	// (LockDataDir); nil: Open takes it, failing with ErrDataDirLocked when
	// another process holds it.
	Lock *DirLock
	// ShutdownTimeout bounds the final checkpoints. Default
	// DefaultShutdownTimeout.
	ShutdownTimeout time.Duration

	// AuthTokenFile holds the bearer tokens the API accepts (see
	// api.GuardConfig.TokenFile). A listen address beyond loopback needs
	// it or GenerateAuthToken (ErrAuthRequired).
	AuthTokenFile string
	// GenerateAuthToken uses DATA_DIR/auth-token as the token file,
	// writing a new random token into it (0600) when it does not exist
	// (GeneratedToken returns it then).
	GenerateAuthToken bool
	// AuthExempt are the paths served without a token (--auth-exempt).
	AuthExempt []string
	// AllowedHosts are further host names the Host header may carry
	// (--allowed-hosts).
	AllowedHosts []string
	// RequestsPerSecond and RequestBurst limit each client IP's requests
	// (api.GuardConfig; 0: the defaults, negative rate: off).
	RequestsPerSecond float64
	RequestBurst      int
	// BodyReadTimeout bounds the reading of a request body (default
	// api.DefaultBodyReadTimeout).
	BodyReadTimeout time.Duration
	// MaxJobs, MaxTopics and MaxSubscriptions bound the active jobs, the
	// topics and the subscriptions clients may create (api.Limits); 0
	// takes api.DefaultMaxObjects, a negative value is no limit.
	MaxJobs, MaxTopics, MaxSubscriptions int
	// MaxConnections bounds the open connections of the API's and the
	// Pub/Sub gRPC API's listeners together, MaxConnectionsPerAddress those
	// of one client address; a connection past a cap is closed as soon as
	// it is accepted (conns.go). 0 takes the default: for MaxConnections
	// the process's descriptor limit less a reserve for the data
	// directory, the broker and sinks (a quarter, at least 128), at most
	// MaxDefaultConnections; DefaultMaxConnectionsPerAddress. A negative
	// value is no cap; MaxConnections never exceeds the descriptor limit
	// less its reserve.
	MaxConnections, MaxConnectionsPerAddress int
	// ReadHeaderTimeout bounds the arrival of a request's headers (and of
	// a TLS handshake); IdleTimeout closes a kept-alive connection without
	// a new request. Defaults DefaultReadHeaderTimeout, DefaultIdleTimeout.
	ReadHeaderTimeout, IdleTimeout time.Duration

	// PubSubGRPCListen is the address of Google's Pub/Sub v1 gRPC API over
	// the broker (package pubsubgrpc; `weir server` defaults to
	// DefaultPubSubGRPCListen); "": not served. A busy port is a warning. An
	// address beyond loopback needs PubSubGRPCTLSCert/Key and a token.
	PubSubGRPCListen string
	// PubSubProject, when set, is the only project ID the gRPC API accepts.
	PubSubProject string
	// PubSubGRPCTLSCert and PubSubGRPCTLSKey are PEM files: the gRPC API
	// serves TLS with them.
	PubSubGRPCTLSCert, PubSubGRPCTLSKey string
	// FileRoots are the directories the file paths of submitted pipelines
	// may lead into (--file-roots); nil: the current directory and the
	// data directory. The data directory's own files (state, broker,
	// process files, the generated token) and the token and TLS key files
	// are out of reach inside any root.
	FileRoots []string
	// AllowedSQLHosts are the hosts PostgreSQL DSNs of submitted pipelines
	// may name (--allowed-sql-hosts: names, IPs, CIDR prefixes); nil:
	// loopback (yamlpipe.NewAccess).
	AllowedSQLHosts []string
	// JinjaSandbox renders the Jinja templates the server is sent (an
	// update's jinja_variables) in child processes, within the render
	// budgets' memory and time; `weir server` sets it to its own binary.
	// nil: in the server's process, where only the range, output and
	// recursion budgets hold (see docs/SECURITY.md, "Budgets").
	JinjaSandbox *yamlpipe.JinjaSandbox
	// TLSCertFile and TLSKeyFile, both or neither, make the API serve
	// HTTPS with that PEM certificate (chain) and key, read again when
	// they change (--tls-cert, --tls-key).
	TLSCertFile, TLSKeyFile string
}

// Stop says why Wait returned.
type Stop int

// Reasons Wait returns.
const (
	// StopSignal: SIGTERM or SIGINT arrived.
	StopSignal Stop = iota + 1
	// StopContext: the context given to Wait ended.
	StopContext
	// StopReleased: a new build took the data directory over (the jobs
	// are checkpointed and the service closed already).
	StopReleased
	// StopFailed: the API stopped serving (Wait's error says why).
	StopFailed
)

// Process is one running weir process (see the package documentation).
// Open, then Serve, then Wait, then Close.
type Process struct {
	cfg    Config
	log    *slog.Logger
	dir    string
	ln     net.Listener
	lock   *DirLock
	broker *pubsub.Broker
	// svc is the job service: opened by Open, or, in a cluster, once this
	// member leads (svcMu guards it then: see cluster.go).
	svcMu  sync.Mutex
	svc    *service.Service
	member *clusterMember // nil outside a cluster
	srv    *http.Server
	// endStreams ends the API's event follow streams (api.Server.EndStreams),
	// which would hold a release or a shutdown open; nil before listening.
	endStreams func()
	gate       gate
	guard      *api.Guard
	conns      *connLimiter
	certs      *certReloader      // nil: plain HTTP
	grpc       *pubsubgrpc.Server // nil: the Pub/Sub gRPC API is not served
	grpcLn     net.Listener
	policy     *yamlpipe.Access // what submitted pipelines may touch
	// token is the token this start generated (GenerateAuthToken), "" if
	// none was generated.
	token string

	serveErr chan error
	// released is closed once a release stopped the backends.
	released chan struct{}

	stopOnce sync.Once
	stopErr  error
}

// Open listens on cfg.Listen, takes the data directory's lock (unless the
// caller holds it), starts the broker and opens the job service, which
// resumes the YAML jobs left running. Nothing is served yet (Serve).
func Open(ctx context.Context, cfg Config) (_ *Process, err error) {
	if cfg.DataDir == "" {
		cfg.DataDir = service.DefaultDataDir
	}
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Kind == "" {
		cfg.Kind = KindServer
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	if cfg.CheckpointInterval == 0 {
		cfg.CheckpointInterval = service.DefaultCheckpointInterval
	}
	if cfg.CheckpointInterval < 10*time.Millisecond {
		return nil, fmt.Errorf("checkpoint interval %s: want at least 10ms", cfg.CheckpointInterval)
	}
	dir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("resolving the data directory: %w", err)
	}
	if err := checkAuthConfig(cfg); err != nil {
		return nil, err
	}
	if err := checkPubSubGRPCConfig(cfg); err != nil {
		return nil, err
	}
	if err := checkNATSConfig(cfg); err != nil {
		return nil, err
	}
	if (cfg.TLSCertFile == "") != (cfg.TLSKeyFile == "") {
		return nil, ErrTLSConfig
	}
	if cfg.ReadHeaderTimeout <= 0 {
		cfg.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	p := &Process{cfg: cfg, log: cfg.Logger, dir: dir, lock: cfg.Lock, serveErr: make(chan error, 1), released: make(chan struct{})}
	fdLimit, fdKnown := descriptorLimit()
	total, perAddr, notes := connCaps(cfg.MaxConnections, cfg.MaxConnectionsPerAddress, fdLimit, fdKnown)
	for _, n := range notes {
		p.log.Warn(n)
	}
	p.conns = newConnLimiter(total, perAddr, p.log)
	defer func() {
		if err != nil {
			err = errors.Join(err, p.stopBackends(context.WithoutCancel(ctx)))
			if p.ln != nil {
				p.ln.Close()
			}
		}
	}()
	if p.ln, err = net.Listen("tcp", cfg.Listen); err != nil {
		return nil, fmt.Errorf("listening on %s: %w (is another weir process using it? choose another address with --listen)", cfg.Listen, err)
	}
	if p.lock == nil {
		if p.lock, err = TryLockDataDir(dir); err != nil {
			return nil, InUseError(dir, err)
		}
	}
	if err := chmodPrivate(dir); err != nil {
		return nil, fmt.Errorf("making the data directory private: %w", err)
	}
	if p.guard, err = p.newGuard(); err != nil {
		return nil, err
	}
	if cfg.TLSCertFile != "" {
		if p.certs, err = newCertReloader(cfg.TLSCertFile, cfg.TLSKeyFile, p.log); err != nil {
			return nil, err
		}
	}
	access, err := p.access()
	if err != nil {
		return nil, err
	}
	if p.broker, err = startBroker(ctx, cfg, dir); err != nil {
		return nil, err
	}
	p.policy = access
	if cfg.Cluster != "" {
		// The service opens once this member leads (cluster.go).
		if p.member, err = p.joinCluster(ctx); err != nil {
			return nil, err
		}
	} else if p.svc, err = p.openService(ctx, nil); err != nil {
		return nil, err
	}
	// After the service and the broker created what they create (0755
	// directories and 0644 files, from older versions too).
	if err := tightenDataDir(dir, p.log); err != nil {
		return nil, err
	}
	return p, nil
}

// openService opens the job service on the data directory; repl, when
// set, is the cluster's log its store writes through.
func (p *Process) openService(ctx context.Context, repl state.Replicator) (*service.Service, error) {
	cfg := p.cfg
	svc, err := service.Open(ctx, service.Options{DataDir: p.dir, CheckpointInterval: cfg.CheckpointInterval, IdleCheckpointInterval: cfg.IdleCheckpointInterval, MaxSinkBuffer: cfg.MaxSinkBuffer, Logger: cfg.Logger,
		MinReplaceInterval: cfg.MinReplaceInterval, RollbackRetention: cfg.RollbackRetention, StorageRetryInterval: cfg.StorageRetryInterval, Broker: p.broker, DeadLetter: deadLetters{p.broker}, Program: cfg.Program, Access: p.policy,
		MaxJobs: objectLimit(cfg.MaxJobs), Replicator: repl, RehearseTraceMemory: cfg.RehearseTraceMemory, RehearseTraceDir: cfg.RehearseTraceDir})
	if err != nil {
		return nil, fmt.Errorf("starting the job service: %w", err)
	}
	return svc, nil
}

// newGuard builds the API's guard (authentication, rate limits, browser
// protections), generating the token file when asked.
func (p *Process) newGuard() (*api.Guard, error) {
	tokenFile := p.cfg.AuthTokenFile
	if p.cfg.GenerateAuthToken {
		path, tok, created, err := ensureAuthToken(p.dir)
		if err != nil {
			return nil, err
		}
		tokenFile, p.token = path, tok
		if !created {
			p.log.Info("using the auth token generated before", "file", path)
		}
	}
	host, _, _ := net.SplitHostPort(p.cfg.Listen)
	g, err := api.NewGuard(api.GuardConfig{TokenFile: tokenFile, Exempt: p.cfg.AuthExempt, ListenHost: host,
		AllowedHosts: p.cfg.AllowedHosts, RequestsPerSecond: p.cfg.RequestsPerSecond, RequestBurst: p.cfg.RequestBurst,
		BodyReadTimeout: p.cfg.BodyReadTimeout, Logger: p.log,
		// A Pub/Sub publish of 10 MB, as Google's takes, is larger than
		// the API's other requests; pubsubrest bounds it.
		LargeBodyPrefix: pubsubrest.Prefix, LargeBodyBytes: pubsubrest.MaxBodyBytes})
	if err != nil {
		return nil, fmt.Errorf("--auth-token-file: %w", err)
	}
	return g, nil
}

// access builds what submitted pipelines may touch: the file roots
// (default: the current directory and the data directory) less the
// server's own files, and the allowed SQL hosts.
func (p *Process) access() (*yamlpipe.Access, error) {
	roots := p.cfg.FileRoots
	if roots == nil {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("--file-roots: the default root, the current directory: %w", err)
		}
		roots = []string{wd, p.dir}
	}
	reserved := []string{filepath.Join(p.dir, "state"), filepath.Join(p.dir, "broker"), filepath.Join(p.dir, AuthTokenFileName),
		filepath.Join(p.dir, ControlFileName), filepath.Join(p.dir, LockFile), p.cfg.AuthTokenFile, p.cfg.TLSKeyFile, p.cfg.PubSubGRPCTLSKey}
	reserved = append(reserved, p.cfg.NATSCredentials.Files()...)
	a, err := yamlpipe.NewAccess(roots, reserved, p.cfg.AllowedSQLHosts)
	if err != nil {
		return nil, fmt.Errorf("--file-roots or --allowed-sql-hosts: %w", err)
	}
	a.Jinja = p.cfg.JinjaSandbox
	return a, nil
}

// GeneratedToken returns the token GenerateAuthToken wrote at this start,
// to show once; "" when none was written (no generation, or the file
// existed already).
func (p *Process) GeneratedToken() string { return p.token }

// TokenFile returns the file of the tokens the API accepts, "" when it
// serves without authentication.
func (p *Process) TokenFile() string {
	if p.cfg.GenerateAuthToken {
		return filepath.Join(p.dir, AuthTokenFileName)
	}
	return p.cfg.AuthTokenFile
}

// InUseError words err, a failure to take dir's lock, for the user: it
// names the process the control file describes.
func InUseError(dir string, err error) error {
	if !errors.Is(err, ErrDataDirLocked) {
		return err
	}
	if c, cerr := ReadControlFile(dir); cerr == nil {
		what := "weir server"
		if c.Kind == KindProgram {
			what = fmt.Sprintf("program %s (job %s)", c.Program, c.JobName)
		}
		return fmt.Errorf("data directory %s is in use by %s, process %d at %s: %w", dir, what, c.PID, c.Address, err)
	}
	return fmt.Errorf("data directory %s is in use by another process: %w", dir, err)
}

// NATSCredentials are the credential and TLS files of an external NATS
// server (Config.NATSCredentials).
type NATSCredentials = pubsub.Credentials

// ErrNATSConfig: the external NATS options cannot work (credentials
// without --nats-url, two ways to authenticate, a half TLS pair). Fix the
// flags.
var ErrNATSConfig = errors.New("invalid NATS options")

// checkNATSConfig checks the external NATS options before anything starts.
func checkNATSConfig(cfg Config) error {
	if cfg.NATSURL == "" {
		if cfg.NATSCredentials != (pubsub.Credentials{}) {
			return fmt.Errorf("--nats-creds, --nats-nkey, --nats-user and --nats-tls-* need --nats-url (the embedded broker takes none): %w", ErrNATSConfig)
		}
		return nil
	}
	if err := (pubsub.ConnectOptions{URL: cfg.NATSURL, Credentials: cfg.NATSCredentials}).Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrNATSConfig, err)
	}
	return nil
}

// startBroker starts the embedded NATS JetStream broker under
// DATA_DIR/broker, or connects to cfg.NATSURL.
func startBroker(ctx context.Context, cfg Config, dir string) (*pubsub.Broker, error) {
	if cfg.NATSURL != "" {
		replicas := 0
		if cfg.Cluster != "" {
			replicas = cfg.ClusterReplicas
			if replicas == 0 {
				replicas = pubsub.ReplicasAuto
			}
		}
		// A NATS server that does not answer yet (both started at a
		// machine's boot) is waited for as long as a lost connection is.
		wait := cfg.NATSUnreachableAfter
		if wait <= 0 {
			wait = pubsub.DefaultUnreachableAfter
		}
		b, err := pubsub.ConnectWith(ctx, pubsub.ConnectOptions{URL: cfg.NATSURL, Credentials: cfg.NATSCredentials, Logger: cfg.Logger, Replicas: replicas,
			UnreachableAfter: cfg.NATSUnreachableAfter, StartWait: wait})
		if err != nil {
			return nil, fmt.Errorf("--nats-url: %w", err)
		}
		return b, nil
	}
	b, err := pubsub.StartEmbedded(ctx, pubsub.Options{StoreDir: filepath.Join(dir, "broker"), Logger: cfg.Logger,
		RecoverInterval: cfg.StorageRetryInterval, DiskCheckInterval: cfg.StorageRetryInterval})
	if err != nil {
		return nil, fmt.Errorf("starting the embedded broker: %w", err)
	}
	return b, nil
}

// Service returns the job service.
//
// In a cluster it is nil until this member leads.
func (p *Process) Service() *service.Service {
	p.svcMu.Lock()
	defer p.svcMu.Unlock()
	return p.svc
}

// DataDir returns the absolute data directory.
func (p *Process) DataDir() string { return p.dir }

// Address returns the API's base URL, http://host:port (https:// with TLS).
func (p *Process) Address() string {
	if p.certs != nil {
		return "https://" + p.ln.Addr().String()
	}
	return "http://" + p.ln.Addr().String()
}

// Serve starts serving the API in the background and writes the control
// file.
func (p *Process) Serve() error {
	opts := []api.ServerOption{api.WithPubSub(p.broker), api.WithLimits(api.Limits{
		Topics: objectLimit(p.cfg.MaxTopics), Subscriptions: objectLimit(p.cfg.MaxSubscriptions)})}
	if p.cfg.Kind == KindProgram {
		opts = append(opts, api.WithRelease(p.release))
	}
	if p.member != nil {
		opts = append(opts, api.WithCollector(newClusterCollector(p.member)))
	}
	if err := p.newPubSubAPI(); err != nil {
		return err
	}
	// apiFor is the API over a job service, with Pub/Sub's REST surface
	// under /v1/projects/ behind the same guard.
	apiFor := func(svc *service.Service) (http.Handler, func()) {
		h := api.NewServer(svc, p.log, opts...)
		return pubsubrest.Mount(h, pubsubrest.New(p.grpc, p.log)), h.EndStreams
	}
	// The console's pages hold no data and ask for the token the API
	// calls they make need, so their guard keeps the Host, Origin, rate
	// and header rules but asks no token.
	host, _, _ := net.SplitHostPort(p.cfg.Listen)
	pages, err := api.NewGuard(api.GuardConfig{ListenHost: host, AllowedHosts: p.cfg.AllowedHosts,
		RequestsPerSecond: p.cfg.RequestsPerSecond, RequestBurst: p.cfg.RequestBurst, Logger: p.log})
	if err != nil {
		return fmt.Errorf("the console's guard: %w", err)
	}
	var inner http.Handler
	if p.member != nil {
		inner = p.member.handler(apiFor)
	} else {
		inner, p.endStreams = apiFor(p.svc)
		inner = notClustered(inner)
	}
	handler := console.Mount(p.guard.Wrap(p.gate.wrap(inner)), pages.Wrap(console.Handler()))
	// Headers must arrive within ReadHeaderTimeout and a body within the
	// guard's BodyReadTimeout; no ReadTimeout or WriteTimeout, which would
	// cut long requests (a release waits for every job's checkpoint). The
	// connections are capped below the descriptor limit (conns.go).
	p.srv = &http.Server{Handler: handler, ReadHeaderTimeout: p.cfg.ReadHeaderTimeout, IdleTimeout: p.cfg.IdleTimeout}
	if p.endStreams != nil {
		p.srv.RegisterOnShutdown(p.endStreams)
	}
	ln := p.conns.wrap(p.ln)
	if p.certs != nil {
		p.srv.TLSConfig = p.certs.tlsConfig()
		ln = tls.NewListener(ln, p.srv.TLSConfig)
	}
	go func() { p.serveErr <- p.srv.Serve(ln) }()
	if err := p.servePubSubGRPC(); err != nil {
		return err
	}
	if p.member != nil {
		p.srv.RegisterOnShutdown(p.member.endStreams)
		p.member.start()
	}
	c := &ControlFile{PID: os.Getpid(), Address: p.Address(), Kind: p.cfg.Kind, JobName: p.cfg.JobName,
		Program: p.cfg.ProgramPath, StartTime: time.Now().UTC()}
	if err := writeControlFile(p.dir, c); err != nil {
		return err
	}
	p.log.Info("weir process serving", "listen", p.ln.Addr().String(), "data_dir", p.dir, "kind", p.cfg.Kind)
	return nil
}

// Wait blocks until SIGTERM or SIGINT, the end of ctx, a release, or a
// failure of the API, and says which.
func (p *Process) Wait(ctx context.Context) (Stop, error) {
	sig, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	select {
	case <-sig.Done():
		p.log.Info("shutting down: checkpointing every job")
		return StopSignal, nil
	case <-ctx.Done():
		return StopContext, nil
	case <-p.released:
		return StopReleased, p.stopErr
	case err := <-p.serveErr:
		return StopFailed, fmt.Errorf("serving the API: %w", err)
	case err := <-p.member.failed():
		return StopFailed, err
	}
}

// Close stops the API, checkpoints every job and closes the service
// (jobs stay RUNNING and resume on the next start), stops the broker,
// removes the control file and releases the lock. ctx bounds nothing
// (the bounds are the configuration's); it carries values only.
func (p *Process) Close(ctx context.Context) error {
	var errs []error
	if p.srv != nil {
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), httpShutdownTimeout)
		defer cancel()
		if err := p.srv.Shutdown(hctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.log.Warn("stopping the API", "error", err)
		}
	}
	errs = append(errs, p.stopBackends(ctx))
	if p.ln != nil {
		p.ln.Close()
	}
	return errors.Join(errs...)
}

// release serves POST /v1/process:release once the check passed: no new
// request gets through, in-flight ones finish, then every job is
// checkpointed and the data directory freed.
func (p *Process) release(ctx context.Context) error {
	p.log.Info("a new build takes the data directory over: checkpointing every job and releasing it")
	if p.endStreams != nil {
		p.endStreams()
	}
	p.gate.close()
	err := p.stopBackends(ctx)
	select {
	case <-p.released:
	default:
		close(p.released)
	}
	return err
}

// stopBackends closes the service (checkpointing every job), the broker,
// the control file and the lock, once.
func (p *Process) stopBackends(ctx context.Context) error {
	p.stopOnce.Do(func() {
		var errs []error
		p.stopPubSubGRPC(ctx)
		if p.member != nil {
			// Stops the campaign (or the leadership's loop) first: the
			// service is then set for good.
			p.member.stopRunning()
		}
		if svc := p.Service(); svc != nil {
			timeout := p.cfg.ShutdownTimeout
			if p.member.lostLeadership() {
				// Nothing can be checkpointed any more: the log refuses.
				timeout = httpShutdownTimeout
			}
			jctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
			if err := svc.Close(jctx); err != nil {
				errs = append(errs, fmt.Errorf("stopping the job service: %w", err))
			}
			cancel()
		}
		if p.member != nil {
			// After the service's last checkpoints: the lease goes last, so
			// the next leader resumes the jobs from them.
			errs = append(errs, p.member.leave(ctx))
		}
		if p.broker != nil {
			bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), httpShutdownTimeout)
			if err := p.broker.Shutdown(bctx); err != nil {
				p.log.Warn("stopping the broker", "error", err)
			}
			cancel()
		}
		if p.srv != nil {
			if err := removeControlFile(p.dir); err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) == 0 {
			// With a job service that failed to stop, the store may still be
			// open: the lock goes with the process.
			errs = append(errs, p.lock.Unlock())
		}
		p.stopErr = errors.Join(errs...)
	})
	return p.stopErr
}

// gate lets API requests through until close, which waits for the ones in
// flight: after a release the service is closed, and no request may reach
// it. The release route itself is not gated.
type gate struct {
	mu       sync.Mutex
	closed   bool           // guarded by mu
	inFlight sync.WaitGroup // Add under mu
}

func (g *gate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.inFlight.Add(1)
	return true
}

func (g *gate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.inFlight.Wait()
}

func (g *gate) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/process:release" {
			h.ServeHTTP(w, r)
			return
		}
		if !g.enter() {
			b, _ := json.Marshal(api.ErrorBody{Error: api.ErrorDetail{Code: errcode.ShuttingDown,
				Message: "this process is handing its data directory over to a new build; retry against the new process"}})
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write(append(b, '\n'))
			return
		}
		defer g.inFlight.Done()
		h.ServeHTTP(w, r)
	})
}

// deadLetters publishes the rejects of jobs to their dead-letter topic,
// weir.deadletter.<job name>, de-duplicated by source position so a replay
// after a restart publishes a reject once.
type deadLetters struct{ b *pubsub.Broker }

// PublishDeadLetter implements service.DeadLetterPublisher.
func (d deadLetters) PublishDeadLetter(ctx context.Context, jobName, _ string, r contract.Reject) error {
	_, err := d.b.PublishReject(ctx, jobName, r, pubsub.RejectID(r))
	return err
}

// objectLimit is the limit --max-jobs, --max-topics or --max-subscriptions
// n sets: 0 is the default (api.DefaultMaxObjects), a negative one none.
func objectLimit(n int) int {
	if n == 0 {
		return api.DefaultMaxObjects
	}
	return n
}
