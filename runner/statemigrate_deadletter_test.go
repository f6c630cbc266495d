package runner_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/runner/contract"
)

// migTally is what the migrated version of buildCheckpointed's Running
// step keeps per key.
type migTally struct{ N int64 }

// buildMigratedJob is buildCheckpointed with its Running step's count
// cell changed to a migTally (the migration refusing odd counts when
// refuseCounts) and, with migrateSums, its Sum step's accumulator changed
// to a sumAcc (the migration refusing odd sums).
func buildMigratedJob(src *seqSource, sink *txSink, refuseCounts, migrateSums bool) *weir.Pipeline {
	p := weir.NewPipeline()
	s := p.Root()
	in := weir.Read[kv](s, "Seq", src, true)
	w := weir.WindowInto(s, "Window", in, weir.FixedWindows(60_000))
	var sums weir.PCollection[weir.KV[string, int64]]
	if migrateSums {
		sums = weir.CombinePerKey(s, "Sum", w, weir.CombineFn[int64, sumAcc, int64](migSumFn{}),
			weir.MigrateAccumulator(func(n int64) (sumAcc, error) {
				if n%2 == 1 {
					return sumAcc{}, fmt.Errorf("an odd sum %d", n)
				}
				return sumAcc{S: n}, nil
			}))
	} else {
		sums = weir.CombinePerKey(s, "Sum", w, weir.Sum[int64]())
	}
	count := weir.ValueState[migTally]{ID: "count"}
	weir.StatefulParDo(s, "Running", weir.WindowInto(s, "Global", in, weir.GlobalWindows()), weir.StatefulFn[string, int64, kv]{
		State: []weir.StateDecl{count},
		Process: func(c *weir.StateContext[string, kv], v int64) error {
			t, _ := count.Read(c)
			count.Write(c, migTally{N: t.N + 1})
			return nil
		},
	}, weir.MigrateState("count", func(n int64) (migTally, error) {
		if refuseCounts && n%2 == 1 {
			return migTally{}, fmt.Errorf("an odd count %d", n)
		}
		return migTally{N: n}, nil
	}))
	weir.Write(s, "Out", sums, contract.Sink(sink))
	return p
}

// buildMigrated refuses the odd counts of buildMigratedJob's Running step.
func buildMigrated(src *seqSource, sink *txSink) *weir.Pipeline {
	return buildMigratedJob(src, sink, true, false)
}

// buildMigratedSum refuses the odd sums of buildMigratedJob's Sum step.
func buildMigratedSum(src *seqSource, sink *txSink) *weir.Pipeline {
	return buildMigratedJob(src, sink, false, true)
}

// checkpointAt2000 runs buildCheckpointed over 2,000 elements of 7 keys,
// every one read before its durable checkpoint into the returned store.
func checkpointAt2000(t *testing.T) *memStore {
	t.Helper()
	src := &seqSource{n: 3000, splits: 2, keys: 7}
	store := &memStore{}
	// Set before Start (see gate).
	src.gate.let(2000)
	x, err := runner.Start(context.Background(), buildCheckpointed(src, newTxSink()).Program(), runner.Options{NumWorkers: 2, Checkpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	src.gate.to(2000)
	checkpointDurably(t, x, store)
	x.Cancel()
	x.Wait()
	return store
}

// restoreMigrated starts the pipeline build makes from store's checkpoint,
// its source held at the gate, with a dead-letter hook that collects.
func restoreMigrated(t *testing.T, store *memStore, build func(*seqSource, *txSink) *weir.Pipeline) (*runner.Execution, *deadLetters) {
	t.Helper()
	dl := &deadLetters{}
	src := &seqSource{n: 3000, splits: 2, keys: 7}
	src.gate.let(0)
	x, err := runner.Start(context.Background(), build(src, newTxSink()).Program(), runner.Options{NumWorkers: 2, Checkpoints: true,
		Restore: &contract.Restore{Epoch: store.epoch, Positions: store.positions, State: store}, DeadLetter: dl.send})
	if err != nil {
		t.Fatal(err)
	}
	return x, dl
}

// deadLetters collects the rejects a run sends to its dead-letter hook.
type deadLetters struct {
	mu  sync.Mutex
	got []contract.Reject
}

func (d *deadLetters) send(_ context.Context, r contract.Reject) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, r)
	return nil
}

// TestStateMigrationDeadLetters: a stored state value a declared
// migration refuses is sent to the dead-letter hook at the restore, a
// reject naming the step, the key, the cell and the stored value, with a
// Key that identifies it across replays; the step counts it; the next
// checkpoint stores the key without it, so a restore from that
// checkpoint refuses nothing again.
func TestStateMigrationDeadLetters(t *testing.T) {
	// k0..k4 count 286 each, k5 and k6 285 (odd: refused).
	store := checkpointAt2000(t)
	x2, dl := restoreMigrated(t, store, buildMigrated)
	var got []string
	for _, r := range dl.got {
		el := r.Element.(map[string]any)
		got = append(got, fmt.Sprintf("%s %s %v %v %v", r.Step, r.Reason, el["key"], el["state"], el["stored"]))
		if !strings.Contains(r.Message, "an odd count") || r.Key == "" || r.Source != nil {
			t.Errorf("reject %+v: want its message naming why, a Key and no source position", r)
		}
	}
	slices.Sort(got)
	want := []string{"Running state_migration_failed k5 count 285", "Running state_migration_failed k6 count 285"}
	if !slices.Equal(got, want) {
		t.Errorf("dead letters:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if st := x2.Metrics().Step("Running"); st.RejectsByReason[contract.ReasonStateMigrationFailed] != 2 {
		t.Errorf("Running counts %v rejects, want 2 %s", st.RejectsByReason, contract.ReasonStateMigrationFailed)
	}
	checkpointDurably(t, x2, store)
	x2.Cancel()
	x2.Wait()

	x3, dl3 := restoreMigrated(t, store, buildMigrated)
	defer func() { x3.Cancel(); x3.Wait() }()
	if len(dl3.got) != 0 {
		t.Errorf("a restore from the migrated job's checkpoint refused %d stored values again: %+v", len(dl3.got), dl3.got)
	}
}

// sumAcc is the accumulator of buildMigratedSum's Sum step.
type sumAcc struct{ S int64 }

type migSumFn struct{}

func (migSumFn) CreateAccumulator() sumAcc            { return sumAcc{} }
func (migSumFn) AddInput(a sumAcc, v int64) sumAcc    { return sumAcc{S: a.S + v} }
func (migSumFn) MergeAccumulators(a, b sumAcc) sumAcc { return sumAcc{S: a.S + b.S} }
func (migSumFn) ExtractOutput(a sumAcc) int64         { return a.S }

// TestAccumulatorMigrationDeadLetters: an accumulator a declared
// migration refuses starts afresh, and the restore sends it to the
// dead-letter hook naming the step, the key and the window — every open
// window whose stored sum was odd, and only those —; the next checkpoint
// stores the fresh accumulator, so a restore from it reports nothing.
func TestAccumulatorMigrationDeadLetters(t *testing.T) {
	store := checkpointAt2000(t)
	// The sum of each key in each one-minute window over elements 0..1999
	// (element i: key i%7, value i, event time i s).
	sums := map[string]int64{}
	for i := range 2000 {
		start := i / 60 * 60
		sums[fmt.Sprintf("k%d %d", i%7, start*1000)] += int64(i)
	}
	x2, dl := restoreMigrated(t, store, buildMigratedSum)
	reported := map[string]bool{}
	for _, r := range dl.got {
		el := r.Element.(map[string]any)
		win, _ := el["window"].(map[string]any)
		if r.Step != "Sum" || r.Reason != "accumulator_migration_failed" || win == nil || r.Key == "" || !strings.Contains(r.Message, "an odd sum") {
			t.Fatalf("reject %+v: want step Sum, reason accumulator_migration_failed, a window, a Key and the refusal", r)
		}
		k := fmt.Sprintf("%v %d", el["key"], win["start"])
		if sums[k]%2 != 1 {
			t.Errorf("reported %s, whose sum %d is even", k, sums[k])
		}
		reported[k] = true
	}
	// The last window (1,980 s to 2,040 s) is surely open: its odd sums
	// must all be reported.
	for k := range 7 {
		key := fmt.Sprintf("k%d %d", k, 1980*1000)
		if sums[key]%2 == 1 && !reported[key] {
			t.Errorf("%s (sum %d, odd) was not reported; reported: %v", key, sums[key], reported)
		}
	}
	if st := x2.Metrics().Step("Sum"); st.RejectsByReason["accumulator_migration_failed"] != int64(len(dl.got)) || len(dl.got) == 0 {
		t.Errorf("Sum counts %v rejects, %d dead letters", st.RejectsByReason, len(dl.got))
	}
	checkpointDurably(t, x2, store)
	x2.Cancel()
	x2.Wait()
	x3, dl3 := restoreMigrated(t, store, buildMigratedSum)
	defer func() { x3.Cancel(); x3.Wait() }()
	if len(dl3.got) != 0 {
		t.Errorf("a restore from the migrated job's checkpoint refused %d accumulators again", len(dl3.got))
	}
}
