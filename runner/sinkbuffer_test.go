package runner_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/weir-dev/weir/mtime"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/runner/contract"
)

// bufSink is a txSink that says how much it holds (contract.BufferingSink),
// 16 bytes an element, and sends on full each time that passes limit.
type bufSink struct {
	*txSink
	held  atomic.Int64
	limit int64
	full  chan struct{}
}

func (b *bufSink) Write(ctx context.Context, w int, es []contract.Element) error {
	if err := b.txSink.Write(ctx, w, es); err != nil {
		return err
	}
	d := 16 * int64(len(es))
	if n := b.held.Add(d); n > b.limit && n-d <= b.limit {
		select {
		case b.full <- struct{}{}:
		default:
		}
	}
	return nil
}

func (b *bufSink) PreCommit(ctx context.Context, w int, epoch uint64) ([]byte, error) {
	b.txSink.mu.Lock()
	n := int64(len(b.txSink.buf[w]))
	b.txSink.mu.Unlock()
	b.held.Add(-16 * n)
	return b.txSink.PreCommit(ctx, w, epoch)
}

func (b *bufSink) BufferedBytes() int64 { return b.held.Load() }

// TestSinkBufferHoldsTheSources: a checkpointed execution whose buffering
// sink holds more than MaxSinkBuffer reads no more until a checkpoint
// takes the buffer, then reads on: what the source read by each
// checkpoint's barrier stays within the bound (a bundle past it), where
// without the bound the source would read on as fast as it can.
func TestSinkBufferHoldsTheSources(t *testing.T) {
	const (
		limit  = 100 * 16 // 100 elements
		bundle = 10
	)
	src := &seqSource{n: 10_000_000, splits: 1}
	sink := &bufSink{txSink: newTxSink(), limit: limit, full: make(chan struct{}, 1)}
	p := weir.NewPipeline()
	s := p.Root()
	in := weir.Read[kv](s, "Seq", src, true)
	weir.Write(s, "Out", in, contract.Sink(sink))
	var logs bytes.Buffer
	var logsMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&logsMu, &logs}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	clock := mtime.NewManualClock(0)
	x, err := runner.Start(context.Background(), p.Program(), runner.Options{Checkpoints: true, MaxSinkBuffer: limit, BundleSize: bundle,
		Clock: clock, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		x.Cancel()
		x.Wait()
	}()
	store := &memStore{}
	last := 0
	var waited int64
	for round := 1; round <= 3; round++ {
		<-sink.full
		// The wait is counted in the run's clock. The worker starts it on
		// its own: the clock moves a millisecond at a time until the wait
		// counts, then a second passes while the source is held back.
		for i := 0; x.Metrics().SinkWaitMillis == waited; i++ {
			if i == 1_000_000 {
				t.Fatalf("round %d: the wait for the sink was not counted", round)
			}
			clock.Advance(1)
			runtime.Gosched()
		}
		clock.Advance(mtime.Second)
		res := x.Metrics()
		if got := res.SinkWaitMillis - waited; got < 1001 {
			t.Errorf("round %d: a wait of more than a second counted %d ms", round, got)
		}
		if !res.BufferingSinks || res.SinkBufferedBytes <= limit {
			t.Errorf("round %d: buffering %v, %d bytes held: want the sink's bytes, above %d", round, res.BufferingSinks, res.SinkBufferedBytes, limit)
		}
		waited = res.SinkWaitMillis
		cp, err := x.Checkpoint(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		pos := cp.Positions["Seq"]
		if len(pos) != 1 {
			t.Fatalf("round %d: %d split positions, want 1", round, len(pos))
		}
		read := int(binary.BigEndian.Uint64(pos[0]))
		// The bound: the buffer held at most limit when the last read
		// began, and that read added a bundle.
		if got, most := read-last, limit/16+bundle; got > most || got <= 0 {
			t.Errorf("round %d: the source read %d elements between checkpoints, want 1 to %d", round, got, most)
		}
		last = read
		// The barrier emptied the buffer: the source reads on, and the
		// buffer passes the bound again (the next round's signal).
		makeDurable(t, x, store, cp)
	}
	// The wait is logged once a minute at most (of the run's clock: the
	// three rounds took a few seconds of it, more on a slow machine),
	// though the worker found the sink full many times.
	logsMu.Lock()
	defer logsMu.Unlock()
	most := 1 + int(int64(clock.Now())/int64(mtime.Minute))
	if n := strings.Count(logs.String(), "the sources wait"); n < 1 || n > most {
		t.Errorf("the wait was logged %d times over %d ms of the clock, want 1 to %d:\n%s", n, clock.Now(), most, logs.String())
	}
}

// lockedWriter writes to w under mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
