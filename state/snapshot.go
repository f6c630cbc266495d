package state

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Snapshots of jobs live in their own key space, independent of the job's
// lineage and checkpoints:
//
//	snap/<id>/cp                       the cut's CheckpointRecord (epoch,
//	                                   positions, sink parts), JSON
//	snap/<id>/s/<step>\x00<kg><key>    every key of every step's keyed state
//	                                   as of the cut (not only the keys the
//	                                   cut's checkpoint changed)
//
// A snapshot's data is written in ONE synced batch together with the
// registry write that marks it complete (the service's READY record), so
// a snapshot is either complete or has no data at all (BuildSnapshot,
// SnapshotBatch.Commit) — or, streamed into table files (StreamSnapshot,
// snapshot_ingest.go), the files are ingested just before that write and
// the caller removes them (DeleteSnapshot) when it cannot make the
// snapshot complete. Nothing but
// DeleteSnapshot ever removes or changes those keys: later checkpoints,
// handovers, DropState and the job's end write other key spaces.
const prefixSnapshot = "snap/"

func snapPrefix(id string) []byte { return []byte(prefixSnapshot + id + "/") }

func snapStatePrefix(id, step string) []byte {
	return []byte(prefixSnapshot + id + "/s/" + step + "\x00")
}

// Pinned is a consistent, read-only view of the whole store at one moment
// (a Pebble snapshot): the cut a job snapshot copies from while the job's
// later checkpoints write on. Release it when done.
type Pinned struct {
	h    *handle // referenced until Release; nil when err is set
	snap *pebble.Snapshot
	err  error // the store could not be pinned (it is being reopened)
}

// Pin returns a view of the store as it is now. The caller makes sure that
// no write it must exclude runs concurrently (the job service pins under
// its store lock, right after the cut's checkpoint write).
// A view of a store that is being reopened carries the error, which the
// functions reading it return.
func (s *Store) Pin() *Pinned {
	h, err := s.acquire()
	if err != nil {
		return &Pinned{err: fmt.Errorf("pinning a view of the store: %w", err)}
	}
	return &Pinned{h: h, snap: h.db.NewSnapshot()}
}

// Release lets go of the view.
func (p *Pinned) Release() error {
	if p.h == nil {
		return nil
	}
	defer p.h.release()
	p.h = nil
	if err := p.snap.Close(); err != nil {
		return fmt.Errorf("releasing a pinned view of the store: %w", err)
	}
	return nil
}

// SnapshotCut is what a job snapshot copies: the steps whose keyed state
// it keeps (every step of the job's graph; those without state are
// skipped) and the cut's checkpoint record.
type SnapshotCut struct {
	Lineage string
	Steps   []string
	Record  CheckpointRecord
	// Names, when a step is in it, names the lineage step whose state the
	// snapshot keeps under the step's own name (a rollback snapshot taken
	// after a handover that renamed steps reads the renamed namespaces).
	Names map[string]string
	// OnState, when set, is called with each entry of keyed state the
	// snapshot copies, by step (the value is valid during the call only):
	// how a caller counts what the snapshot holds without reading it again.
	OnState func(step string, value []byte)
}

// SnapshotBatch is a job snapshot's data, read from a pinned view and
// not yet written: the caller commits it with the registry write that
// marks the snapshot complete, or closes it to write nothing.
type SnapshotBatch struct {
	h   *handle // referenced until Commit or Close; nil when err is set
	id  string
	b   *pebble.Batch
	err error // the store could not give a database (it is being reopened)
	// files are table files of the snapshot's state not yet ingested
	// (StreamSnapshot), on fs; Close removes them.
	files []string
	fs    vfs.FS
	// Size is the bytes the snapshot takes (keys and values).
	Size int64
}

// BuildSnapshot reads the full keyed state of cut's steps as pin sees it,
// and cut's checkpoint record, into a batch for snapshot id's own key
// space. It writes nothing: see SnapshotBatch.
func (s *Store) BuildSnapshot(id string, pin *Pinned, cut SnapshotCut) (_ *SnapshotBatch, err error) {
	if pin.err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", id, pin.err)
	}
	// The batch goes to the database the view was pinned on: its commit
	// fails if that one failed meanwhile.
	pin.h.refs.Add(1)
	sb := &SnapshotBatch{h: pin.h, id: id, b: pin.h.db.NewBatch()}
	defer func() {
		if err != nil {
			sb.Close()
		}
	}()
	if err := scanCut(id, pin, cut, func(k, v []byte) error {
		if err := sb.b.Set(k, v, nil); err != nil { // Set copies
			return fmt.Errorf("snapshot %s: %w", id, err)
		}
		sb.Size += int64(len(k) + len(v))
		return nil
	}); err != nil {
		return nil, err
	}
	if err := sb.putRecord(cut); err != nil {
		return nil, err
	}
	return sb, nil
}

// scanCut calls fn with every key of the keyed state of cut's steps as pin
// sees it, under snapshot id's key space (snap/<id>/s/<step>\x00<key
// group><key>), with its value, in ascending key order: steps in the order
// of their key space (snap/<id>/s/<step>\x00 sorts as the step names do),
// each one's keys in the store's. A step of cut.Names is read from the
// lineage step it names. The slices are valid only during the call.
func scanCut(id string, pin *Pinned, cut SnapshotCut, fn func(key, value []byte) error) error {
	steps := slices.Clone(cut.Steps)
	slices.Sort(steps)
	steps = slices.Compact(steps)
	var key []byte
	for _, step := range steps {
		src := step
		if n, ok := cut.Names[step]; ok {
			src = n
		}
		v, closer, err := pin.snap.Get(nsKey(cut.Lineage, src))
		if errors.Is(err, pebble.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("snapshot %s: reading the state namespace of step %q: %w", id, step, err)
		}
		ns := binary.BigEndian.Uint32(v)
		closer.Close()
		lo := nsPrefix(ns)
		it, err := pin.snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
		if err != nil {
			return fmt.Errorf("snapshot %s: scanning the state of step %q: %w", id, step, err)
		}
		dst := snapStatePrefix(id, step)
		for it.First(); it.Valid(); it.Next() {
			key = append(append(key[:0], dst...), it.Key()[len(lo):]...)
			if cut.OnState != nil {
				cut.OnState(step, it.Value())
			}
			if err := fn(key, it.Value()); err != nil {
				it.Close()
				return err
			}
		}
		if err := errors.Join(it.Error(), it.Close()); err != nil {
			return fmt.Errorf("snapshot %s: scanning the state of step %q: %w", id, step, err)
		}
	}
	return nil
}

// putRecord adds the cut's checkpoint record (snap/<id>/cp) to the batch.
func (sb *SnapshotBatch) putRecord(cut SnapshotCut) error {
	rec, err := json.Marshal(cut.Record)
	if err != nil {
		return fmt.Errorf("snapshot %s: encoding its checkpoint record: %w", sb.id, err)
	}
	cpKey := append(snapPrefix(sb.id), "cp"...)
	if err := sb.b.Set(cpKey, rec, nil); err != nil {
		return fmt.Errorf("snapshot %s: %w", sb.id, err)
	}
	sb.Size += int64(len(cpKey) + len(rec))
	return nil
}

// Commit writes the snapshot's data with the registry changes w (the
// snapshot's complete record) in one synced batch, and closes sb. Table
// files that Ingest has not added yet are ingested first.
func (sb *SnapshotBatch) Commit(w *Write) error {
	if sb.err != nil {
		return fmt.Errorf("writing snapshot %s: %w", sb.id, sb.err)
	}
	defer sb.Close()
	if err := sb.Ingest(context.Background()); err != nil {
		return err
	}
	if err := applyWrite(sb.b, w); err != nil {
		return fmt.Errorf("snapshot %s: %w", sb.id, err)
	}
	if err := sb.h.commit(sb.b); err != nil {
		return fmt.Errorf("writing snapshot %s: %w", sb.id, err)
	}
	return nil
}

// Close drops what sb holds; after Commit it does nothing.
func (sb *SnapshotBatch) Close() {
	if sb.b != nil {
		sb.removeFiles()
		sb.b.Close()
		sb.b = nil
		sb.h.release()
	}
}

// SnapshotRecord returns the checkpoint record of snapshot id.
func (s *Store) SnapshotRecord(id string) (*CheckpointRecord, error) {
	h, err := s.acquire()
	if err != nil {
		return nil, fmt.Errorf("reading snapshot %s: %w", id, err)
	}
	defer h.release()
	v, closer, err := h.db.Get(append(snapPrefix(id), "cp"...))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("snapshot %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading snapshot %s: %w", id, err)
	}
	defer closer.Close()
	var rec CheckpointRecord
	if err := json.Unmarshal(v, &rec); err != nil {
		return nil, fmt.Errorf("decoding snapshot %s: %w", id, err)
	}
	return &rec, nil
}

// DeleteSnapshot removes every key of snapshot id, with the registry
// changes w (its tombstone record), in one synced batch.
func (s *Store) DeleteSnapshot(id string, w *Write) error {
	h, err := s.acquire()
	if err != nil {
		return fmt.Errorf("deleting snapshot %s: %w", id, err)
	}
	defer h.release()
	b := h.db.NewBatch()
	defer b.Close()
	lo := snapPrefix(id)
	if err := b.DeleteRange(lo, prefixEnd(lo), nil); err != nil {
		return fmt.Errorf("deleting snapshot %s: %w", id, err)
	}
	if err := applyWrite(b, w); err != nil {
		return fmt.Errorf("deleting snapshot %s: %w", id, err)
	}
	if err := h.commit(b); err != nil {
		return fmt.Errorf("deleting snapshot %s: %w", id, err)
	}
	return nil
}

// SnapshotRestore says how job JobID of Lineage starts from a snapshot: the
// state of each snapshot step in Steps (snapshot step name → the new job's
// step name) is copied into the lineage's namespace of the new step, which
// is emptied first (state an earlier job of the lineage left), and the new
// job's checkpoint record is rec. All of it, with the registry changes w
// (the new job's record and its name's lineage), is one synced batch.
type SnapshotRestore struct {
	Lineage string
	JobID   string
	Steps   map[string]string
	// Clear lists steps of the new job whose lineage state is emptied
	// without anything copied in (steps the snapshot has no state for).
	Clear  []string
	Record CheckpointRecord
}

// RestoreSnapshot writes r (see SnapshotRestore) from snapshot id in one
// synced batch, with the registry changes w.
func (s *Store) RestoreSnapshot(id string, r SnapshotRestore, w *Write) error {
	if w == nil {
		w = &Write{}
	}
	h, err := s.acquire()
	if err != nil {
		return fmt.Errorf("restoring snapshot %s: %w", id, err)
	}
	defer h.release()
	b := h.db.NewBatch()
	defer b.Close()
	clear := func(step string) (uint32, error) {
		ns, ok, err := h.lookupNamespace(r.Lineage, step)
		if err != nil {
			return 0, err
		}
		if !ok {
			return h.namespace(r.Lineage, step)
		}
		return ns, b.DeleteRange(nsPrefix(ns), prefixEnd(nsPrefix(ns)), nil)
	}
	for _, step := range r.Clear {
		if _, err := clear(step); err != nil {
			return fmt.Errorf("restoring snapshot %s: emptying the state of step %q: %w", id, step, err)
		}
	}
	for old, nw := range r.Steps {
		ns, err := clear(nw)
		if err != nil {
			return fmt.Errorf("restoring snapshot %s: emptying the state of step %q: %w", id, nw, err)
		}
		lo := snapStatePrefix(id, old)
		it, err := h.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
		if err != nil {
			return fmt.Errorf("restoring snapshot %s: %w", id, err)
		}
		// The batch copies key and value, so one key buffer serves every
		// entry.
		key := nsPrefix(ns)
		dst := len(key)
		for it.First(); it.Valid(); it.Next() {
			key = append(key[:dst], it.Key()[len(lo):]...)
			if err := b.Set(key, it.Value(), nil); err != nil {
				it.Close()
				return fmt.Errorf("restoring snapshot %s: %w", id, err)
			}
		}
		if err := errors.Join(it.Error(), it.Close()); err != nil {
			return fmt.Errorf("restoring snapshot %s: reading the state of step %q: %w", id, old, err)
		}
	}
	rec, err := json.Marshal(r.Record)
	if err != nil {
		return fmt.Errorf("restoring snapshot %s: %w", id, err)
	}
	if err := b.Set([]byte(prefixCheckpoint+r.JobID), rec, nil); err != nil {
		return err
	}
	if err := applyWrite(b, w); err != nil {
		return fmt.Errorf("restoring snapshot %s: %w", id, err)
	}
	if err := h.commit(b); err != nil {
		return fmt.Errorf("restoring snapshot %s into job %s: %w", id, r.JobID, err)
	}
	return nil
}
