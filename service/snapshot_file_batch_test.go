package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/errcode"

	"github.com/weir-dev/weir/state"
)

// openServiceHooks opens a service on dataDir with the test hooks h; it
// is closed when the test ends (if the test has not closed it).
func openServiceHooks(t *testing.T, dataDir string, h Hooks) *Service {
	t.Helper()
	s, err := open(context.Background(), Options{DataDir: dataDir, CheckpointInterval: 50 * time.Millisecond,
		Clock: testClock{base: time.Now()}, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// exportedFile takes a snapshot of a running job and returns it exported.
func exportedFile(t *testing.T, dir string) (*record.Snapshot, []byte) {
	t.Helper()
	s := openService(t, filepath.Join(dir, "data"))
	v1 := submit(t, s, "totals", snapshotPipeline(filepath.Join(dir, "job.sqlite"), "Sums"), dir)
	waitElements(t, s, v1.ID, "Events", 400)
	snap := snapshotOf(t, s, "totals")
	cancelAndWait(t, s, v1.ID)
	var file bytes.Buffer
	if _, err := s.ExportSnapshot(context.Background(), snap.ID, &file); err != nil {
		t.Fatalf("ExportSnapshot: %v", err)
	}
	return snap, file.Bytes()
}

// assertAbsent checks that snapshot id has no record and no data in s.
func assertAbsent(t *testing.T, s *Service, id string) {
	t.Helper()
	if got, err := s.GetSnapshot(id); errcode.Of(err) != errcode.SnapshotNotFound {
		t.Errorf("snapshot %s after a failed import: %+v, %v; want SNAPSHOT_NOT_FOUND", id, got, err)
	}
	if _, err := s.core.Store.SnapshotRecord(id); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("snapshot %s after a failed import still has data: %v", id, err)
	}
	n := 0
	pin := s.core.Store.Pin()
	defer pin.Release()
	if err := s.core.Store.SnapshotEntries(pin, id, func(_, _ []byte) error { n++; return nil }); err != nil || n != 0 {
		t.Errorf("snapshot %s after a failed import: %d keys left (%v)", id, n, err)
	}
	if err := s.core.Store.Scan("snapimport/", func(k string, _ []byte) error { return errors.New("mark left: " + k) }); err != nil {
		t.Error(err)
	}
}

// TestSnapshotImportInBatches: a large import is written in bounded
// batches, and until the last one lands with the READY record the
// snapshot is PENDING — listed as such, and no job can start from it; a
// failure between batches, and a stop between batches followed by Open,
// leave no trace of it.
func TestSnapshotImportInBatches(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	snap, file := exportedFile(t, dir)
	ctx := context.Background()

	t.Run("complete", func(t *testing.T) {
		var s2 *Service
		var seen []record.SnapshotState
		s2 = openServiceHooks(t, filepath.Join(dir, "ok"), Hooks{ImportBatchBytes: 64, ImportBatch: func(id string, n int) error {
			cur, err := s2.GetSnapshot(id)
			if err != nil {
				return err
			}
			seen = append(seen, cur.State)
			if n == 1 {
				list, err := s2.ListSnapshots("", false)
				if err != nil || len(list) != 1 || list[0].State != record.SnapshotPending {
					t.Errorf("list mid-import: %+v, %v", list, err)
				}
				_, err = s2.CreateFromSnapshot(ctx, FromSnapshotRequest{SubmitRequest: SubmitRequest{Name: "early",
					Pipeline: snapshotPipeline(filepath.Join(dir, "early.sqlite"), "Sums"), BaseDir: dir}, SnapshotID: id})
				if errcode.Of(err) != errcode.SnapshotCorrupt {
					t.Errorf("create-from-snapshot mid-import: %v, want a refusal (not READY)", err)
				}
			}
			return nil
		}})
		imp, err := s2.ImportSnapshot(ctx, bytes.NewReader(file), 0)
		if err != nil {
			t.Fatalf("ImportSnapshot: %v", err)
		}
		if len(seen) < 3 {
			t.Fatalf("the import wrote %d intermediate batches of ≤64 bytes for a %d-byte snapshot, want several", len(seen), snap.DiskSizeBytes)
		}
		for i, st := range seen {
			if st != record.SnapshotPending {
				t.Errorf("after batch %d the snapshot is %s, want PENDING", i+1, st)
			}
		}
		if imp.State != record.SnapshotReady || imp.DiskSizeBytes != snap.DiskSizeBytes {
			t.Errorf("imported %s with %d bytes, want READY with %d", imp.State, imp.DiskSizeBytes, snap.DiskSizeBytes)
		}
		var got bytes.Buffer
		if _, err := s2.ExportSnapshot(ctx, imp.ID, &got); err != nil {
			t.Fatal(err)
		}
		if _, err := VerifySnapshotFile(bytes.NewReader(got.Bytes())); err != nil {
			t.Errorf("the imported snapshot exports a bad file: %v", err)
		}
		if err := s2.core.Store.Scan("snapimport/", func(k string, _ []byte) error { return errors.New("mark left: " + k) }); err != nil {
			t.Error(err)
		}
	})

	t.Run("failure between batches", func(t *testing.T) {
		boom := errors.New("injected failure")
		s2 := openServiceHooks(t, filepath.Join(dir, "fail"), Hooks{ImportBatchBytes: 64, ImportBatch: func(_ string, n int) error {
			if n == 2 {
				return boom
			}
			return nil
		}})
		if _, err := s2.ImportSnapshot(ctx, bytes.NewReader(file), 0); !errors.Is(err, boom) {
			t.Fatalf("ImportSnapshot: %v, want the injected failure", err)
		}
		assertAbsent(t, s2, snap.ID)
		// The ID is free again: a later import succeeds.
		s3 := s2
		s3.core.Hooks = Hooks{}
		if imp, err := s3.ImportSnapshot(ctx, bytes.NewReader(file), 0); err != nil || imp.State != record.SnapshotReady {
			t.Fatalf("import after a failed one: %+v, %v", imp, err)
		}
	})

	t.Run("deleted while importing", func(t *testing.T) {
		var s2 *Service
		s2 = openServiceHooks(t, filepath.Join(dir, "del"), Hooks{ImportBatchBytes: 64, ImportBatch: func(id string, n int) error {
			if n == 1 {
				if _, err := s2.DeleteSnapshot(id); err != nil {
					t.Errorf("DeleteSnapshot mid-import: %v", err)
				}
			}
			return nil
		}})
		if _, err := s2.ImportSnapshot(ctx, bytes.NewReader(file), 0); errcode.Of(err) != errcode.SnapshotNotFound {
			t.Fatalf("ImportSnapshot of a snapshot deleted meanwhile: %v, want SNAPSHOT_NOT_FOUND", err)
		}
		if cur, err := s2.GetSnapshot(snap.ID); err != nil || cur.State != record.SnapshotDeleted {
			t.Errorf("after the delete: %+v, %v; want the DELETED tombstone", cur, err)
		}
		if _, err := s2.core.Store.SnapshotRecord(snap.ID); !errors.Is(err, state.ErrNotFound) {
			t.Errorf("a deleted import left data: %v", err)
		}
	})

	t.Run("stop between batches", func(t *testing.T) {
		// What a stop leaves: the PENDING record, the mark and some batches
		// of data; Open removes all of it.
		data := filepath.Join(dir, "stop")
		s2 := openServiceHooks(t, data, Hooks{})
		// The record, the mark and one batch of data, written as an import
		// writes them (snapshot_file.go: beginImport, then a batch).
		pending := *snap
		pending.State, pending.StateTime, pending.DiskSizeBytes = record.SnapshotPending, time.Now(), 0
		err := s2.core.Update(func(tx *Tx) error {
			w := &state.Write{}
			if err := core.PutJSON(w, record.SnapshotKey(snap.ID), &pending); err != nil {
				return err
			}
			w.Put("snapimport/"+snap.ID, []byte(time.Now().Format(time.RFC3339Nano)))
			return tx.Apply(w)
		})
		if err != nil {
			t.Fatal(err)
		}
		sb := s2.core.Store.NewSnapshotBatch(snap.ID)
		for i := range 5 {
			if err := sb.Put([]byte(fmt.Sprintf("s/Sums\x00%d", i)), []byte("v")); err != nil {
				t.Fatal(err)
			}
		}
		err = s2.core.Update(func(tx *Tx) error { return tx.WriteSnapshot(sb, &state.Write{}) })
		if err != nil {
			t.Fatal(err)
		}
		m := struct{ Snapshot *record.Snapshot }{snap}
		if cur, err := s2.GetSnapshot(m.Snapshot.ID); err != nil || cur.State != record.SnapshotPending {
			t.Fatalf("mid-import: %+v, %v", cur, err)
		}
		if err := s2.Close(ctx); err != nil {
			t.Fatal(err)
		}
		s3 := openServiceHooks(t, data, Hooks{})
		assertAbsent(t, s3, m.Snapshot.ID)
	})
}
