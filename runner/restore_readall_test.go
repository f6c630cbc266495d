package runner_test

import (
	"context"
	"testing"
	"time"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// onceSource is a bounded source without positions (as the file sources
// are): one split that returns its elements once, then Done.
type onceSource struct{ elems []kv }

func (o *onceSource) Split(context.Context, int) ([]contract.SourceSplit, error) {
	return []contract.SourceSplit{&onceSplit{elems: o.elems}}, nil
}

type onceSplit struct {
	elems []kv
	done  bool
}

func (s *onceSplit) Read(_ context.Context, buf []contract.Element) (contract.ReadResult, error) {
	if s.done {
		return contract.ReadResult{Watermark: mtime.MaxTimestamp, Done: true}, nil
	}
	n := min(len(buf), len(s.elems))
	for i := range n {
		buf[i] = contract.Element{Value: s.elems[i], Time: mtime.MinTimestamp, Window: window.Global, Pane: window.NoFiring}
	}
	s.elems = s.elems[n:]
	s.done = len(s.elems) == 0
	return contract.ReadResult{N: n, Watermark: mtime.MinTimestamp}, nil
}

func (s *onceSplit) Close() error { return nil }

// buildSeeded is a streaming job that sums per key, in the global window,
// a bounded seed read without positions (onceSource) and an unbounded
// source that resumes from positions (seqSource).
func buildSeeded(seed []kv, src *seqSource, sink *txSink) *weir.Pipeline {
	p := weir.NewPipeline()
	s := p.Root()
	seeded := weir.Read[kv](s, "Seed", &onceSource{elems: seed}, true)
	stream := weir.Read[kv](s, "Seq", src, false)
	all := weir.Flatten(s, "All", []weir.PCollection[kv]{seeded, stream})
	weir.Write(s, "Out", weir.CombinePerKey(s, "Sum", all, weir.Sum[int64]()), contract.Sink(sink))
	return p
}

// TestRestoreSkipsSourceThatReadAll: a streaming job's bounded source
// without positions that had read all of its input before the checkpoint
// is recorded as such; the restored execution reads it no more (its
// elements are in the restored state) instead of refusing to restore, and
// the sums count the seed exactly once — also after a second crash.
func TestRestoreSkipsSourceThatReadAll(t *testing.T) {
	seed := []kv{{Key: "k0", Value: 1_000_000}, {Key: "k1", Value: 2_000_000}}
	src := &seqSource{n: 6000, splits: 2}
	sink := newTxSink()
	store := &memStore{}
	ctx := context.Background()
	start := func(restore *contract.Restore) *runner.Execution {
		t.Helper()
		x, err := runner.Start(ctx, buildSeeded(seed, src, sink).Program(), runner.Options{NumWorkers: 2, Checkpoints: true, Restore: restore})
		if err != nil {
			t.Fatalf("start (restore %t): %v", restore != nil, err)
		}
		return x
	}
	seedRead := func(x *runner.Execution) func() bool {
		return func() bool { return x.Metrics().Step("Seed").ElementsOut == int64(len(seed)) }
	}
	crash := func(x *runner.Execution) {
		x.Cancel()
		x.Wait()
		// Only what the sink committed survives.
		sink = &txSink{buf: map[int][]kv{}, committed: sink.committed, epoch: sink.epoch, commits: sink.commits}
	}

	src.gate.let(1000) // set before Start (see gate)
	x := start(nil)
	src.gate.to(1000)
	if !await.Until(30*time.Second, time.Millisecond, seedRead(x)) {
		t.Fatal("the seed was not read")
	}
	src.gate.let(2000)
	checkpointDurably(t, x, store)
	if got := store.positions["Seed"]; len(got) != 1 || string(got[0]) != "\x00weir:read-all" {
		t.Fatalf("the checkpoint records the seed as %q, want it read all", got)
	}
	src.gate.to(3000)
	crash(x)

	// The restored execution reads the seed no more and records it as read
	// all again, so that a second crash restores the same way.
	x = start(&contract.Restore{Epoch: store.epoch, Positions: store.positions, State: store})
	src.gate.let(4000)
	checkpointDurably(t, x, store)
	if got := store.positions["Seed"]; len(got) != 1 || string(got[0]) != "\x00weir:read-all" {
		t.Fatalf("the restored execution's checkpoint records the seed as %q", got)
	}
	crash(x)

	src.gate.open()
	x = start(&contract.Restore{Epoch: store.epoch, Positions: store.positions, State: store})
	finishDurably(t, x, store)
	want := src.sums()
	for _, s := range seed {
		want[s.Key] += s.Value
	}
	sink.checkCommitted(t, want)
	if got := x.Metrics().Step("Seed").ElementsOut; got != 0 {
		t.Errorf("the restored execution read the seed again: %d elements", got)
	}
}
