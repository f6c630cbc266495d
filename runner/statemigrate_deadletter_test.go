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

// buildMigrated is buildCheckpointed with its Running step's count cell
// changed to a migTally, declaring a migration that refuses odd counts.
func buildMigrated(src *seqSource, sink *txSink) *weir.Pipeline {
	p := weir.NewPipeline()
	s := p.Root()
	in := weir.Read[kv](s, "Seq", src, true)
	w := weir.WindowInto(s, "Window", in, weir.FixedWindows(60_000))
	sums := weir.CombinePerKey(s, "Sum", w, weir.Sum[int64]())
	count := weir.ValueState[migTally]{ID: "count"}
	weir.StatefulParDo(s, "Running", weir.WindowInto(s, "Global", in, weir.GlobalWindows()), weir.StatefulFn[string, int64, kv]{
		State: []weir.StateDecl{count},
		Process: func(c *weir.StateContext[string, kv], v int64) error {
			t, _ := count.Read(c)
			count.Write(c, migTally{N: t.N + 1})
			return nil
		},
	}, weir.MigrateState("count", func(n int64) (migTally, error) {
		if n%2 == 1 {
			return migTally{}, fmt.Errorf("an odd count %d", n)
		}
		return migTally{N: n}, nil
	}))
	weir.Write(s, "Out", sums, contract.Sink(sink))
	return p
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
	ctx := context.Background()
	src := &seqSource{n: 3000, splits: 2, keys: 7}
	store := &memStore{}
	x, err := runner.Start(ctx, buildCheckpointed(src, newTxSink()).Program(), runner.Options{NumWorkers: 2, Checkpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	// Every element up to 2,000 read before the checkpoint: k0..k4 count
	// 286 each, k5 and k6 285 (odd: refused).
	src.gate.to(2000)
	checkpointDurably(t, x, store)
	x.Cancel()
	x.Wait()

	restoreOnce := func() (*runner.Execution, *deadLetters) {
		t.Helper()
		dl := &deadLetters{}
		src2 := &seqSource{n: 3000, splits: 2, keys: 7}
		src2.gate.let(0)
		restore := &contract.Restore{Epoch: store.epoch, Positions: store.positions, State: store}
		x2, err := runner.Start(ctx, buildMigrated(src2, newTxSink()).Program(), runner.Options{NumWorkers: 2, Checkpoints: true, Restore: restore, DeadLetter: dl.send})
		if err != nil {
			t.Fatal(err)
		}
		return x2, dl
	}
	x2, dl := restoreOnce()
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

	x3, dl3 := restoreOnce()
	defer func() { x3.Cancel(); x3.Wait() }()
	if len(dl3.got) != 0 {
		t.Errorf("a restore from the migrated job's checkpoint refused %d stored values again: %+v", len(dl3.got), dl3.got)
	}
}
