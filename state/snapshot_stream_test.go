package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/weir-dev/weir/runner/contract"
)

// streamFixture is a store with 500 keys of step Count in lineage orders
// at epoch 1 (pinned) and one more key written after the pin.
func streamFixture(t *testing.T) (*Store, *Pinned, SnapshotCut) {
	t.Helper()
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var es []contract.StateEntry
	for i := range 500 {
		es = append(es, contract.StateEntry{Step: "Count", KeyGroup: uint16(i % 7), Key: []byte(fmt.Sprint("k", i)), Value: []byte(fmt.Sprint(i))})
	}
	es = append(es, contract.StateEntry{Step: "Avg", KeyGroup: 3, Key: []byte("a"), Value: []byte("1")})
	if err := s.WriteCheckpoint("orders", "j1", &contract.Checkpoint{Epoch: 1, State: es}, nil); err != nil {
		t.Fatal(err)
	}
	pin := s.Pin()
	t.Cleanup(func() { pin.Release() })
	if err := s.WriteCheckpoint("orders", "j1", &contract.Checkpoint{Epoch: 2, State: []contract.StateEntry{{Step: "Count", KeyGroup: 1, Key: []byte("late"), Value: []byte("x")}}}, nil); err != nil {
		t.Fatal(err)
	}
	// Steps out of order, and one without state: the files' keys must
	// still ascend.
	cut := SnapshotCut{Lineage: "orders", Steps: []string{"Read", "Count", "Avg"}, Record: CheckpointRecord{JobID: "j1", Epoch: 1}}
	return s, pin, cut
}

func snapshotKeys(t *testing.T, s *Store, id string) map[string]string {
	t.Helper()
	out := map[string]string{}
	p := s.Pin()
	defer p.Release()
	if err := s.SnapshotEntries(p, id, func(rel, v []byte) error { out[string(rel)] = string(v); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func ingestFiles(t *testing.T, s *Store) []os.DirEntry {
	t.Helper()
	es, err := os.ReadDir(s.ingestDir())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return es
}

// TestStreamSnapshotMatchesBuild: a snapshot streamed into small table
// files holds exactly the keys and values BuildSnapshot puts in one batch,
// as of the pin (later checkpoints do not leak in); pace is called after
// each file, and the files are gone once ingested.
func TestStreamSnapshotMatchesBuild(t *testing.T) {
	s, pin, cut := streamFixture(t)
	one, err := s.BuildSnapshot("once", pin, cut)
	if err != nil {
		t.Fatal(err)
	}
	if err := one.Commit(&Write{}); err != nil {
		t.Fatal(err)
	}
	paced, last := 0, int64(0)
	sb, err := s.StreamSnapshot(context.Background(), "many", pin, cut, 256, func(n int64) error {
		paced++
		if n <= last {
			t.Errorf("pace called with %d bytes after %d", n, last)
		}
		last = n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if paced < 10 {
		t.Fatalf("%d files; want many", paced)
	}
	if got := snapshotKeys(t, s, "many"); len(got) != 0 {
		t.Fatalf("%d keys of the snapshot in the store before its commit; want none", len(got))
	}
	if err := sb.Ingest(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := snapshotKeys(t, s, "many"); len(got) != 501 {
		t.Fatalf("%d keys after the ingest; want the 501 state keys (the record waits for the commit)", len(got))
	}
	if err := sb.Commit(&Write{}); err != nil {
		t.Fatal(err)
	}
	a, b := snapshotKeys(t, s, "once"), snapshotKeys(t, s, "many")
	if len(a) != 502 || len(a) != len(b) {
		t.Fatalf("one batch: %d keys, streamed: %d; want 502 (501 and cp)", len(a), len(b))
	}
	for k, v := range a {
		if b[k] != v {
			t.Errorf("key %q: %q streamed, %q in one batch", k, b[k], v)
		}
		if bytes.Contains([]byte(k), []byte("late")) {
			t.Errorf("a key written after the pin leaked in: %q", k)
		}
	}
	if sb.Size != one.Size {
		t.Errorf("streamed size %d, one batch %d", sb.Size, one.Size)
	}
	if es := ingestFiles(t, s); len(es) != 0 {
		t.Errorf("%d files left in %s after the commit", len(es), s.ingestDir())
	}
}

// TestStreamSnapshotAbandoned: a stream stopped by pace, or closed without
// a commit, leaves no file and no key behind; files a crash left are
// removed when the store opens.
func TestStreamSnapshotAbandoned(t *testing.T) {
	s, pin, cut := streamFixture(t)
	stop := errors.New("stop")
	calls := 0
	if _, err := s.StreamSnapshot(context.Background(), "stopped", pin, cut, 256, func(int64) error {
		if calls++; calls == 3 {
			return stop
		}
		return nil
	}); !errors.Is(err, stop) {
		t.Fatalf("stream stopped by pace: %v; want pace's error", err)
	}
	sb, err := s.StreamSnapshot(context.Background(), "closed", pin, cut, 256, nil)
	if err != nil {
		t.Fatal(err)
	}
	sb.Close()
	for _, id := range []string{"stopped", "closed"} {
		if got := snapshotKeys(t, s, id); len(got) != 0 {
			t.Errorf("snapshot %s: %d keys left", id, len(got))
		}
	}
	if es := ingestFiles(t, s); len(es) != 0 {
		t.Errorf("%d files left in %s", len(es), s.ingestDir())
	}

	// A crash between the files and their ingest.
	left, err := s.StreamSnapshot(context.Background(), "crashed", pin, cut, 256, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ingestFiles(t, s)) == 0 {
		t.Fatal("no files written")
	}
	dir := s.dir
	left.files = nil // as if the process died: nothing removes them
	left.Close()
	pin.Release()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if es := ingestFiles(t, s2); len(es) != 0 {
		t.Errorf("%d files a crash left are still in %s after the open", len(es), s2.ingestDir())
	}
	if got := snapshotKeys(t, s2, "crashed"); len(got) != 0 {
		t.Errorf("%d keys of a snapshot never ingested", len(got))
	}
}

// TestStreamSnapshotRenamedSteps: a cut whose Names map a step to the
// lineage step that now holds its state (a rollback snapshot after a
// handover that renamed steps) copies that state under the old name.
func TestStreamSnapshotRenamedSteps(t *testing.T) {
	s, pin, _ := streamFixture(t)
	cut := SnapshotCut{Lineage: "orders", Steps: []string{"OldCount"}, Names: map[string]string{"OldCount": "Count"},
		Record: CheckpointRecord{JobID: "j1", Epoch: 1}}
	sb, err := s.StreamSnapshot(context.Background(), "renamed", pin, cut, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Commit(&Write{}); err != nil {
		t.Fatal(err)
	}
	got := snapshotKeys(t, s, "renamed")
	n := 0
	for k := range got {
		if bytes.HasPrefix([]byte(k), []byte("s/OldCount\x00")) {
			n++
		}
	}
	if n != 500 {
		t.Fatalf("%d keys under the old name; want the 500 of the renamed step (keys: %d)", n, len(got))
	}
}
