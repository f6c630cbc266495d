package state

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// What export and import of portable snapshot files need of the store:
// the snapshot's keys, read from a pinned view, and a batch of them to
// commit with the snapshot's READY record. The file format is the job
// service's (service/snapshot_file.go).

// SnapshotEntries calls fn for every key of snapshot id's data as pin sees
// it, in key order, with the key relative to the snapshot's key space:
// "cp" (the cut's checkpoint record) and "s/<step>\x00<kg><key>" (keyed
// state). The slices are valid only during the call.
func (s *Store) SnapshotEntries(pin *Pinned, id string, fn func(rel, value []byte) error) error {
	if pin.err != nil {
		return fmt.Errorf("reading snapshot %s: %w", id, pin.err)
	}
	lo := snapPrefix(id)
	it, err := pin.snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return fmt.Errorf("reading snapshot %s: %w", id, err)
	}
	for it.First(); it.Valid(); it.Next() {
		if err := fn(it.Key()[len(lo):], it.Value()); err != nil {
			it.Close()
			return err
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return fmt.Errorf("reading snapshot %s: %w", id, err)
	}
	return nil
}

// NewSnapshotBatch returns an empty batch of snapshot id's data, to fill
// with Put (an import) and commit with the snapshot's READY record.
//
// While the store is being reopened the batch is bound to no database:
// its Put and Commit fail with the store's error.
func (s *Store) NewSnapshotBatch(id string) *SnapshotBatch {
	h, err := s.acquire()
	if err != nil {
		return &SnapshotBatch{id: id, err: err}
	}
	return &SnapshotBatch{h: h, id: id, b: h.db.NewBatch()}
}

// Put adds one key of the snapshot's data; rel is relative to its key
// space, as SnapshotEntries gives it: "cp" or "s/<step>\x00...".
func (sb *SnapshotBatch) Put(rel, value []byte) error {
	if !bytes.Equal(rel, []byte("cp")) && !bytes.HasPrefix(rel, []byte("s/")) {
		return fmt.Errorf("snapshot %s: key %q is not a snapshot key", sb.id, rel)
	}
	if sb.err != nil {
		return fmt.Errorf("snapshot %s: %w", sb.id, sb.err)
	}
	k := append(snapPrefix(sb.id), rel...)
	if err := sb.b.Set(k, value, nil); err != nil {
		return fmt.Errorf("snapshot %s: %w", sb.id, err)
	}
	sb.Size += int64(len(k) + len(value))
	return nil
}

// StreamSnapshot is BuildSnapshot in bounded batches: it reads the full
// keyed state of cut's steps as pin sees it into batches for snapshot id
// of about limit bytes each, and calls commit with each full batch (last
// false) and finally with the rest and the cut's checkpoint record (last
// true). commit must Commit or Close the batch; an error from it stops the
// stream. The caller makes the snapshot complete only with the last batch
// (and removes what earlier batches wrote when it fails: DeleteSnapshot).
// It returns the bytes the snapshot takes.
func (s *Store) StreamSnapshot(id string, pin *Pinned, cut SnapshotCut, limit int64, commit func(sb *SnapshotBatch, last bool) error) (int64, error) {
	var total int64
	sb := s.NewSnapshotBatch(id)
	defer func() { sb.Close() }()
	flush := func(last bool) error {
		total += sb.Size
		done := sb
		sb = s.NewSnapshotBatch(id)
		return commit(done, last)
	}
	var key []byte
	for _, step := range cut.Steps {
		v, closer, err := pin.snap.Get(nsKey(cut.Lineage, step))
		if errors.Is(err, pebble.ErrNotFound) {
			continue
		}
		if err != nil {
			return total, fmt.Errorf("snapshot %s: reading the state namespace of step %q: %w", id, step, err)
		}
		ns := binary.BigEndian.Uint32(v)
		closer.Close()
		lo := nsPrefix(ns)
		it, err := pin.snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
		if err != nil {
			return total, fmt.Errorf("snapshot %s: scanning the state of step %q: %w", id, step, err)
		}
		dst := snapStatePrefix(id, step)
		for it.First(); it.Valid(); it.Next() {
			key = append(append(key[:0], dst...), it.Key()[len(lo):]...)
			if err := sb.b.Set(key, it.Value(), nil); err != nil { // Set copies
				it.Close()
				return total, fmt.Errorf("snapshot %s: %w", id, err)
			}
			sb.Size += int64(len(key) + len(it.Value()))
			if sb.Size >= limit {
				if err := flush(false); err != nil {
					it.Close()
					return total, err
				}
			}
		}
		if err := errors.Join(it.Error(), it.Close()); err != nil {
			return total, fmt.Errorf("snapshot %s: scanning the state of step %q: %w", id, step, err)
		}
	}
	rec, err := json.Marshal(cut.Record)
	if err != nil {
		return total, fmt.Errorf("snapshot %s: encoding its checkpoint record: %w", id, err)
	}
	cpKey := append(snapPrefix(id), "cp"...)
	if err := sb.b.Set(cpKey, rec, nil); err != nil {
		return total, fmt.Errorf("snapshot %s: %w", id, err)
	}
	sb.Size += int64(len(cpKey) + len(rec))
	err = flush(true)
	return total, err
}
