package pubsub

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultDiskCheckInterval is how often an embedded broker whose storage
// limit follows the disk (Options.MaxStore 0) looks at the free space.
const DefaultDiskCheckInterval = 30 * time.Second

// diskShare is the share of the free space the broker may fill: JetStream's
// own default (three quarters), so that the state store and the sinks keep
// the rest.
const diskShare = 0.75

// storeLimit is an embedded broker's JetStream storage limit that follows
// the disk: what the store holds plus three quarters of the free space of
// its file system, raised when the disk grew or space was freed (JetStream
// cannot lower a limit at runtime, so it never shrinks).
type storeLimit struct {
	dir  string
	free func(dir string) (int64, error) // bytes available to the process
	// mu serialises refreshes (the ticker's and direct calls) and guards
	// srvOpts. A leaf: held across the server's reload, no other lock.
	mu sync.Mutex
	// srvOpts are the embedded server's options, the base of a reload.
	srvOpts *server.Options
	limit   atomic.Int64
	stop    chan struct{}
	done    chan struct{}
}

// statfsFree returns the bytes available to unprivileged users on dir's
// file system.
func statfsFree(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("reading the free space of %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// dirBytes returns the bytes of the regular files under dir (what the store
// holds already, at start).
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// compute returns the limit for used bytes held and the current free space.
func (l *storeLimit) compute(used int64) (int64, error) {
	free, err := l.free(l.dir)
	if err != nil {
		return 0, err
	}
	return used + int64(float64(free)*diskShare), nil
}

// RefreshStoreLimit recomputes an embedded broker's storage limit from the
// free space now, when it follows the disk, and raises it when the disk has
// room for more; publishes that the old limit refused are then accepted. It
// returns the limit in force (0: the broker's limit does not follow the
// disk). The broker calls it every Options.DiskCheckInterval.
func (b *Broker) RefreshStoreLimit(ctx context.Context) (int64, error) {
	l := b.storeLimit
	if l == nil {
		return 0, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	info, err := b.js.AccountInfo(ctx)
	if err != nil {
		return l.limit.Load(), apiErr("reading the broker's storage use", err)
	}
	return b.raiseLimit(int64(info.Store))
}

// raiseLimit raises the storage limit to what a store holding used bytes
// may fill on its disk now, when that is more than the limit in force,
// and returns the limit in force. The caller holds l.mu.
func (b *Broker) raiseLimit(used int64) (int64, error) {
	l := b.storeLimit
	want, err := l.compute(used)
	if err != nil {
		return l.limit.Load(), err
	}
	cur := l.limit.Load()
	if want <= cur {
		return cur, nil
	}
	opts := l.srvOpts.Clone()
	opts.JetStreamMaxStore = want
	if b.srv.JetStreamEnabled() {
		if err := b.srv.ReloadOptions(opts); err != nil {
			return cur, fmt.Errorf("raising the broker's storage limit to %d bytes: %w", want, err)
		}
	} // else: JetStream is loaded again with the limit (recover.go)
	l.limit.Store(want)
	l.srvOpts = opts
	b.log.Info("broker storage limit raised: the disk has more room", "limit_bytes", want, "previous_bytes", cur, "used_bytes", used)
	return want, nil
}

// followDisk refreshes the storage limit every interval until the broker
// shuts down.
func (b *Broker) followDisk(interval time.Duration) {
	l := b.storeLimit
	defer close(l.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), interval)
			if _, err := b.RefreshStoreLimit(ctx); err != nil {
				b.log.Warn("could not refresh the broker's storage limit", "error", err)
			}
			cancel()
		}
	}
}

// stopFollowing ends followDisk, if it runs.
func (b *Broker) stopFollowing() {
	if l := b.storeLimit; l != nil {
		close(l.stop)
		<-l.done
	}
}

// storageFull reports whether err is JetStream refusing a write for lack of
// storage (its limit reached, or the disk full).
func storageFull(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jetstream.ErrorCode(server.JSInsufficientResourcesErr), jetstream.ErrorCode(server.JSStorageResourcesExceededErr):
			return true
		}
	}
	return false
}
