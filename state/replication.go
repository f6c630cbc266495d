package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// A store can be one replica of a replicated log (a weir cluster: package
// cluster). Every batch the store commits then goes to the log first
// (Replicator.Append) and into the local database only once the log holds
// it, so the log's order is the order of the writes and a replica that
// applies the log (ApplyReplicated) holds, entry for entry, what the
// writing member held. Each entry carries the log sequence it ends at
// under keyApplied, written in the same batch, so a replica knows exactly
// which entries it holds (ReplicatedSeq), across crashes.

// keyApplied is the log sequence of the last replicated entry the store
// holds. Nothing else lives under prefixCluster.
const (
	prefixCluster = "cl/"
	keyApplied    = prefixCluster + "applied"
)

// appliedEntryBytes bounds what the keyApplied entry adds to a batch's
// representation (kind, two varint lengths, the key, an 8-byte value).
const appliedEntryBytes = 1 + 2*binary.MaxVarintLen32 + len(keyApplied) + 8

// ErrNotReplicated wraps the error of a write the replicated log refused
// or could not take: nothing of it was written, here or anywhere.
var ErrNotReplicated = errors.New("the write did not reach the cluster's replicated log")

// ErrReplicaDiverged is returned by every write after one that the log
// holds but the local database failed to commit: the replica no longer
// holds what the log says it holds, and only a restart (which applies the
// log again) may write.
var ErrReplicaDiverged = errors.New("the local replica missed a write the cluster's log holds: restart this member")

// Replicator is the replicated log a store's writes go through.
type Replicator interface {
	// Append appends one entry of about size bytes: it calls build once
	// with the log sequence the entry will end at, and makes the
	// representation build returns durable in the log before it returns
	// nil. An error means the entry is not in the log (a fenced or
	// unreachable log): the store does not commit it.
	Append(size int, build func(endSeq uint64) []byte) error
}

// BaseTaker is implemented by a Replicator whose log is cut short now and
// then: a base image (a checkpoint of the whole store at one log
// sequence) replaces the entries before it, which a replica that falls
// behind them restores from instead.
type BaseTaker interface {
	// WantBase reports whether the log wants a base image now; asked
	// after each write.
	WantBase() bool
	// TakeBase is handed dir, a checkpoint of the store (a Pebble
	// directory, openable with Open) holding the log up to sequence seq.
	// It owns dir from then on and must not block: it keeps it in the
	// background.
	TakeBase(dir string, seq uint64)
}

// Diverger is implemented by a Replicator that must know when the store
// missed a write the log holds (ErrReplicaDiverged): a cluster's leader
// then gives its place up, so that a member whose replica holds the write
// takes over.
type Diverger interface {
	Diverged(err error)
}

// replSlot is the store's replicator, shared by every handle it opens.
// Its mutex (a leaf: taken inside an operation's handle reference, never
// around another lock of the store) makes appending and committing one
// step, so the log's order is the commit order.
type replSlot struct {
	// r is set once, before the store is used (SetReplicator); read
	// without mu, so a store without a replicator commits concurrently
	// (Pebble groups concurrent commits into one sync).
	r        atomic.Pointer[replicatorBox]
	mu       sync.Mutex
	diverged error // guarded by mu
}

type replicatorBox struct{ Replicator }

// SetReplicator makes every later write of the store go through r.
// Called once, before the store is written to; a store without one
// writes locally only.
func (s *Store) SetReplicator(r Replicator) {
	s.repl.r.Store(&replicatorBox{r})
}

// replicated reports whether the store's writes go through a replicated
// log.
func (rs *replSlot) replicated() bool {
	return rs != nil && rs.r.Load() != nil
}

// commitReplicated appends b to the log, then commits it locally with
// commit. Without a replicator (handle.commit does not call it then) it
// only commits.
//
// When the replicator is a BaseTaker that wants a base image, the store's
// checkpoint is taken right after the commit, still under the slot's lock,
// so that it holds the log exactly up to this entry.
func (rs *replSlot) commitReplicated(b *pebble.Batch, commit func() error, checkpoint func(dir string) error) error {
	if rs == nil {
		return commit()
	}
	r := rs.r.Load()
	if r == nil {
		return commit()
	}
	rs.mu.Lock() // leaf: see replSlot
	defer rs.mu.Unlock()
	if rs.diverged != nil {
		return rs.diverged
	}
	var (
		setErr error
		end    uint64
	)
	err := r.Append(len(b.Repr())+appliedEntryBytes, func(e uint64) []byte {
		end = e
		setErr = b.Set([]byte(keyApplied), binary.BigEndian.AppendUint64(nil, e), nil)
		return b.Repr()
	})
	if err == nil {
		err = setErr
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotReplicated, err)
	}
	if err := commit(); err != nil {
		rs.diverged = fmt.Errorf("%w (the local commit failed: %w)", ErrReplicaDiverged, err)
		if d, ok := r.Replicator.(Diverger); ok {
			d.Diverged(rs.diverged)
		}
		return rs.diverged
	}
	if bt, ok := r.Replicator.(BaseTaker); ok && checkpoint != nil && bt.WantBase() {
		// A fresh name: Pebble creates the directory itself.
		dir, err := os.MkdirTemp("", "weir-base-")
		if err == nil {
			if err = os.Remove(dir); err == nil {
				err = checkpoint(dir)
			}
		}
		if err != nil {
			_ = os.RemoveAll(dir)
			// The write itself is done; the next one tries again.
			return nil
		}
		bt.TakeBase(dir, end)
	}
	return nil
}

// ApplyReplicated commits repr, one entry of the replicated log that ends
// at sequence seq, to the local database: what a replica that does not
// write itself does with each entry it reads. It must not be called on a
// store with a replicator.
func (s *Store) ApplyReplicated(seq uint64, repr []byte) error {
	h, err := s.acquire()
	if err != nil {
		return fmt.Errorf("applying log entry %d: %w", seq, err)
	}
	defer h.release()
	if h.repl.replicated() {
		return fmt.Errorf("applying log entry %d: the store writes through the log itself", seq)
	}
	b := h.db.NewBatch()
	defer b.Close()
	// A copy: the batch takes ownership of its representation.
	if err := b.SetRepr(append([]byte(nil), repr...)); err != nil {
		return fmt.Errorf("applying log entry %d: %w", seq, err)
	}
	// The entry carries its own sequence; set it again for entries that
	// were written without one.
	if err := b.Set([]byte(keyApplied), binary.BigEndian.AppendUint64(nil, seq), nil); err != nil {
		return fmt.Errorf("applying log entry %d: %w", seq, err)
	}
	if err := h.commit(b); err != nil {
		return fmt.Errorf("applying log entry %d: %w", seq, err)
	}
	return nil
}

// ReplicatedSeq returns the log sequence of the last replicated entry the
// store holds; 0 for a store that holds none.
func (s *Store) ReplicatedSeq() (uint64, error) {
	h, err := s.acquire()
	if err != nil {
		return 0, fmt.Errorf("reading the replicated sequence: %w", err)
	}
	defer h.release()
	v, closer, err := h.db.Get([]byte(keyApplied))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the replicated sequence: %w", err)
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, fmt.Errorf("reading the replicated sequence: %d bytes, want 8", len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// Empty reports whether the store holds no key at all (a data directory
// that may become a replica of a cluster's log).
func (s *Store) Empty() (bool, error) {
	h, err := s.acquire()
	if err != nil {
		return false, err
	}
	defer h.release()
	it, err := h.db.NewIter(nil)
	if err != nil {
		return false, err
	}
	empty := !it.First()
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return false, err
	}
	return empty, nil
}
