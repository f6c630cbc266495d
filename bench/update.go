package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir/runner/contract"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/state"
	"github.com/weir-dev/weir/window"
)

// UpdateConfig configures `weir bench update`: a keyed job holding Keys
// keys of state under a steady load is replaced (Mode "update": in-place
// update, state handed over in memory; Mode "restore": stop and restore
// the same state from the durable checkpoint), and the longest gap between
// two consecutive elements entering the pipeline around the swap is the pause.
type UpdateConfig struct {
	Keys int64
	// Rate is the steady load in elements per second. Default 50,000.
	Rate float64
	// Workers is the worker count. Default 2.
	Workers int
	// Mode is "update" or "restore".
	Mode string
	// Dir holds the state store.
	Dir string
	// Steady is how long the steady load runs before and after the swap.
	// Default 2s.
	Steady time.Duration
	// Swaps is how many swaps one run of the server variant makes, each
	// after a baseline stretch of Steady and followed by Steady of load, so
	// that the pauses have a distribution (p50, p99). Default 1. The SDK
	// variant always swaps once.
	Swaps int
	// AfterFill, when set, is called by the server variant once the state
	// is built, before the steady load (to trace only the swaps).
	AfterFill func()
	// Publisher, when set, gives the server variant's steady load to
	// another process (as in production, where publishers are not the
	// job's process): it returns the command of `weir bench-child-publish`
	// for the broker's network URL. The command publishes until its stdin
	// closes, then prints the number of messages the broker acknowledged.
	// Unset, the load is published from this process.
	Publisher func(ctx context.Context, url, topic string, keys int64, rate float64) *exec.Cmd
	// IDField makes the server variant's source de-duplicate by the
	// messages' id field (id_field): the variant that measures the
	// handover of the source's memory of IDs at an update.
	IDField bool
	// BeforeEnd, when set, is called by the server variant after the last
	// swap, while the job and its state are still live (for a heap
	// profile).
	BeforeEnd func()
	// Migrate makes the server variant's in-place update declare a state
	// migration: the new version appends an accumulator whose value for
	// every stored key and window starts from a CEL init over the old
	// accumulators (ServerUpdateMigratedYAML). After the swaps, a pass of
	// one message per key (the touch pass, measured in either variant)
	// makes the new execution migrate every key.
	Migrate bool
	// Rekey makes the server variant's in-place update re-key the state
	// instead: the new version groups key k under k / 2, every pair of
	// stored counts merged (ServerUpdateRekeyedYAML). The move runs during
	// the first swap's handover, so that swap's pause holds it; later swaps
	// find the keys moved already.
	Rekey bool
}

// UpdateOutcome is what one run of the update benchmark measured.
type UpdateOutcome struct {
	Mode string `json:"mode"`
	// Server is set for the server variant (a YAML job in the job service).
	Server bool `json:"server,omitempty"`
	// IDField is set when the server variant's source de-duplicated by ID.
	IDField bool `json:"id_field,omitempty"`
	// Migrate is set when the server variant's update declared a state
	// migration (UpdateConfig.Migrate).
	Migrate bool `json:"migrate,omitempty"`
	// Rekey is set when the server variant's update re-keyed the state
	// (UpdateConfig.Rekey); KeysAfter is then how many keys the step held
	// after the touch pass (half of Keys, rounded up).
	Rekey     bool  `json:"rekey,omitempty"`
	KeysAfter int64 `json:"keys_after,omitempty"`
	// TouchSeconds is how long the server variant's job took, after the
	// swaps and without other load, to aggregate one message for each key:
	// with Migrate, the pass that migrates every key (its keys per second,
	// against the same pass without, is the migration's own cost).
	TouchSeconds float64 `json:"touch_s,omitempty"`
	Keys         int64   `json:"keys"`
	PauseMillis  float64 `json:"pause_ms"`
	// SwapMillis is how long the swap took until the new execution ran.
	SwapMillis float64 `json:"swap_ms"`
	// Phases splits SwapMillis into the steps of the swap, in milliseconds.
	Phases map[string]float64 `json:"phases_ms"`
	// FillSeconds is how long building the state took (not measured as pause).
	FillSeconds float64 `json:"fill_s"`
	// BaselineMillis is the longest gap over as long a stretch of steady
	// load without a swap (server variant): the pause to compare against.
	BaselineMillis float64 `json:"baseline_gap_ms,omitempty"`
	// Elements is how many elements the two executions consumed in total
	// (server variant: how many were published).
	Elements int64 `json:"elements"`
	// Verified says the final per-key totals add up to the elements read.
	Verified bool `json:"verified"`
	// PausesMillis and BaselinesMillis are every swap's pause and the
	// baseline gap of the stretch just before it (server variant), in the
	// order measured; PauseMillis and BaselineMillis are their maxima.
	PausesMillis    []float64 `json:"pauses_ms,omitempty"`
	BaselinesMillis []float64 `json:"baseline_gaps_ms,omitempty"`
	// PauseP50Millis, PauseP99Millis, BaselineP50Millis and
	// BaselineP99Millis summarise them (nearest rank; with fewer than 100
	// swaps the p99 is the largest value).
	PauseP50Millis    float64 `json:"pause_p50_ms,omitempty"`
	PauseP99Millis    float64 `json:"pause_p99_ms,omitempty"`
	BaselineP50Millis float64 `json:"baseline_gap_p50_ms,omitempty"`
	BaselineP99Millis float64 `json:"baseline_gap_p99_ms,omitempty"`
}

// Percentile is the nearest-rank p-th percentile (0 < p <= 100) of xs, 0
// for none. It does not change xs.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	if rank < 1 {
		rank = 1
	}
	if rank > len(s) {
		rank = len(s)
	}
	return s[rank-1]
}

func (c *UpdateConfig) ensureDefaults() {
	if c.Rate <= 0 {
		c.Rate = 50000
	}
	if c.Workers <= 0 {
		c.Workers = 2
	}
	if c.Swaps <= 0 {
		c.Swaps = 1
	}
	if c.Steady <= 0 {
		c.Steady = 2 * time.Second
	}
}

// fillSource emits element i with key i for i < keys as fast as it can
// (building the state), then keys cycling through [0, keys) at rate per
// second (the steady load). Its position is the next index, so a restored
// or updated execution continues exactly where the checkpoint was.
type fillSource struct {
	keys int64
	rate float64
}

func (s *fillSource) Split(ctx context.Context, _ int) ([]contract.SourceSplit, error) {
	return s.Resume(ctx, [][]byte{nil})
}

func (s *fillSource) Resume(_ context.Context, pos [][]byte) ([]contract.SourceSplit, error) {
	next := int64(0)
	if len(pos) > 0 && len(pos[0]) == 8 {
		next = int64(binary.BigEndian.Uint64(pos[0]))
	}
	return []contract.SourceSplit{&fillSplit{src: s, next: next, start: time.Now(), startNext: next}}, nil
}

type fillSplit struct {
	src       *fillSource
	next      int64
	start     time.Time
	startNext int64
}

func (f *fillSplit) Read(ctx context.Context, buf []contract.Element) (contract.ReadResult, error) {
	n := 0
	if f.next >= f.src.keys {
		// Steady phase: pace to the rate, from when this split reached it.
		if f.startNext < f.src.keys {
			f.start, f.startNext = time.Now(), f.next
		}
		due := f.start.Add(time.Duration(float64(f.next-f.startNext) / f.src.rate * float64(time.Second)))
		if wait := time.Until(due); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return contract.ReadResult{}, ctx.Err()
			case <-t.C:
			}
		}
		if max := int(f.src.rate/200) + 1; len(buf) > max {
			buf = buf[:max]
		}
	}
	for n < len(buf) {
		i := f.next
		k := i
		if i >= f.src.keys {
			k = (i * 2654435761) % f.src.keys
		}
		buf[n] = contract.Element{Value: weir.KV[int64, int64]{Key: k, Value: 1}, Time: 0, Window: window.Global, Pane: window.NoFiring}
		n++
		f.next++
		if f.next == f.src.keys {
			break
		}
	}
	return contract.ReadResult{N: n, Watermark: 0}, nil
}

func (f *fillSplit) Close() error { return nil }

func (f *fillSplit) Position() ([]byte, error) {
	return binary.BigEndian.AppendUint64(nil, uint64(f.next)), nil
}

func (f *fillSplit) Ack(context.Context, []byte) error { return nil }

// gapTracker keeps the longest time between two marks since it was last
// reset (the benchmark's pause).
type gapTracker struct {
	mu     sync.Mutex
	lastAt time.Time
	maxGap time.Duration
}

func (g *gapTracker) mark(now time.Time) {
	g.mu.Lock()
	if !g.lastAt.IsZero() {
		g.maxGap = max(g.maxGap, now.Sub(g.lastAt))
	}
	g.lastAt = now
	g.mu.Unlock()
}

// reset starts a new measurement and returns the longest gap of the last,
// counting the gap still open (no element since the last one seen). The
// new measurement starts now, so a stretch without any element is a gap
// as long as the stretch, not none.
func (g *gapTracker) reset() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	gap := g.maxGap
	if !g.lastAt.IsZero() {
		gap = max(gap, now.Sub(g.lastAt))
	}
	g.maxGap, g.lastAt = 0, now
	return gap
}

// gapProbe records when elements enter the pipeline, once armed.
type gapProbe struct {
	gaps    gapTracker
	armed   atomic.Bool
	arrived atomic.Int64
}

func (g *gapProbe) Process(pc *contract.ProcessContext, e contract.Element) error {
	g.arrived.Add(1)
	if g.armed.Load() {
		g.gaps.mark(time.Now())
	}
	pc.Emit(0, e)
	return nil
}

func (g *gapProbe) arm() {
	g.gaps.reset()
	g.armed.Store(true)
}

// totalsSink adds up the final per-key sums.
type totalsSink struct{ total atomic.Int64 }

func (t *totalsSink) Write(_ context.Context, _ int, es []contract.Element) error {
	var s int64
	for _, e := range es {
		s += e.Value.(weir.KV[int64, int64]).Value
	}
	t.total.Add(s)
	return nil
}

func (t *totalsSink) Close(context.Context) error { return nil }

func updatePipeline(src *fillSource, probe *gapProbe, sink *totalsSink) *weir.Pipeline {
	p := weir.NewPipeline()
	s := p.Root()
	in := weir.Read[weir.KV[int64, int64]](s, "Events", src, false)
	probed := weir.ParDoFn[weir.KV[int64, int64], weir.KV[int64, int64]](s, "Probe", in, probe)
	sums := weir.CombinePerKey(s, "CountByKey", probed, weir.Sum[int64]())
	weir.Write(s, "Totals", sums, contract.Sink(sink))
	return p
}

// RunUpdate runs the update benchmark once in this process.
func RunUpdate(ctx context.Context, cfg UpdateConfig) (UpdateOutcome, error) {
	cfg.ensureDefaults()
	out := UpdateOutcome{Mode: cfg.Mode, Keys: cfg.Keys}
	if cfg.Mode != "update" && cfg.Mode != "restore" {
		return out, fmt.Errorf("update bench: mode %q is neither update nor restore", cfg.Mode)
	}
	store, err := state.Open(filepath.Join(cfg.Dir, "state"), nil)
	if err != nil {
		return out, err
	}
	defer store.Close()
	src := &fillSource{keys: cfg.Keys, rate: cfg.Rate}
	probe := &gapProbe{}
	sink := &totalsSink{}
	const lineage, jobID = "bench-update", "job-1"
	checkpoint := func(x *runner.Execution) error {
		cp, err := x.Checkpoint(ctx)
		if err != nil {
			return err
		}
		if err := store.WriteCheckpoint(lineage, jobID, cp, nil); err != nil {
			return err
		}
		return x.Commit(ctx, cp)
	}
	prog := updatePipeline(src, probe, sink).Program()
	start := time.Now()
	x, err := runner.Start(ctx, prog, runner.Options{NumWorkers: cfg.Workers, Checkpoints: true})
	if err != nil {
		return out, err
	}
	// Fill: wait until every key has state, then checkpoint it (the first,
	// large checkpoint belongs to building the state, not to the swap).
	for x.Metrics().Step("CountByKey").ElementsIn < cfg.Keys {
		time.Sleep(20 * time.Millisecond)
	}
	if err := checkpoint(x); err != nil {
		return out, err
	}
	out.FillSeconds = time.Since(start).Seconds()
	// Steady load with periodic checkpoints, as a job service would take.
	stop := make(chan struct{})
	var cpErr atomic.Pointer[error]
	var wg sync.WaitGroup
	periodic := func(x *runner.Execution) {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if err := checkpoint(x); err != nil {
					cpErr.Store(&err)
					return
				}
			}
		}
	}
	wg.Add(1)
	go periodic(x)
	time.Sleep(cfg.Steady)
	close(stop)
	wg.Wait()
	if e := cpErr.Load(); e != nil {
		return out, *e
	}
	probe.arm()
	time.Sleep(200 * time.Millisecond)

	swapStart := time.Now()
	out.Phases = map[string]float64{}
	last := swapStart
	phase := func(name string) {
		now := time.Now()
		out.Phases[name] = float64(now.Sub(last).Microseconds()) / 1000
		last = now
	}
	cp, err := x.Pause(ctx)
	if err != nil {
		return out, err
	}
	phase("pause")
	var x2 *runner.Execution
	if cfg.Mode == "update" {
		// The new execution adopts the keyed state in memory and starts at
		// once; the paused checkpoint is encoded by its workers (copy on
		// write) and written while it runs, as the job service does.
		restore := &contract.Restore{Epoch: cp.Epoch, Positions: cp.Positions}
		adopt := &runner.Adoption{From: x, Steps: map[string]string{"CountByKey": "CountByKey"}}
		if x2, err = runner.Start(ctx, prog, runner.Options{NumWorkers: cfg.Workers, Checkpoints: true, Restore: restore, Adopt: adopt}); err != nil {
			return out, err
		}
		phase("start")
		out.SwapMillis = float64(time.Since(swapStart).Microseconds()) / 1000
	}
	if err := cp.Complete(ctx); err != nil {
		return out, err
	}
	phase("encode")
	if err := store.WriteCheckpoint(lineage, jobID, cp, nil); err != nil {
		return out, err
	}
	phase("write")
	if err := x.Commit(ctx, cp); err != nil {
		return out, err
	}
	phase("commit")
	x.Cancel()
	res1, _ := x.Wait()
	phase("stop")
	if cfg.Mode == "restore" {
		restore, _, err := store.Restore(lineage, jobID)
		if err != nil {
			return out, err
		}
		if x2, err = runner.Start(ctx, prog, runner.Options{NumWorkers: cfg.Workers, Checkpoints: true, Restore: restore}); err != nil {
			return out, err
		}
		phase("restore")
		out.SwapMillis = float64(time.Since(swapStart).Microseconds()) / 1000
	}
	x = nil
	time.Sleep(cfg.Steady)
	out.PauseMillis = float64(probe.gaps.reset().Microseconds()) / 1000
	x2.Drain()
	res2, err := x2.Wait()
	if err != nil {
		return out, err
	}
	// Elements the first execution read after the pause barrier were
	// discarded and read again; count what the checkpoint covered.
	covered := int64(binary.BigEndian.Uint64(cp.Positions["Events"][0]))
	_ = res1
	out.Elements = covered + (res2.Step("Events").ElementsIn)
	out.Verified = sink.total.Load() == out.Elements
	if !out.Verified {
		return out, fmt.Errorf("%w: the per-key totals add up to %d, but %d elements were read", ErrMismatch, sink.total.Load(), out.Elements)
	}
	return out, nil
}
