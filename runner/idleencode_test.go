package runner

import (
	"context"
	"testing"
	"time"
)

// countingSnapshot is a snapshot task of slices keys to encode, one slice
// per encodeSome call.
type countingSnapshot struct {
	slices, calls int
}

func (c *countingSnapshot) encodeSome(int) bool {
	c.calls++
	return c.calls >= c.slices
}

func (c *countingSnapshot) release() {}

// TestEncodeWhileIdle: a worker whose sources found no input encodes its
// snapshots on to the end instead of a slice per (blocking) source read,
// unless other work waits for it: a message, a checkpoint barrier to
// inject, a drain or a cancellation.
func TestEncodeWhileIdle(t *testing.T) {
	const slices = 500
	for _, tc := range []struct {
		name      string
		other     func(w *worker, cancel context.CancelFunc)
		wantCalls int
	}{
		{"nothing else to do", func(*worker, context.CancelFunc) {}, slices},
		{"a message waits", func(w *worker, _ context.CancelFunc) { w.inbox.q = append(w.inbox.q, message{}) }, 0},
		{"a barrier to inject", func(w *worker, _ context.CancelFunc) { w.r.epoch.Store(w.sources[0].epoch + 1) }, 0},
		{"draining", func(w *worker, _ context.CancelFunc) { w.r.draining.Store(true) }, 0},
		{"cancelled", func(_ *worker, cancel context.CancelFunc) { cancel() }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			r := &run{ctx: ctx}
			r.opts.Checkpoints = true
			r.opts.EnsureDefaults()
			w := &worker{r: r, sources: []*sourceNode{{epoch: 0}}}
			snap := &countingSnapshot{slices: slices}
			w.snapshots = []snapshotTask{snap}
			tc.other(w, cancel)
			frozen := time.Now()
			w.encodeWhileIdle(func() time.Time { return frozen })
			if snap.calls != tc.wantCalls {
				t.Errorf("encoded %d slices, want %d", snap.calls, tc.wantCalls)
			}
			if done := len(w.snapshots) == 0; done != (tc.wantCalls == slices) {
				t.Errorf("snapshot finished = %v", done)
			}
		})
	}
}

// TestEncodeWhileIdleBurst: the burst ends after snapIdleBurst, so that
// the worker reads its sources again.
func TestEncodeWhileIdleBurst(t *testing.T) {
	r := &run{ctx: context.Background()}
	r.opts.EnsureDefaults()
	w := &worker{r: r}
	snap := &countingSnapshot{slices: 1000}
	w.snapshots = []snapshotTask{snap}
	clock := time.Now()
	w.encodeWhileIdle(func() time.Time {
		clock = clock.Add(snapIdleBurst / 10) // each call, a tenth of the burst
		return clock
	})
	if snap.calls != 9 {
		t.Errorf("encoded %d slices in one burst, want 9", snap.calls)
	}
}
