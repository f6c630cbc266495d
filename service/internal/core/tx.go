package core

import (
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/service/record"
	"github.com/weir-dev/weir/state"
)

// Tx is the registry lock (Core.mu, lock order 3) held: a value of it
// exists only inside the function given to Core.update, which holds
// the lock while the function runs. Every store write of the service, and
// every read of a registry record that such a write modifies, happens
// through a Tx, so holding the lock is a fact the compiler checks, not a
// naming convention: a function that needs the lock takes a *Tx.
//
// A Tx is never kept past its function: its methods refuse once update
// has returned. It is not safe for concurrent use (one goroutine holds the
// lock).
type Tx struct {
	s *Core // nil once the update returned
}

// update runs fn holding the registry lock (lock order 3): after the name
// guards and an execution's cpMu, before the leaves. It is never held
// while waiting for an execution (a pause, a checkpoint, a commit, an end)
// nor across a broker or sink call: fn does in-memory work and store
// writes only. This is the one place the lock is taken.
func (s *Core) Update(fn func(tx *Tx) error) error {
	s.mu.Lock() // lock order 3
	defer s.mu.Unlock()
	tx := &Tx{s: s}
	defer func() { tx.s = nil }()
	return fn(tx)
}

// errTxDone is what a Tx used after its update returned answers: a
// programming error, reported instead of writing without the lock.
var errTxDone = &errcode.Error{Code: errcode.Internal, Message: "internal error: a registry write was attempted after its lock was released"}

// Apply writes registry changes w durably.
func (tx *Tx) Apply(w *state.Write) error {
	s := tx.s
	if s == nil {
		return errTxDone
	}
	defer s.Changes.Notify()
	return s.stored(s.Store.Apply(w))
}

// WriteCheckpoint writes checkpoint cp of job id, whose state is kept under
// lineage, with the registry changes w in one atomic write.
func (tx *Tx) WriteCheckpoint(lineage, id string, cp *contract.Checkpoint, w *state.Write) error {
	s := tx.s
	if s == nil {
		return errTxDone
	}
	defer s.Changes.Notify()
	return s.stored(s.Store.WriteCheckpoint(lineage, id, cp, w))
}

// WriteHandover writes handover h of checkpoint cp with the registry
// changes w in one atomic write.
func (tx *Tx) WriteHandover(h state.Handover, cp *contract.Checkpoint, w *state.Write) error {
	s := tx.s
	if s == nil {
		return errTxDone
	}
	defer s.Changes.Notify()
	return s.stored(s.Store.WriteHandover(h, cp, w))
}

// DropState deletes the keyed state of step of lineage.
func (tx *Tx) DropState(lineage, step string) error {
	s := tx.s
	if s == nil {
		return errTxDone
	}
	return s.stored(s.Store.DropState(lineage, step))
}

// WriteSnapshot commits a built snapshot batch with the registry changes w.
func (tx *Tx) WriteSnapshot(sb *state.SnapshotBatch, w *state.Write) error {
	s := tx.s
	if s == nil {
		return errTxDone
	}
	defer s.Changes.Notify()
	return s.stored(sb.Commit(w))
}

// DeleteSnapshot deletes snapshot id's data with the registry changes w.
func (tx *Tx) DeleteSnapshot(id string, w *state.Write) error {
	s := tx.s
	if s == nil {
		return errTxDone
	}
	defer s.Changes.Notify()
	return s.stored(s.Store.DeleteSnapshot(id, w))
}

// RestoreSnapshot writes a new job's start from snapshot id with the
// registry changes w.
func (tx *Tx) RestoreSnapshot(id string, r state.SnapshotRestore, w *state.Write) error {
	s := tx.s
	if s == nil {
		return errTxDone
	}
	defer s.Changes.Notify()
	return s.stored(s.Store.RestoreSnapshot(id, r, w))
}

// Pin pins the store as the Tx's writes so far left it: no other write
// comes between them and the pin. The caller releases it.
func (tx *Tx) Pin() *state.Pinned {
	if tx.s == nil {
		return nil
	}
	return tx.s.Store.Pin()
}

// Closing reports whether the service is closing. Close sets it under
// the lock, so the answer holds until the Tx ends: a goroutine the
// service waits for is started only with Closing false (Core.spawn).
func (tx *Tx) Closing() bool { return tx.s == nil || tx.s.Closing.Load() }

// spawn starts fn in a goroutine that Close waits for, unless the service
// is closing (then it returns false and fn does not run). The WaitGroup's
// Add happens under the registry lock, so it never follows Close's Wait.
func (s *Core) Spawn(fn func()) bool {
	started := false
	_ = s.Update(func(tx *Tx) error {
		if tx.Closing() {
			return nil
		}
		s.wg.Add(1)
		started = true
		return nil
	})
	if started {
		go func() {
			defer s.wg.Done()
			fn()
		}()
	}
	return started
}

// Admit refuses, as LIMIT_EXCEEDED, a new active job of name when the
// service runs Options.MaxJobs active jobs already. A name that has an
// active job is replaced, not added to: it is always admitted. Every way a
// job is created calls it in the Tx that records the job, so two requests
// cannot pass the limit together.
func (tx *Tx) Admit(name string) error {
	s := tx.s
	if s == nil {
		return errTxDone
	}
	max := s.Opts.MaxJobs
	if max <= 0 {
		return nil
	}
	l, err := s.ReadLineage(name)
	if err != nil {
		return err
	}
	if l.ActiveJobID != "" {
		return nil
	}
	active := 0
	err = s.Store.Scan("job/", func(_ string, v []byte) error {
		j := &record.Job{}
		if err := UnmarshalJob(v, j); err != nil {
			return err
		}
		if j.Active() {
			active++
		}
		return nil
	})
	if err != nil {
		return errcode.Internalf("counting the active jobs: %w", err)
	}
	if active >= max {
		return errcode.Errorf(errcode.LimitExceeded, "the server already runs %d active jobs, its limit (--max-jobs %d): drain or cancel one first, or restart the server with a higher --max-jobs", active, max)
	}
	return nil
}
