package state

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/weir-dev/weir/runner/contract"
)

// TestStreamSnapshotMatchesBuild: a snapshot streamed in small batches
// holds exactly the keys and values BuildSnapshot puts in one batch, as
// of the pin (later checkpoints do not leak in), and only the last batch
// is marked last.
func TestStreamSnapshotMatchesBuild(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var es []contract.StateEntry
	for i := range 500 {
		es = append(es, contract.StateEntry{Step: "Count", KeyGroup: uint16(i % 7), Key: []byte(fmt.Sprint("k", i)), Value: []byte(fmt.Sprint(i))})
	}
	if err := s.WriteCheckpoint("orders", "j1", &contract.Checkpoint{Epoch: 1, State: es}, nil); err != nil {
		t.Fatal(err)
	}
	pin := s.Pin()
	defer pin.Release()
	if err := s.WriteCheckpoint("orders", "j1", &contract.Checkpoint{Epoch: 2, State: []contract.StateEntry{{Step: "Count", KeyGroup: 1, Key: []byte("late"), Value: []byte("x")}}}, nil); err != nil {
		t.Fatal(err)
	}
	cut := SnapshotCut{Lineage: "orders", Steps: []string{"Read", "Count"}, Record: CheckpointRecord{JobID: "j1", Epoch: 1}}
	one, err := s.BuildSnapshot("once", pin, cut)
	if err != nil {
		t.Fatal(err)
	}
	if err := one.Commit(&Write{}); err != nil {
		t.Fatal(err)
	}
	batches, lasts := 0, 0
	size, err := s.StreamSnapshot("many", pin, cut, 256, func(sb *SnapshotBatch, last bool) error {
		batches++
		if last {
			lasts++
		}
		return sb.Commit(&Write{})
	})
	if err != nil {
		t.Fatal(err)
	}
	if batches < 10 || lasts != 1 {
		t.Fatalf("%d batches, %d marked last; want many and one", batches, lasts)
	}
	read := func(id string) map[string]string {
		out := map[string]string{}
		p := s.Pin()
		defer p.Release()
		if err := s.SnapshotEntries(p, id, func(rel, v []byte) error { out[string(rel)] = string(v); return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	a, b := read("once"), read("many")
	if len(a) != 501 || len(a) != len(b) {
		t.Fatalf("one batch: %d keys, streamed: %d; want 501 (500 and cp)", len(a), len(b))
	}
	for k, v := range a {
		if b[k] != v {
			t.Errorf("key %q: %q streamed, %q in one batch", k, b[k], v)
		}
		if bytes.Contains([]byte(k), []byte("late")) {
			t.Errorf("a key written after the pin leaked in: %q", k)
		}
	}
	if size != one.Size {
		t.Errorf("streamed size %d, one batch %d", size, one.Size)
	}
}
