package weir_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/runner/contract"
)

// seenSink records the int64 elements written to it.
type seenSink struct {
	mu   sync.Mutex
	seen map[int64]int
}

func (s *seenSink) Write(_ context.Context, _ int, es []contract.Element) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range es {
		s.seen[e.Value.(int64)]++
	}
	return nil
}

func (s *seenSink) Close(context.Context) error { return nil }

// TestGenerateEach: every split calls newFn once and keeps the function
// it returned to itself, so that function's unsynchronised state is safe
// (go test -race checks it); every element is generated exactly once,
// whatever the number of workers.
func TestGenerateEach(t *testing.T) {
	for _, workers := range []int{1, 2, 4} {
		var made atomic.Int32
		p := weir.NewPipeline()
		s := p.Root()
		gen := weir.GenerateEach(s, "Gen", weir.GenerateConfig{Count: 10_000}, func() func(int64) int64 {
			made.Add(1)
			var last int64 = -1 // this split's own: no lock
			return func(i int64) int64 {
				if i <= last {
					t.Errorf("a split's function saw %d after %d: shared between splits?", i, last)
				}
				last = i
				return i
			}
		})
		sink := &seenSink{seen: map[int64]int{}}
		weir.Write(s, "Out", gen, contract.Sink(sink))
		if _, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: workers}); err != nil {
			t.Fatal(err)
		}
		if got := int(made.Load()); got != workers {
			t.Errorf("%d workers: newFn called %d times, want once per split", workers, got)
		}
		if len(sink.seen) != 10_000 {
			t.Errorf("%d workers: %d distinct elements, want 10000", workers, len(sink.seen))
		}
		for v, n := range sink.seen {
			if n != 1 || v < 0 || v >= 10_000 {
				t.Errorf("%d workers: element %d written %d times", workers, v, n)
				break
			}
		}
	}
}
