package state

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrStoreFailed is wrapped by every write of a store that Pebble reported
// a fatal error for (a failed WAL or MANIFEST write, a broken invariant):
// the write did not happen or may not be durable, and the store refuses
// every later write. Reads keep working on what is there. The caller must
// stop: nothing the failed write was to make durable (a checkpoint, a job
// transition) may be acted on. The error also wraps the cause Pebble gave,
// when it gave one; Store.Failed returns it.
var ErrStoreFailed = errors.New("state store failed")

// failure is the first fatal error Pebble reported for a store; it is set
// once (the first report wins) and never cleared. It is safe for
// concurrent use: Pebble reports from its own goroutines.
type failure struct{ err atomic.Pointer[storeFailure] }

// storeFailure is what Pebble reported: its message and the first error
// among the message's arguments (the cause).
type storeFailure struct {
	msg   string
	cause error
}

func (f *storeFailure) Error() string { return "state store failed: " + f.msg }

// Unwrap returns ErrStoreFailed and the cause, for errors.Is and errors.As.
func (f *storeFailure) Unwrap() []error {
	if f.cause == nil {
		return []error{ErrStoreFailed}
	}
	return []error{ErrStoreFailed, f.cause}
}

// record stores the first failure and reports whether this was it.
func (f *failure) record(msg string, cause error) bool {
	return f.err.CompareAndSwap(nil, &storeFailure{msg: msg, cause: cause})
}

// get returns the failure, or nil.
func (f *failure) get() error {
	if e := f.err.Load(); e != nil {
		return e
	}
	return nil
}

// Failed returns nil while the store is healthy, and once Pebble reported a
// fatal error, that error (wrapping ErrStoreFailed and Pebble's cause). A
// failed store refuses every write; the process can keep serving reads and
// report the cause. Safe for concurrent use.
func (s *Store) Failed() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.h != nil {
		return s.h.fail.get()
	}
	if s.closed {
		return nil
	}
	return s.lastFail // being reopened, or the reopen failed
}

// commit commits b synced. It refuses to when the store has failed, and it
// checks again after Pebble returns: Pebble's DB.Commit reports a failed
// WAL write or sync only through Logger.Fatalf and then returns nil (see
// pebbleLogger.Fatalf), so without the check a checkpoint whose write
// failed would be treated as durable. The check before matters as much:
// after such a failure Pebble's commit pipeline keeps the failed batch in
// its pending queue and a commit semaphore slot taken, so a later commit
// could block forever instead of failing.
//
// A store that is a replica of a cluster's log appends b to the log first
// (replication.go).
func (h *handle) commit(b *pebble.Batch) error {
	if !h.repl.replicated() {
		return h.commitLocal(b) // a single server's store: no lock, no closure
	}
	return h.repl.commitReplicated(b, func() error { return h.commitLocal(b) }, func(dir string) error {
		return h.db.Checkpoint(dir, pebble.WithFlushedWAL())
	})
}

// commitLocal is commit without the replicated log.
func (h *handle) commitLocal(b *pebble.Batch) error {
	if err := h.fail.get(); err != nil {
		return err
	}
	err := b.Commit(pebble.Sync)
	if f := h.fail.get(); f != nil {
		if err != nil {
			return errors.Join(f, err)
		}
		return f
	}
	return err
}

// pebbleLogger routes Pebble's log to slog, and turns its Fatalf into a
// failure of the store.
type pebbleLogger struct {
	l    *slog.Logger
	fail *failure
}

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

// Fatalf is what Pebble calls when an invariant breaks or a write it cannot
// undo fails; Pebble's own logger exits the process. We do not: the process
// keeps serving its API and reports the cause. Fatalf records the failure
// (Store.Failed, ErrStoreFailed), after which every write of the store
// fails, and then returns into Pebble.
//
// Returning is the one choice that is safe at every call site in Pebble v2
// (studied at v2.1.7). The alternatives, blocking the calling goroutine or
// runtime.Goexit, hang the store: several call sites run on Pebble's
// background goroutines with DB.mu or the MANIFEST lock held and released
// without defer (compaction.go "could not update state for compaction",
// version_set.go "MANIFEST flush/sync failed"), so every later read, write
// and Close would wait forever; and at the site that matters most, DB.Commit
// ("pebble: fatal commit error", db.go), the caller is our own goroutine,
// which would vanish instead of returning an error. What returning costs is
// that Pebble carries on as if nothing happened — DB.Commit then returns
// nil for the failed batch — which Store.commit makes harmless by checking
// the failure after every commit and refusing every commit after it.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	var cause error
	for _, a := range args {
		if e, ok := a.(error); ok {
			cause = e
			break
		}
	}
	if p.fail.record(msg, cause) {
		p.l.Error("the state store failed; it refuses every write from now on", "component", "pebble", "error", msg)
		return
	}
	p.l.Error(msg, "component", "pebble")
}

// OpenReadOnly opens the existing store in dir for reading only (an
// inspection of a stopped server's or program's data directory): nothing
// is written, not even the replay of its write-ahead log, and every write
// fails. A directory without a store is an error.
func OpenReadOnly(dir string, logger *slog.Logger) (*Store, error) {
	if logger == nil {
		logger = slog.Default()
	}
	h, err := openHandle(dir, logger, nil, true)
	if err != nil {
		return nil, err
	}
	s := &Store{dir: dir, logger: logger}
	h.repl = &s.repl
	s.h = h
	return s, nil
}

// open opens (creating if needed) the store in dir on fs (nil: the
// operating system's file system). Tests pass a fault-injecting one.
func open(dir string, logger *slog.Logger, fs vfs.FS) (*Store, error) {
	if logger == nil {
		logger = slog.Default()
	}
	h, err := openHandle(dir, logger, fs, false)
	if err != nil {
		return nil, err
	}
	s := &Store{dir: dir, logger: logger, fs: fs}
	h.repl = &s.repl
	s.h = h
	if err := s.clearIngestDir(); err != nil {
		_ = h.db.Close()
		return nil, fmt.Errorf("opening state store in %s: %w", dir, err)
	}
	return s, nil
}
