package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/runner/contract"
)

// This file coordinates checkpoints: participants report their share of
// an epoch, the coordinator completes the checkpoint, and Commit lets sinks
// commit and sources acknowledge once it is durable.

// report is one participant's share of a checkpoint.
type report struct {
	epoch     uint64
	source    string
	positions map[int][]byte // split index -> position
	state     []contract.StateEntry
	sink      string
	worker    int
	part      []byte
	finished  bool
	// from is, for a finished sink's share repeated in later checkpoints,
	// the first checkpoint that carried it.
	from uint64
	// pending is a keyed step's snapshot, encoded after the barrier.
	pending pendingState
}

// coordinator collects reports and completes checkpoints.
type coordinator struct {
	mu           sync.Mutex
	participants map[string]bool // participant key -> registered
	finals       map[string]*report
	pending      *pendingCheckpoint
	epoch        uint64
}

type pendingCheckpoint struct {
	cp       *contract.Checkpoint
	reported map[string]bool
	done     chan struct{}
}

func newCoordinator() *coordinator {
	return &coordinator{participants: map[string]bool{}, finals: map[string]*report{}}
}

func (c *coordinator) register(key string) { c.participants[key] = true }

func (c *coordinator) add(cp *contract.Checkpoint, r *report) {
	if r.source != "" {
		ps := cp.Positions[r.source]
		for i, p := range r.positions {
			for len(ps) <= i {
				ps = append(ps, nil)
			}
			ps[i] = p
		}
		cp.Positions[r.source] = ps
	}
	cp.State = append(cp.State, r.state...)
	if r.pending != nil {
		cp.Pending = append(cp.Pending, r.pending)
	}
	if r.sink != "" && r.part != nil {
		parts := cp.SinkParts[r.sink]
		for len(parts) <= r.worker {
			parts = append(parts, nil)
		}
		parts[r.worker] = r.part
		cp.SinkParts[r.sink] = parts
	}
}

// submit records a participant's report for the pending epoch; a finished
// participant's report also stands in for every later epoch (its state
// deletions go into the next checkpoint only).
//
// A final report may name the epoch before the pending one: a participant
// reads the run's epoch, which Execution.checkpoint stores only after it
// began the next. It then stands in for the pending epoch at once, so that
// the epoch completes when it was the last report the epoch waited for
// (nothing else would report again once every participant finished, and
// the checkpoint would wait forever).
func (c *coordinator) submit(key string, r *report) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.finished {
		c.finals[key] = r
	}
	p := c.pending
	if p == nil || p.reported[key] {
		return
	}
	if r.epoch == c.epoch {
		c.take(p, key, r)
	} else if !r.finished {
		return
	}
	c.completeLocked()
}

func (c *coordinator) take(p *pendingCheckpoint, key string, r *report) {
	p.reported[key] = true
	c.add(p.cp, r)
	if f := c.finals[key]; f == r {
		// Later checkpoints repeat the positions but not the state. A
		// sink's final share is repeated too until a commit of it
		// succeeds (committed): when the commit of the checkpoint that
		// first carried it fails, the next one must retry its rows, and a
		// restart from a later checkpoint must still commit them. (Its
		// sink then pre-commits nothing more: without the repeat a failed
		// final commit lost its rows to the next, empty, commit.)
		// Committing a share again writes nothing twice.
		rep := &report{source: r.source, positions: r.positions, sink: r.sink, worker: r.worker, finished: true}
		if r.sink != "" && r.part != nil {
			rep.part, rep.from = r.part, r.from
			if rep.from == 0 {
				rep.from = p.cp.Epoch
			}
		}
		c.finals[key] = rep
	}
}

// committed drops from the finished shares of sink those that a commit of
// checkpoint epoch covered: later checkpoints no longer repeat them.
func (c *coordinator) committed(sink string, epoch uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, r := range c.finals {
		if r.sink == sink && r.part != nil && r.from != 0 && r.from <= epoch {
			c.finals[key] = &report{source: r.source, positions: r.positions, sink: r.sink, worker: r.worker, finished: true}
		}
	}
}

func (c *coordinator) completeLocked() {
	p := c.pending
	if p == nil {
		return
	}
	for key := range c.participants {
		if p.reported[key] {
			continue
		}
		f := c.finals[key]
		if f == nil {
			return
		}
		c.take(p, key, f)
	}
	close(p.done)
	c.pending = nil
}

// begin starts epoch e; it completes at once if every participant finished.
func (c *coordinator) begin(e uint64) *pendingCheckpoint {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch = e
	p := &pendingCheckpoint{
		cp:       &contract.Checkpoint{Epoch: e, Positions: map[string][][]byte{}, SinkParts: map[string][][]byte{}},
		reported: map[string]bool{},
		done:     make(chan struct{}),
	}
	c.pending = p
	c.completeLocked()
	return p
}

// Checkpoint takes an aligned checkpoint: sources record their positions
// and inject a barrier; keyed steps snapshot their changed state when the
// barrier arrived on all inputs; transactional sinks pre-commit. It returns
// when every participant reported (or ctx is done). Only one checkpoint
// runs at a time. Nothing is committed: persist the result, then call Commit.
func (x *Execution) Checkpoint(ctx context.Context) (*contract.Checkpoint, error) {
	return x.checkpoint(ctx, false)
}

// Pause takes a checkpoint at which the execution stops: every source
// reads nothing after injecting the barrier, and keyed steps fire no
// processing-time timer after their snapshot, so once Pause returns the
// in-memory state is exactly the checkpoint's. Cancel the execution next;
// a new execution may then adopt its keyed state in memory (Options.Adopt)
// instead of reading it back from the store — a handover in O(1) of the
// state's size.
func (x *Execution) Pause(ctx context.Context) (*contract.Checkpoint, error) {
	return x.checkpoint(ctx, true)
}

func (x *Execution) checkpoint(ctx context.Context, pause bool) (*contract.Checkpoint, error) {
	r := x.r
	if !r.opts.Checkpoints {
		return nil, fmt.Errorf("%w: the execution was started without Options.Checkpoints", contract.ErrNotCheckpointable)
	}
	x.cpMu.Lock()
	defer x.cpMu.Unlock()
	e := r.epoch.Load() + 1
	if pause {
		r.pauseEpoch.Store(e)
	}
	p := r.coord.begin(e)
	r.epoch.Store(e)
	for _, w := range r.workers {
		w.inbox.wake()
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-x.done:
		// The execution ended; finished participants complete the epoch.
		select {
		case <-p.done:
		default:
			if x.err != nil {
				return nil, fmt.Errorf("checkpoint %d: execution failed: %w", e, x.err)
			}
			select {
			case <-p.done:
			case <-ctx.Done():
				return nil, fmt.Errorf("checkpoint %d: the ended execution's participants did not complete it: %w", e, ctx.Err())
			}
		}
	}
	if pause {
		// The paused steps' snapshots are encoded by the execution that
		// adopts their state, or by Complete.
		contract.SortStateEntries(p.cp.State)
		if err := r.closePausedSources(); err != nil {
			return nil, err
		}
		return p.cp, nil
	}
	if !p.cp.Incomplete() {
		contract.SortStateEntries(p.cp.State)
		return p.cp, nil
	}
	if err := p.cp.Complete(ctx); err != nil {
		return nil, err
	}
	return p.cp, nil
}

// closePausedSources closes the splits of the sources a Pause stopped, so
// that nothing they still had in flight (a pull request of a subscription)
// competes with a new execution that resumes the same sources at once.
// After the Pause no worker reads them any more; Commit may still
// acknowledge through them.
func (r *run) closePausedSources() error {
	var errs []error
	for _, w := range r.workers {
		for _, sn := range w.sources {
			if !sn.paused {
				continue
			}
			for _, sp := range sn.splits {
				if sp.closed {
					continue
				}
				sp.closed = true
				if err := sp.split.Close(); err != nil {
					errs = append(errs, fmt.Errorf("closing source %q at the pause: %w", sn.plan.step.Name, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// Commit tells transactional sinks to commit cp's epoch and sources to
// acknowledge what cp covers. Call it only after cp is durable. It may be
// called again for the same checkpoint (after a crash, with the restored
// checkpoint): sinks skip epochs they already committed.
func (x *Execution) Commit(ctx context.Context, cp *contract.Checkpoint) error {
	var errs []error
	for _, sp := range x.r.steps {
		if ts, ok := sp.code.(contract.TransactionalSink); ok && sp.step.Kind == graph.KindSink {
			if err := guard(x.r.opts.Logger, sp.step.Name, func() error { return ts.Commit(ctx, cp.Epoch, cp.SinkParts[sp.step.Name]) }); err != nil {
				errs = append(errs, fmt.Errorf("committing sink %q for checkpoint %d: %w", sp.step.Name, cp.Epoch, err))
				continue
			}
			x.r.coord.committed(sp.step.Name, cp.Epoch)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, w := range x.r.workers {
		for _, sn := range w.sources {
			for _, s := range sn.splits {
				ps, ok := s.split.(contract.PositionedSplit)
				pos := cp.Positions[sn.plan.step.Name]
				if !ok || s.index >= len(pos) || pos[s.index] == nil {
					continue
				}
				if err := guard(x.r.opts.Logger, sn.plan.step.Name, func() error { return ps.Ack(ctx, pos[s.index]) }); err != nil {
					errs = append(errs, fmt.Errorf("acknowledging source %q: %w", sn.plan.step.Name, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// CommitRestored commits the sink parts of the checkpoint an execution was
// restored from, for the case where the process stopped after the
// checkpoint became durable but before its sinks committed. A sink the
// checkpoint holds no parts of is left alone (it may be new in prog).
func CommitRestored(ctx context.Context, prog *contract.Program, cp *contract.Checkpoint) error {
	return commitRestored(ctx, prog, cp, false)
}

// CommitFinal commits again the final checkpoint cp of an ended job whose
// program is prog, as the execution's last Commit did: every transactional
// sink of prog commits cp's epoch, with its parts or with none. A sink
// whose rows all went out with earlier checkpoints still learns that the
// run ended at cp (a partition run's staged sink publishes at its Close
// only after it saw an epoch).
func CommitFinal(ctx context.Context, prog *contract.Program, cp *contract.Checkpoint) error {
	return commitRestored(ctx, prog, cp, true)
}

func commitRestored(ctx context.Context, prog *contract.Program, cp *contract.Checkpoint, every bool) error {
	var errs []error
	for name, code := range prog.Code {
		if ts, ok := code.(contract.TransactionalSink); ok {
			if parts, ok := cp.SinkParts[name]; ok || every {
				if err := guard(nil, name, func() error { return ts.Commit(ctx, cp.Epoch, parts) }); err != nil {
					errs = append(errs, fmt.Errorf("committing sink %q for checkpoint %d: %w", name, cp.Epoch, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}
