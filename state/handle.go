package state

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// A store's Pebble database lives in a handle, so that a store whose
// database failed (Failed, ErrStoreFailed: Pebble's failed WAL is sticky,
// and nothing short of closing the database clears it) can be reopened in
// place, without the process restarting: Reopen swaps the handle.
//
// # The swap's lock discipline
//
// Store.mu guards which handle is current. Every operation takes it only
// to pick the current handle and count itself in (handle.refs), and then
// works on that handle without it: the same handle from its first read to
// its commit. Objects that outlive one call (Pinned, SnapshotBatch) hold a
// reference until they are released. Reopen, under Store.mu, takes the
// handle out (operations that start meanwhile wait for the new one, up to
// SwapWait), waits for the references to the old one to end, closes it,
// opens the directory again and installs the new handle. So no operation
// ever touches a closed Pebble database (which would panic), and reads
// during the swap wait briefly or answer an error that wraps
// ErrStoreFailed, never a panic. A caller that holds a reference must not
// wait for a second one of the same store (it could wait out SwapWait
// while the swap waits for it); the store's own methods pass their handle
// down instead.

// SwapWait bounds how long an operation that starts while the store is
// being reopened waits for the new database before it fails with
// ErrStoreReopening.
const SwapWait = 5 * time.Second

// ErrStoreReopening is returned (wrapped, together with ErrStoreFailed) by
// operations that found the store being reopened after a failure and the
// new database not ready within SwapWait, or not opened at all.
var ErrStoreReopening = errors.New("the state store is being reopened after a failure")

// errStoreClosed is returned by operations on a closed store.
var errStoreClosed = errors.New("the state store is closed")

// handle is one open Pebble database of a store, with its own failure.
type handle struct {
	db   *pebble.DB
	fail *failure
	// readOnly is set when the directory could only be opened read-only
	// (Reopen's fallback): every write fails (fail is set).
	readOnly bool
	// refs counts the operations and objects using db; draining is set by
	// the swap, after which the last release signals drained.
	refs     atomic.Int64
	draining atomic.Bool
	drained  chan struct{} // capacity 1
	// repl is the store's replicated log (replication.go), shared by its
	// handles.
	repl *replSlot
}

func (h *handle) release() {
	if h.refs.Add(-1) == 0 && h.draining.Load() {
		select {
		case h.drained <- struct{}{}:
		default:
		}
	}
}

// wait returns once no operation uses h (the caller set draining), or with
// ctx's error.
func (h *handle) wait(ctx context.Context) error {
	for h.refs.Load() > 0 {
		select {
		case <-h.drained:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// acquire returns the current handle, counted in: the caller releases it.
// While the store is being reopened it waits for the new handle, up to
// SwapWait.
func (s *Store) acquire() (*handle, error) {
	var timer *time.Timer
	for {
		s.mu.RLock()
		h, closed, swapped, last := s.h, s.closed, s.swapped, s.lastFail
		if h != nil {
			h.refs.Add(1)
		}
		s.mu.RUnlock()
		switch {
		case h != nil:
			return h, nil
		case closed:
			return nil, errStoreClosed
		case swapped == nil:
			// A reopen failed and left no database: the next Reopen tries again.
			return nil, fmt.Errorf("%w: %w", ErrStoreReopening, last)
		}
		if timer == nil {
			timer = time.NewTimer(SwapWait)
			defer timer.Stop()
		}
		select {
		case <-swapped:
		case <-timer.C:
			return nil, fmt.Errorf("%w (waited %s): %w", ErrStoreReopening, SwapWait, last)
		}
	}
}

// storeLocks are the store's fields besides the current handle's: kept in
// one place so that open and Reopen set them alike.
type storeLocks struct {
	// mu guards h, closed, swapped and lastFail (see "The swap's lock
	// discipline" above). Held only to read or replace them, never across
	// a Pebble call.
	mu sync.RWMutex
	h  *handle
	// closed is set by Close.
	closed bool
	// swapped is non-nil while Reopen has taken the handle out; it is
	// closed when Reopen ends (with a new handle or without one).
	swapped chan struct{}
	// lastFail is the failure of the handle taken out, or of the last
	// Reopen that could not open the directory.
	lastFail error
	// reopenMu serialises Reopen and Close.
	reopenMu sync.Mutex
	// repl is the replicated log every handle's commits go through.
	repl replSlot
}

// memTableBytes is the size of the store's memtable (Pebble's default is
// 4 MB). A job's checkpoints update keys all over its state, so every
// table a memtable flush writes spans the whole state, and each
// compaction of the first level rewrites all of the level below it: the
// number of flushes, not the bytes, sets the compaction work. At 1M keys
// and 20,000 updates a second, 4 MB memtables flushed every few seconds
// and their compactions took 14 % of the process's CPU (weir bench
// update); 64 MB flush about once a minute. Pebble starts with a small
// memtable and grows it to this size as writes need.
const memTableBytes = 64 << 20

// tableBlockBytes is the size of a table's blocks: a restore reads a whole
// job's state, block by block, each one a read from the file; 32 KiB
// blocks are an eighth of Pebble's default 4 KiB blocks' reads. (The store
// reads single keys rarely: the registry's records, a key's snapshot.)
const tableBlockBytes = 32 << 10

// openHandle opens dir on fs as a new handle.
func openHandle(dir string, logger *slog.Logger, fs vfs.FS, readOnly bool) (*handle, error) {
	h := &handle{fail: &failure{}, drained: make(chan struct{}, 1), readOnly: readOnly}
	opts := &pebble.Options{Logger: pebbleLogger{l: logger, fail: h.fail}, FS: fs, ReadOnly: readOnly, ErrorIfNotExists: readOnly, MemTableSize: memTableBytes}
	for i := range opts.Levels {
		opts.Levels[i].BlockSize = tableBlockBytes
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("opening state store in %s: %w", dir, err)
	}
	h.db = db
	return h, nil
}

// Reopen closes a failed store's database and opens its directory again,
// so that a store whose disk has room again (or whose I/O error has
// passed) writes again without the process restarting. Writes that Pebble
// reported as failed are not in the reopened store: it holds what was
// durable (the write-ahead log replayed). A healthy store is left alone
// (Reopen returns nil). ctx bounds the wait for the operations still
// using the failed database; when it ends first, nothing changes.
//
// When the directory cannot be opened for writing (the disk is still
// full), Reopen falls back to opening it read-only, so that reads keep
// answering; the store then stays failed (Failed returns the open's
// error) and a later Reopen tries again. Reopen returns the error that
// kept the store from writing.
func (s *Store) Reopen(ctx context.Context) error {
	s.reopenMu.Lock()
	defer s.reopenMu.Unlock()
	s.mu.Lock()
	old := s.h
	switch {
	case s.closed:
		s.mu.Unlock()
		return errStoreClosed
	case old != nil && old.fail.get() == nil:
		s.mu.Unlock()
		return nil
	}
	if old != nil {
		s.lastFail = old.fail.get()
	}
	s.h = nil
	swapped := make(chan struct{})
	s.swapped = swapped
	s.mu.Unlock()

	finish := func(h *handle, lastFail error) {
		s.mu.Lock()
		s.h, s.swapped = h, nil
		if lastFail != nil {
			s.lastFail = lastFail
		}
		s.mu.Unlock()
		close(swapped)
	}
	if old != nil {
		old.draining.Store(true)
		if err := old.wait(ctx); err != nil {
			old.draining.Store(false)
			finish(old, nil) // put the failed handle back: nothing changed
			return fmt.Errorf("reopening the state store: waiting for the operations on the failed store: %w", err)
		}
		if err := old.db.Close(); err != nil {
			// Expected: the failed database reports its failure again.
			s.logger.Info("closed the failed state store", "component", "pebble", "error", err.Error())
		}
	}
	h, err := openHandle(s.dir, s.logger, s.fs, false)
	if err == nil {
		h.repl = &s.repl
		finish(h, nil)
		return nil
	}
	ro, rerr := openHandle(s.dir, s.logger, s.fs, true)
	if ro != nil {
		ro.repl = &s.repl
	}
	if rerr != nil {
		finish(nil, fmt.Errorf("%w: %w", ErrStoreFailed, err))
		return fmt.Errorf("reopening the state store: %w (read-only as well: %w)", err, rerr)
	}
	ro.fail.record("it could not be reopened for writing (read-only until the next attempt): "+err.Error(), err)
	finish(ro, nil)
	return fmt.Errorf("reopening the state store (read-only until the next attempt): %w", err)
}
