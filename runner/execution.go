package runner

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/weir-dev/weir/runner/contract"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/mtime"
)

// This file holds an execution's lifecycle: Run, Start, Wait, Drain,
// Cancel, the run's shared state, metrics and the closing of sinks and
// sources at the end.

// StepError is the failure of a run caused by one element in a step that
// declares no error output.
type StepError struct {
	Step    string
	Reason  string
	Message string
	Source  *contract.SourcePos
	Err     error
}

// Error names the step, the element's source position (when it has one:
// an aggregate has none) and the reason.
func (e *StepError) Error() string {
	if e.Source == nil {
		return fmt.Sprintf("step %q failed on an element: %s: %s", e.Step, e.Reason, e.Message)
	}
	return fmt.Sprintf("step %q failed on the element at %s: %s: %s", e.Step, e.Source, e.Reason, e.Message)
}

// Unwrap returns the underlying error, if any.
func (e *StepError) Unwrap() error { return e.Err }

type run struct {
	// buffering are the sinks whose buffers bound the source reads
	// (sinksFull); nil without checkpoints. sinksFullNext is when the run
	// may next log that its sources wait for them (an mtime.Time; from
	// the start, mtime.MinTimestamp).
	buffering     []contract.BufferingSink
	sinksFullNext atomic.Int64
	ctx           context.Context
	cancel        context.CancelCauseFunc
	opts          Options
	prog          *contract.Program
	steps         []*stepPlan
	byName        map[string]*stepPlan
	nroots        int
	route         RoutingTable
	workers       []*worker
	// idle marks source instances that read no split: receivers do not wait
	// for their watermark, so a source with fewer splits than workers does
	// not hold watermarks back (and a TestStream stays deterministic).
	idle      map[int]bool
	draining  atomic.Bool
	cancelled atomic.Bool
	coord     *coordinator
	// epoch is the latest checkpoint epoch requested.
	epoch atomic.Uint64
	// pauseEpoch is the epoch at which the execution stops (Pause); 0: none.
	pauseEpoch atomic.Uint64
	// bundles recycles the bundles sent to other workers.
	bundles sync.Pool
	// manual is true when processing time is a manual clock (TestStream):
	// it then moves only with tick messages, in order with the data.
	manual bool
	// rekeys holds, by step, the shared re-key of a step's adopted state
	// (rekey_share.go): written while the execution is instantiated (one
	// goroutine), read by the workers' restores after.
	rekeys map[string]*rekeyShare
	// rekeyRestores holds, by step, the shared restore of a re-keying
	// step's stored state (rekey_restore.go): written while the execution
	// is instantiated, read by the workers' restores after.
	rekeyRestores map[string]*rekeyRestore
}

// Run executes prog until every source has ended and every window has
// fired, or until ctx is done or an element fails in a step without an
// error output.
func Run(ctx context.Context, prog *contract.Program, opts Options) (*Result, error) {
	x, err := Start(ctx, prog, opts)
	if err != nil {
		return nil, err
	}
	return x.Wait()
}

// Execution is a running program. Its methods are safe for concurrent use.
type Execution struct {
	r    *run
	cpMu sync.Mutex
	done chan struct{}
	res  *Result
	err  error
}

// Start plans prog and starts its workers. It returns once the workers run;
// Wait for the outcome. Cancelling ctx cancels the execution.
func Start(ctx context.Context, prog *contract.Program, opts Options) (*Execution, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := prog.Graph.Validate(); err != nil {
		return nil, err
	}
	r := &run{opts: opts, prog: prog, byName: map[string]*stepPlan{}, idle: map[int]bool{}, coord: newCoordinator()}
	r.sinksFullNext.Store(int64(mtime.MinTimestamp))
	if opts.Restore != nil {
		r.epoch.Store(opts.Restore.Epoch)
	}
	_, r.manual = opts.Clock.(*mtime.ManualClock)
	r.ctx, r.cancel = context.WithCancelCause(ctx)
	if err := r.plan(); err != nil {
		r.cancel(nil)
		return nil, err
	}
	r.route = NewRoutingTable(opts.KeyGroups, opts.NumWorkers)
	if err := r.instantiate(); err != nil {
		r.cancel(nil)
		return nil, err
	}
	if err := r.restoreState(); err != nil {
		r.cancel(nil)
		return nil, err
	}
	x := &Execution{r: r, done: make(chan struct{})}
	var wg sync.WaitGroup
	for _, w := range r.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer w.exited.Store(true)
			defer w.releaseSnapshots()
			defer func() {
				// A panic stops this execution, not the process: the
				// other workers see the cancellation and stop too.
				if p := recover(); p != nil {
					r.cancel(r.recovered(p, w.at))
				}
			}()
			if err := w.loop(); err != nil {
				r.cancel(err)
			}
		}()
	}
	go func() {
		wg.Wait()
		runErr := context.Cause(r.ctx)
		if errors.Is(runErr, context.Canceled) && ctx.Err() == nil && !r.cancelled.Load() {
			runErr = nil
		}
		closeErr := guard(r.opts.Logger, "", func() error { return r.close(runErr != nil || r.cancelled.Load()) })
		r.cancel(nil)
		x.res = r.result()
		x.err = runErr
		if x.err == nil {
			x.err = closeErr
		}
		close(x.done)
	}()
	return x, nil
}

// Wait blocks until the execution ends and returns its metrics and error.
func (x *Execution) Wait() (*Result, error) {
	<-x.done
	return x.res, x.err
}

// Done is closed when the execution has ended.
func (x *Execution) Done() <-chan struct{} { return x.done }

// Drain stops reading every source and moves its watermark to +∞, so that
// every open window fires (its last pane has is_last) and event-time timers
// fire; the execution then ends by itself. A source with a split that is
// catching up (CatchingUpSplit: a replacement job re-reading what the old
// job read) first reads that split on until it has caught up. Draining
// twice is harmless.
func (x *Execution) Drain() {
	x.r.draining.Store(true)
	for _, w := range x.r.workers {
		w.inbox.wake()
	}
}

// Cancel stops the execution as fast as possible; buffered state and open
// windows are discarded. Wait then returns ErrCancelled.
func (x *Execution) Cancel() {
	x.r.cancelled.Store(true)
	x.r.cancel(ErrCancelled)
}

// ErrCancelled is the error of an execution stopped by Cancel.
var ErrCancelled = errors.New("execution cancelled")

// CloseSinks closes the transactional sinks of a checkpointed execution,
// after its final checkpoint was committed. Other sinks close by themselves.
func (x *Execution) CloseSinks(ctx context.Context) error {
	var errs []error
	for _, sp := range x.r.steps {
		if ts, ok := sp.code.(contract.TransactionalSink); ok && sp.step.Kind == graph.KindSink {
			if err := guard(x.r.opts.Logger, sp.step.Name, func() error { return ts.Close(ctx) }); err != nil {
				errs = append(errs, fmt.Errorf("closing sink %q: %w", sp.step.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// ReleaseSinks releases the transactional sinks of a checkpointed
// execution that stopped without a final share (cancelled, failed, or
// handed over to another execution after its last commit): each sink that
// holds committed rows out of readers' sight (contract.ReleasingSink)
// makes exactly those visible and drops what no commit covered. Call it
// once the execution has stopped.
func (x *Execution) ReleaseSinks(ctx context.Context) error {
	var errs []error
	for _, sp := range x.r.steps {
		if rs, ok := sp.code.(contract.ReleasingSink); ok && sp.step.Kind == graph.KindSink {
			if err := guard(x.r.opts.Logger, sp.step.Name, func() error { return rs.Release(ctx) }); err != nil {
				errs = append(errs, fmt.Errorf("releasing sink %q: %w", sp.step.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Activity returns the elements every step has read, emitted, rejected
// and dropped so far, summed: it stays the same while the execution
// processes nothing (the job service skips the checkpoints of an idle
// job). It allocates nothing.
func (x *Execution) Activity() int64 {
	var n int64
	for _, sp := range x.r.steps {
		c := sp.counters
		n += c.in.Load() + c.out.Load() + c.rejects.Load() + c.dropped.Load()
	}
	return n
}

// Metrics returns the live counters and watermarks of every step.
func (x *Execution) Metrics() *Result { return x.r.result() }

func (r *run) result() *Result {
	res := &Result{}
	for _, sp := range r.steps {
		c := sp.counters
		keys, keyed := c.keyCount()
		st := StepMetrics{
			Name: sp.step.Name, ElementsIn: c.in.Load(), ElementsOut: c.out.Load(),
			Rejects: c.rejects.Load(), RejectsByReason: c.rejectsByReason(), DroppedLateElements: c.dropped.Load(),
			Watermark: c.watermark(), PendingTimers: c.pendingTimers(),
			Keys: keys, Keyed: keyed, User: c.user.Snapshot(),
		}
		if sr, ok := sp.code.(contract.StateRejecter); ok {
			for reason, n := range sr.StateRejects() {
				if st.RejectsByReason == nil {
					st.RejectsByReason = map[string]int64{}
				}
				st.RejectsByReason[reason] += n
				st.Rejects += n
			}
		}
		res.Steps = append(res.Steps, st)
	}
	sort.Slice(res.Steps, func(i, j int) bool { return res.Steps[i].Name < res.Steps[j].Name })
	res.Workers = len(r.workers)
	now := r.opts.Clock.Now()
	for _, w := range r.workers {
		res.IdleNanos += w.idle.Load()
		res.SinkWaitMillis += w.sinkWaited(now)
	}
	res.BufferingSinks = len(r.buffering) > 0
	res.SinkBufferedBytes = r.sinkBytes()
	return res
}

// close closes the sinks and source splits of an ended execution; with
// stopped (it failed or was cancelled) a sink that publishes only a
// complete input (contract.AbortingSink) is aborted instead.
func (r *run) close(stopped bool) error {
	var errs []error
	closeCtx := context.WithoutCancel(r.ctx)
	for _, sp := range r.steps {
		if s, ok := sp.code.(contract.Sink); ok && sp.step.Kind == graph.KindSink {
			if _, tx := s.(contract.TransactionalSink); tx && r.opts.Checkpoints {
				continue // closed by Execution.CloseSinks after the final commit
			}
			if ab, ok := s.(contract.AbortingSink); ok && stopped {
				if err := ab.Abort(closeCtx); err != nil {
					errs = append(errs, fmt.Errorf("aborting sink %q: %w", sp.step.Name, err))
				}
				continue
			}
			if err := s.Close(closeCtx); err != nil {
				errs = append(errs, fmt.Errorf("closing sink %q: %w", sp.step.Name, err))
			}
		}
	}
	for _, w := range r.workers {
		for _, sn := range w.sources {
			for _, sp := range sn.splits {
				if sp.closed {
					continue
				}
				if err := sp.split.Close(); err != nil {
					errs = append(errs, fmt.Errorf("closing source %q: %w", sn.plan.step.Name, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}
