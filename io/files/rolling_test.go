package files

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a settable time for rolling parts' ages.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func newRollingSink(t *testing.T, path string, r Rolling, clock *fakeClock) *EpochSink {
	t.Helper()
	s, err := NewEpochSink(SinkConfig{Path: path, Format: JSONLines, Schema: testSchema, Rolling: r, Now: clock.now,
		Owner: &Owner{JobName: "orders", JobID: "job-1", Generation: 2}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkpoint pre-commits epoch on the workers and commits it, returning
// the parts.
func checkpoint(t *testing.T, s *EpochSink, epoch uint64, workers ...int) [][]byte {
	t.Helper()
	ctx := context.Background()
	var parts [][]byte
	for _, w := range workers {
		p, err := s.PreCommit(ctx, w, epoch)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, p)
	}
	if err := s.Commit(ctx, epoch, parts); err != nil {
		t.Fatal(err)
	}
	return parts
}

func lines(rows string) []string {
	l := strings.Split(strings.TrimSpace(rows), "\n")
	if len(l) == 1 && l[0] == "" {
		return nil
	}
	slices.Sort(l)
	return l
}

// TestRollingPartsBySizeAndAge: a worker's part stays open (and hidden)
// across checkpoints, rolls at the barrier where it is big or old enough,
// and every row is visible exactly once after the final share.
func TestRollingPartsBySizeAndAge(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clock := &fakeClock{}
	s := newRollingSink(t, filepath.Join(dir, "orders.jsonl"), Rolling{Size: 40, Interval: time.Minute}, clock)

	// Epochs 1 and 2: 2 rows of ~8 bytes each per epoch: under 40 bytes,
	// under a minute: nothing visible, one in-progress file.
	if err := s.Write(ctx, 0, rowsOf(1, 2)); err != nil {
		t.Fatal(err)
	}
	checkpoint(t, s, 1, 0)
	if err := s.Write(ctx, 0, rowsOf(3, 4)); err != nil {
		t.Fatal(err)
	}
	checkpoint(t, s, 2, 0)
	if names, _ := visible(t, dir); len(names) != 0 {
		t.Fatalf("visible before the part rolled: %v", names)
	}
	// Epoch 3 passes 40 bytes: the part rolls as the part of epoch 3.
	if err := s.Write(ctx, 0, rowsOf(5, 6, 7)); err != nil {
		t.Fatal(err)
	}
	checkpoint(t, s, 3, 0)
	names, rows := visible(t, dir)
	if !slices.Equal(names, []string{"orders-g0002-e00000003-w00.jsonl"}) || len(lines(rows)) != 7 {
		t.Fatalf("after the size roll: %v\n%s", names, rows)
	}
	// Epoch 4 on: a new part, rolled by age a minute later.
	if err := s.Write(ctx, 0, rowsOf(8)); err != nil {
		t.Fatal(err)
	}
	checkpoint(t, s, 4, 0)
	clock.advance(61 * time.Second)
	checkpoint(t, s, 5, 0)
	if names, _ := visible(t, dir); len(names) != 2 || names[1] != "orders-g0002-e00000005-w00.jsonl" {
		t.Fatalf("after the age roll: %v", names)
	}
	// The final share rolls whatever its size.
	if err := s.Write(ctx, 0, rowsOf(9)); err != nil {
		t.Fatal(err)
	}
	p, err := s.PreCommitFinal(ctx, 0, 6)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, 6, [][]byte{p}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	names, rows = visible(t, dir)
	want := []string{`{"n":1}`, `{"n":2}`, `{"n":3}`, `{"n":4}`, `{"n":5}`, `{"n":6}`, `{"n":7}`, `{"n":8}`, `{"n":9}`}
	if len(names) != 3 || !slices.Equal(lines(rows), want) {
		t.Fatalf("after the final share: %v\n%s", names, rows)
	}
	if hidden := inProgressFiles(t, dir); len(hidden) != 0 {
		t.Errorf("in-progress files left: %v", hidden)
	}
}

func inProgressFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, ".*.inprogress"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRollingPartsAfterACrash: the next execution replaying the last
// checkpoint (a crash after it) makes the open part visible up to what
// that checkpoint covered — rows written after it are dropped, to be
// written again by the replay — so every row is seen exactly once.
func TestRollingPartsAfterACrash(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "orders.jsonl")
	clock := &fakeClock{}
	r := Rolling{Interval: time.Hour}
	s := newRollingSink(t, path, r, clock)
	if err := s.Write(ctx, 0, rowsOf(1, 2)); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, 1, rowsOf(3)); err != nil {
		t.Fatal(err)
	}
	last := checkpoint(t, s, 1, 0, 1)
	// Written after the checkpoint, then the process dies (no Close).
	if err := s.Write(ctx, 0, rowsOf(4, 5)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PreCommit(ctx, 0, 2); err != nil { // pre-committed, never committed
		t.Fatal(err)
	}
	if names, _ := visible(t, dir); len(names) != 0 {
		t.Fatalf("visible before any roll: %v", names)
	}

	// The next execution (a restart, one worker now) commits the restored
	// checkpoint again: the parts roll at what it covered.
	s2 := newRollingSink(t, path, r, clock)
	if err := s2.Commit(ctx, 1, last); err != nil {
		t.Fatal(err)
	}
	if err := s2.Commit(ctx, 1, last); err != nil { // a second replay changes nothing
		t.Fatal(err)
	}
	names, rows := visible(t, dir)
	if !slices.Equal(names, []string{"orders-g0002-e00000001-w00.jsonl", "orders-g0002-e00000001-w01.jsonl"}) ||
		!slices.Equal(lines(rows), []string{`{"n":1}`, `{"n":2}`, `{"n":3}`}) {
		t.Fatalf("after the replay: %v\n%s", names, rows)
	}
	// The replay writes 4 and 5 again, in a new part.
	if err := s2.Write(ctx, 0, rowsOf(4, 5)); err != nil {
		t.Fatal(err)
	}
	p, err := s2.PreCommitFinal(ctx, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Commit(ctx, 2, [][]byte{p}); err != nil {
		t.Fatal(err)
	}
	if err := s2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, rows := visible(t, dir); !slices.Equal(lines(rows), []string{`{"n":1}`, `{"n":2}`, `{"n":3}`, `{"n":4}`, `{"n":5}`}) {
		t.Fatalf("after the replayed epoch:\n%s", rows)
	}
}

// TestRollingPartsReleased: an execution that stops without a final share
// (cancelled, or handed over to an update) releases its parts: what its
// commits covered becomes visible, what they did not is dropped.
func TestRollingPartsReleased(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clock := &fakeClock{}
	s := newRollingSink(t, filepath.Join(dir, "orders.jsonl"), Rolling{Size: 1 << 20}, clock)
	if err := errors.Join(s.Write(ctx, 0, rowsOf(1)), s.Write(ctx, 1, rowsOf(2))); err != nil {
		t.Fatal(err)
	}
	checkpoint(t, s, 1, 0, 1)
	// Worker 0 writes more and its part is pre-committed at epoch 2, which
	// is never committed; worker 2 writes only after the checkpoint.
	if err := errors.Join(s.Write(ctx, 0, rowsOf(3)), s.Write(ctx, 2, rowsOf(4))); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PreCommit(ctx, 0, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx); err != nil {
		t.Fatal(err)
	}
	names, rows := visible(t, dir)
	if len(names) != 2 || !slices.Equal(lines(rows), []string{`{"n":1}`, `{"n":2}`}) {
		t.Fatalf("after the release: %v\n%s", names, rows)
	}
	if hidden := inProgressFiles(t, dir); len(hidden) != 0 {
		t.Errorf("in-progress files left: %v", hidden)
	}
	if err := s.Write(ctx, 0, rowsOf(5)); err == nil {
		t.Error("a released sink accepted a write")
	}
}

// TestRollingNeedsAppendableFormat: Parquet and Avro parts are complete
// only when closed: rolling them is refused.
func TestRollingNeedsAppendableFormat(t *testing.T) {
	for _, f := range []Format{Parquet, Avro} {
		_, err := NewEpochSink(SinkConfig{Path: filepath.Join(t.TempDir(), "x"), Format: f, Rolling: Rolling{Size: 1},
			Owner: &Owner{JobName: "j", JobID: "1", Generation: 1}})
		if err == nil || !strings.Contains(err.Error(), "appendable") {
			t.Errorf("format %d: %v", f, err)
		}
	}
}
