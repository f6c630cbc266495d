package runner_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/runner/contract"
)

// abortingSink counts how it was ended.
type abortingSink struct {
	rows, closes, aborts atomic.Int64
}

func (s *abortingSink) Write(_ context.Context, _ int, es []contract.Element) error {
	s.rows.Add(int64(len(es)))
	return nil
}
func (s *abortingSink) Close(context.Context) error { s.closes.Add(1); return nil }
func (s *abortingSink) Abort(context.Context) error { s.aborts.Add(1); return nil }

// TestAbortingSinkEndsByOutcome: a sink that publishes only a complete
// input (contract.AbortingSink) is closed when its execution's input
// ended, and aborted — never closed — when the execution failed.
func TestAbortingSinkEndsByOutcome(t *testing.T) {
	for _, tc := range []struct {
		name       string
		failOn     int64
		wantErr    bool
		wantCloses int64
		wantAborts int64
	}{
		{name: "the input ended", failOn: -1, wantCloses: 1},
		{name: "the execution failed", failOn: 2, wantErr: true, wantAborts: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := weir.NewPipeline()
			s := p.Root()
			in := weir.Create(s, "In", []int64{1, 2, 3})
			out := weir.ParDo(s, "Check", in, func(c *weir.Context, v int64, emit func(int64)) error {
				if v == tc.failOn {
					return weir.Fail("bad", "%d is bad", v)
				}
				emit(v)
				return nil
			})
			sink := &abortingSink{}
			weir.Write(s, "Out", out, contract.Sink(sink))
			_, err := runner.Run(context.Background(), p.Program(), runner.Options{})
			if (err != nil) != tc.wantErr {
				t.Fatalf("run: %v, want an error %v", err, tc.wantErr)
			}
			if sink.closes.Load() != tc.wantCloses || sink.aborts.Load() != tc.wantAborts {
				t.Errorf("closed %d and aborted %d times, want %d and %d", sink.closes.Load(), sink.aborts.Load(), tc.wantCloses, tc.wantAborts)
			}
		})
	}
}
