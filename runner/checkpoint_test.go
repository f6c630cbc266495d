package runner_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/weir-dev/weir/runner/contract"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/window"
)

// seqSource emits elements 0..n-1 over splits (element i on split i%splits),
// with positions so it can resume, and reads no element at or past its
// gate's limit: a test takes checkpoints, pauses and crashes at known
// points of the input, with no sleeps.
type seqSource struct {
	n, splits int
	// keys is the number of distinct keys (element i has key i%keys); 0: 10.
	keys int
	// prefix starts every key (a long one makes keys longer than a key
	// record holds inline).
	prefix string
	gate   gate
	// minWM holds the watermark at −∞ while set (a source catching up).
	minWM atomic.Bool
}

// gate holds a seqSource's splits back before an element index. Without a
// limit the splits read freely, so a test that counts on one sets it (let)
// before the execution starts: a limit set after Start comes too late on a
// loaded machine (TestKeyCounts read 1,000 elements where it let 500).
type gate struct {
	mu sync.Mutex
	// set says a limit applies; without one the splits read freely.
	set   bool
	limit int
	// read counts the elements the splits returned, over every execution.
	read int
	// until and reached: reached is closed once read comes to until.
	until   int
	reached chan struct{}
}

// let lets the splits read up to (not including) element index limit.
func (g *gate) let(limit int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.set, g.limit = true, limit
}

// to lets the splits read up to element index limit and returns once they
// have (valid while no execution re-reads elements from a checkpoint).
func (g *gate) to(limit int) {
	g.let(limit)
	g.waitRead(limit)
}

// waitRead returns once the splits have returned until elements in all,
// over every execution.
func (g *gate) waitRead(until int) {
	g.mu.Lock()
	ch := make(chan struct{})
	g.until, g.reached = until, ch
	g.check()
	g.mu.Unlock()
	<-ch
}

// count returns how many elements the splits have returned.
func (g *gate) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.read
}

// open lifts the limit.
func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.set = false
}

// check closes reached once read has come to until; g.mu is held.
func (g *gate) check() {
	if g.reached != nil && g.read >= g.until {
		close(g.reached)
		g.reached = nil
	}
}

// sums returns the ground truth: the sum of the values per key.
func (s *seqSource) sums() map[string]int64 {
	want := map[string]int64{}
	for i := 0; i < s.n; i++ {
		want[s.key(i)] += int64(i)
	}
	return want
}

func (s *seqSource) key(i int) string {
	if s.keys > 0 {
		return fmt.Sprintf("%sk%d", s.prefix, i%s.keys)
	}
	return fmt.Sprintf("%sk%d", s.prefix, i%10)
}

func (s *seqSource) Split(ctx context.Context, _ int) ([]contract.SourceSplit, error) {
	pos := make([][]byte, s.splits)
	return s.Resume(ctx, pos)
}

func (s *seqSource) Resume(_ context.Context, positions [][]byte) ([]contract.SourceSplit, error) {
	out := make([]contract.SourceSplit, s.splits)
	for i := range out {
		next := i
		if len(positions) > i && positions[i] != nil {
			next = int(binary.BigEndian.Uint64(positions[i]))
		}
		out[i] = &seqSplit{src: s, next: next}
	}
	return out, nil
}

type seqSplit struct {
	src  *seqSource
	next int
}

func (s *seqSplit) Read(_ context.Context, buf []contract.Element) (contract.ReadResult, error) {
	g := &s.src.gate
	g.mu.Lock()
	limit := s.src.n
	if g.set {
		limit = min(limit, g.limit)
	}
	n := 0
	for n < len(buf) && n < 7 && s.next < limit {
		buf[n] = contract.Element{Value: kv{Key: s.src.key(s.next), Value: int64(s.next)}, Time: mtime.Time(s.next) * 1000, Window: window.Global, Pane: window.NoFiring}
		n++
		s.next += s.src.splits
	}
	g.read += n
	g.check()
	g.mu.Unlock()
	if n == 0 && s.next < s.src.n {
		runtime.Gosched() // held at the gate: let the test run
	}
	if s.next >= s.src.n {
		return contract.ReadResult{N: n, Watermark: mtime.MaxTimestamp, Done: true}, nil
	}
	if s.src.minWM.Load() {
		return contract.ReadResult{N: n, Watermark: mtime.MinTimestamp}, nil
	}
	return contract.ReadResult{N: n, Watermark: mtime.Time(s.next-s.src.splits) * 1000}, nil
}

func (s *seqSplit) Close() error { return nil }
func (s *seqSplit) Position() ([]byte, error) {
	return binary.BigEndian.AppendUint64(nil, uint64(s.next)), nil
}
func (s *seqSplit) Ack(context.Context, []byte) error {
	return nil
}

// memStore is an in-memory stand-in for the durable state store.
type memStore struct {
	mu        sync.Mutex
	state     map[string]map[uint16]map[string][]byte
	positions map[string][][]byte
	epoch     uint64
}

func (m *memStore) apply(cp *contract.Checkpoint) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state == nil {
		m.state = map[string]map[uint16]map[string][]byte{}
	}
	for _, e := range cp.State {
		if m.state[e.Step] == nil {
			m.state[e.Step] = map[uint16]map[string][]byte{}
		}
		g := m.state[e.Step][e.KeyGroup]
		if g == nil {
			g = map[string][]byte{}
			m.state[e.Step][e.KeyGroup] = g
		}
		if e.Value == nil {
			delete(g, string(e.Key))
		} else {
			g[string(e.Key)] = e.Value
		}
	}
	m.positions = cp.Positions
	m.epoch = cp.Epoch
}

func (m *memStore) Scan(_ context.Context, step string, kgs []int, fn func(uint16, []byte, []byte) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, kg := range kgs {
		for k, v := range m.state[step][uint16(kg)] {
			if err := fn(uint16(kg), []byte(k), v); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkpointDurably takes a checkpoint of x, writes it to store and
// commits it, as the job service does.
func checkpointDurably(t *testing.T, x *runner.Execution, store *memStore) {
	t.Helper()
	cp, err := x.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	makeDurable(t, x, store, cp)
}

// pauseDurably pauses x at an aligned checkpoint, writes it to store and
// commits it, and ends x, as the job service does before an update in
// place or a rescale. It returns the restore that starts an execution
// from that checkpoint's positions (no state reader: the state is
// adopted in memory).
func pauseDurably(t *testing.T, x *runner.Execution, store *memStore) *contract.Restore {
	t.Helper()
	cp, err := x.Pause(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	makeDurable(t, x, store, cp)
	x.Cancel()
	x.Wait()
	return &contract.Restore{Epoch: store.epoch, Positions: store.positions}
}

// finishDurably waits until x ends, then takes its final checkpoint, writes
// it to store (unless nil) and commits it, as the job service does at the
// end of a job. It returns x's result.
func finishDurably(t *testing.T, x *runner.Execution, store *memStore) *runner.Result {
	t.Helper()
	res, err := x.Wait()
	if err != nil {
		t.Fatal(err)
	}
	final, err := x.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if store != nil {
		store.apply(final)
	}
	if err := x.Commit(context.Background(), final); err != nil {
		t.Fatal(err)
	}
	return res
}

// makeDurable writes cp to store and lets x's sinks and sources commit it.
func makeDurable(t *testing.T, x *runner.Execution, store *memStore, cp *contract.Checkpoint) {
	t.Helper()
	store.apply(cp)
	if err := x.Commit(context.Background(), cp); err != nil {
		t.Fatal(err)
	}
}

// txSink commits per epoch; only committed results count.
type txSink struct {
	mu        sync.Mutex
	buf       map[int][]kv
	committed map[string]int64
	epoch     uint64
	commits   int
}

func newTxSink() *txSink { return &txSink{buf: map[int][]kv{}, committed: map[string]int64{}} }

// checkCommitted reports every key whose committed total is not want's,
// in key order.
func (t *txSink) checkCommitted(tb testing.TB, want map[string]int64) {
	tb.Helper()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if t.committed[k] != want[k] {
			tb.Errorf("%s: committed %d, want %d", k, t.committed[k], want[k])
		}
	}
}

func (t *txSink) Write(_ context.Context, w int, es []contract.Element) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range es {
		t.buf[w] = append(t.buf[w], e.Value.(kv))
	}
	return nil
}

func (t *txSink) PreCommit(_ context.Context, w int, _ uint64) ([]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b, err := json.Marshal(t.buf[w])
	t.buf[w] = nil
	return b, err
}

func (t *txSink) Commit(_ context.Context, epoch uint64, parts [][]byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if epoch <= t.epoch {
		return nil
	}
	for _, p := range parts {
		var kvs []kv
		if err := json.Unmarshal(p, &kvs); err != nil {
			return err
		}
		for _, x := range kvs {
			t.committed[x.Key] += x.Value // sums per key: upsert of the final pane
		}
	}
	t.epoch = epoch
	t.commits++
	return nil
}

func (t *txSink) Close(context.Context) error { return nil }

func buildCheckpointed(src *seqSource, sink *txSink) *weir.Pipeline {
	p := weir.NewPipeline()
	s := p.Root()
	in := weir.Read[kv](s, "Seq", src, true)
	// Fixed one-minute windows: panes fire while the job runs, and late
	// windows stay open across the restart.
	w := weir.WindowInto(s, "Window", in, weir.FixedWindows(mtime.Minute))
	sums := weir.CombinePerKey(s, "Sum", w, weir.Sum[int64]())
	count := weir.ValueState[int64]{ID: "count"}
	running := weir.StatefulParDo(s, "Running", weir.WindowInto(s, "Global", in, weir.GlobalWindows()), weir.StatefulFn[string, int64, kv]{
		State: []weir.StateDecl{count},
		Process: func(c *weir.StateContext[string, kv], v int64) error {
			n, _ := count.Read(c)
			count.Write(c, n+1)
			return nil
		},
		OnTimer: nil,
	})
	_ = running
	weir.Write(s, "Out", sums, contract.Sink(sink))
	return p
}

// runCheckpointing starts the checkpointed job of buildCheckpointed on
// workers workers and takes durable checkpoints into store after 2,000,
// 3,000, ... last×1,000 elements; each is taken while the source reads on
// (up to the next thousand), never after it has ended.
func runCheckpointing(t *testing.T, src *seqSource, sink *txSink, store *memStore, workers, last int) *runner.Execution {
	t.Helper()
	// Set before Start (see gate).
	src.gate.let(1000)
	x, err := runner.Start(context.Background(), buildCheckpointed(src, sink).Program(), runner.Options{NumWorkers: workers, Checkpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	src.gate.to(1000)
	for i := 2; i <= last; i++ {
		src.gate.let(i * 1000)
		checkpointDurably(t, x, store)
	}
	return x
}

// TestCheckpointRestoreExactlyOnce: run, checkpoint, keep running past the
// checkpoint, then stop abruptly (a crash loses everything after the last
// durable checkpoint); restore and finish. The committed sums equal the
// ground truth: nothing lost, nothing counted twice.
func TestCheckpointRestoreExactlyOnce(t *testing.T) {
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("w%d", workers), func(t *testing.T) {
			const n = 6000
			src := &seqSource{n: n, splits: 3}
			sink := newTxSink()
			store := &memStore{}
			ctx := context.Background()
			x := runCheckpointing(t, src, sink, store, workers, 4)
			src.gate.to(4000)
			x.Cancel() // crash: work after the last checkpoint is lost
			x.Wait()
			// The crash also loses the sink's in-memory buffers; only what
			// was committed (its "database") survives.
			sink = &txSink{buf: map[int][]kv{}, committed: sink.committed, epoch: sink.epoch, commits: sink.commits}
			if sink.commits == 0 || len(store.positions["Seq"]) != 3 {
				t.Fatalf("no checkpoint reached the sink (commits %d, positions %v)", sink.commits, store.positions)
			}

			src.gate.open()
			restore := &contract.Restore{Epoch: store.epoch, Positions: store.positions, State: store}
			x2, err := runner.Start(ctx, buildCheckpointed(src, sink).Program(), runner.Options{NumWorkers: workers, Checkpoints: true, Restore: restore})
			if err != nil {
				t.Fatal(err)
			}
			res2 := finishDurably(t, x2, store)
			if got := res2.Step("Sum").DroppedLateElements; got != 0 {
				t.Errorf("restored run dropped %d elements as late", got)
			}
			want := src.sums()
			sink.checkCommitted(t, want)
			// The restored stateful step lost no count either: its state is
			// gone at the end of input, so every key's entry is deleted.
			for kg, g := range store.state["Running"] {
				if len(g) != 0 {
					t.Errorf("stateful step kept state in key group %d after the end", kg)
				}
			}
		})
	}
}

// TestPauseAndAdopt: an execution paused at a checkpoint hands its keyed
// state to a new execution in memory; the new one resumes the sources from
// the checkpoint's positions and the committed result is exact.
func TestPauseAndAdopt(t *testing.T) {
	for _, tc := range [][2]int{{1, 1}, {2, 2}, {1, 3}, {3, 2}} {
		workers, after := tc[0], tc[1]
		t.Run(fmt.Sprintf("w%d-to-w%d", workers, after), func(t *testing.T) {
			const n = 6000
			src := &seqSource{n: n, splits: 3}
			sink := newTxSink()
			store := &memStore{}
			ctx := context.Background()
			// Set before Start (see gate).
			src.gate.let(2000)
			x, err := runner.Start(ctx, buildCheckpointed(src, sink).Program(), runner.Options{NumWorkers: workers, Checkpoints: true})
			if err != nil {
				t.Fatal(err)
			}
			// The checkpoint and the pause are taken while the source reads on.
			src.gate.to(2000)
			src.gate.let(3000)
			checkpointDurably(t, x, store)
			src.gate.to(3000)
			src.gate.let(4000)
			// The store deliberately lacks nothing; but the new execution must
			// not need it: give it no state reader at all.
			restore := pauseDurably(t, x, store)
			src.gate.open()
			adopt := &runner.Adoption{From: x, Steps: map[string]string{"Sum": "Sum", "Running": "Running"}}
			// A different worker count rescales: key groups move to the
			// workers the new routing table names.
			x2, err := runner.Start(ctx, buildCheckpointed(src, sink).Program(), runner.Options{NumWorkers: after, Checkpoints: true, Restore: restore, Adopt: adopt})
			if err != nil {
				t.Fatal(err)
			}
			finishDurably(t, x2, nil)
			want := src.sums()
			for k, w := range want {
				if sink.committed[k] != w {
					t.Errorf("%s: committed %d, want %d", k, sink.committed[k], w)
				}
			}
		})
	}
}

// TestPauseAdoptThenCrash: the checkpoint taken at a Pause is encoded by the
// execution that adopted the paused state, while that execution already
// changes the same keys (copy on write). The checkpoint must still hold
// every key as it was at the barrier: after a crash of the new execution,
// a third one restored from that checkpoint ends with exact totals.
func TestPauseAdoptThenCrash(t *testing.T) {
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("w%d", workers), func(t *testing.T) {
			// Few enough keys that every key changes between the checkpoints,
			// so the new execution changes keys the snapshot still holds.
			const n = 20000
			src := &seqSource{n: n, splits: 3, keys: 1500}
			sink := newTxSink()
			store := &memStore{}
			ctx := context.Background()
			build := func() *contract.Program {
				p := weir.NewPipeline()
				s := p.Root()
				in := weir.Read[kv](s, "Seq", src, true)
				sums := weir.CombinePerKey(s, "Sum", in, weir.Sum[int64]())
				weir.Write(s, "Out", sums, contract.Sink(sink))
				return p.Program()
			}
			opts := runner.Options{NumWorkers: workers, Checkpoints: true}
			// Set before Start (see gate).
			src.gate.let(6000)
			x, err := runner.Start(ctx, build(), opts)
			if err != nil {
				t.Fatal(err)
			}
			// The checkpoint and the pause are taken while the source reads on.
			src.gate.to(6000)
			src.gate.let(9000)
			checkpointDurably(t, x, store)
			src.gate.to(9000)
			src.gate.let(12000)
			cp, err := x.Pause(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !cp.Incomplete() {
				t.Fatal("the pause checkpoint encoded its keys before returning; want them left to the adopting execution")
			}
			adopt := &runner.Adoption{From: x, Steps: map[string]string{"Sum": "Sum"}}
			// The new execution reads 4000 more elements, changing keys the
			// pause checkpoint still holds, then crashes.
			crashAt := make(chan struct{})
			readAtPause := src.gate.count()
			src.gate.let(n)
			go func() {
				src.gate.waitRead(readAtPause + 4000)
				close(crashAt)
			}()
			x2, err := runner.Start(ctx, build(), runner.Options{NumWorkers: workers, Checkpoints: true,
				Restore: &contract.Restore{Epoch: cp.Epoch, Positions: cp.Positions}, Adopt: adopt})
			if err != nil {
				t.Fatal(err)
			}
			if err := cp.Complete(ctx); err != nil {
				t.Fatal(err)
			}
			makeDurable(t, x, store, cp)
			x.Cancel()
			x.Wait()
			<-crashAt
			x2.Cancel() // crash of the new execution before its first checkpoint
			x2.Wait()
			sink = &txSink{buf: map[int][]kv{}, committed: sink.committed, epoch: sink.epoch, commits: sink.commits}

			src.gate.open()
			restore := &contract.Restore{Epoch: store.epoch, Positions: store.positions, State: store}
			x3, err := runner.Start(ctx, build(), runner.Options{NumWorkers: workers, Checkpoints: true, Restore: restore})
			if err != nil {
				t.Fatal(err)
			}
			finishDurably(t, x3, nil)
			want := src.sums()
			bad := 0
			for k, w := range want {
				if sink.committed[k] != w {
					if bad++; bad <= 5 {
						t.Errorf("%s: committed %d, want %d", k, sink.committed[k], w)
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d keys wrong", bad, len(want))
			}
		})
	}
}

// TestCommitRestoredAndFinal: CommitRestored commits only the sinks a
// restored checkpoint holds parts of (a sink new in the program is left
// alone); CommitFinal, for an ended job's final checkpoint, commits every
// sink, so one whose rows all went out with earlier checkpoints still sees
// the final epoch (a partition run's staged sink publishes only then).
func TestCommitRestoredAndFinal(t *testing.T) {
	rows, _ := json.Marshal([]kv{{Key: "NORTH", Value: 425}})
	for _, tc := range []struct {
		name        string
		commit      func(context.Context, *contract.Program, *contract.Checkpoint) error
		wantWithout uint64 // the epoch the sink without parts committed
	}{
		{"restored", runner.CommitRestored, 0},
		{"final", runner.CommitFinal, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			with, without := newTxSink(), newTxSink()
			prog := &contract.Program{Code: map[string]any{"With": with, "Without": without, "Other": "not a sink"}}
			cp := &contract.Checkpoint{Epoch: 7, SinkParts: map[string][][]byte{"With": {rows}}}
			if err := tc.commit(context.Background(), prog, cp); err != nil {
				t.Fatal(err)
			}
			if with.epoch != 7 || with.committed["NORTH"] != 425 {
				t.Errorf("the sink with parts committed epoch %d, totals %v; want 7 and NORTH 425", with.epoch, with.committed)
			}
			if without.epoch != tc.wantWithout {
				t.Errorf("the sink without parts committed epoch %d, want %d", without.epoch, tc.wantWithout)
			}
		})
	}
}
