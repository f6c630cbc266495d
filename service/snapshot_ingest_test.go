package service

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/weir-dev/weir/service/record"
)

// snapshotDataKeys counts the keys of snapshot id's data in the store
// (its checkpoint record and its state).
func snapshotDataKeys(t *testing.T, s *Service, id string) int {
	t.Helper()
	pin := s.core.Store.Pin()
	defer pin.Release()
	n := 0
	if err := s.core.Store.SnapshotEntries(pin, id, func(_, _ []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSnapshotDeletedWhileCopiedLeavesNoData: a snapshot deleted after its
// state's files were written, before they join the store, has that state
// removed when they have joined (the delete found nothing to remove); the
// copy ends without error and the tombstone stays.
func TestSnapshotDeletedWhileCopiedLeavesNoData(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var s *Service
	deleted := make(chan error, 1)
	s = openServiceHooks(t, filepath.Join(dir, "data"), Hooks{SnapshotWrite: func(id string, _ int64) error {
		_, err := s.DeleteSnapshot(id)
		deleted <- err
		return nil
	}})
	j := submitCheckpointed(t, s, dir)
	snap, err := s.CreateSnapshot(context.Background(), SnapshotRequest{Job: j.ID})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-deleted; err != nil {
		t.Fatalf("DeleteSnapshot while copied: %v", err)
	}
	// Close waits for the copy to end.
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	s = openService(t, filepath.Join(dir, "data"))
	got, err := s.GetSnapshot(snap.ID)
	if err != nil || got.State != record.SnapshotDeleted {
		t.Fatalf("after the delete: %+v, %v; want DELETED", got, err)
	}
	if n := snapshotDataKeys(t, s, snap.ID); n != 0 {
		t.Fatalf("%d keys of a snapshot deleted while it was copied are left in the store", n)
	}
}
