package runner_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/runner/contract"
)

// rejectingTxSink is a txSink that cannot store values divisible by 100.
type rejectingTxSink struct{ *txSink }

func (s rejectingTxSink) WriteRejecting(ctx context.Context, w int, es []contract.Element, rejects []contract.SinkReject) ([]contract.SinkReject, error) {
	keep := make([]contract.Element, 0, len(es))
	for i, e := range es {
		if e.Value.(kv).Value%100 == 0 {
			rejects = append(rejects, contract.SinkReject{Index: i, Err: contract.ElementError{Reason: "value_out_of_range", Message: "divisible by 100"}})
			continue
		}
		keep = append(keep, e)
	}
	return rejects, s.Write(ctx, w, keep)
}

// buildRejecting: Seq → Out (a rejecting transactional sink) → its error
// output → Count → Rejected (another transactional sink).
func buildRejecting(src *seqSource, out, rejected *txSink) *weir.Pipeline {
	p := weir.NewPipeline()
	s := p.Root()
	in := weir.Read[kv](s, "Seq", src, true)
	errs := weir.WriteWithErrors(s, "Out", in, contract.Sink(rejectingTxSink{out}), weir.WithErrorOutput("unstored"))
	counted := weir.Map(s, "Count", errs, func(r contract.Reject) kv { return kv{Key: r.Reason, Value: 1} })
	weir.Write(s, "Rejected", counted, contract.Sink(rejected))
	return p
}

// TestSinkRejectsExactlyOnce: the rows a sink cannot store go to its error
// output, in order with the checkpoint barriers the sink forwards there, so
// a transactional sink downstream of the rejects commits each exactly once
// across a crash and a restore, and the first sink commits every other row.
func TestSinkRejectsExactlyOnce(t *testing.T) {
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("w%d", workers), func(t *testing.T) {
			const n = 3000
			src := &seqSource{n: n, splits: 3}
			out, rejected := newTxSink(), newTxSink()
			store := &memStore{}
			ctx := context.Background()
			// Set before Start (see gate).
			src.gate.let(1000)
			x, err := runner.Start(ctx, buildRejecting(src, out, rejected).Program(), runner.Options{NumWorkers: workers, Checkpoints: true})
			if err != nil {
				t.Fatal(err)
			}
			src.gate.to(1000)
			src.gate.let(2000)
			checkpointDurably(t, x, store)
			src.gate.to(2000)
			x.Cancel() // crash: work after the checkpoint is lost
			x.Wait()
			out = &txSink{buf: map[int][]kv{}, committed: out.committed, epoch: out.epoch, commits: out.commits}
			rejected = &txSink{buf: map[int][]kv{}, committed: rejected.committed, epoch: rejected.epoch, commits: rejected.commits}
			if out.commits == 0 || rejected.commits == 0 {
				t.Fatalf("the checkpoint reached no sink (commits %d and %d)", out.commits, rejected.commits)
			}

			src.gate.open()
			restore := &contract.Restore{Epoch: store.epoch, Positions: store.positions, State: store}
			x2, err := runner.Start(ctx, buildRejecting(src, out, rejected).Program(), runner.Options{NumWorkers: workers, Checkpoints: true, Restore: restore})
			if err != nil {
				t.Fatal(err)
			}
			res := finishDurably(t, x2, store)
			want := map[string]int64{}
			for i := range n {
				if i%100 != 0 {
					want[src.key(i)] += int64(i)
				}
			}
			for k, v := range want {
				if out.committed[k] != v {
					t.Errorf("%s: committed %d, want %d", k, out.committed[k], v)
				}
			}
			if got := rejected.committed["value_out_of_range"]; got != n/100 {
				t.Errorf("rejects committed %d, want %d (each exactly once)", got, n/100)
			}
			if m := res.Step("Out"); m.Rejects == 0 {
				t.Errorf("Out counts no rejects")
			}
		})
	}
}

// TestSinkRejectWithoutErrorOutput: a sink's reject without an error output
// fails the run naming the step, the reason and the source position.
func TestSinkRejectWithoutErrorOutput(t *testing.T) {
	p := weir.NewPipeline()
	s := p.Root()
	in := weir.CreateTimestamped(s, "In", []weir.TimestampedValue[kv]{
		{Value: kv{Key: "a", Value: 1}, Source: &contract.SourcePos{Source: "in.jsonl", Offset: 1}},
		{Value: kv{Key: "b", Value: 200}, Source: &contract.SourcePos{Source: "in.jsonl", Offset: 2}},
	})
	weir.Write(s, "Out", in, contract.Sink(rejectingTxSink{newTxSink()}))
	_, err := weir.Run(context.Background(), p, weir.RunOptions{})
	if err == nil {
		t.Fatal("run succeeded; want a failure")
	}
	for _, w := range []string{`"Out"`, "value_out_of_range", "in.jsonl:2"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %s", err, w)
		}
	}
}
