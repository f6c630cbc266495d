package runner_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-dev/weir/runner/contract"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner"
)

// unboundedSum sums an unbounded generated stream in hourly windows;
// reading is closed once the source has generated 100 elements (less than
// an hour of event time, so no window has fired yet).
func unboundedSum(t *testing.T) (p *weir.Pipeline, out *weir.Collector[kv], reading <-chan struct{}) {
	t.Helper()
	p = weir.NewPipeline()
	s := p.Root()
	started := make(chan struct{})
	var generated atomic.Int64
	gen := weir.Generate(s, "Gen", weir.GenerateConfig{Rate: 20000, Start: clock("00:00:00"), Spacing: mtime.Second},
		func(i int64) kv {
			if generated.Add(1) == 100 {
				close(started)
			}
			return kv{Key: "k", Value: 1}
		})
	w := weir.WindowInto(s, "Window", gen, weir.FixedWindows(mtime.Hour))
	return p, weir.Collect(s, "Out", weir.CombinePerKey(s, "Sum", w, weir.Sum[int64]())), started
}

// TestDrainFiresOpenWindows: draining an unbounded execution stops reading,
// moves the watermark to +∞, fires every open window (last pane is_last) and
// ends without error; every element read is in exactly one final total.
func TestDrainFiresOpenWindows(t *testing.T) {
	for _, workers := range []int{1, 2} {
		p, out, reading := unboundedSum(t)
		x, err := runner.Start(context.Background(), p.Program(), runner.Options{NumWorkers: workers})
		if err != nil {
			t.Fatal(err)
		}
		<-reading
		x.Drain()
		select {
		case <-x.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("drain did not end the execution")
		}
		res, err := x.Wait()
		if err != nil {
			t.Fatalf("drain: %v", err)
		}
		var total int64
		for _, e := range out.Elements() {
			if !e.Pane.IsLast {
				t.Errorf("pane %+v of a drained window is not last", e.Pane)
			}
			total += e.Value.Value
		}
		read := res.Step("Gen").ElementsIn
		if read == 0 || total != read {
			t.Errorf("workers %d: windows hold %d, source read %d", workers, total, read)
		}
		if wm := res.Step("Sum").Watermark; wm != mtime.MaxTimestamp {
			t.Errorf("watermark after drain = %s, want +inf", wm)
		}
	}
}

// TestCancelDiscards: cancel ends an unbounded execution with ErrCancelled
// and emits nothing for open windows.
func TestCancelDiscards(t *testing.T) {
	p, out, reading := unboundedSum(t)
	x, err := runner.Start(context.Background(), p.Program(), runner.Options{NumWorkers: 2})
	if err != nil {
		t.Fatal(err)
	}
	<-reading
	x.Cancel()
	if _, err := x.Wait(); !errors.Is(err, runner.ErrCancelled) {
		t.Fatalf("cancel: err = %v, want ErrCancelled", err)
	}
	if n := len(out.Elements()); n != 0 {
		t.Errorf("cancel emitted %d panes for open windows", n)
	}
}

// TestDeadLetterInsteadOfFailure: with a dead-letter hook, an element that
// fails in a step without an error output is handed over and the run goes on.
func TestDeadLetterInsteadOfFailure(t *testing.T) {
	p := weir.NewPipeline()
	s := p.Root()
	in := weir.Create(s, "In", []int64{1, 2, 3})
	out := weir.ParDo(s, "Odd", in, func(c *weir.Context, v int64, emit func(int64)) error {
		if v%2 == 0 {
			return weir.Fail("even", "%d is even", v)
		}
		emit(v)
		return nil
	})
	got := weir.Collect(s, "Out", out)
	var dead []contract.Reject
	var mu sync.Mutex
	res, err := runner.Run(context.Background(), p.Program(), runner.Options{DeadLetter: func(_ context.Context, r contract.Reject) error {
		mu.Lock()
		defer mu.Unlock()
		dead = append(dead, r)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Values()) != 2 || len(dead) != 1 || dead[0].Reason != "even" || dead[0].Step != "Odd" {
		t.Fatalf("outputs %v, dead letters %+v", got.Values(), dead)
	}
	if res.Step("Odd").Rejects != 1 {
		t.Errorf("rejects counter = %d", res.Step("Odd").Rejects)
	}
}
