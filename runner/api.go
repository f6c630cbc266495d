// Package runner is weir's executor. It takes a pipeline graph plus the code
// bound to each step and runs it: elements move in bundles, consecutive
// stateless steps are fused into one loop, keyed steps are partitioned by key
// group over N workers, watermarks flow with the data, and triggers decide
// when windows fire (through package window's deterministic machine).
//
// The runner is the executor above its contract, package contract
// (runner/contract): elements, the Source/Sink/DoFn/Aggregator interfaces
// and the checkpoint contract are declared there. The
// runner speaks in step names, bundles and watermarks. It may import
// runner/contract, graph, window, mtime, github.com/cespare/xxhash/v2 (the
// key hash) and the standard library (unsafe only for unsafe.String, in
// aggKey.setStr); it knows nothing of YAML, HTTP or the
// job store, and must not import yamlpipe, state, service, api or server.
package runner

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
)

// Options configure one run.
type Options struct {
	// NumWorkers is the number of workers (goroutines). Default 1.
	NumWorkers int
	// KeyGroups is the fixed number of key groups keys hash into. Default 4096.
	KeyGroups int
	// BundleSize is the most elements a source reads at once. Default 1024.
	BundleSize int
	// Clock gives processing time. Default the wall clock.
	Clock mtime.Clock
	// Logger receives the run's logs. Default slog.Default().
	Logger *slog.Logger
	// Checkpoints enables Execution.Checkpoint: keyed steps track changed
	// state, transactional sinks commit only through Commit (not at the end
	// of the run), and every keyed step's code must implement StateCoder.
	Checkpoints bool
	// MaxSinkBuffer bounds what the buffering sinks
	// (contract.BufferingSink) of a checkpointed execution hold between two
	// checkpoints, in bytes: above it, the workers read no source until a
	// checkpoint takes the sinks' buffers. Default DefaultMaxSinkBuffer.
	MaxSinkBuffer int64
	// Restore, when set, resumes sources and keyed state from a checkpoint.
	Restore *contract.Restore
	// RestoreParts is how many goroutines each worker reads and decodes
	// its key groups of a keyed step's restored state with (each a
	// contiguous range of them; the worker puts the keys in place). 0:
	// GOMAXPROCS shared among the workers, at most maxRestoreParts, and
	// one for a worker of fewer than 2*minRestoreGroups key groups.
	RestoreParts int
	// Adopt, when set, takes the keyed state of a paused execution over in
	// memory for the steps it names (see Execution.Pause); those steps do
	// not read Restore.State.
	Adopt *Adoption
	// DeadLetter, when set, receives the rejects of steps that declare no
	// error output instead of failing the execution (a server job sends
	// them to its dead-letter topic). It is called from worker goroutines;
	// an error it returns fails the execution.
	DeadLetter func(ctx context.Context, r contract.Reject) error
	// HoldPanesAtMinWatermark makes every GroupByKey and CombinePerKey
	// fire no pane while its input watermark is −∞: a window whose trigger
	// would fire (an early, count or processing-time trigger) keeps its
	// contents and its trigger state, and is evaluated again as soon as
	// the watermark rises above −∞. The job service sets it for the new
	// job of a replacement that re-reads retained input, whose sources
	// hold their watermark at −∞ while they catch up with the old job: the
	// first pane of each window then carries everything the old job had
	// read for it, instead of a partial total fired half-way through the
	// catch-up. Nothing is discarded, so discarding panes lose nothing
	// either; they are only delayed. An execution that restores keys (a
	// restart while catching up, a re-keying update) holds every restored
	// window with elements no pane has shown, as the checkpoint does not
	// say which were held; the ones whose trigger does not fire when the
	// watermark rises are left as they were.
	HoldPanesAtMinWatermark bool
	// PartialBefore, when above −∞, is where the job's input started in
	// event time: its sources began reading after input that belongs before
	// this instant (a subscription sought or created past earlier
	// messages), and the job holds no state for that input. Every pane of a
	// window that began before it is marked cut short (PaneInfo.CutShort):
	// the window's earlier input was never seen, so its totals are partial.
	// Zero (the default) and −∞ mark nothing.
	PartialBefore mtime.Time
}

// DefaultKeyGroups is the number of key groups used when none is set.
const DefaultKeyGroups = 4096

// EnsureDefaults fills unset options with their defaults.
func (o *Options) EnsureDefaults() {
	if o.NumWorkers <= 0 {
		o.NumWorkers = 1
	}
	if o.KeyGroups <= 0 {
		o.KeyGroups = DefaultKeyGroups
	}
	if o.BundleSize <= 0 {
		o.BundleSize = 1024
	}
	if o.MaxSinkBuffer <= 0 {
		o.MaxSinkBuffer = DefaultMaxSinkBuffer
	}
	if o.Clock == nil {
		o.Clock = mtime.WallClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// DefaultMaxSinkBuffer is Options.MaxSinkBuffer's default: 64 MiB.
const DefaultMaxSinkBuffer = 64 << 20

// Validate reports options that cannot work.
func (o Options) Validate() error {
	if o.KeyGroups > 1<<16 {
		return fmt.Errorf("key groups %d exceeds the maximum of 65536", o.KeyGroups)
	}
	if o.NumWorkers > o.KeyGroups {
		return fmt.Errorf("%d workers exceed the %d key groups", o.NumWorkers, o.KeyGroups)
	}
	return nil
}

// StepMetrics are the counters of one step.
type StepMetrics struct {
	Name        string
	ElementsIn  int64
	ElementsOut int64
	Rejects     int64
	// RejectsByReason counts Rejects by their reason (the reject's
	// Reason); nil when there is none.
	RejectsByReason     map[string]int64
	DroppedLateElements int64
	// Watermark is the output watermark of a step that has one (sources,
	// keyed steps, steps with side inputs); mtime.MinTimestamp otherwise.
	Watermark mtime.Time
	// PendingTimers counts the timers keyed instances have set and not yet
	// fired, as of their last watermark move (window-end and expiry timers
	// included; lazily cancelled ones too).
	PendingTimers int64
	// Keys is the number of keys a keyed step (GroupByKey, Combine,
	// stateful ParDo) holds state for, as of its instances' last bundle or
	// control message; Keyed reports whether the step is keyed.
	Keys  int64
	Keyed bool
	// User are the step code's user-defined metrics (counters and
	// distributions, by namespace and name) of this execution; nil when
	// its code updated none.
	User []contract.UserMetric
}

// Result is the outcome of a completed run.
type Result struct {
	Steps []StepMetrics
	// Workers is the execution's number of workers, and IdleNanos the time
	// they waited with nothing to do since it started, summed: over an
	// interval, 1 − ΔIdleNanos / (Δt × Workers) is how busy they were (the
	// autoscaler's utilisation).
	Workers   int
	IdleNanos int64
	// SinkWaitMillis is the time (ms of the run's clock) the workers held
	// their sources back since the execution started because its
	// buffering sinks held more than Options.MaxSinkBuffer, summed over
	// the workers: the job read no faster than its sinks committed.
	SinkWaitMillis int64
	// BufferingSinks reports whether the execution bounds its reads by its
	// sinks' buffers (a checkpointed execution with a
	// contract.BufferingSink); SinkBufferedBytes is what they hold now.
	BufferingSinks    bool
	SinkBufferedBytes int64
}

// Step returns the metrics of a step by name.
func (r *Result) Step(name string) StepMetrics {
	for _, s := range r.Steps {
		if s.Name == name {
			return s
		}
	}
	return StepMetrics{Name: name}
}
