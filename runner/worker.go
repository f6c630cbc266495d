package runner

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir/mtime"
)

// This file is the worker loop: one goroutine per worker takes messages
// from its inbox, reads its sources, fires processing-time timers, injects
// checkpoint barriers and encodes snapshots between bundles.

// node is one step's instance on one worker. All calls come from the
// worker's goroutine.
type node interface {
	process(port int, b bundle) error
	control(port int, c ctrl) error
}

// receiver is a root node fed by other nodes: it tracks input watermarks.
type receiver interface {
	node
	finished() bool
	// nextDeadline returns the earliest pending processing-time timer (0: none).
	nextDeadline() mtime.Time
	// onProcessingTime fires processing-time timers due by now.
	onProcessingTime(now mtime.Time) error
	// step is the receiver's step.
	step() *stepPlan
}

const maxInflight = 64

type message struct {
	step, port int
	b          bundle
	c          *ctrl
	from       int
	// pooled is returned to the run's bundle pool once processed.
	pooled *bundle
}

type inbox struct {
	mu     sync.Mutex
	q      []message
	notify chan struct{}
	// interrupt, when set, cuts short the worker's idle read (wake).
	interrupt atomic.Pointer[context.CancelFunc]
}

func (ib *inbox) push(m message) {
	ib.mu.Lock()
	ib.q = append(ib.q, m)
	ib.mu.Unlock()
	ib.wake()
}

func (ib *inbox) wake() {
	select {
	case ib.notify <- struct{}{}:
	default:
	}
	if f := ib.interrupt.Load(); f != nil {
		(*f)()
	}
}

// empty reports whether no message waits.
func (ib *inbox) empty() bool {
	ib.mu.Lock()
	n := len(ib.q)
	ib.mu.Unlock()
	return n == 0
}

func (ib *inbox) take(buf []message) []message {
	ib.mu.Lock()
	q := ib.q
	ib.q = buf[:0]
	ib.mu.Unlock()
	return q
}

type worker struct {
	id        int
	r         *run
	nodes     []node
	sources   []*sourceNode
	receivers []receiver
	inbox     inbox
	// inflight counts bundles this worker sent to others that were not yet processed.
	inflight atomic.Int64
	// exited is set when the worker's loop returned; messages to it are dropped.
	exited atomic.Bool
	spare  []message
	// snapshots are checkpoint snapshots of this worker's keyed steps still
	// being encoded, oldest first (see snapshot.go).
	snapshots []snapshotTask
	nextSrc   int
	// cur is the root instance whose output is being delivered.
	cur int
	// at is the step whose code the worker runs (its stepPlan.idx+1; 0
	// between steps): the step a panic is blamed on (run.recovered).
	at int
	// idle is the time (ns) the worker waited with nothing to do since it
	// started: its utilisation is what it did not wait (Result.IdleNanos).
	idle atomic.Int64
	// restores load the checkpointed state of the worker's keyed nodes
	// (queued by keyed.enableCheckpoints, run and cleared by
	// run.restoreState before the worker's loop starts).
	restores []func() error
	// sinkMu guards sinkWait and sinkWaitFrom, written by the worker's
	// goroutine (under the lock) as a wait begins and ends and read by
	// Execution.Metrics. The worker's goroutine, their only writer, reads
	// them without it. A leaf.
	sinkMu sync.Mutex
	// sinkWait is the time (ms of the run's clock) the worker held its
	// sources back for the sinks (sinksFull) in waits that ended;
	// sinkWaitFrom is when the wait under way began, noSinkWait when none.
	sinkWait     int64
	sinkWaitFrom int64
}

// noSinkWait is worker.sinkWaitFrom while the worker's sources do not
// wait for the sinks.
const noSinkWait = int64(mtime.MinTimestamp)

// holdForSinks records that the worker does not read its sources because
// the sinks are full: a wait begins unless one is under way.
func (w *worker) holdForSinks() {
	if w.sinkWaitFrom != noSinkWait || !w.reading() {
		return
	}
	w.sinkMu.Lock() // a leaf
	w.sinkWaitFrom = int64(w.r.opts.Clock.Now())
	w.sinkMu.Unlock()
}

// releaseFromSinks ends the worker's wait for the sinks, if one is under
// way, adding its time to sinkWait. Without a wait it takes no lock.
func (w *worker) releaseFromSinks() {
	if w.sinkWaitFrom == noSinkWait {
		return
	}
	w.sinkMu.Lock() // a leaf
	w.sinkWait += max(0, int64(w.r.opts.Clock.Now())-w.sinkWaitFrom)
	w.sinkWaitFrom = noSinkWait
	w.sinkMu.Unlock()
}

// sinkWaited returns the time (ms) the worker held its sources back for
// the sinks by now, the wait under way included.
func (w *worker) sinkWaited(now mtime.Time) int64 {
	w.sinkMu.Lock() // a leaf
	defer w.sinkMu.Unlock()
	d := w.sinkWait
	if w.sinkWaitFrom != noSinkWait {
		d += max(0, int64(now)-w.sinkWaitFrom)
	}
	return d
}

// reading reports whether one of the worker's sources has not ended.
func (w *worker) reading() bool {
	for _, s := range w.sources {
		if !s.done {
			return true
		}
	}
	return false
}

// sinksFull reports whether the run's buffering sinks hold more than
// Options.MaxSinkBuffer bytes between them.
func (r *run) sinksFull() bool {
	if len(r.buffering) == 0 {
		return false
	}
	n := r.sinkBytes()
	if n <= r.opts.MaxSinkBuffer {
		return false
	}
	r.warnSinksFull(n)
	return true
}

// sinkBytes returns what the run's buffering sinks hold between them.
func (r *run) sinkBytes() int64 {
	var n int64
	for _, s := range r.buffering {
		n += s.BufferedBytes()
	}
	return n
}

// sinksFullWarnEvery is how often, at most, a run logs that its sources
// wait for its sinks.
const sinksFullWarnEvery = mtime.Minute

// warnSinksFull logs, at most once every sinksFullWarnEvery, that the
// sources wait because the sinks hold held bytes: the sinks commit slower
// than the input comes.
func (r *run) warnSinksFull(held int64) {
	now := r.opts.Clock.Now()
	next := r.sinksFullNext.Load()
	if now.Before(mtime.Time(next)) || !r.sinksFullNext.CompareAndSwap(next, int64(now.Add(sinksFullWarnEvery))) {
		return
	}
	r.opts.Logger.Warn("the sources wait: the sinks hold more than they may between two checkpoints, and commit slower than the input comes",
		"held_bytes", held, "max_bytes", r.opts.MaxSinkBuffer)
}

func (w *worker) loop() error {
	ctx := w.r.ctx
	clock := w.r.opts.Clock
	var timer *time.Timer
	for {
		if err := ctx.Err(); err != nil {
			return nil
		}
		msgs := w.inbox.take(w.spare)
		for i := range msgs {
			m := &msgs[i]
			var err error
			if m.c != nil {
				err = w.control(m.step, m.port, *m.c)
			} else {
				err = w.process(m.step, m.port, m.b)
				if m.pooled != nil {
					clear(m.b.elems)
					m.pooled.elems, m.pooled.hashes = m.b.elems[:0], m.b.hashes[:0]
					w.r.bundles.Put(m.pooled)
				}
				if m.from != w.id {
					w.r.workers[m.from].creditReturned()
				}
			}
			if err != nil {
				return err
			}
			msgs[i] = message{}
		}
		w.spare = msgs
		if !w.r.manual {
			if err := w.fireProcessingTimers(clock.Now()); err != nil {
				return err
			}
		}
		if e := w.r.epoch.Load(); w.r.opts.Checkpoints {
			for _, sn := range w.sources {
				if sn.epoch < e {
					if err := sn.barrier(e); err != nil {
						return err
					}
				}
			}
		}
		if w.done() {
			return nil
		}
		read, got := false, false
		// A full sink buffer waits for the next checkpoint, whose barrier
		// (a message) wakes the worker once it emptied the buffer.
		if w.inflight.Load() < maxInflight {
			if w.r.sinksFull() {
				w.holdForSinks()
			} else {
				w.releaseFromSinks()
				var err error
				read, got, err = w.readSource()
				if err != nil {
					return err
				}
			}
		}
		encoded := w.encodeSnapshots()
		if encoded && !got && len(msgs) == 0 {
			w.encodeWhileIdle(time.Now)
		}
		if read || len(msgs) > 0 || encoded {
			continue
		}
		// Nothing to do: wait for the next event. Every event that can give
		// the worker work wakes it: a message or a returned credit
		// (inbox.notify), Drain, Checkpoint and Pause (inbox.wake),
		// cancellation (ctx), and the earliest processing-time deadline of
		// a wall clock (the timer). There is no polling.
		var deadline <-chan time.Time
		if d := w.nextDeadline(); d != 0 && !w.r.manual {
			wait := time.Duration(d-clock.Now()) * time.Millisecond
			if wait <= 0 {
				continue
			}
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			deadline = timer.C
		}
		waited := time.Now()
		select {
		case <-ctx.Done():
		case <-w.inbox.notify:
		case <-deadline:
		}
		w.idle.Add(int64(time.Since(waited)))
		if deadline != nil && !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// process hands bundle b to port of step's node, recording the step as
// the one the worker runs (at) while it does.
func (w *worker) process(step, port int, b bundle) error {
	prev := w.at
	w.at = step + 1
	err := w.nodes[step].process(port, b)
	w.at = prev
	return err
}

// control hands control message c to port of step's node, recording the
// step as the one the worker runs (at) while it does.
func (w *worker) control(step, port int, c ctrl) error {
	prev := w.at
	w.at = step + 1
	err := w.nodes[step].control(port, c)
	w.at = prev
	return err
}

func (w *worker) creditReturned() {
	if w.inflight.Add(-1) == maxInflight/2 {
		w.inbox.wake()
	}
}

func (w *worker) done() bool {
	for _, s := range w.sources {
		if !s.done {
			return false
		}
	}
	for _, rc := range w.receivers {
		if !rc.finished() {
			return false
		}
	}
	return w.inbox.empty()
}

// readSource reads one bundle from the next source that is neither done
// nor paused: read says whether one was read from, got whether that read
// found input.
func (w *worker) readSource() (read, got bool, err error) {
	for range w.sources {
		s := w.sources[w.nextSrc%len(w.sources)]
		w.nextSrc++
		if s.done || s.paused {
			continue
		}
		w.at = s.plan.idx + 1
		err := s.read(w.r.ctx)
		w.at = 0
		return true, s.got, err
	}
	return false, false, nil
}

// snapIdleBurst is how long a worker whose sources found no input goes on
// encoding its snapshots before it reads them again (encodeWhileIdle).
const snapIdleBurst = 50 * time.Millisecond

// encodeWhileIdle encodes further slices of the worker's snapshots while
// it has nothing else to do — its sources found no input and no message,
// barrier, drain or due timer waits — for at most snapIdleBurst. Without
// it a worker encodes one slice per source read, and a source with no
// input blocks each read for its fetch wait (25 ms for Pub/Sub): a
// checkpoint of a million changed keys taken after a burst then took a
// thousand waits to complete. Input that arrives meanwhile waits at most
// the burst (measured with now, the wall clock but in tests).
func (w *worker) encodeWhileIdle(now func() time.Time) {
	start := now()
	for len(w.snapshots) > 0 && !w.hasOtherWork() && now().Sub(start) < snapIdleBurst {
		w.encodeSnapshots()
	}
}

// hasOtherWork reports whether anything but snapshot encoding waits for
// the worker: a message, a checkpoint barrier to inject, a drain, a
// cancellation or a due processing-time timer.
func (w *worker) hasOtherWork() bool {
	if !w.inbox.empty() || w.r.draining.Load() || w.r.ctx.Err() != nil {
		return true
	}
	if w.r.opts.Checkpoints {
		e := w.r.epoch.Load()
		for _, sn := range w.sources {
			if sn.epoch < e {
				return true
			}
		}
	}
	if d := w.nextDeadline(); d != 0 && !w.r.manual && d <= w.r.opts.Clock.Now() {
		return true
	}
	return false
}

// mayWaitIdle reports whether the worker may let its source wait long for
// input (contract.IdleReader): it reads one split only (a long wait on one
// would hold up the others), has no snapshot to encode and is not
// draining.
func (w *worker) mayWaitIdle() bool {
	if len(w.snapshots) > 0 || w.r.draining.Load() || len(w.sources) != 1 {
		return false
	}
	open := 0
	for _, s := range w.sources[0].splits {
		if !s.done {
			open++
		}
	}
	return open == 1
}

// idleReadContext returns the context of an idle read: cancelled by the
// next wake of the worker's inbox (a message, a checkpoint, a drain, a
// pause), at the next processing-time deadline, or with ctx. done
// unregisters it and must be called when the read returns.
func (w *worker) idleReadContext(ctx context.Context) (context.Context, func()) {
	var rctx context.Context
	var cancel context.CancelFunc
	if d := w.nextDeadline(); d != 0 && !w.r.manual {
		wait := time.Duration(d-w.r.opts.Clock.Now()) * time.Millisecond
		rctx, cancel = context.WithTimeout(ctx, wait)
	} else {
		rctx, cancel = context.WithCancel(ctx)
	}
	w.inbox.interrupt.Store(&cancel)
	select {
	case <-w.inbox.notify:
		// Woken before the interrupt was in place (or a wake the loop has
		// not waited on yet): the loop takes its inbox next, before it can
		// wait again, so the wake is consumed here.
		cancel()
	default:
	}
	return rctx, func() {
		w.inbox.interrupt.Store(nil)
		cancel()
	}
}

func (w *worker) nextDeadline() mtime.Time {
	var best mtime.Time
	for _, rc := range w.receivers {
		if d := rc.nextDeadline(); d != 0 && (best == 0 || d < best) {
			best = d
		}
	}
	return best
}

// fireProcessingTimers fires the processing-time timers due by now,
// recording each receiver's step as the one the worker runs (at) while it
// does: a panic in a timer's code names its step.
func (w *worker) fireProcessingTimers(now mtime.Time) error {
	for _, rc := range w.receivers {
		if d := rc.nextDeadline(); d != 0 && d <= now {
			prev := w.at
			w.at = rc.step().idx + 1
			err := rc.onProcessingTime(now)
			w.at = prev
			if err != nil {
				return err
			}
		}
	}
	return nil
}
