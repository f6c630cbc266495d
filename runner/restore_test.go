package runner_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/runner/contract"
)

// lendingReader hands fn each key and value in one reused buffer and
// scribbles over it once fn returns, as a store lending its iterator's
// buffers may: a restore that kept a reference instead of copying would
// read garbage.
type lendingReader struct {
	inner contract.StateReader
	// fail, when set, is the error the scan of every step returns after
	// its first key.
	fail error
}

func (l lendingReader) Scan(ctx context.Context, step string, kgs []int, fn func(uint16, []byte, []byte) error) error {
	var buf []byte
	return l.inner.Scan(ctx, step, kgs, func(kg uint16, k, v []byte) error {
		buf = append(append(buf[:0], k...), v...)
		key, value := buf[:len(k):len(k)], buf[len(k):]
		err := fn(kg, key, value)
		for i := range buf {
			buf[i] = 0xA5
		}
		if err == nil && l.fail != nil {
			return l.fail
		}
		return err
	})
}

// TestRestoreCopiesLentBuffers: every worker restores its key groups
// (the workers at once, each with one goroutine or several: parts) from a
// reader that lends its buffers; the job then finishes with the exact
// sums, so no restored key or accumulator aliases the reader's memory and
// no key is restored twice or lost. Keys short enough to sit inside their
// record and longer ones alike.
func TestRestoreCopiesLentBuffers(t *testing.T) {
	for _, tc := range []struct {
		workers, parts int
		prefix         string
	}{{1, 1, ""}, {2, 1, ""}, {3, 1, ""}, {2, 1, "a key longer than a record holds/"},
		{1, 4, ""}, {2, 3, ""}, {3, 8, "a key longer than a record holds/"}, {1, 0, ""}} {
		workers := tc.workers
		name := fmt.Sprintf("w%d/parts%d", workers, tc.parts)
		if tc.prefix != "" {
			name += "/long_keys"
		}
		t.Run(name, func(t *testing.T) {
			src := &seqSource{n: 6000, splits: 3, keys: 50, prefix: tc.prefix}
			sink := newTxSink()
			store := &memStore{}
			ctx := context.Background()
			x := runCheckpointing(t, src, sink, store, workers, 3)
			x.Cancel()
			x.Wait()
			sink = &txSink{buf: map[int][]kv{}, committed: sink.committed, epoch: sink.epoch, commits: sink.commits}

			src.gate.open()
			restore := &contract.Restore{Epoch: store.epoch, Positions: store.positions, State: lendingReader{inner: store}}
			x2, err := runner.Start(ctx, buildCheckpointed(src, sink).Program(), runner.Options{NumWorkers: workers, Checkpoints: true, Restore: restore, RestoreParts: tc.parts})
			if err != nil {
				t.Fatal(err)
			}
			finishDurably(t, x2, store)
			for k, want := range src.sums() {
				if got := sink.committed[k]; got != want {
					t.Errorf("%s: committed %d, want %d", k, got, want)
				}
			}
		})
	}
}

// TestRestoreFailureFailsStart: a state read that fails during the
// restore (every worker's at once, each with one goroutine or several)
// makes Start return the error, naming the step, before any source is
// read.
func TestRestoreFailureFailsStart(t *testing.T) {
	for _, parts := range []int{1, 4} {
		t.Run(fmt.Sprintf("parts%d", parts), func(t *testing.T) { testRestoreFailureFailsStart(t, parts) })
	}
}

func testRestoreFailureFailsStart(t *testing.T, parts int) {
	src := &seqSource{n: 3000, splits: 2}
	sink := newTxSink()
	store := &memStore{}
	ctx := context.Background()
	// Set before Start (see gate).
	src.gate.let(1000)
	x, err := runner.Start(ctx, buildCheckpointed(src, sink).Program(), runner.Options{NumWorkers: 2, Checkpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	src.gate.to(1000)
	src.gate.let(2000)
	checkpointDurably(t, x, store)
	x.Cancel()
	x.Wait()

	broken := errors.New("disk read failed")
	restore := &contract.Restore{Epoch: store.epoch, Positions: store.positions, State: lendingReader{inner: store, fail: broken}}
	src2 := &seqSource{n: 3000, splits: 2}
	x2, err := runner.Start(ctx, buildCheckpointed(src2, newTxSink()).Program(), runner.Options{NumWorkers: 2, Checkpoints: true, Restore: restore, RestoreParts: parts})
	if err == nil {
		x2.Cancel()
		x2.Wait()
		t.Fatal("Start succeeded with a state reader that fails")
	}
	if !errors.Is(err, broken) || !strings.Contains(err.Error(), "restoring step") {
		t.Errorf("Start's error = %v, want the reader's error under the step's name", err)
	}
}

// TestRestoreKeepsTheTimersOrder: keys restored by several goroutines
// are put in place in key-group order, as by one: the panes of windows
// that end at the same time (here every key's one-hour window) fire in
// the same order whatever the goroutines' pace, since the timer heap
// orders by time alone. The reader yields each key group's keys sorted,
// as the store does.
func TestRestoreKeepsTheTimersOrder(t *testing.T) {
	build := func(src *seqSource, sink contract.Sink) *weir.Pipeline {
		p := weir.NewPipeline()
		s := p.Root()
		in := weir.Read[kv](s, "Seq", src, true)
		sums := weir.CombinePerKey(s, "Sum", weir.WindowInto(s, "Hour", in, weir.FixedWindows(mtime.Hour)), weir.Sum[int64]())
		weir.Write(s, "Out", sums, sink)
		return p
	}
	_, restored := checkpointHalf(t, build)
	sameOrderAfterParts(t, 1000, "panes (one per key and hour)", func(parts int) []string { return restored(parts).order })
}

// checkpointHalf runs build's pipeline over the first half of an input of
// 6,000 elements of 500 keys (each key has an element in it), one element
// a second, and checkpoints it. The function it returns restores that
// checkpoint with parts goroutines per worker, from a reader that yields
// each key group's keys sorted (as the store does) and lends its buffers,
// reads the rest of the input and returns the sink once it is committed.
func checkpointHalf(t *testing.T, build func(*seqSource, contract.Sink) *weir.Pipeline) (*seqSource, func(parts int) *orderSink) {
	t.Helper()
	ctx := context.Background()
	src := &seqSource{n: 6000, splits: 2, keys: 500}
	store := &memStore{}
	src.gate.let(3000)
	x, err := runner.Start(ctx, build(src, newTxSink()).Program(), runner.Options{Checkpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	src.gate.waitRead(3000)
	checkpointDurably(t, x, store)
	x.Cancel()
	x.Wait()
	src.gate.open()
	return src, func(parts int) *orderSink {
		sink := &orderSink{txSink: newTxSink()}
		restore := &contract.Restore{Epoch: store.epoch, Positions: store.positions, State: lendingReader{inner: sortedReader{store}}}
		x, err := runner.Start(ctx, build(src, sink).Program(), runner.Options{Checkpoints: true, Restore: restore, RestoreParts: parts})
		if err != nil {
			t.Fatal(err)
		}
		finishDurably(t, x, nil)
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return sink
	}
}

// sameOrderAfterParts checks that the outputs of restores by 4 and 8
// goroutines come in the order of a restore by one (several rounds each),
// and that there are want of them.
func sameOrderAfterParts(t *testing.T, want int, what string, order func(parts int) []string) {
	t.Helper()
	first := order(1)
	if len(first) != want {
		t.Fatalf("%d %s after the restore, want %d", len(first), what, want)
	}
	for _, parts := range []int{4, 8} {
		for round := range 3 {
			if got := order(parts); !slices.Equal(got, first) {
				t.Fatalf("parts %d, round %d: the %s came in another order than after a restore by one goroutine", parts, round, what)
			}
		}
	}
}

// orderSink is a txSink that also records the keys written, in order.
type orderSink struct {
	*txSink
	order []string // guarded by txSink.mu
}

func (o *orderSink) Write(ctx context.Context, w int, es []contract.Element) error {
	o.mu.Lock()
	for _, e := range es {
		o.order = append(o.order, e.Value.(kv).Key)
	}
	o.mu.Unlock()
	return o.txSink.Write(ctx, w, es)
}

// sortedReader yields each key group's keys in key order, as the store
// does (memStore yields them in a map's order).
type sortedReader struct{ inner contract.StateReader }

func (r sortedReader) Scan(ctx context.Context, step string, kgs []int, fn func(uint16, []byte, []byte) error) error {
	for _, kg := range kgs {
		type entry struct{ k, v []byte }
		var es []entry
		if err := r.inner.Scan(ctx, step, []int{kg}, func(_ uint16, k, v []byte) error {
			es = append(es, entry{bytes.Clone(k), bytes.Clone(v)})
			return nil
		}); err != nil {
			return err
		}
		slices.SortFunc(es, func(a, b entry) int { return bytes.Compare(a.k, b.k) })
		for _, e := range es {
			if err := fn(uint16(kg), e.k, e.v); err != nil {
				return err
			}
		}
	}
	return nil
}

// TestStatefulRestoreInParts: a stateful step's keys restored by one
// goroutine or several, from a reader that lends its buffers, hold the
// exact totals, and their timers (every key's set for the same time) fire
// in the same order after every restore: the worker puts the key groups in
// place in order, so the timers get their sequence numbers as a restore by
// one goroutine gives them.
func TestStatefulRestoreInParts(t *testing.T) {
	flushAt := mtime.Time(0).Add(3 * mtime.Hour)
	build := func(src *seqSource, sink contract.Sink) *weir.Pipeline {
		p := weir.NewPipeline()
		s := p.Root()
		in := weir.Read[kv](s, "Seq", src, true)
		total := weir.ValueState[int64]{ID: "total"}
		flush := weir.EventTimer("flush")
		out := weir.StatefulParDo(s, "Total", in, weir.StatefulFn[string, int64, kv]{
			State:  []weir.StateDecl{total},
			Timers: []weir.TimerSpec{flush},
			Process: func(c *weir.StateContext[string, kv], v int64) error {
				n, ok := total.Read(c)
				total.Write(c, n+v)
				if !ok {
					flush.Set(c, flushAt)
				}
				return nil
			},
			OnTimer: func(c *weir.StateContext[string, kv], _ contract.Timer) error {
				n, _ := total.Read(c)
				c.Output(kv{Key: c.Key(), Value: n})
				return nil
			},
		})
		weir.Write(s, "Out", out, sink)
		return p
	}
	src, restored := checkpointHalf(t, build)
	sameOrderAfterParts(t, 500, "timers' outputs (one per key)", func(parts int) []string {
		sink := restored(parts)
		for k, want := range src.sums() {
			if got := sink.committed[k]; got != want {
				t.Errorf("parts %d: %s totals %d, want %d", parts, k, got, want)
			}
		}
		return sink.order
	})
}
