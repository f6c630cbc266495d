package state

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/weir-dev/weir/runner/contract"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// failingWAL returns a file system whose WAL writes fail while the toggle
// is on.
func failingWAL(inject *errorfs.Toggle) vfs.FS {
	inject.Injector = errorfs.ErrInjected
	return errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !strings.HasSuffix(op.Path, ".log") {
			return nil
		}
		switch op.Kind {
		case errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
			return inject.MaybeError(op)
		}
		return nil
	}))
}

// TestReopenAfterFailure: a store whose WAL write failed is reopened in
// place once the disk works again. It then writes again; it holds every
// write that was durable before the failure and not the failed one; reads
// running concurrently with the swap never panic and either answer or
// fail with ErrStoreFailed; a healthy store is left alone; and while the
// disk still fails, the reopened store stays failed.
func TestReopenAfterFailure(t *testing.T) {
	var inject errorfs.Toggle
	s, err := open(t.TempDir(), nil, failingWAL(&inject))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cp := func(epoch uint64) *contract.Checkpoint {
		return &contract.Checkpoint{Epoch: epoch, Positions: map[string][][]byte{"Read": {[]byte{byte(epoch)}}},
			State: []contract.StateEntry{{Step: "Count", KeyGroup: 1, Key: []byte("k"), Value: []byte{byte(epoch)}}}}
	}
	var w Write
	w.Put("job/j1", []byte("epoch 1"))
	if err := s.WriteCheckpoint("orders", "j1", cp(1), &w); err != nil {
		t.Fatal(err)
	}
	if err := s.Reopen(context.Background()); err != nil {
		t.Fatalf("Reopen of a healthy store: %v", err)
	}

	inject.On()
	var w2 Write
	w2.Put("job/j1", []byte("epoch 2"))
	if err := s.WriteCheckpoint("orders", "j1", cp(2), &w2); !errors.Is(err, ErrStoreFailed) {
		t.Fatalf("checkpoint 2 on a failing disk: %v, want ErrStoreFailed", err)
	}

	// Readers hammer the store while it is swapped.
	var stop atomic.Bool
	var wg sync.WaitGroup
	var answered, refused atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				_, err := s.Get("job/j1")
				switch {
				case err == nil:
					answered.Add(1)
				case errors.Is(err, ErrStoreFailed):
					refused.Add(1)
				default:
					t.Errorf("read during the swap: %v", err)
					return
				}
				pin := s.Pin()
				_ = s.SnapshotEntries(pin, "none", func(_, _ []byte) error { return nil })
				_ = pin.Release()
			}
		}()
	}

	// The disk still fails: the reopened store fails at its first write.
	if err := s.Reopen(context.Background()); err != nil {
		t.Logf("reopen on a failing disk: %v", err)
	}
	if err := s.Apply(&w2); !errors.Is(err, ErrStoreFailed) {
		t.Errorf("write after a reopen on a failing disk: %v, want ErrStoreFailed", err)
	}

	inject.Off()
	if err := s.Reopen(context.Background()); err != nil {
		t.Fatalf("Reopen once the disk works: %v", err)
	}
	stop.Store(true)
	wg.Wait()
	if answered.Load() == 0 {
		t.Errorf("no read answered while the store was swapped (%d refused)", refused.Load())
	}
	if err := s.Failed(); err != nil {
		t.Fatalf("Failed() after the reopen: %v", err)
	}
	rec, err := s.LastCheckpoint("j1")
	if err != nil || rec.Epoch != 1 {
		t.Fatalf("last checkpoint after the reopen: %+v %v, want epoch 1 (2 never became durable)", rec, err)
	}
	if v, err := s.Get("job/j1"); err != nil || string(v) != "epoch 1" {
		t.Errorf("registry after the reopen: %q %v, want the durable \"epoch 1\"", v, err)
	}
	var w3 Write
	w3.Put("job/j1", []byte("epoch 3"))
	if err := s.WriteCheckpoint("orders", "j1", cp(3), &w3); err != nil {
		t.Fatalf("checkpoint 3 after the reopen: %v", err)
	}
	var got []byte
	if err := s.StateReader("orders").Scan(context.Background(), "Count", []int{1}, func(_ uint16, _, v []byte) error {
		got = bytes.Clone(v)
		return nil
	}); err != nil || len(got) != 1 || got[0] != 3 {
		t.Errorf("state after checkpoint 3: %v %v", got, err)
	}

	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := s.Get("job/j1"); !errors.Is(err, errStoreClosed) {
		t.Errorf("read after Close: %v, want the store closed (not a panic)", err)
	}
}

// TestReopenReadOnlyFallback: when the directory cannot be opened for
// writing (no file can be created: the disk is still full), Reopen opens
// it read-only, so reads go on answering what was durable, the store stays
// failed, and a later Reopen, once files can be created, makes it write.
func TestReopenReadOnlyFallback(t *testing.T) {
	var inject errorfs.Toggle
	inject.Injector = errorfs.ErrInjected
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		switch op.Kind {
		case errorfs.OpCreate, errorfs.OpReuseForWrite, errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
			if strings.Contains(op.Path, "LOCK") {
				return nil
			}
			return inject.MaybeError(op)
		}
		return nil
	}))
	s, err := open(t.TempDir(), nil, fs)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var w Write
	w.Put("job/j1", []byte("durable"))
	if err := s.Apply(&w); err != nil {
		t.Fatal(err)
	}
	inject.On()
	if err := s.Apply(&w); !errors.Is(err, ErrStoreFailed) {
		t.Fatalf("write on a failing disk: %v, want ErrStoreFailed", err)
	}
	err = s.Reopen(context.Background())
	if err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("Reopen while no file can be created: %v, want the read-only fallback", err)
	}
	if s.Failed() == nil {
		t.Error("the read-only store does not say it failed")
	}
	if v, err := s.Get("job/j1"); err != nil || string(v) != "durable" {
		t.Errorf("read from the read-only store: %q %v", v, err)
	}
	if err := s.Apply(&w); !errors.Is(err, ErrStoreFailed) {
		t.Errorf("write to the read-only store: %v, want ErrStoreFailed", err)
	}
	inject.Off()
	if err := s.Reopen(context.Background()); err != nil {
		t.Fatalf("Reopen once files can be created: %v", err)
	}
	w.Put("job/j1", []byte("again"))
	if err := s.Apply(&w); err != nil {
		t.Fatalf("write after the reopen: %v", err)
	}
	if v, err := s.Get("job/j1"); err != nil || string(v) != "again" {
		t.Errorf("read after the reopen: %q %v", v, err)
	}
}
