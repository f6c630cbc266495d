package runner

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir/runner/contract"
)

// Asynchronous snapshots. When a checkpoint barrier reaches a keyed step,
// the step does not encode its changed keys there and then (that would stop
// its worker for as long as encoding takes, which grows with the keys
// changed since the last checkpoint). It only hands the list of changed
// keys to a snapshot and forwards the barrier. The keys are encoded
// afterwards, a slice at a time between bundles on the worker that owns
// them, and — copy on write — a key about to change before it was encoded
// is encoded first, so the snapshot holds every key as it was at the
// barrier. A key remembers the change-log generation it was logged in
// (changeLog.gen): a key whose generation is the snapshot's is still to be
// encoded; encoding it sets its generation to 0.
//
// At a Pause the steps are frozen and nothing encodes the snapshot: a new
// execution that adopts the steps' state in memory takes the snapshot over
// and its workers encode it while they already process new data; otherwise
// Checkpoint.Complete encodes it on the caller's goroutine.

// Snapshot ownership states.
const (
	// snapFree: no goroutine encodes the snapshot (its step is frozen at a
	// Pause, or its worker exited); Complete or an adopting step may claim it.
	snapFree int32 = iota
	// snapWorker: the worker of the step that owns the keys encodes it.
	snapWorker
	// snapClaimed: Checkpoint.Complete encodes it.
	snapClaimed
	// snapDone: encoded; entries are final.
	snapDone
)

// snapshotTask is a snapshot as a worker sees it: encoded a slice at a time.
type snapshotTask interface {
	// encodeSome encodes up to n keys and reports whether the snapshot is
	// complete.
	encodeSome(n int) bool
	// release gives the snapshot up when the worker exits before it is
	// complete.
	release()
}

// pendingState is a snapshot as the checkpoint sees it. Await (what
// Checkpoint.Complete calls) claims a free snapshot and encodes it, or waits
// for whoever owns it.
type pendingState interface {
	contract.PendingState
	// claim takes the snapshot from the free state for the calling
	// goroutine; false when someone else owns it.
	claim() bool
	// finishHere encodes the rest of a claimed snapshot.
	finishHere()
	// result returns the entries once every key is encoded.
	result() ([]contract.StateEntry, error)
}

// lazySnapshot holds the keys one keyed step instance changed in one
// snapshot interval, and encodes them.
type lazySnapshot[R any] struct {
	step string
	gen  uint64
	refs []R
	next int
	// keyGen returns the key's logged generation; enc appends the key's
	// current state to buf (has is false when the key has no state any
	// more); id names the key.
	keyGen func(R) *uint64
	enc    func(buf []byte, r R) ([]byte, bool, error)
	id     func(R) dirtyKey

	// buf is the chunk the keys are encoded into; spans locate the keys
	// encoded in it. A full chunk's spans become entries in out and a new
	// chunk starts: no allocation grows with the snapshot (a large one
	// under the garbage collector's pressure of a large state costs the
	// allocating worker assist time in proportion).
	buf   []byte
	spans []snapSpan
	err   error

	state atomic.Int32
	done  chan struct{}
	// freed gets a token when the owning worker gives the snapshot up
	// (release), so that Await claims it at once instead of polling.
	freed chan struct{}
	// out holds the entries until Await hands them out: the node's change
	// log keeps the snapshot (pending) until its next one, so out and the
	// chunks its entries point into would otherwise stay referenced after
	// the checkpoint was written (the size of the whole encoded snapshot).
	out   []contract.StateEntry
	taken atomic.Bool
	// now reads the time that bounds an encoding slice; nil: time.Now.
	// Tests inject a clock that runs fast.
	now func() time.Time
}

type snapSpan struct {
	kg             uint16
	k0, k1, v0, v1 int
}

func newLazySnapshot[R any](step string, gen uint64, refs []R, keyGen func(R) *uint64, id func(R) dirtyKey,
	enc func([]byte, R) ([]byte, bool, error), state int32) *lazySnapshot[R] {
	l := &lazySnapshot[R]{step: step, gen: gen, refs: refs, keyGen: keyGen, id: id, enc: enc, done: make(chan struct{}), freed: make(chan struct{}, 1)}
	l.state.Store(state)
	return l
}

// encodeRef encodes r if it is still waiting for this snapshot. The caller
// owns the snapshot (its worker, or a claim).
func (l *lazySnapshot[R]) encodeRef(r R) {
	g := l.keyGen(r)
	if *g != l.gen {
		return
	}
	*g = 0
	if l.err != nil {
		return
	}
	k := l.id(r)
	if cap(l.buf)-len(l.buf) < snapChunkReserve {
		l.flushChunk()
		l.buf = make([]byte, 0, snapChunk)
	}
	sp := snapSpan{kg: k.kg, k0: len(l.buf)}
	l.buf = append(l.buf, k.key...)
	sp.k1, sp.v0 = len(l.buf), len(l.buf)
	buf, has, err := l.enc(l.buf, r)
	if err != nil {
		l.err = fmt.Errorf("step %q: %w", l.step, err)
		return
	}
	l.buf = buf
	if !has {
		sp.v0 = -1
	}
	sp.v1 = len(l.buf)
	l.spans = append(l.spans, sp)
}

func (l *lazySnapshot[R]) encodeSome(n int) bool {
	if l.state.Load() == snapDone {
		return true
	}
	end := min(len(l.refs), l.next+n)
	now := l.now
	if now == nil {
		now = time.Now
	}
	var start time.Time
	if end-l.next > snapCheckEvery {
		start = now()
	}
	for i := 0; l.next < end; l.next, i = l.next+1, i+1 {
		l.encodeRef(l.refs[l.next])
		if i%snapCheckEvery == snapCheckEvery-1 && !start.IsZero() && now().Sub(start) > snapSliceTime {
			l.next++
			break
		}
	}
	if l.next < len(l.refs) {
		return false
	}
	l.finish()
	return true
}

// Chunks of encoded keys: a new chunk starts when fewer than
// snapChunkReserve bytes are left (a larger key grows its chunk).
const (
	snapChunk        = 64 << 10
	snapChunkReserve = 4 << 10
)

// flushChunk turns the spans of the current chunk into entries.
func (l *lazySnapshot[R]) flushChunk() {
	if l.out == nil {
		// At most one entry per key: one allocation, not a copy of every
		// entry at each growth (a full checkpoint of millions of keys).
		l.out = make([]contract.StateEntry, 0, max(len(l.refs), len(l.spans)))
	}
	for _, sp := range l.spans {
		e := contract.StateEntry{Step: l.step, KeyGroup: sp.kg, Key: l.buf[sp.k0:sp.k1:sp.k1]}
		if sp.v0 >= 0 {
			e.Value = l.buf[sp.v0:sp.v1:sp.v1]
		}
		l.out = append(l.out, e)
	}
	l.spans = l.spans[:0]
}

// finish builds the entries once every key was encoded.
func (l *lazySnapshot[R]) finish() {
	l.flushChunk()
	clear(l.refs)
	l.refs, l.spans, l.buf = nil, nil, nil
	l.state.Store(snapDone)
	close(l.done)
}

func (l *lazySnapshot[R]) release() {
	if l.state.CompareAndSwap(snapWorker, snapFree) {
		select {
		case l.freed <- struct{}{}:
		default: // a token is already waiting
		}
	}
}

func (l *lazySnapshot[R]) claim() bool { return l.state.CompareAndSwap(snapFree, snapClaimed) }

func (l *lazySnapshot[R]) finishHere() {
	for !l.encodeSome(len(l.refs)) {
		// encodeSome yields every snapSliceTime; go on to the end.
	}
}

func (l *lazySnapshot[R]) result() ([]contract.StateEntry, error) { return l.out, l.err }

// adoptBy hands a free snapshot (its step frozen at a Pause) to w, whose
// adopting step now owns the keys: w encodes it between bundles.
func (l *lazySnapshot[R]) adoptBy(w *worker) {
	for !l.state.CompareAndSwap(snapFree, snapWorker) {
		if l.state.Load() == snapDone {
			return
		}
		// Complete claimed it: wait until it has encoded every key, as the
		// adopting step is about to change them.
		<-l.done
		return
	}
	w.snapshots = append(w.snapshots, l)
}

// A worker encodes snapshots between bundles in slices of at most
// snapSlice keys or snapSliceTime (checked every snapCheckEvery keys), so
// that encoding never holds the data back for long, however slow a key is
// to encode.
const (
	snapSlice      = 1024
	snapSliceTime  = 2 * time.Millisecond
	snapCheckEvery = 32
)

// encodeSnapshots encodes a slice of the oldest snapshot the worker owns;
// it reports whether any work was done.
func (w *worker) encodeSnapshots() bool {
	if len(w.snapshots) == 0 {
		return false
	}
	if w.snapshots[0].encodeSome(snapSlice) {
		w.snapshots[0] = nil
		w.snapshots = w.snapshots[1:]
	}
	return true
}

// releaseSnapshots gives up the snapshots of an exiting worker: whoever
// completes their checkpoint encodes the rest.
func (w *worker) releaseSnapshots() {
	for _, s := range w.snapshots {
		s.release()
	}
	w.snapshots = nil
}

// Await encodes the snapshot on the calling goroutine when nobody else
// does, or waits until its owner has; when the owner (an exiting worker)
// gives it up instead, release wakes Await, which encodes the rest. The
// entries are handed out once (a later call returns none) and the snapshot
// then drops its reference to them.
func (l *lazySnapshot[R]) Await(ctx context.Context) ([]contract.StateEntry, error) {
	for {
		if l.claim() {
			l.finishHere()
		}
		select {
		case <-l.done:
			if l.taken.Swap(true) {
				return nil, l.err // handed out already
			}
			out, err := l.result()
			l.out = nil
			return out, err
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-l.freed:
		}
	}
}
