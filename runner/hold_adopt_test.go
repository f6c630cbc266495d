package runner_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// paneSink records every pane it is given, committed or not.
type paneSink struct {
	mu    sync.Mutex
	panes []string
}

func (p *paneSink) Write(_ context.Context, _ int, es []contract.Element) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range es {
		v := e.Value.(weir.KV[string, int64])
		p.panes = append(p.panes, fmt.Sprintf("%s=%d %s", v.Key, v.Value, e.Pane.Timing))
	}
	return nil
}
func (p *paneSink) Close(context.Context) error { return nil }

func (p *paneSink) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.panes...)
}

// TestHeldPanesSurviveAdoption: a window whose early pane was held back
// at a −∞ watermark (Options.HoldPanesAtMinWatermark, a re-reading
// replacement catching up) fires that pane as soon as the watermark rises
// after the job was updated in place or rescaled (its keys adopted in
// memory) or restarted from its checkpoint (a crash while catching up),
// not only at its next element or its end.
func TestHeldPanesSurviveAdoption(t *testing.T) {
	for _, tc := range []struct {
		workers, after int
		restart        bool // restored from the checkpoint, not adopted
	}{{1, 1, false}, {1, 2, false}, {2, 1, false}, {1, 1, true}, {1, 2, true}, {2, 1, true}} {
		workers, after := tc.workers, tc.after
		how := "adopted"
		if tc.restart {
			how = "restored"
		}
		t.Run(fmt.Sprintf("w%d-to-w%d-%s", workers, after, how), func(t *testing.T) {
			ctx := context.Background()
			src := &seqSource{n: 100, splits: 1, keys: 1}
			src.minWM.Store(true)
			src.gate.let(4)
			sink := &paneSink{}
			build := func() *contract.Program {
				p := weir.NewPipeline()
				s := p.Root()
				in := weir.Read[kv](s, "Seq", src, true)
				w := weir.WindowInto(s, "Window", in, weir.Windowing{Fn: window.FixedFn(3_600_000),
					Trigger: window.AfterWatermark(&window.Trigger{Kind: window.TriggerAfterCount, Count: 2}, nil), Accumulation: window.Accumulating})
				sums := weir.CombinePerKey(s, "Sum", weir.Map(s, "KV", w, func(e kv) weir.KV[string, int64] {
					return weir.KV[string, int64]{Key: e.Key, Value: e.Value}
				}), weir.Sum[int64]())
				weir.Write(s, "Out", sums, contract.Sink(sink))
				return p.Program()
			}
			store := &memStore{}
			x, err := runner.Start(ctx, build(), runner.Options{NumWorkers: workers, Checkpoints: true, HoldPanesAtMinWatermark: true})
			if err != nil {
				t.Fatal(err)
			}
			src.gate.to(4)
			checkpointDurably(t, x, store)
			if got := sink.seen(); len(got) != 0 {
				t.Fatalf("panes while the watermark is −∞: %v", got)
			}
			restore := pauseDurably(t, x, store)
			adopt := &runner.Adoption{From: x, Steps: map[string]string{"Sum": "Sum"}}
			if tc.restart {
				adopt, restore.State = nil, store
			}
			x2, err := runner.Start(ctx, build(), runner.Options{NumWorkers: after, Checkpoints: true, HoldPanesAtMinWatermark: true, Restore: restore, Adopt: adopt})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { x2.Cancel(); x2.Wait() }()
			src.minWM.Store(false) // the watermark rises, no element arrives
			want := "k0=6 EARLY"
			if !await.Until(30*time.Second, 20*time.Millisecond, func() bool {
				checkpointDurably(t, x2, store)
				for _, p := range sink.seen() {
					if p == want {
						return true
					}
				}
				return false
			}) {
				t.Fatalf("panes after the watermark rose: %v, want %s", sink.seen(), want)
			}
		})
	}
}
