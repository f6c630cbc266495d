// Package state is weir's durable store: keyed state of running jobs,
// checkpoint records (source positions, pre-committed sink data) and the job
// service's registry, all in one Pebble database so that a checkpoint and a
// job's state transition can be one atomic write.
//
// Keyed state is stored under a namespace ID bound to a (lineage, step name)
// pair, where the lineage is the job name that survives updates. Renaming a
// step in an update rebinds the name to the same namespace: the handover is
// metadata, O(1) in the size of the state.
//
// It may import runner/contract (for the checkpoint types),
// github.com/cockroachdb/pebble/v2 and the standard library. It must not
// import runner (the executor), not even indirectly.
package state

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weir-dev/weir/runner/contract"
)

// Key prefixes. Everything the store writes lives under one of them.
const (
	prefixRegistry   = "r/"
	prefixNamespace  = "ns/"
	prefixState      = "s/"
	prefixCheckpoint = "cp/"
	keyNextNamespace = "nsnext"
)

// ErrNotFound is returned when a registry key or checkpoint does not exist.
var ErrNotFound = errors.New("not found")

// Store is an open state database. It is safe for concurrent use.
//
// When Pebble reports a fatal error (a failed WAL or MANIFEST write, a
// broken invariant) the store fails: Failed returns the cause and every
// write from then on returns an error wrapping ErrStoreFailed, including
// the write during which Pebble reported it (see fatal.go).
//
// A failed store can be reopened in place (Reopen, handle.go): its
// database is swapped under running reads, which never touch a closed
// database.
type Store struct {
	storeLocks
	dir    string
	logger *slog.Logger
	fs     vfs.FS
}

// Open opens (creating if needed) the store in dir.
func Open(dir string, logger *slog.Logger) (*Store, error) {
	return open(dir, logger, nil)
}

// OpenFS opens the store in dir on the file system fs (nil: the operating
// system's), for tests that inject faults (Pebble's vfs/errorfs).
func OpenFS(dir string, logger *slog.Logger, fs vfs.FS) (*Store, error) {
	return open(dir, logger, fs)
}

// Close flushes and closes the store, once the operations using it have
// ended. Operations after Close fail; a second Close does nothing.
func (s *Store) Close() error {
	s.reopenMu.Lock()
	defer s.reopenMu.Unlock()
	s.mu.Lock()
	h := s.h
	s.h, s.closed = nil, true
	s.mu.Unlock()
	if h == nil {
		return nil
	}
	h.draining.Store(true)
	_ = h.wait(context.Background())
	if err := h.db.Close(); err != nil {
		return fmt.Errorf("closing state store: %w", err)
	}
	return nil
}

// ---- registry ----

// Get returns the registry value at key.
func (s *Store) Get(key string) ([]byte, error) {
	h, err := s.acquire()
	if err != nil {
		return nil, fmt.Errorf("reading registry key %q: %w", key, err)
	}
	defer h.release()
	v, closer, err := h.db.Get([]byte(prefixRegistry + key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("registry key %q: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading registry key %q: %w", key, err)
	}
	defer closer.Close()
	return bytes.Clone(v), nil
}

// Scan calls fn for every registry key with the given prefix, in key order.
func (s *Store) Scan(prefix string, fn func(key string, value []byte) error) error {
	h, err := s.acquire()
	if err != nil {
		return fmt.Errorf("scanning registry: %w", err)
	}
	defer h.release()
	lo := []byte(prefixRegistry + prefix)
	it, err := h.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return fmt.Errorf("scanning registry: %w", err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		if err := fn(string(it.Key()[len(prefixRegistry):]), bytes.Clone(it.Value())); err != nil {
			return err
		}
	}
	return it.Error()
}

// Write is a set of registry changes applied atomically, alone or together
// with a checkpoint.
type Write struct {
	puts    map[string][]byte
	deletes []string
}

// Put records a registry write.
func (w *Write) Put(key string, value []byte) {
	if w.puts == nil {
		w.puts = map[string][]byte{}
	}
	w.puts[key] = value
}

// Delete records a registry deletion.
func (w *Write) Delete(key string) { w.deletes = append(w.deletes, key) }

// Apply commits w durably.
func (s *Store) Apply(w *Write) error {
	h, err := s.acquire()
	if err != nil {
		return fmt.Errorf("writing registry: %w", err)
	}
	defer h.release()
	b := h.db.NewBatch()
	defer b.Close()
	if err := applyWrite(b, w); err != nil {
		return fmt.Errorf("writing registry: %w", err)
	}
	if err := h.commit(b); err != nil {
		return fmt.Errorf("writing registry: %w", err)
	}
	return nil
}

// ---- namespaces ----

func nsKey(lineage, step string) []byte {
	return []byte(prefixNamespace + lineage + "\x00" + step)
}

// Namespace returns the namespace ID bound to (lineage, step), creating one
// if the step has none yet.
func (s *Store) Namespace(lineage, step string) (uint32, error) {
	h, err := s.acquire()
	if err != nil {
		return 0, fmt.Errorf("allocating a state namespace: %w", err)
	}
	defer h.release()
	return h.namespace(lineage, step)
}

func (h *handle) namespace(lineage, step string) (uint32, error) {
	if id, ok, err := h.lookupNamespace(lineage, step); err != nil || ok {
		return id, err
	}
	b := h.db.NewIndexedBatch()
	defer b.Close()
	next := uint32(1)
	if v, closer, err := b.Get([]byte(keyNextNamespace)); err == nil {
		next = binary.BigEndian.Uint32(v)
		closer.Close()
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return 0, fmt.Errorf("allocating a state namespace: %w", err)
	}
	if err := b.Set([]byte(keyNextNamespace), binary.BigEndian.AppendUint32(nil, next+1), nil); err != nil {
		return 0, err
	}
	if err := b.Set(nsKey(lineage, step), binary.BigEndian.AppendUint32(nil, next), nil); err != nil {
		return 0, err
	}
	if err := h.commit(b); err != nil {
		return 0, fmt.Errorf("allocating a state namespace: %w", err)
	}
	return next, nil
}

func (h *handle) lookupNamespace(lineage, step string) (uint32, bool, error) {
	v, closer, err := h.db.Get(nsKey(lineage, step))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading the state namespace of step %q: %w", step, err)
	}
	defer closer.Close()
	return binary.BigEndian.Uint32(v), true, nil
}

// Rebind moves the namespace of step old to step new within a lineage (a
// rename during an update), as part of w's atomic write. The state itself
// is not touched.
func (s *Store) Rebind(w *Write, lineage, old, new string) error {
	h, err := s.acquire()
	if err != nil {
		return err
	}
	defer h.release()
	return h.rebind(w, lineage, old, new)
}

func (h *handle) rebind(w *Write, lineage, old, new string) error {
	id, ok, err := h.lookupNamespace(lineage, old)
	if err != nil || !ok {
		return err
	}
	w.rawPut(nsKey(lineage, new), binary.BigEndian.AppendUint32(nil, id))
	w.rawDelete(nsKey(lineage, old))
	return nil
}

// rawPut and rawDelete record writes of store-internal keys (namespace
// bindings) that must commit atomically with the registry changes.
func (w *Write) rawPut(k, v []byte) {
	if w.puts == nil {
		w.puts = map[string][]byte{}
	}
	w.puts["\x00raw\x00"+string(k)] = v
}

func (w *Write) rawDelete(k []byte) { w.deletes = append(w.deletes, "\x00raw\x00"+string(k)) }

func nsPrefix(ns uint32) []byte {
	return binary.BigEndian.AppendUint32([]byte(prefixState), ns)
}

func stateKey(ns uint32, kg uint16, key []byte) []byte {
	return appendStateKey(make([]byte, 0, len(prefixState)+6+len(key)), ns, kg, key)
}

// appendStateKey appends stateKey's key to out.
func appendStateKey(out []byte, ns uint32, kg uint16, key []byte) []byte {
	out = append(out, prefixState...)
	out = binary.BigEndian.AppendUint32(out, ns)
	out = binary.BigEndian.AppendUint16(out, kg)
	return append(out, key...)
}

// checkpointBatchSize is about the bytes a batch holding cp's state takes
// (keys, values and each record's few bytes of framing), so that the batch
// is allocated once instead of copied at each growth (a full checkpoint of
// millions of keys is hundreds of megabytes).
func checkpointBatchSize(cp *contract.Checkpoint) int {
	n := 1 << 10
	for _, e := range cp.State {
		n += len(prefixState) + 6 + len(e.Key) + len(e.Value) + 12
	}
	return n
}

// ---- checkpoints ----

// CheckpointRecord is what the store keeps of a job's latest checkpoint
// besides keyed state.
type CheckpointRecord struct {
	JobID     string              `json:"job_id"`
	Epoch     uint64              `json:"epoch"`
	Positions map[string][][]byte `json:"positions"`
	SinkParts map[string][][]byte `json:"sink_parts"`
}

// WriteCheckpoint durably writes cp for job jobID of lineage in one atomic,
// synced batch: the changed keyed state, the checkpoint record, and the
// registry changes in w (a state transition recorded with the checkpoint).
func (s *Store) WriteCheckpoint(lineage, jobID string, cp *contract.Checkpoint, w *Write) error {
	h, err := s.acquire()
	if err != nil {
		return fmt.Errorf("writing checkpoint %d: %w", cp.Epoch, err)
	}
	defer h.release()
	b := h.db.NewBatchWithSize(checkpointBatchSize(cp))
	defer b.Close()
	if err := h.writeCheckpointBatch(b, lineage, jobID, cp, w); err != nil {
		return err
	}
	if err := h.commit(b); err != nil {
		return fmt.Errorf("writing checkpoint %d: %w", cp.Epoch, err)
	}
	return nil
}

func (h *handle) writeCheckpointBatch(b *pebble.Batch, lineage, jobID string, cp *contract.Checkpoint, w *Write) error {
	if cp.Incomplete() {
		return fmt.Errorf("checkpoint %d of job %s is not complete: its keyed state is still being encoded (call Checkpoint.Complete first)", cp.Epoch, jobID)
	}
	nss := map[string]uint32{}
	var k []byte // the entry's store key; the batch copies it
	for _, e := range cp.State {
		ns, ok := nss[e.Step]
		if !ok {
			var err error
			if ns, err = h.namespace(lineage, e.Step); err != nil {
				return err
			}
			nss[e.Step] = ns
		}
		k = appendStateKey(k[:0], ns, e.KeyGroup, e.Key)
		var err error
		if e.Value == nil {
			err = b.Delete(k, nil)
		} else {
			err = b.Set(k, e.Value, nil)
		}
		if err != nil {
			return fmt.Errorf("writing checkpoint %d: %w", cp.Epoch, err)
		}
	}
	rec, err := json.Marshal(CheckpointRecord{JobID: jobID, Epoch: cp.Epoch, Positions: cp.Positions, SinkParts: cp.SinkParts})
	if err != nil {
		return fmt.Errorf("encoding checkpoint %d: %w", cp.Epoch, err)
	}
	if err := b.Set([]byte(prefixCheckpoint+jobID), rec, nil); err != nil {
		return err
	}
	return applyWrite(b, w)
}

func applyWrite(b *pebble.Batch, w *Write) error {
	if w == nil {
		return nil
	}
	for k, v := range w.puts {
		key := []byte(prefixRegistry + k)
		if raw, ok := bytes.CutPrefix([]byte(k), []byte("\x00raw\x00")); ok {
			key = raw
		}
		if err := b.Set(key, v, nil); err != nil {
			return err
		}
	}
	for _, k := range w.deletes {
		key := []byte(prefixRegistry + k)
		if raw, ok := bytes.CutPrefix([]byte(k), []byte("\x00raw\x00")); ok {
			key = raw
		}
		if err := b.Delete(key, nil); err != nil {
			return err
		}
	}
	return nil
}

// Handover describes an in-place update: the old job's final checkpoint
// becomes the new job's starting point in the same atomic write.
type Handover struct {
	Lineage string
	OldJob  string
	NewJob  string
	// Renames maps old step names to new ones (the compatibility check's
	// matches whose names differ): their state namespaces are rebound.
	Renames map[string]string
	// Drops lists old steps whose state is deleted on purpose.
	Drops []string
	// Positions maps new source step names to the old positions they take
	// over (sources renamed by the mapping, or kept).
	Positions map[string][][]byte
}

// WriteHandover durably writes the old job's final checkpoint cp and hands
// it to the new job in one synced batch: cp's state changes, the old job's
// checkpoint record, the new job's (same epoch, positions under the new
// step names; no sink parts: the old job commits those), namespace rebinds
// for renamed steps, deletion of dropped steps' state, and the registry changes in w (the old job
// becoming UPDATED and the new one RUNNING). Handover is metadata: the
// state itself is not copied.
func (s *Store) WriteHandover(h Handover, cp *contract.Checkpoint, w *Write) error {
	if w == nil {
		w = &Write{}
	}
	sh, err := s.acquire()
	if err != nil {
		return fmt.Errorf("writing the handover from job %s to %s: %w", h.OldJob, h.NewJob, err)
	}
	defer sh.release()
	for old, nw := range h.Renames {
		if old == nw {
			continue
		}
		if err := sh.rebind(w, h.Lineage, old, nw); err != nil {
			return fmt.Errorf("handing over the state of step %q to %q: %w", old, nw, err)
		}
	}
	var dropRanges [][2][]byte
	for _, step := range h.Drops {
		id, ok, err := sh.lookupNamespace(h.Lineage, step)
		if err != nil {
			return err
		}
		if ok {
			dropRanges = append(dropRanges, [2][]byte{nsPrefix(id), prefixEnd(nsPrefix(id))})
			w.rawDelete(nsKey(h.Lineage, step))
		}
	}
	// The old job commits its own sink parts (they are its sinks' epoch);
	// the new job starts with positions and epoch numbering only.
	next, err := json.Marshal(CheckpointRecord{JobID: h.NewJob, Epoch: cp.Epoch, Positions: h.Positions})
	if err != nil {
		return fmt.Errorf("encoding the handover checkpoint: %w", err)
	}
	w.rawPut([]byte(prefixCheckpoint+h.NewJob), next)
	b := sh.db.NewBatchWithSize(checkpointBatchSize(cp))
	defer b.Close()
	for _, r := range dropRanges {
		if err := b.DeleteRange(r[0], r[1], nil); err != nil {
			return err
		}
	}
	if err := sh.writeCheckpointBatch(b, h.Lineage, h.OldJob, cp, w); err != nil {
		return err
	}
	if err := sh.commit(b); err != nil {
		return fmt.Errorf("writing the handover from job %s to %s: %w", h.OldJob, h.NewJob, err)
	}
	return nil
}

// LastCheckpoint returns the latest checkpoint record of job jobID.
func (s *Store) LastCheckpoint(jobID string) (*CheckpointRecord, error) {
	h, err := s.acquire()
	if err != nil {
		return nil, fmt.Errorf("reading the checkpoint of job %s: %w", jobID, err)
	}
	defer h.release()
	v, closer, err := h.db.Get([]byte(prefixCheckpoint + jobID))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("checkpoint of job %s: %w", jobID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the checkpoint of job %s: %w", jobID, err)
	}
	defer closer.Close()
	var rec CheckpointRecord
	if err := json.Unmarshal(v, &rec); err != nil {
		return nil, fmt.Errorf("decoding the checkpoint of job %s: %w", jobID, err)
	}
	return &rec, nil
}

// Restore returns what a new execution of job jobID (of lineage) resumes
// from, or nil when the job has no checkpoint yet.
func (s *Store) Restore(lineage, jobID string) (*contract.Restore, *contract.Checkpoint, error) {
	rec, err := s.LastCheckpoint(jobID)
	if errors.Is(err, ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	cp := &contract.Checkpoint{Epoch: rec.Epoch, Positions: rec.Positions, SinkParts: rec.SinkParts}
	return &contract.Restore{Epoch: rec.Epoch, Positions: rec.Positions, State: &reader{s: s, lineage: lineage}}, cp, nil
}

// StateReader returns a reader of the keyed state of lineage.
func (s *Store) StateReader(lineage string) contract.StateReader {
	return &reader{s: s, lineage: lineage}
}

type reader struct {
	s       *Store
	lineage string
}

func (r *reader) Scan(ctx context.Context, step string, keyGroups []int, fn func(kg uint16, key, value []byte) error) error {
	h, err := r.s.acquire()
	if err != nil {
		return fmt.Errorf("scanning the state of step %q: %w", step, err)
	}
	defer h.release()
	ns, ok, err := h.lookupNamespace(r.lineage, step)
	if err != nil || !ok {
		return err
	}
	lo := nsPrefix(ns)
	it, err := h.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return fmt.Errorf("scanning the state of step %q: %w", step, err)
	}
	defer it.Close()
	// Key groups are contiguous per worker; seek to each.
	for _, kg := range keyGroups {
		start := stateKey(ns, uint16(kg), nil)
		end := prefixEnd(start)
		for it.SeekGE(start); it.Valid() && bytes.Compare(it.Key(), end) < 0; it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			k := it.Key()[len(start):]
			// The iterator's buffers are lent to fn (the contract says
			// fn copies what it keeps): a restore of millions of keys
			// then copies each key and value once, not twice.
			if err := fn(uint16(kg), k, it.Value()); err != nil {
				return err
			}
		}
	}
	return it.Error()
}

// DropState deletes the keyed state of a step of lineage (a step deleted on
// purpose by an update, or a lineage that ended).
func (s *Store) DropState(lineage, step string) error {
	h, err := s.acquire()
	if err != nil {
		return fmt.Errorf("dropping the state of step %q: %w", step, err)
	}
	defer h.release()
	ns, ok, err := h.lookupNamespace(lineage, step)
	if err != nil || !ok {
		return err
	}
	lo := nsPrefix(ns)
	b := h.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange(lo, prefixEnd(lo), nil); err != nil {
		return err
	}
	if err := b.Delete(nsKey(lineage, step), nil); err != nil {
		return err
	}
	return h.commit(b)
}

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}
