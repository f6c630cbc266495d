package pubsub

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/weir-dev/weir/mtime"
)

// DefaultRecoverInterval is how often an embedded broker checks that its
// JetStream can write and, after a storage failure, tries to bring it back
// (Options.RecoverInterval): the job service's default storage retry
// interval, so that the broker and the state store come back together.
const DefaultRecoverInterval = 10 * time.Second

// minRecoverFree is the free space below which the broker does not try to
// bring JetStream back: recovering the streams writes index files, and a
// disk still full would fail them again at once.
const minRecoverFree = 1 << 20

// recovery is an embedded broker's watch over its storage. A write that
// fails for lack of space ("no space left on device") leaves JetStream's
// stream in a write-error state in which it refuses (and does not answer)
// every later write until the stream is loaded again, and may switch
// JetStream off altogether; nothing in the server undoes that while the
// process lives. The broker loads JetStream again (ShutdownJetStream,
// EnableJetStream: the streams and consumers are recovered from the store)
// once the disk has room.
type recovery struct {
	dir      string
	interval time.Duration
	free     func(dir string) (int64, error)
	// jsConfig is the JetStream configuration the server started with.
	jsConfig server.JetStreamConfig
	// mu serialises checks (the ticker's, a publish's and direct calls) and
	// guards since and cause. Taken before the store limit's mu (never
	// the other way), no other lock.
	mu    sync.Mutex
	since time.Time // when the failure was seen first; zero while healthy
	cause string
	// unloaded: a reload of JetStream failed during this failure. A later
	// check that finds the broker healthy reloads it before calling it
	// recovered: a JetStream switched on by the server itself while a
	// reload was under way answered health checks while a stream's
	// consumers were missing to lookups and present to creations
	// (TestCLIServerFullDisk, once in a fresh-clone CI run).
	unloaded bool
	// failing mirrors !since.IsZero(), for publishes that must not wait
	// for mu.
	failing atomic.Bool
	// recoveries counts the times JetStream was brought back.
	recoveries atomic.Int64
	// closedReloads counts the reloads for a closed consumer
	// (reloadForClosedConsumer); lastClosedReload is the last one's time
	// (under mu).
	closedReloads    atomic.Int64
	lastClosedReload mtime.Time
	stop             chan struct{}
	done             chan struct{}
}

// storageProblem returns what keeps the embedded server's JetStream from
// writing ("" when it writes): JetStream switched off, or a stream in a
// write-error state. Other health findings (a server still starting or
// shutting down) are not storage problems and are left alone.
func (b *Broker) storageProblem() string {
	if !b.srv.JetStreamEnabled() {
		if b.srv.Running() {
			return "JetStream is switched off"
		}
		return ""
	}
	h := b.srv.Healthz(&server.HealthzOptions{Details: true})
	var problems []string
	for _, e := range h.Errors {
		if e.Type == server.HealthzErrorStream && strings.Contains(e.Error, "write error") {
			problems = append(problems, e.Error)
		}
	}
	return strings.Join(problems, "; ")
}

// StorageRecoveries returns how many times the embedded broker brought its
// JetStream back after a storage failure since it started.
func (b *Broker) StorageRecoveries() int64 {
	if b.recovery == nil {
		return 0
	}
	return b.recovery.recoveries.Load()
}

// StorageFailing reports whether the embedded broker's storage is failed
// (a full disk) and not yet brought back: publishes are refused with
// ErrStorageFull until it is.
func (b *Broker) StorageFailing() bool {
	return b.recovery != nil && b.recovery.failing.Load()
}

// CheckStorage checks that an embedded broker's JetStream can write and,
// after a storage failure (a full disk), brings it back once the disk has
// room: it raises the storage limit to the free space and loads JetStream
// again from its store, without a restart of the process; nothing that was
// stored is lost. It returns nil when the broker writes (again), an error
// wrapping ErrStorageFull while the disk is still full or the broker could
// not be brought back. The broker calls it every Options.RecoverInterval
// and when a publish fails; a connected (external) broker has nothing to
// check.
func (b *Broker) CheckStorage(ctx context.Context) error {
	r := b.recovery
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	problem := b.storageProblem()
	if problem == "" {
		if r.since.IsZero() {
			return nil
		}
		if !r.unloaded {
			b.markRecovered(r, "JetStream writes again")
			return nil
		}
		// Healthy to look at, but a reload failed during this failure:
		// reloaded below like any other before it counts as recovered.
		problem = r.cause
	}
	if r.since.IsZero() {
		r.since, r.cause = time.Now(), problem
		r.failing.Store(true)
		b.log.Error(fmt.Sprintf("the broker's storage failed: publishes are refused until the disk has room again; weir checks every %s and brings the broker back by itself", r.interval),
			"cause", problem, "store_dir", r.dir)
	}
	free, err := r.free(r.dir)
	if err != nil {
		return fmt.Errorf("the broker's storage failed (%s) and its free space cannot be read: %w: %w", problem, ErrStorageFull, err)
	}
	if free < minRecoverFree {
		b.log.Warn(fmt.Sprintf("the broker's storage is still unavailable: retrying in %s", r.interval), "cause", problem, "free_bytes", free)
		return fmt.Errorf("the broker's storage failed (%s) and its disk has %d bytes free: %w", problem, free, ErrStorageFull)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("bringing the broker's storage back: %w", err)
	}
	if err := b.restartJetStream(); err != nil {
		r.unloaded = true
		b.log.Warn(fmt.Sprintf("the broker's storage could not be brought back: retrying in %s", r.interval), "cause", problem, "error", err)
		return fmt.Errorf("bringing the broker's storage back after %s: %w: %w", problem, ErrStorageFull, err)
	}
	if again := b.storageProblem(); again != "" {
		b.log.Warn(fmt.Sprintf("the broker's storage is still unavailable after reloading JetStream: retrying in %s", r.interval), "cause", again)
		return fmt.Errorf("the broker's storage still fails after reloading JetStream (%s): %w", again, ErrStorageFull)
	}
	b.markRecovered(r, "JetStream reloaded from its store")
	return nil
}

// closedConsumerReloadEvery is the least time between two reloads of
// JetStream for a closed consumer.
const closedConsumerReloadEvery = 10 * mtime.Second

// reloadForClosedConsumer loads an embedded broker's JetStream again from
// its store when subscription sub answers "not found" to lookups and
// "exists" to creations, for good: a consumer that a storage failure
// closed but left registered in its stream (the server reports a closed
// consumer as missing, refuses a new one of its name, and deleting it does
// nothing), which a job would otherwise wait on until the process restarts
// (TestCLIServerFullDisk, in a fresh-clone CI run). Loading JetStream again
// builds the stream's consumers afresh from their store; nothing stored is
// lost, and the other subscriptions' readers reconnect as after a full
// disk. At most once every closedConsumerReloadEvery; a connected
// (external) broker is not reloaded. It reports whether it reloaded.
func (b *Broker) reloadForClosedConsumer(sub string) (bool, error) {
	r := b.recovery
	if r == nil {
		return false, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := b.clock.Now()
	if r.lastClosedReload != 0 && now.Before(r.lastClosedReload.Add(closedConsumerReloadEvery)) {
		return false, nil
	}
	r.lastClosedReload = now
	b.log.Warn("a subscription is registered in the broker but closed (left so by a storage failure): loading JetStream again from its store", "subscription", sub)
	if err := b.restartJetStream(); err != nil {
		return false, fmt.Errorf("loading JetStream again for subscription %s: %w", sub, err)
	}
	r.closedReloads.Add(1)
	return true, nil
}

// markRecovered records and logs the end of a storage failure. r.mu is
// held.
func (b *Broker) markRecovered(r *recovery, how string) {
	r.recoveries.Add(1)
	b.log.Info("the broker recovered from its storage failure: publishes are accepted again", "how", how,
		"down_for", time.Since(r.since).Round(time.Millisecond).String(), "cause", r.cause, "recoveries", r.recoveries.Load())
	r.since, r.cause, r.unloaded = time.Time{}, "", false
	r.failing.Store(false)
}

// restartJetStream raises the storage limit to the disk's room and loads
// the embedded server's JetStream again from its store.
func (b *Broker) restartJetStream() error {
	cfg := b.recovery.jsConfig
	if b.srv.JetStreamEnabled() {
		if err := b.srv.ShutdownJetStream(); err != nil {
			return fmt.Errorf("stopping JetStream: %w", err)
		}
	}
	if l := b.storeLimit; l != nil {
		// With JetStream stopped, the store's bytes are its files'.
		l.mu.Lock()
		limit, err := b.raiseLimit(dirBytes(b.recovery.dir))
		l.mu.Unlock()
		if err != nil {
			return err
		}
		cfg.MaxStore = limit
	}
	// Not abandoned here even when ctx is done: JetStream stays off until
	// it is enabled again.
	if err := b.srv.EnableJetStream(&cfg); err != nil {
		if !b.srv.JetStreamEnabled() {
			return fmt.Errorf("starting JetStream: %w", err)
		}
		// Switched on meanwhile (the server finishing its own switch-off
		// and on): whatever it loaded, load it again, whole.
		if err := b.srv.ShutdownJetStream(); err != nil {
			return fmt.Errorf("stopping JetStream: %w", err)
		}
		if err := b.srv.EnableJetStream(&cfg); err != nil {
			return fmt.Errorf("starting JetStream: %w", err)
		}
	}
	return nil
}

// failFast answers a publish that failed while the storage is failed: it
// checks the storage at once (a failure is seen on the first refused
// publish, not an interval later) and returns an error wrapping
// ErrStorageFull when it is failed, else nil.
func (b *Broker) failFast(ctx context.Context, topic string, err error) error {
	r := b.recovery
	if r == nil || !errors.Is(err, ErrUnavailable) {
		return nil
	}
	if !r.failing.Load() {
		if b.CheckStorage(ctx) == nil {
			return nil
		}
	}
	return b.storageFailedErr(topic)
}

// storageFailedErr is the error of a publish refused while the storage is
// failed.
func (b *Broker) storageFailedErr(topic string) error {
	return fmt.Errorf("publishing to topic %s: the broker's storage failed (a full disk?); weir checks every %s and accepts publishes again once the disk has room: %w", topic, b.recovery.interval, ErrStorageFull)
}

// ensureStorage brings a failed storage back now, if the disk has room,
// before a source opens its subscription: a job that resumes after a full
// disk (the state store came back) finds the broker writing, not in the
// middle of a reload an interval later. A storage still failed is logged
// by CheckStorage and left to the caller's calls to report.
func (b *Broker) ensureStorage(ctx context.Context) {
	if b.StorageFailing() {
		_ = b.CheckStorage(ctx)
	}
}

// watchStorage runs CheckStorage every interval until the broker shuts
// down.
func (b *Broker) watchStorage() {
	r := b.recovery
	defer close(r.done)
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), r.interval)
			_ = b.CheckStorage(ctx) // logged
			cancel()
		}
	}
}

// stopWatching ends watchStorage, if it runs.
func (b *Broker) stopWatching() {
	if r := b.recovery; r != nil {
		close(r.stop)
		<-r.done
	}
}
