package files

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// The publication lock: partition runs of different partitions of one
// target may end together (one writer per partition, not per target), in
// one server or in several processes (a server and an in-process weir
// run). Each publication reads the manifest, adds its entry and writes it
// back, so the read-modify-write holds an exclusive flock on
// DIR/.NAME.EXT.publish.lock; without it the last writer would drop the
// others' entries, and their rows would leave the view. The kernel releases
// the lock when its holder dies, so a crash never leaves it held.

// publishLockPath returns the lock file of sink path p.
func publishLockPath(p string) string {
	return filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".publish.lock")
}

// publishLockPoll is how often a publication waiting for another's lock
// tries again.
const publishLockPoll = 5 * time.Millisecond

// lockPublications takes the publication lock of sink path p, waiting
// while another publication holds it (until ctx ends), and returns its
// release.
func lockPublications(ctx context.Context, p string, mode fs.FileMode) (func(), error) {
	name := publishLockPath(p)
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, mode)
	if err != nil {
		return nil, fmt.Errorf("opening the publication lock %s: %w", name, err)
	}
	var tick *time.Ticker
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			// Closing the file releases the flock.
			return func() { _ = f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			_ = f.Close()
			return nil, fmt.Errorf("locking the publication lock %s: %w", name, err)
		}
		if tick == nil {
			tick = time.NewTicker(publishLockPoll)
			defer tick.Stop()
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("waiting for another publication to %s: %w", p, ctx.Err())
		case <-tick.C:
		}
	}
}
