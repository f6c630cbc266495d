package runner_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/runner/contract"
)

// frozenState serves a memStore's state without its lock: a restore's
// workers read it at once, as they read the state store.
type frozenState map[string]map[uint16]map[string][]byte

func (f frozenState) Scan(_ context.Context, step string, kgs []int, fn func(uint16, []byte, []byte) error) error {
	for _, kg := range kgs {
		for k, v := range f[step][uint16(kg)] {
			if err := fn(uint16(kg), []byte(k), v); err != nil {
				return err
			}
		}
	}
	return nil
}

// rekeyOpts declares the re-key rekey, or nothing when it is nil.
func rekeyOpts(rekey func(string) (string, error)) []weir.StepOption {
	if rekey == nil {
		return nil
	}
	return []weir.StepOption{weir.RekeyFrom(rekey)}
}

// buildGlobalSums sums per key in the global window (no window closes,
// so every key stays in the state), re-keying from the stored keys by
// rekey when it is not nil.
func buildGlobalSums(src *seqSource, sink *txSink, rekey func(string) (string, error)) *weir.Pipeline {
	p := weir.NewPipeline()
	s := p.Root()
	in := weir.Read[kv](s, "Seq", src, false)
	weir.Write(s, "Out", weir.CombinePerKey(s, "Sum", in, weir.Sum[int64](), rekeyOpts(rekey)...), contract.Sink(sink))
	return p
}

// buildGlobalGroups groups per key in the global window (GroupByKey) and
// writes each key's values summed, re-keying from the stored keys by rekey
// when it is not nil.
func buildGlobalGroups(src *seqSource, sink *txSink, rekey func(string) (string, error)) *weir.Pipeline {
	p := weir.NewPipeline()
	s := p.Root()
	in := weir.Read[kv](s, "Seq", src, false)
	groups := weir.GroupByKey(s, "Group", in, rekeyOpts(rekey)...)
	sums := weir.Map(s, "Sum", groups, func(g weir.KV[string, []int64]) kv {
		var t int64
		for _, v := range g.Value {
			t += v
		}
		return kv{Key: g.Key, Value: t}
	})
	weir.Write(s, "Out", sums, contract.Sink(sink))
	return p
}

// storeGlobalSums runs buildGlobalSums (without a re-key) over keys
// elements, one per key ("k0".."kN-1", element i carrying the value i),
// on workers workers, and returns the store its checkpoint wrote and the
// source, whose last element (key k0, value keys) it has not read yet.
func storeGlobalSums(tb testing.TB, keys, workers int) (*memStore, *seqSource) {
	return storeGlobal(tb, buildGlobalSums, keys, workers)
}

// storeGlobal is storeGlobalSums for the pipeline build makes.
func storeGlobal(tb testing.TB, build func(*seqSource, *txSink, func(string) (string, error)) *weir.Pipeline, keys, workers int) (*memStore, *seqSource) {
	tb.Helper()
	src := &seqSource{n: keys + 1, splits: 2, keys: keys}
	store := &memStore{}
	src.gate.let(keys)
	x, err := runner.Start(context.Background(), build(src, newTxSink(), nil).Program(),
		runner.Options{NumWorkers: workers, Checkpoints: true})
	if err != nil {
		tb.Fatal(err)
	}
	src.gate.waitRead(keys)
	cp, err := x.Checkpoint(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	store.apply(cp)
	x.Cancel()
	_, _ = x.Wait()
	if got := len(cp.State); got != keys {
		tb.Fatalf("the checkpoint holds %d keys, want %d", got, keys)
	}
	return store, src
}

// TestRestoreRekeyMergesAcrossWorkers: a restore that re-keys every
// stored key — on one worker, and on several, where a key's new key group
// is another worker's — merges the sums of the keys that meet, so that
// every new key's total is the sum of its earlier keys' totals; stored on
// two workers, restored on one, two or three.
func TestRestoreRekeyMergesAcrossWorkers(t *testing.T) {
	for _, workers := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) { checkRestoreRekey(t, buildGlobalSums, 3000, workers) })
	}
}

// TestRestoreRekeysGroupByKey: a GroupByKey that declares a re-key
// (RekeyFrom) joins the buffered values of the stored keys that meet at a
// new key, on one worker and on two: every new key's values are its
// earlier keys' together (their sum checked), none left under an earlier
// key.
func TestRestoreRekeysGroupByKey(t *testing.T) {
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) { checkRestoreRekey(t, buildGlobalGroups, 500, workers) })
	}
}

// checkRestoreRekey stores keys keys of the pipeline build makes on two
// workers, restores them on workers workers re-keyed to the key without
// its last digit, reads one element more, and checks that every new key
// committed the sum of its earlier keys' values, and no other key.
func checkRestoreRekey(t *testing.T, build func(*seqSource, *txSink, func(string) (string, error)) *weir.Pipeline, keys, workers int) {
	t.Helper()
	store, src := storeGlobal(t, build, keys, 2)
	rekey := func(k string) (string, error) { return k[:len(k)-1], nil }
	want := map[string]int64{"k0": int64(keys)} // the element read after the restore
	for i := range keys {
		k := src.key(i)
		want[k[:len(k)-1]] += int64(i)
	}
	sink := newTxSink()
	src.gate.let(keys + 1)
	restore := &contract.Restore{Epoch: store.epoch, Positions: store.positions, State: frozenState(store.state)}
	x, err := runner.Start(context.Background(), build(src, sink, rekey).Program(),
		runner.Options{NumWorkers: workers, Checkpoints: true, Restore: restore})
	if err != nil {
		t.Fatal(err)
	}
	finishDurably(t, x, nil)
	sink.checkCommitted(t, want)
	if len(sink.committed) != len(want) {
		t.Errorf("%d keys committed, want %d (a key committed under its earlier name, or twice)", len(sink.committed), len(want))
	}
}

// BenchmarkRestoreRekey measures a restore from the store that re-keys
// every stored key (a restart, or --create-from-snapshot, of a version
// that declares the re-key): keys "k0".."kN-1" move to the key without
// their last digit, about ten merging into each. ns/op is Start's time
// (the restore runs before any worker starts); keys/s is reported.
func BenchmarkRestoreRekey(b *testing.B) {
	for _, keys := range []int{200_000} {
		for _, workers := range []int{1, 2} {
			b.Run(fmt.Sprintf("keys=%d/workers=%d", keys, workers), func(b *testing.B) {
				store, src := storeGlobalSums(b, keys, workers)
				state := frozenState(store.state)
				rekey := func(k string) (string, error) { return k[:len(k)-1], nil }
				b.ResetTimer()
				for range b.N {
					restore := &contract.Restore{Epoch: store.epoch, Positions: store.positions, State: state}
					x, err := runner.Start(context.Background(), buildGlobalSums(src, newTxSink(), rekey).Program(),
						runner.Options{NumWorkers: workers, Checkpoints: true, Restore: restore})
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					x.Cancel()
					_, _ = x.Wait()
					b.StartTimer()
				}
				b.ReportMetric(float64(keys)*float64(b.N)/b.Elapsed().Seconds(), "keys/s")
			})
		}
	}
}
