package state

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"

	"github.com/weir-dev/weir/runner/contract"
)

// TestSnapshotIsCompleteAndIndependent: a snapshot taken after two
// incremental checkpoints holds the full state (keys the cut's checkpoint
// did not change too), survives later checkpoints, DropState and a
// reopen, restores into another lineage under a renamed step, and is gone
// once deleted.
func TestSnapshotIsCompleteAndIndependent(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	write := func(epoch uint64, es ...contract.StateEntry) {
		t.Helper()
		cp := &contract.Checkpoint{Epoch: epoch, State: es,
			Positions: map[string][][]byte{"Read": {[]byte(fmt.Sprint("p", epoch))}},
			SinkParts: map[string][][]byte{"Write": {[]byte(fmt.Sprint("rows", epoch))}}}
		if err := s.WriteCheckpoint("orders", "j1", cp, nil); err != nil {
			t.Fatal(err)
		}
	}
	write(1, contract.StateEntry{Step: "Count", KeyGroup: 1, Key: []byte("a"), Value: []byte("1")},
		contract.StateEntry{Step: "Count", KeyGroup: 2, Key: []byte("b"), Value: []byte("2")})
	// The cut's checkpoint changes one key only.
	write(2, contract.StateEntry{Step: "Count", KeyGroup: 2, Key: []byte("b"), Value: []byte("3")})
	pin := s.Pin()
	// The job goes on before the copy: a later checkpoint and a drop.
	write(3, contract.StateEntry{Step: "Count", KeyGroup: 1, Key: []byte("a")})
	if err := s.DropState("orders", "Count"); err != nil {
		t.Fatal(err)
	}
	last, _ := s.LastCheckpoint("j1")
	w := &Write{}
	w.Put("snapshot/x", []byte(`{"state":"READY"}`))
	sb, err := s.BuildSnapshot("x", pin, SnapshotCut{Lineage: "orders", Steps: []string{"Read", "Count", "Write"},
		Record: CheckpointRecord{JobID: "j1", Epoch: 2, Positions: map[string][][]byte{"Read": {[]byte("p2")}}, SinkParts: map[string][][]byte{"Write": {[]byte("rows2")}}}})
	if err != nil || sb.Size <= 0 {
		t.Fatalf("build snapshot: %v", err)
	}
	if err := sb.Commit(w); err != nil {
		t.Fatal(err)
	}
	if err := pin.Release(); err != nil {
		t.Fatal(err)
	}
	if last.Epoch != 3 {
		t.Fatalf("the job's checkpoint is %d, want 3", last.Epoch)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir, nil); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := s.Get("snapshot/x"); err != nil || string(v) != `{"state":"READY"}` {
		t.Fatalf("snapshot record: %q %v", v, err)
	}
	rec, err := s.SnapshotRecord("x")
	if err != nil || rec.Epoch != 2 || string(rec.Positions["Read"][0]) != "p2" {
		t.Fatalf("snapshot checkpoint: %+v %v", rec, err)
	}
	// Another lineage had state under the new name: it is replaced.
	if err := s.WriteCheckpoint("v2", "old", &contract.Checkpoint{Epoch: 9, State: []contract.StateEntry{
		{Step: "Totals", KeyGroup: 1, Key: []byte("stale"), Value: []byte("9")}}}, nil); err != nil {
		t.Fatal(err)
	}
	jw := &Write{}
	jw.Put("job/j2", []byte(`{}`))
	if err := s.RestoreSnapshot("x", SnapshotRestore{Lineage: "v2", JobID: "j2", Steps: map[string]string{"Count": "Totals"},
		Record: CheckpointRecord{JobID: "j2", Epoch: rec.Epoch, Positions: rec.Positions}}, jw); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	if err := s.StateReader("v2").Scan(context.Background(), "Totals", []int{0, 1, 2, 3}, func(_ uint16, k, v []byte) error {
		got[string(k)] = string(v)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"a": "1", "b": "3"}; !maps.Equal(got, want) {
		t.Fatalf("restored state %v, want %v (the full state as of the cut)", got, want)
	}
	if cp, err := s.LastCheckpoint("j2"); err != nil || cp.Epoch != 2 {
		t.Fatalf("restored checkpoint: %+v %v", cp, err)
	}
	dw := &Write{}
	dw.Put("snapshot/x", []byte(`{"state":"DELETED"}`))
	if err := s.DeleteSnapshot("x", dw); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SnapshotRecord("x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted snapshot's data: %v", err)
	}
	if v, _ := s.Get("snapshot/x"); string(v) != `{"state":"DELETED"}` {
		t.Fatalf("tombstone: %q", v)
	}
}

// TestSnapshotBuildWritesNothing: a built snapshot that is closed instead
// of committed leaves no trace.
func TestSnapshotBuildWritesNothing(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pin := s.Pin()
	defer pin.Release()
	sb, err := s.BuildSnapshot("y", pin, SnapshotCut{Lineage: "l", Steps: []string{"A"}})
	if err != nil {
		t.Fatal(err)
	}
	sb.Close()
	if _, err := s.SnapshotRecord("y"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("data written: %v", err)
	}
}
