package state

import (
	"errors"
	"strings"
	"testing"

	"github.com/weir-dev/weir/runner/contract"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// TestWriteErrorFailsStore: a write error in the WAL while a checkpoint is
// written makes that write return an error (never nil: Pebble reports it
// only through Logger.Fatalf and then returns nil from Commit), marks the
// store failed with the cause, and makes every write after it fail too,
// while reads keep answering.
func TestWriteErrorFailsStore(t *testing.T) {
	var inject errorfs.Toggle
	walWrites := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !strings.HasSuffix(op.Path, ".log") {
			return nil
		}
		switch op.Kind {
		case errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
			return inject.MaybeError(op)
		}
		return nil
	})
	inject.Injector = errorfs.ErrInjected
	s, err := open(t.TempDir(), nil, errorfs.Wrap(vfs.Default, walWrites))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cp := func(epoch uint64) *contract.Checkpoint {
		return &contract.Checkpoint{Epoch: epoch,
			Positions: map[string][][]byte{"Read": {[]byte("p")}},
			State:     []contract.StateEntry{{Step: "Count", KeyGroup: 1, Key: []byte("k"), Value: []byte{byte(epoch)}}}}
	}
	var w Write
	w.Put("job/j1", []byte("RUNNING"))
	if err := s.WriteCheckpoint("orders", "j1", cp(1), &w); err != nil {
		t.Fatalf("healthy checkpoint: %v", err)
	}
	if err := s.Failed(); err != nil {
		t.Fatalf("healthy store: Failed() = %v", err)
	}

	inject.On()
	err = s.WriteCheckpoint("orders", "j1", cp(2), nil)
	if err == nil {
		t.Fatal("checkpoint 2 with a failing WAL: WriteCheckpoint returned nil")
	}
	if !errors.Is(err, ErrStoreFailed) || !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("checkpoint 2: %v, want ErrStoreFailed wrapping the injected error", err)
	}
	if f := s.Failed(); !errors.Is(f, ErrStoreFailed) || !errors.Is(f, errorfs.ErrInjected) {
		t.Fatalf("Failed() = %v, want ErrStoreFailed with the injected cause", f)
	}
	inject.Off() // the disk is fine again: the store stays failed

	var w2 Write
	w2.Put("job/j1", []byte("DONE"))
	writes := map[string]func() error{
		"WriteCheckpoint": func() error { return s.WriteCheckpoint("orders", "j1", cp(3), nil) },
		"Apply":           func() error { return s.Apply(&w2) },
		"Namespace":       func() error { _, err := s.Namespace("orders", "NewStep"); return err },
		"DropState":       func() error { return s.DropState("orders", "Count") },
		"WriteHandover": func() error {
			return s.WriteHandover(Handover{Lineage: "orders", OldJob: "j1", NewJob: "j2"}, cp(4), &w2)
		},
	}
	for name, write := range writes {
		if err := write(); !errors.Is(err, ErrStoreFailed) {
			t.Errorf("%s after the failure: %v, want ErrStoreFailed", name, err)
		}
	}
	// Reads answer: the registry still says what the last durable write said.
	if v, err := s.Get("job/j1"); err != nil || string(v) != "RUNNING" {
		t.Errorf("registry after the failure: %q %v, want RUNNING", v, err)
	}
}
