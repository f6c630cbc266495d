package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/state"
	"github.com/weir-dev/weir/yamlpipe"
)

// StateConfig configures one run of `weir bench state`: a streaming job
// that holds Keys distinct keys of a count-and-sum per key (a string key,
// two int64 accumulators, the global window), its heap and its
// checkpoints measured.
type StateConfig struct {
	// Job is "sdk" (a Go SDK pipeline), "yaml" (the YAML pipeline) or
	// "stateful" (a Go SDK stateful step holding the same count and sum
	// in a value cell).
	Job string
	// Keys is how many distinct keys the job holds.
	Keys int64
	// Workers is the worker count. Default 2.
	Workers int
	// Dir holds the state store (a Pebble directory, created under it).
	Dir string
	// HeapProfile, when set, is a path prefix: heap profiles are written
	// to HeapProfile+"-held.pprof" at the heap reading while the keys are
	// held, to HeapProfile+"-after-cp.pprof" after the full checkpoint and
	// to HeapProfile+"-restored.pprof" once a new execution restored them.
	HeapProfile string
	// CPUProfile, when set, is a path prefix: CPU profiles of the full
	// checkpoint and of the restore are written to
	// CPUProfile+"-full-cp.pprof" and CPUProfile+"-restore.pprof".
	CPUProfile string
}

// StateOutcome is what one run of the state benchmark measured.
type StateOutcome struct {
	Job  string `json:"job"`
	Keys int64  `json:"keys"`
	// KeysHeld is the number of keys the keyed step reports holding state
	// for (the runner's per-step key count) after the full checkpoint.
	KeysHeld int64 `json:"keys_held"`
	// HeapBytes is the live heap (HeapAlloc after two collections) while
	// the job holds the keys, minus the same reading before it started;
	// HeapBytesPerKey divides it by Keys, HeapBytesPerHeldKey by KeysHeld.
	HeapBytes           int64   `json:"heap_bytes"`
	HeapBytesPerKey     float64 `json:"heap_bytes_per_key"`
	HeapBytesPerHeldKey float64 `json:"heap_bytes_per_held_key"`
	// HeapBytesPerKeyAfterCheckpoint is the same reading taken after the
	// full checkpoint was written and committed (what a checkpointing job
	// keeps; the state store's own memory is in both readings).
	HeapBytesPerKeyAfterCheckpoint float64 `json:"heap_bytes_per_key_after_checkpoint"`
	// StoreEmptyBytes and StoreBytes are the state store directory's size
	// on disk when empty and after the full checkpoint; CheckpointBytesPerKey
	// is their difference over Keys.
	StoreEmptyBytes       int64   `json:"store_empty_bytes"`
	StoreBytes            int64   `json:"store_bytes"`
	CheckpointBytesPerKey float64 `json:"checkpoint_bytes_per_key"`
	// CheckpointEntries and CheckpointEntryBytesPerKey are the full
	// checkpoint's keyed-state entries and their key plus value bytes per
	// key (what the checkpoint writes, before the store's own framing).
	CheckpointEntries          int64   `json:"checkpoint_entries"`
	CheckpointEntryBytesPerKey float64 `json:"checkpoint_entry_bytes_per_key"`
	// FullCheckpointMillis is the time to take, write (synced) and commit
	// the checkpoint that covers every key; FullTakeMillis and
	// FullWriteMillis are its first two parts (the runner's barrier and
	// encoding; the store's synced batch).
	FullCheckpointMillis float64 `json:"full_checkpoint_ms"`
	FullTakeMillis       float64 `json:"full_take_ms"`
	FullWriteMillis      float64 `json:"full_write_ms"`
	// ChangedKeys is how many keys (1% of Keys, at least 1) received one
	// more element after the full checkpoint; ChangedCheckpointMillis and
	// ChangedCheckpointEntries are the next checkpoint's time and entries.
	ChangedKeys              int64   `json:"changed_keys"`
	ChangedCheckpointMillis  float64 `json:"changed_checkpoint_ms"`
	ChangedTakeMillis        float64 `json:"changed_take_ms"`
	ChangedWriteMillis       float64 `json:"changed_write_ms"`
	ChangedCheckpointEntries int64   `json:"changed_checkpoint_entries"`
	// FixedChangedKeys is how many keys (fixedChangedKeys, or all when
	// fewer are held) then received one more element each, whatever the
	// keys held; FixedChangedCheckpointMillis and
	// FixedChangedCheckpointEntries are the next checkpoint's time and
	// entries. Across key counts, this time should not grow with the keys
	// held.
	FixedChangedKeys              int64   `json:"fixed_changed_keys"`
	FixedChangedCheckpointMillis  float64 `json:"fixed_changed_checkpoint_ms"`
	FixedChangedCheckpointEntries int64   `json:"fixed_changed_checkpoint_entries"`
	// ChangedAgainCheckpointMillis is the time of a checkpoint after 1% of
	// the keys changed once more, after the two above. The first 1%
	// checkpoint follows the full one, whose hundreds of megabytes the
	// store is still flushing from memory into its tables at millions of
	// keys; the store's next write waits for that flush (its bound on the
	// memory of unflushed writes). This one shows the 1% checkpoint of a
	// job in its steady state.
	ChangedAgainCheckpointMillis float64 `json:"changed_again_checkpoint_ms"`
	// FillSeconds is how long the job took to read every key once.
	FillSeconds float64 `json:"fill_s"`
	// RestoreMillis is the time a new execution took to start from the
	// last checkpoint after the job was stopped and the state store closed
	// and opened again (a restart): from runner.Start until it returned
	// with every key's state loaded. RestoredKeys is the keys the new
	// execution holds (it must equal KeysHeld), RestoreKeysPerSec their
	// number over RestoreMillis.
	RestoreMillis     float64 `json:"restore_ms"`
	RestoredKeys      int64   `json:"restored_keys"`
	RestoreKeysPerSec float64 `json:"restore_keys_per_sec"`
	// HeapBytesPerKeyAfterRestore is the live heap per key once the new
	// execution restored them, read as HeapBytes is: what a restarted
	// server holds for the same keys.
	HeapBytesPerKeyAfterRestore float64 `json:"heap_bytes_per_key_after_restore"`
	// GOMAXPROCS, GoVersion and LoadAverage describe where it ran.
	GOMAXPROCS  int     `json:"gomaxprocs"`
	GoVersion   string  `json:"go_version"`
	LoadAverage float64 `json:"load_average"`
}

// fixedChangedKeys is how many keys change before the state benchmark's
// last checkpoint, whatever the keys held.
const fixedChangedKeys = 1000

// StateYAMLText returns the YAML pipeline of the state benchmark's yaml
// job: Generate (unbounded; the benchmark caps it) → MapToFields in
// Python (key "key-" + str(id % keys), amount 1) → Combine count and sum
// by key in the global window → LogForTesting (never reached: the window
// never closes). The key is computed in Python, not CEL: a CEL string
// expression that is cost-tracked fails after about a million cost units
// per worker (the evaluation frame keeps its cost tracker across elements).
func StateYAMLText(keys int64) string {
	return fmt.Sprintf(`# weir bench state, YAML job.
pipeline:
  transforms:
    - type: Generate
      name: Events
      config:
        count: 0
        keys: 1
    - type: MapToFields
      name: Keyed
      input: Events
      config:
        language: python
        fields:
          key: "'key-' + str(id %% %d)"
          amount: "1"
    - type: Combine
      name: CountAndSum
      input: Keyed
      config:
        group_by: key
        combine:
          n: {value: amount, fn: count}
          total: {value: amount, fn: sum}
    - type: LogForTesting
      name: Out
      input: CountAndSum
`, keys)
}

// countSum is the SDK job's accumulator: two int64s.
type countSum struct {
	N     int64
	Total int64
}

type countSumFn struct{}

func (countSumFn) CreateAccumulator() countSum { return countSum{} }
func (countSumFn) AddInput(a countSum, in int64) countSum {
	return countSum{N: a.N + 1, Total: a.Total + in}
}
func (countSumFn) MergeAccumulators(a, b countSum) countSum {
	return countSum{N: a.N + b.N, Total: a.Total + b.Total}
}
func (countSumFn) ExtractOutput(a countSum) countSum { return a }

// stateSDKPipeline is the SDK job: Generate (unbounded, capped by the
// benchmark) of "key-" + i mod keys → CombinePerKey count and sum → a sink
// that is never reached.
func stateSDKPipeline(keys int64) *weir.Pipeline {
	p := weir.NewPipeline()
	s := p.Root()
	in := weir.Generate(s, "Events", weir.GenerateConfig{}, func(i int64) weir.KV[string, int64] {
		return weir.KV[string, int64]{Key: "key-" + strconv.FormatInt(i%keys, 10), Value: 1}
	})
	sums := weir.CombinePerKey(s, "CountAndSum", in, weir.CombineFn[int64, countSum, countSum](countSumFn{}))
	weir.Write(s, "Out", sums, contract.Sink(discardSink{}))
	return p
}

// stateStatefulPipeline is the stateful job: the SDK job's input →
// StatefulParDo holding each key's count and sum in a value cell → a sink
// that is never reached.
func stateStatefulPipeline(keys int64) *weir.Pipeline {
	p := weir.NewPipeline()
	s := p.Root()
	in := weir.Generate(s, "Events", weir.GenerateConfig{}, func(i int64) weir.KV[string, int64] {
		return weir.KV[string, int64]{Key: "key-" + strconv.FormatInt(i%keys, 10), Value: 1}
	})
	cs := weir.ValueState[countSum]{ID: "count-and-sum"}
	out := weir.StatefulParDo(s, "CountAndSum", in, weir.StatefulFn[string, int64, countSum]{
		State: []weir.StateDecl{cs},
		Process: func(c *weir.StateContext[string, countSum], v int64) error {
			a, _ := cs.Read(c)
			cs.Write(c, countSum{N: a.N + 1, Total: a.Total + v})
			return nil
		},
	})
	weir.Write(s, "Out", out, contract.Sink(discardSink{}))
	return p
}

type discardSink struct{}

func (discardSink) Write(context.Context, int, []contract.Element) error { return nil }
func (discardSink) Close(context.Context) error                          { return nil }

// cappedSource lets an unbounded generator (element i at index i, its
// splits striding over the indexes) emit only indexes below a limit, then
// idle without ending; raising the limit lets more through.
type cappedSource struct {
	inner   contract.ResumableSource
	limit   atomic.Int64
	emitted atomic.Int64
	mu      sync.Mutex
	raised  chan struct{}
}

func newCappedSource(inner any, limit int64) (*cappedSource, error) {
	rs, ok := inner.(contract.ResumableSource)
	if !ok {
		return nil, fmt.Errorf("state bench: the Events step's code is a %T, not a resumable source", inner)
	}
	c := &cappedSource{inner: rs, raised: make(chan struct{})}
	c.limit.Store(limit)
	return c, nil
}

// raise lets indexes below limit through.
func (c *cappedSource) raise(limit int64) {
	c.limit.Store(limit)
	c.mu.Lock()
	close(c.raised)
	c.raised = make(chan struct{})
	c.mu.Unlock()
}

func (c *cappedSource) wait() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.raised
}

func (c *cappedSource) Split(ctx context.Context, n int) ([]contract.SourceSplit, error) {
	return c.wrap(c.inner.Split(ctx, n))
}

func (c *cappedSource) Resume(ctx context.Context, pos [][]byte) ([]contract.SourceSplit, error) {
	return c.wrap(c.inner.Resume(ctx, pos))
}

func (c *cappedSource) wrap(splits []contract.SourceSplit, err error) ([]contract.SourceSplit, error) {
	if err != nil {
		return nil, err
	}
	out := make([]contract.SourceSplit, len(splits))
	for i, sp := range splits {
		ps, ok := sp.(contract.PositionedSplit)
		if !ok {
			return nil, fmt.Errorf("state bench: the generator's split is a %T, not a positioned split", sp)
		}
		out[i] = &cappedSplit{c: c, inner: ps, stride: int64(len(splits))}
	}
	return out, nil
}

type cappedSplit struct {
	c      *cappedSource
	inner  contract.PositionedSplit
	stride int64
	wm     mtime.Time
}

func (s *cappedSplit) Read(ctx context.Context, buf []contract.Element) (contract.ReadResult, error) {
	raised := s.c.wait()
	pos, err := s.inner.Position()
	if err != nil {
		return contract.ReadResult{}, err
	}
	next := int64(binary.BigEndian.Uint64(pos))
	allowed := (s.c.limit.Load() - next + s.stride - 1) / s.stride
	if allowed <= 0 {
		// Idle: wait for a raise, emitting nothing; return every 10ms so
		// that a checkpoint's barrier is injected soon, as a broker
		// source's short poll does.
		t := time.NewTimer(10 * time.Millisecond)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return contract.ReadResult{}, ctx.Err()
		case <-raised:
		case <-t.C:
		}
		return contract.ReadResult{Watermark: s.wm}, nil
	}
	if int64(len(buf)) > allowed {
		buf = buf[:allowed]
	}
	r, err := s.inner.Read(ctx, buf)
	if r.N > 0 {
		s.wm = r.Watermark
	}
	s.c.emitted.Add(int64(r.N))
	return r, err
}

func (s *cappedSplit) Close() error                            { return s.inner.Close() }
func (s *cappedSplit) Position() ([]byte, error)               { return s.inner.Position() }
func (s *cappedSplit) Ack(ctx context.Context, p []byte) error { return s.inner.Ack(ctx, p) }

// dirSize is the size of the files under dir.
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("measuring the state store's size: %w", err)
	}
	return n, nil
}

// StartCPUProfile starts writing a CPU profile to path; the returned
// function stops it and closes the file.
func StartCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("creating the CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting the CPU profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// writeHeapProfile writes a heap profile to prefix+suffix, when prefix
// is set.
func writeHeapProfile(prefix, suffix string) error {
	if prefix == "" {
		return nil
	}
	f, err := os.Create(prefix + suffix)
	if err != nil {
		return fmt.Errorf("creating the heap profile: %w", err)
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("writing the heap profile %s: %w", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing the heap profile: %w", err)
	}
	return nil
}

// liveHeap is HeapAlloc after two collections: the live heap.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// keyedMetrics sums the keys held and the elements in of the keyed steps.
func keyedMetrics(x *runner.Execution) (keys, in int64) {
	for _, s := range x.Metrics().Steps {
		if s.Keyed {
			keys += s.Keys
			in += s.ElementsIn
		}
	}
	return keys, in
}

// pollUntil calls cond every 10ms until it holds or ctx is done.
func pollUntil(ctx context.Context, what string, cond func() bool) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("state bench: waiting until %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

func statePipeline(job string, keys int64, dir string) (*weir.Pipeline, error) {
	switch job {
	case "sdk":
		return stateSDKPipeline(keys), nil
	case "stateful":
		return stateStatefulPipeline(keys), nil
	case "yaml":
		p, err := yamlpipe.Load("state.yaml", []byte(StateYAMLText(keys)), yamlpipe.Options{BaseDir: dir, LogOutput: discardWriter{}})
		if err != nil {
			return nil, fmt.Errorf("loading the state bench's YAML pipeline: %w", err)
		}
		return p, nil
	}
	return nil, fmt.Errorf("state bench: job %q is not sdk, yaml or stateful", job)
}

type discardWriter struct{}

func (discardWriter) Write(b []byte) (int, error) { return len(b), nil }

// RunState runs the state benchmark once in this process. Run it in a
// fresh process for clean heap figures: the heap it measures is the
// process's.
func RunState(ctx context.Context, cfg StateConfig) (StateOutcome, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	out := StateOutcome{Job: cfg.Job, Keys: cfg.Keys, GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version()}
	out.LoadAverage, _ = LoadAverage()
	if cfg.Keys < 1 {
		return out, fmt.Errorf("state bench: keys must be at least 1, not %d", cfg.Keys)
	}
	if cfg.Dir == "" {
		return out, fmt.Errorf("state bench: no directory for the state store")
	}
	p, err := statePipeline(cfg.Job, cfg.Keys, cfg.Dir)
	if err != nil {
		return out, err
	}
	if err := p.Err(); err != nil {
		return out, fmt.Errorf("building the state bench's %s pipeline: %w", cfg.Job, err)
	}
	prog := p.Program()
	src, err := newCappedSource(prog.Code["Events"], cfg.Keys)
	if err != nil {
		return out, err
	}
	prog.Code["Events"] = src
	storeDir := filepath.Join(cfg.Dir, "state")
	store, err := state.Open(storeDir, nil)
	if err != nil {
		return out, fmt.Errorf("opening the state store: %w", err)
	}
	defer store.Close()
	if out.StoreEmptyBytes, err = dirSize(storeDir); err != nil {
		return out, err
	}
	const lineage, jobID = "bench-state", "job-1"
	// checkpoint returns the checkpoint and the milliseconds it took in
	// all, to take and to write.
	checkpoint := func(x *runner.Execution) (*contract.Checkpoint, [3]float64, error) {
		var ms [3]float64
		start := time.Now()
		cp, err := x.Checkpoint(ctx)
		if err != nil {
			return nil, ms, fmt.Errorf("taking a checkpoint: %w", err)
		}
		ms[1] = millisSince(start)
		if err := store.WriteCheckpoint(lineage, jobID, cp, nil); err != nil {
			return nil, ms, fmt.Errorf("writing a checkpoint: %w", err)
		}
		ms[2] = millisSince(start) - ms[1]
		if err := x.Commit(ctx, cp); err != nil {
			return nil, ms, fmt.Errorf("committing a checkpoint: %w", err)
		}
		ms[0] = millisSince(start)
		return cp, ms, nil
	}

	before := liveHeap()
	start := time.Now()
	x, err := runner.Start(ctx, prog, runner.Options{NumWorkers: cfg.Workers, Checkpoints: true})
	if err != nil {
		return out, fmt.Errorf("starting the %s job: %w", cfg.Job, err)
	}
	defer func() {
		if x != nil {
			x.Cancel()
			_, _ = x.Wait()
		}
	}()
	failed := func() bool {
		select {
		case <-x.Done():
			return true
		default:
			return false
		}
	}
	// Fill: every key once, then the source idles.
	if err := pollUntil(ctx, "the job holds every key", func() bool {
		k, _ := keyedMetrics(x)
		return k >= cfg.Keys || failed()
	}); err != nil {
		return out, err
	}
	if failed() {
		_, err := x.Wait()
		return out, fmt.Errorf("the %s job ended while filling its state: %w", cfg.Job, err)
	}
	out.FillSeconds = time.Since(start).Seconds()
	held := liveHeap()
	if err := writeHeapProfile(cfg.HeapProfile, "-held.pprof"); err != nil {
		return out, err
	}
	out.HeapBytes = held - before
	out.HeapBytesPerKey = float64(out.HeapBytes) / float64(cfg.Keys)

	stopProfile := func() {}
	if cfg.CPUProfile != "" {
		if stopProfile, err = StartCPUProfile(cfg.CPUProfile + "-full-cp.pprof"); err != nil {
			return out, err
		}
	}
	cp, took, err := checkpoint(x)
	stopProfile()
	if err != nil {
		return out, err
	}
	out.FullCheckpointMillis, out.FullTakeMillis, out.FullWriteMillis = took[0], took[1], took[2]
	out.CheckpointEntries = int64(len(cp.State))
	var entryBytes int64
	for _, e := range cp.State {
		entryBytes += int64(len(e.Key) + len(e.Value))
	}
	out.CheckpointEntryBytesPerKey = float64(entryBytes) / float64(cfg.Keys)
	if out.StoreBytes, err = dirSize(storeDir); err != nil {
		return out, err
	}
	out.CheckpointBytesPerKey = float64(out.StoreBytes-out.StoreEmptyBytes) / float64(cfg.Keys)
	out.KeysHeld, _ = keyedMetrics(x)
	if out.KeysHeld > 0 {
		out.HeapBytesPerHeldKey = float64(out.HeapBytes) / float64(out.KeysHeld)
	}
	// The benchmark keeps no reference to the checkpoint it wrote: what the
	// reading finds is the runner's and the store's.
	cp = nil
	out.HeapBytesPerKeyAfterCheckpoint = float64(liveHeap()-before) / float64(cfg.Keys)
	if err := writeHeapProfile(cfg.HeapProfile, "-after-cp.pprof"); err != nil {
		return out, err
	}

	// change lets n more elements through (n keys get one more element
	// each), waits until the keyed step read them and checkpoints.
	emitted := cfg.Keys
	change := func(n int64) (*contract.Checkpoint, [3]float64, error) {
		_, in0 := keyedMetrics(x)
		emitted += n
		src.raise(emitted)
		if err := pollUntil(ctx, "the job read the changed keys", func() bool {
			_, in := keyedMetrics(x)
			return in >= in0+n || failed()
		}); err != nil {
			return nil, [3]float64{}, err
		}
		if failed() {
			_, err := x.Wait()
			return nil, [3]float64{}, fmt.Errorf("the %s job ended while changing its state: %w", cfg.Job, err)
		}
		return checkpoint(x)
	}
	// 1% of the keys change, then a fixed number (whatever the keys held).
	out.ChangedKeys = max(cfg.Keys/100, 1)
	if cp, took, err = change(out.ChangedKeys); err != nil {
		return out, err
	}
	out.ChangedCheckpointMillis, out.ChangedTakeMillis, out.ChangedWriteMillis = took[0], took[1], took[2]
	out.ChangedCheckpointEntries = int64(len(cp.State))
	out.FixedChangedKeys = min(cfg.Keys, fixedChangedKeys)
	if cp, took, err = change(out.FixedChangedKeys); err != nil {
		return out, err
	}
	out.FixedChangedCheckpointMillis = took[0]
	out.FixedChangedCheckpointEntries = int64(len(cp.State))
	if cp, took, err = change(out.ChangedKeys); err != nil {
		return out, err
	}
	if int64(len(cp.State)) != out.ChangedCheckpointEntries {
		return out, fmt.Errorf("%w: the second 1%% checkpoint holds %d entries, the first %d", ErrMismatch, len(cp.State), out.ChangedCheckpointEntries)
	}
	out.ChangedAgainCheckpointMillis = took[0]
	if got := src.emitted.Load(); got != emitted {
		return out, fmt.Errorf("%w: the source emitted %d elements, want %d", ErrMismatch, got, emitted)
	}
	heldBefore, _ := keyedMetrics(x)
	x.Cancel()
	_, _ = x.Wait()
	// The stopped execution's keys are garbage now: the deferred cancel
	// must not keep them alive through the restore's heap reading.
	x = nil
	if err := store.Close(); err != nil {
		return out, fmt.Errorf("closing the state store: %w", err)
	}
	return out, measureRestore(ctx, cfg, storeDir, lineage, jobID, emitted, heldBefore, before, &out)
}

// measureRestore opens the state store again (as a restarted server
// would), starts a new execution of the job from its last checkpoint and
// records how long the restore took; the new execution must hold the
// held keys. Its source resumes at the checkpoint's positions and is
// capped at emitted, so it reads nothing new.
//
// before is the live heap before the first execution started, which the
// restored execution's heap is read against.
func measureRestore(ctx context.Context, cfg StateConfig, storeDir, lineage, jobID string, emitted, held, before int64, out *StateOutcome) error {
	store, err := state.Open(storeDir, nil)
	if err != nil {
		return fmt.Errorf("opening the state store again: %w", err)
	}
	defer store.Close()
	rs, _, err := store.Restore(lineage, jobID)
	if err != nil {
		return fmt.Errorf("reading the checkpoint to restore: %w", err)
	}
	if rs == nil {
		return fmt.Errorf("%w: the state store holds no checkpoint of the job", ErrMismatch)
	}
	p, err := statePipeline(cfg.Job, cfg.Keys, cfg.Dir)
	if err != nil {
		return err
	}
	prog := p.Program()
	src, err := newCappedSource(prog.Code["Events"], emitted)
	if err != nil {
		return err
	}
	prog.Code["Events"] = src
	runtime.GC()
	stopProfile := func() {}
	if cfg.CPUProfile != "" {
		if stopProfile, err = StartCPUProfile(cfg.CPUProfile + "-restore.pprof"); err != nil {
			return err
		}
	}
	start := time.Now()
	x, err := runner.Start(ctx, prog, runner.Options{NumWorkers: cfg.Workers, Checkpoints: true, Restore: rs})
	out.RestoreMillis = millisSince(start)
	stopProfile()
	if err != nil {
		return fmt.Errorf("restoring the %s job: %w", cfg.Job, err)
	}
	defer func() {
		x.Cancel()
		_, _ = x.Wait()
	}()
	out.RestoredKeys, _ = keyedMetrics(x)
	if out.RestoredKeys != held {
		return fmt.Errorf("%w: the restored execution holds %d keys, the stopped one held %d", ErrMismatch, out.RestoredKeys, held)
	}
	out.RestoreKeysPerSec = perSecond(out.RestoredKeys, out.RestoreMillis)
	out.HeapBytesPerKeyAfterRestore = float64(liveHeap()-before) / float64(cfg.Keys)
	return writeHeapProfile(cfg.HeapProfile, "-restored.pprof")
}
