package state

import (
	"bytes"
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
