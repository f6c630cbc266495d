package runner_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/weir-dev/weir/runner/contract"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/runner"
)

// buildKeyCounted is a pipeline whose two keyed steps hold one key per
// distinct key read so far: a Combine and a stateful ParDo, both in the
// global window (nothing fires before the end of input).
func buildKeyCounted(src *seqSource, sink *txSink) *weir.Pipeline {
	p := weir.NewPipeline()
	s := p.Root()
	in := weir.WindowInto(s, "Global", weir.Read[kv](s, "Seq", src, true), weir.GlobalWindows())
	sums := weir.CombinePerKey(s, "Sum", in, weir.Sum[int64]())
	count := weir.ValueState[int64]{ID: "count"}
	weir.StatefulParDo(s, "Running", in, weir.StatefulFn[string, int64, kv]{
		State: []weir.StateDecl{count},
		Process: func(c *weir.StateContext[string, kv], v int64) error {
			n, _ := count.Read(c)
			count.Write(c, n+1)
			return nil
		},
	})
	weir.Write(s, "Out", sums, contract.Sink(sink))
	return p
}

// TestKeyCounts: the keys a keyed step holds are counted as keys arrive,
// carried over by an adoption (also when rescaling) and a restore, and
// dropped when their windows end. Every read follows a checkpoint, whose
// barrier every keyed instance has handled, so the count is exact.
func TestKeyCounts(t *testing.T) {
	for _, tc := range [][2]int{{1, 1}, {2, 3}, {3, 1}} {
		workers, after := tc[0], tc[1]
		t.Run(fmt.Sprintf("w%d-to-w%d", workers, after), func(t *testing.T) {
			const n, keys = 6000, 1000
			src := &seqSource{n: n, splits: 3, keys: keys}
			sink := newTxSink()
			store := &memStore{}
			ctx := context.Background()
			want := func(x *runner.Execution, stage string, k int64) {
				t.Helper()
				res := x.Metrics()
				for _, step := range []string{"Sum", "Running"} {
					st := res.Step(step)
					if !st.Keyed || st.Keys != k {
						t.Errorf("%s: step %s: keys %d (keyed %v), want %d", stage, step, st.Keys, st.Keyed, k)
					}
				}
				for _, step := range []string{"Seq", "Global", "Out"} {
					if st := res.Step(step); st.Keyed || st.Keys != 0 {
						t.Errorf("%s: step %s is not keyed, but reports %d keys (keyed %v)", stage, step, st.Keys, st.Keyed)
					}
				}
			}
			// Set before Start (see gate).
			src.gate.let(500)
			x, err := runner.Start(ctx, buildKeyCounted(src, sink).Program(), runner.Options{NumWorkers: workers, Checkpoints: true})
			if err != nil {
				t.Fatal(err)
			}
			src.gate.to(500)
			checkpointDurably(t, x, store)
			want(x, "after 500 elements", 500)
			src.gate.to(3000)
			checkpointDurably(t, x, store)
			want(x, "after 3000 elements", keys)
			restore := pauseDurably(t, x, store)

			// Adopted in memory, before the new execution reads anything.
			adopt := &runner.Adoption{From: x, Steps: map[string]string{"Sum": "Sum", "Running": "Running"}}
			x2, err := runner.Start(ctx, buildKeyCounted(src, sink).Program(), runner.Options{NumWorkers: after, Checkpoints: true, Restore: restore, Adopt: adopt})
			if err != nil {
				t.Fatal(err)
			}
			want(x2, "adopted", keys)
			x2.Cancel()
			x2.Wait()

			// Restored from the store, as after a crash.
			restore = &contract.Restore{Epoch: store.epoch, Positions: store.positions, State: store}
			x3, err := runner.Start(ctx, buildKeyCounted(src, sink).Program(), runner.Options{NumWorkers: after, Checkpoints: true, Restore: restore})
			if err != nil {
				t.Fatal(err)
			}
			want(x3, "restored", keys)
			src.gate.open()
			finishDurably(t, x3, nil)
			want(x3, "finished", 0)
		})
	}
}
