package pubsub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-dev/weir/mtime"
)

// Options configure an embedded broker. The zero value of every field but
// StoreDir is usable.
type Options struct {
	// StoreDir is the directory of the JetStream file store (created if
	// missing). Required: topics live there across restarts.
	StoreDir string
	// Listen is a host:port on which the embedded server also accepts
	// network clients (e.g. "127.0.0.1:4222" for the nats CLI or workers in
	// other processes). Default "": in-process connections only.
	Listen string
	// ServerName names the embedded server in logs. Default "weir".
	ServerName string
	// MaxStore caps the bytes JetStream may store on disk. Default 0: the
	// limit follows the disk: what the store holds plus three quarters of
	// the free space of StoreDir's file system, looked at again every
	// DiskCheckInterval and raised when the disk has more room (so a
	// broker that refused publishes when the disk was full accepts them
	// again once space returns, without a restart).
	MaxStore int64
	// DiskCheckInterval is how often a limit that follows the disk is
	// recomputed. Default DefaultDiskCheckInterval (30s).
	DiskCheckInterval time.Duration
	// RecoverInterval is how often an embedded broker checks that its
	// JetStream can write and, after a storage failure (a full disk),
	// brings it back (CheckStorage). Default DefaultRecoverInterval (10s,
	// the job service's storage retry interval).
	RecoverInterval time.Duration
	// diskFree reads the bytes available on a directory's file system
	// (default: statfs); tests replace it.
	diskFree func(dir string) (int64, error)
	// Logger receives the broker's and the server's logs. Default
	// slog.Default().
	Logger *slog.Logger
	// ReadyTimeout bounds how long StartEmbedded waits for the server to
	// accept connections. Default 10s.
	ReadyTimeout time.Duration
	// Clock gives the creation and expire times of subscription snapshots.
	// Default the wall clock; tests inject one.
	Clock mtime.Clock
}

// EnsureDefaults fills unset options with their defaults.
func (o *Options) EnsureDefaults() {
	if o.ServerName == "" {
		o.ServerName = "weir"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 10 * time.Second
	}
	if o.DiskCheckInterval <= 0 {
		o.DiskCheckInterval = DefaultDiskCheckInterval
	}
	if o.RecoverInterval <= 0 {
		o.RecoverInterval = DefaultRecoverInterval
	}
	if o.diskFree == nil {
		o.diskFree = statfsFree
	}
	if o.Clock == nil {
		o.Clock = mtime.WallClock{}
	}
}

// Validate reports options that cannot work.
func (o *Options) Validate() error {
	if o.StoreDir == "" {
		return fmt.Errorf("the embedded broker needs a store directory: %w", ErrInvalidConfig)
	}
	if o.Listen != "" {
		if _, _, err := splitHostPort(o.Listen); err != nil {
			return fmt.Errorf("listen address %q: %w: %w", o.Listen, ErrInvalidConfig, err)
		}
	}
	return nil
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("port %q is not a number from 0 to 65535", p)
	}
	return host, port, nil
}

// Broker is weir's Pub/Sub: a JetStream connection, to an embedded server
// (StartEmbedded) or an external one (Connect). Its methods are safe for
// concurrent use. Every method that talks to the server takes a context:
// cancelling it abandons the call (the server may still complete it).
type Broker struct {
	srv *server.Server // nil when connected to an external server
	nc  *nats.Conn
	js  jetstream.JetStream
	log *slog.Logger
	// clock gives subscription snapshots' times (Options.Clock).
	clock mtime.Clock
	// replicas is how many servers keep the streams and buckets the broker
	// creates (ConnectOptions.Replicas); set before use, then read only.
	replicas int
	// unreachableAfter is its sources' default SourceConfig.UnreachableAfter
	// (ConnectOptions.UnreachableAfter; 0: DefaultUnreachableAfter); set
	// before use, then read only.
	unreachableAfter time.Duration
	// conn tells sources that the connection went down (down is closed
	// then), so that a read waiting for its pull or its doorbell ends and
	// the next one can say how long it has been down
	// (SourceConfig.UnreachableAfter) rather than a pull's or an idle poll
	// interval's time later. Its mutex is a leaf, taken by the
	// connection's handlers and by connDown.
	conn struct {
		sync.Mutex
		down chan struct{} // closed at a disconnect; a new one at each reconnect
	}
	// expiry throttles ExpireSubscriptionSnapshots; last is guarded by
	// its mutex, a leaf.
	expiry struct {
		sync.Mutex
		last time.Time
	}

	// admin serialises the creation and deletion of topics and
	// subscriptions within the process: JetStream creates a stream or
	// consumer again without error when the configuration is the same, and
	// a subscription's name must be unique across topics, so a check and
	// the create it guards must not interleave with another's. A leaf: no
	// other lock is taken while it is held.
	admin sync.Mutex

	// acks keeps the per-message acknowledgement state (acked.go).
	acks ackState

	// storeLimit is set for an embedded broker whose storage limit follows
	// the disk (Options.MaxStore 0).
	storeLimit *storeLimit
	// recovery is set for an embedded broker: it brings JetStream back
	// after a storage failure (recover.go).
	recovery *recovery

	// idConflicts counts, per topic (string → *atomic.Int64), the
	// publishes dropped as duplicates of a stored message ID whose content
	// differed (topic.go).
	idConflicts sync.Map
	// recent remembers the data hash of the message IDs this broker
	// published lately, so that telling an ID conflict from a plain
	// repeat reads no stored message (topic.go).
	recent recentIDs
}

// StartEmbedded starts an in-process nats-server with JetStream and its file
// store under opts.StoreDir, and connects to it in-process. It blocks until
// the server accepts connections (at most opts.ReadyTimeout, or until ctx is
// done). Call Shutdown to stop it.
func StartEmbedded(ctx context.Context, opts Options) (*Broker, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	so := &server.Options{
		ServerName:        opts.ServerName,
		JetStream:         true,
		StoreDir:          opts.StoreDir,
		NoSigs:            true,
		DontListen:        opts.Listen == "",
		JetStreamMaxStore: max(opts.MaxStore, 0),
		MaxPayload:        EmbeddedMaxPayload,
	}
	var limit *storeLimit
	if opts.MaxStore == 0 {
		// An explicit limit (JetStream's dynamic one cannot be raised at
		// runtime), computed as JetStream would, then kept up with the disk.
		if err := os.MkdirAll(opts.StoreDir, 0o700); err != nil {
			return nil, fmt.Errorf("creating the broker's store directory: %w", err)
		}
		limit = &storeLimit{dir: opts.StoreDir, free: opts.diskFree, stop: make(chan struct{}), done: make(chan struct{})}
		v, err := limit.compute(dirBytes(opts.StoreDir))
		if err != nil {
			return nil, fmt.Errorf("sizing the broker's storage: %w", err)
		}
		limit.limit.Store(v)
		so.JetStreamMaxStore = v
		limit.srvOpts = so
	}
	if opts.Listen != "" {
		host, port, _ := splitHostPort(opts.Listen)
		so.Host, so.Port = host, port
	}
	srv, err := server.NewServer(so)
	if err != nil {
		return nil, fmt.Errorf("configuring the embedded broker: %w", err)
	}
	srv.SetLoggerV2(&serverLogger{log: opts.Logger.With("component", "nats-server")}, false, false, false)
	srv.Start()
	wait := opts.ReadyTimeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
		wait = time.Until(dl)
	}
	if !srv.ReadyForConnections(wait) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("the embedded broker did not start within %s (store %s): %w", wait, opts.StoreDir, ErrUnavailable)
	}
	nc, err := nats.Connect("", nats.InProcessServer(srv), nats.Name("weir"), nats.MaxReconnects(-1))
	if err != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("connecting to the embedded broker: %w: %w", ErrUnavailable, err)
	}
	b, err := newBroker(nc, srv, opts.Logger, opts.Clock)
	if err != nil {
		nc.Close()
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, err
	}
	if limit != nil {
		b.storeLimit = limit
		go b.followDisk(opts.DiskCheckInterval)
	}
	// What Server.Start gives EnableJetStream, to load it again after a
	// storage failure.
	b.recovery = &recovery{dir: opts.StoreDir, interval: opts.RecoverInterval, free: opts.diskFree,
		jsConfig: server.JetStreamConfig{StoreDir: so.StoreDir, SyncInterval: so.SyncInterval, SyncAlways: so.SyncAlways,
			Strict: !so.NoJetStreamStrict, MaxMemory: so.JetStreamMaxMemory, MaxStore: so.JetStreamMaxStore,
			Domain: so.JetStreamDomain, CompressOK: true, UniqueTag: so.JetStreamUniqueTag},
		stop: make(chan struct{}), done: make(chan struct{})}
	go b.watchStorage()
	b.log.Info("embedded broker started", "store_dir", opts.StoreDir, "listen", opts.Listen, "server_version", server.VERSION)
	return b, nil
}

func newBroker(nc *nats.Conn, srv *server.Server, logger *slog.Logger, clock mtime.Clock) (*Broker, error) {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(asyncWindow*2))
	if err != nil {
		return nil, fmt.Errorf("opening JetStream: %w", err)
	}
	b := &Broker{srv: srv, nc: nc, js: js, log: logger.With("component", "pubsub"), clock: clock}
	b.conn.down = make(chan struct{})
	nc.SetDisconnectErrHandler(func(*nats.Conn, error) {
		b.conn.Lock()
		select {
		case <-b.conn.down: // closed at an earlier disconnect
		default:
			close(b.conn.down)
		}
		b.conn.Unlock()
	})
	nc.SetReconnectHandler(func(*nats.Conn) {
		b.conn.Lock()
		select {
		case <-b.conn.down:
			b.conn.down = make(chan struct{})
		default: // never closed
		}
		b.conn.Unlock()
	})
	return b, nil
}

// connDown returns a channel that is closed once the connection goes down
// (already closed while it is down).
func (b *Broker) connDown() <-chan struct{} {
	b.conn.Lock()
	defer b.conn.Unlock()
	return b.conn.down
}

// EmbeddedMaxPayload is the largest message (data, attributes and ID) the
// embedded broker takes: Pub/Sub's 10 MB of data, with room for
// attributes. (NATS's default is 1 MiB; an external server's max_payload
// is its own.)
const EmbeddedMaxPayload = 10<<20 + 1<<20

// asyncWindow is the most asynchronous publishes the sink keeps in flight.
const asyncWindow = 2048

// Embedded reports whether the broker runs the server in-process.
func (b *Broker) Embedded() bool { return b.srv != nil }

// ServerVersion returns the version of the NATS server.
func (b *Broker) ServerVersion() string { return b.nc.ConnectedServerVersion() }

// Conn returns the underlying NATS connection, for tools that need it (the
// nats CLI's equivalents, metrics). Do not close it: Shutdown does.
func (b *Broker) Conn() *nats.Conn { return b.nc }

// Shutdown drains the connection (pending publishes and acknowledgements are
// flushed) and, for an embedded broker, stops the server. It blocks until
// done or ctx is done; in the latter case the connection is closed at once
// and the server still stops in the background.
func (b *Broker) Shutdown(ctx context.Context) error {
	b.stopFollowing()
	b.stopWatching()
	var errs []error
	if !b.nc.IsClosed() {
		closed := make(chan struct{})
		b.nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
		if err := b.nc.Drain(); err != nil {
			b.nc.Close()
		} else {
			select {
			case <-closed:
			case <-ctx.Done():
				b.nc.Close()
				errs = append(errs, fmt.Errorf("draining the broker connection: %w", ctx.Err()))
			}
		}
	}
	if b.srv != nil {
		b.srv.Shutdown()
		done := make(chan struct{})
		go func() {
			b.srv.WaitForShutdown()
			close(done)
		}()
		select {
		case <-done:
			b.log.Info("embedded broker stopped")
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("stopping the embedded broker: %w", ctx.Err()))
		}
	}
	return errors.Join(errs...)
}

// apiErr wraps an error from a JetStream call with what was being done,
// adding ErrUnavailable when the server could not be reached.
func apiErr(what string, err error) error {
	if storageFull(err) {
		return fmt.Errorf("%s: %w: %w", what, ErrStorageFull, err)
	}
	if errors.Is(err, nats.ErrConnectionClosed) {
		return fmt.Errorf("%s: %w: %w", what, ErrBrokerClosed, err)
	}
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
		errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, nats.ErrDisconnected) {
		return fmt.Errorf("%s: %w: %w", what, ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// serverLogger sends nats-server logs to slog.
type serverLogger struct{ log *slog.Logger }

func (l *serverLogger) Noticef(format string, v ...any) { l.log.Debug(trimLog(format, v)) }
func (l *serverLogger) Warnf(format string, v ...any)   { l.log.Warn(trimLog(format, v)) }
func (l *serverLogger) Fatalf(format string, v ...any)  { l.log.Error(trimLog(format, v)) }
func (l *serverLogger) Errorf(format string, v ...any)  { l.log.Error(trimLog(format, v)) }
func (l *serverLogger) Debugf(format string, v ...any)  { l.log.Debug(trimLog(format, v)) }
func (l *serverLogger) Tracef(format string, v ...any)  { l.log.Debug(trimLog(format, v)) }

func trimLog(format string, v []any) string {
	return strings.TrimSpace(fmt.Sprintf(format, v...))
}

// Replicas is how many NATS servers keep the streams and buckets the
// broker creates: one unless ConnectOptions.Replicas said more (or chose
// three on a NATS cluster).
func (b *Broker) Replicas() int {
	if b.replicas > 1 {
		return b.replicas
	}
	return 1
}
