package state

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/weir-dev/weir/runner/contract"
)

// memLog is a replicated log in memory: each entry takes parts sequence
// numbers, as a log that splits large entries does.
type memLog struct {
	parts   uint64
	last    uint64
	entries []memEntry
	refuse  error
}

type memEntry struct {
	seq  uint64
	repr []byte
}

func (l *memLog) Append(size int, build func(uint64) []byte) error {
	if l.refuse != nil {
		return l.refuse
	}
	end := l.last + l.parts
	repr := build(end)
	if len(repr) > size {
		return errors.New("the representation is larger than announced")
	}
	l.entries = append(l.entries, memEntry{end, append([]byte(nil), repr...)})
	l.last = end
	return nil
}

// TestReplicaHoldsWhatTheWriterHolds: a store writing through a log and a
// store applying that log hold the same registry, keyed state, checkpoint
// and snapshot, and both know the sequence they hold; a refused append
// writes nothing.
func TestReplicaHoldsWhatTheWriterHolds(t *testing.T) {
	writer, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	log := &memLog{parts: 2}
	writer.SetReplicator(log)

	var w Write
	w.Put("job/j1", []byte(`{"state":"RUNNING"}`))
	cp := &contract.Checkpoint{Epoch: 1, State: []contract.StateEntry{
		{Step: "Count", KeyGroup: 3, Key: []byte("a"), Value: []byte("1")},
		{Step: "Count", KeyGroup: 4, Key: []byte("b"), Value: []byte("2")},
	}}
	if err := writer.WriteCheckpoint("orders", "j1", cp, &w); err != nil {
		t.Fatal(err)
	}
	pin := writer.Pin()
	sb, err := writer.StreamSnapshot(context.Background(), "snap1", pin, SnapshotCut{Lineage: "orders", Steps: []string{"Count"}}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(sb.files) != 0 {
		t.Fatalf("a replicated store wrote %d table files for a snapshot; the log cannot carry them", len(sb.files))
	}
	if err := pin.Release(); err != nil {
		t.Fatal(err)
	}
	var w2 Write
	w2.Put("snapshot/snap1", []byte(`{"state":"READY"}`))
	if err := sb.Commit(&w2); err != nil {
		t.Fatal(err)
	}

	log.refuse = errors.New("fenced")
	var w3 Write
	w3.Put("job/j2", []byte(`{}`))
	if err := writer.Apply(&w3); !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("a refused append: %v, want ErrNotReplicated", err)
	}
	if _, err := writer.Get("job/j2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a refused append was committed locally: %v", err)
	}

	replica, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer replica.Close()
	for _, e := range log.entries {
		if err := replica.ApplyReplicated(e.seq, e.repr); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []*Store{writer, replica} {
		seq, err := s.ReplicatedSeq()
		if err != nil || seq != log.last {
			t.Fatalf("replicated sequence %d, %v; want %d", seq, err, log.last)
		}
		if v, err := s.Get("job/j1"); err != nil || string(v) != `{"state":"RUNNING"}` {
			t.Fatalf("registry: %q %v", v, err)
		}
		if v, err := s.Get("snapshot/snap1"); err != nil || string(v) != `{"state":"READY"}` {
			t.Fatalf("snapshot record: %q %v", v, err)
		}
		if rec, err := s.SnapshotRecord("snap1"); err != nil || rec == nil {
			t.Fatalf("snapshot checkpoint: %v", err)
		}
		got := map[string]string{}
		err = s.StateReader("orders").Scan(context.Background(), "Count", []int{3, 4}, func(_ uint16, k, v []byte) error {
			got[string(k)] = string(v)
			return nil
		})
		if err != nil || got["a"] != "1" || got["b"] != "2" || len(got) != 2 {
			t.Fatalf("state: %v %v", got, err)
		}
		if _, last, err := s.Restore("orders", "j1"); err != nil || last == nil || last.Epoch != 1 {
			t.Fatalf("restore: %+v %v", last, err)
		}
	}
	if err := replica.ApplyReplicated(99, nil); err == nil {
		t.Fatal("an empty representation was applied")
	}
}

// divergeLog is a memLog that records the divergence it is told of.
type divergeLog struct {
	memLog
	diverged error
}

func (l *divergeLog) Diverged(err error) { l.diverged = err }

// TestLocalFailureAfterAppendDiverges: a write the log took but the local
// database failed to commit makes the store refuse every later write
// (ErrReplicaDiverged) and tells the replicator, which must give its
// place up.
func TestLocalFailureAfterAppendDiverges(t *testing.T) {
	var inject errorfs.Toggle
	inject.Injector = errorfs.ErrInjected
	walWrites := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".log") && (op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData) {
			return inject.MaybeError(op)
		}
		return nil
	})
	s, err := OpenFS(t.TempDir(), nil, errorfs.Wrap(vfs.Default, walWrites))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	log := &divergeLog{memLog: memLog{parts: 1}}
	s.SetReplicator(log)
	var w Write
	w.Put("job/j1", []byte("a"))
	if err := s.Apply(&w); err != nil {
		t.Fatal(err)
	}
	inject.On()
	w.Put("job/j1", []byte("b"))
	if err := s.Apply(&w); !errors.Is(err, ErrReplicaDiverged) {
		t.Fatalf("a failed local commit after the append: %v", err)
	}
	inject.Off()
	if !errors.Is(log.diverged, ErrReplicaDiverged) {
		t.Fatalf("the replicator was told %v", log.diverged)
	}
	if len(log.entries) != 2 {
		t.Fatalf("the log holds %d entries, want 2", len(log.entries))
	}
	if err := s.Apply(&w); !errors.Is(err, ErrReplicaDiverged) || len(log.entries) != 2 {
		t.Fatalf("a write after the divergence: %v, %d entries", err, len(log.entries))
	}
}
