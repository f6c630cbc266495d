package runner

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// lazySums is the code of a keyed sum whose accumulators (*int64) adopted
// from an earlier execution carry over when first used — here, when
// encoded — and whose carry-over fails for odd sums, as a YAML migration
// init that does not evaluate. It implements contract.Aggregator,
// StateCoder and AdoptedStateRejecter.
type lazySums struct {
	mu      sync.Mutex
	adopted map[*int64]bool
	pending map[*int64]string
}

func (a *lazySums) AppendKey(dst []byte, v any) []byte { return append(dst, v.(string)...) }
func (a *lazySums) Key(v any) any                      { return v }
func (a *lazySums) NewAccumulator() any                { return new(int64) }
func (a *lazySums) AddInput(acc any, e *contract.Element) any {
	*acc.(*int64) += e.Value.(int64)
	return acc
}
func (a *lazySums) MergeAccumulators(x, y any) any { *x.(*int64) += *y.(*int64); return x }
func (a *lazySums) Output(_ any, acc any, _ window.Window, _ window.PaneInfo) any {
	return *acc.(*int64)
}
func (a *lazySums) EncodeKey(key any) ([]byte, error) { return []byte(key.(string)), nil }
func (a *lazySums) DecodeKey(b []byte) (any, error)   { return string(b), nil }
func (a *lazySums) DecodeState(_ string, b []byte) (any, error) {
	n, err := strconv.ParseInt(string(b), 10, 64)
	return &n, err
}

// EncodeState carries an adopted accumulator over: an odd one fails.
func (a *lazySums) EncodeState(_ string, v any) ([]byte, error) {
	acc := v.(*int64)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.adopted[acc] {
		delete(a.adopted, acc)
		if *acc%2 == 1 {
			a.pending[acc] = "the init of output n did not evaluate: an odd sum"
		}
	}
	return strconv.AppendInt(nil, *acc, 10), nil
}

func (a *lazySums) PendingStateRejects() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.pending) > 0
}

func (a *lazySums) TakeStateRejects(acc any) []*contract.PartialStateError {
	a.mu.Lock()
	defer a.mu.Unlock()
	msg, ok := a.pending[acc.(*int64)]
	if !ok {
		return nil
	}
	delete(a.pending, acc.(*int64))
	return []*contract.PartialStateError{{Reason: "migration_init_failed", Message: msg}}
}

// TestEncodeReportsAdoptedRejects: a key changed since the update (a new
// window's element) whose adopted accumulator nothing used is carried over
// when the checkpoint encodes it. What did not carry over goes to the
// dead-letter hook then, before the checkpoint can commit — once, with the
// key and the window — and not again at the next checkpoint. A failing
// hook fails the encoding; a paused node's snapshot, encoded by the
// execution that adopted it, reports nothing.
func TestEncodeReportsAdoptedRejects(t *testing.T) {
	w1 := window.Window{Start: 0, End: 60_000}
	w2 := window.Window{Start: 60_000, End: 120_000}
	for _, tc := range []struct {
		name    string
		frozen  bool
		hookErr error
		// wantWins are the window starts reported at the first encoding.
		wantWins []int64
		wantErr  bool
	}{
		{name: "reported at the encoding", wantWins: []int64{0}},
		{name: "a paused node's snapshot", frozen: true},
		{name: "the hook fails", hookErr: errors.New("dead-letter topic unavailable"), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var got []contract.Reject
			r := &run{ctx: context.Background()}
			r.opts.DeadLetter = func(_ context.Context, rj contract.Reject) error {
				mu.Lock()
				defer mu.Unlock()
				if tc.hookErr != nil {
					return tc.hookErr
				}
				got = append(got, rj)
				return nil
			}
			agg := &lazySums{adopted: map[*int64]bool{}, pending: map[*int64]string{}}
			n := &aggNode{agg: agg, sc: agg, adoptedRej: agg}
			n.keyed = keyed{w: &worker{r: r}, sp: &stepPlan{step: &graph.Step{Name: "Sums"}}}
			n.changes.frozen = tc.frozen
			odd, even, fresh := new(int64), new(int64), new(int64)
			*odd, *even, *fresh = 7, 4, 3
			agg.adopted[odd], agg.adopted[even] = true, true
			// k1 holds an odd adopted sum in w1 and a new window w2 of its
			// own; k2 an even adopted sum.
			k1 := newAggKey(0, KeyHash([]byte("k1")), []byte("k1"))
			k1.setVal("k1")
			k1.setWindows([]*winState{{w: w1, acc: odd}, {w: w2, acc: fresh}})
			k2 := newAggKey(0, KeyHash([]byte("k2")), []byte("k2"))
			k2.setVal("k2")
			k2.setWindows([]*winState{{w: w1, acc: even}})
			var err error
			for _, k := range []*aggKey{k1, k2} {
				if _, _, e := n.encodeKey(nil, k); e != nil && err == nil {
					err = e
				}
			}
			if (err != nil) != tc.wantErr {
				t.Fatalf("encoding: %v, want an error: %v", err, tc.wantErr)
			}
			if tc.wantErr && !strings.Contains(err.Error(), "dead-letter topic unavailable") {
				t.Errorf("encoding error %q does not say why", err)
			}
			if len(got) != len(tc.wantWins) {
				t.Fatalf("reported %d rejects %+v, want %d", len(got), got, len(tc.wantWins))
			}
			for i, rj := range got {
				el := rj.Element.(map[string]any)
				win, _ := el["window"].(map[string]any)
				if rj.Step != "Sums" || rj.Reason != "migration_init_failed" || el["key"] != "k1" || win == nil ||
					win["start"] != mtime.Time(tc.wantWins[i]) || rj.Key == "" || !strings.Contains(rj.Message, "an odd sum") {
					t.Errorf("reject %+v: want step Sums, reason migration_init_failed, key k1, window %d, a Key and the refusal", rj, tc.wantWins[i])
				}
			}
			// The next checkpoint encodes k1 again: nothing more to report.
			before := len(got)
			if _, _, err := n.encodeKey(nil, k1); err != nil && !tc.wantErr {
				t.Fatal(err)
			}
			if len(got) != before {
				t.Errorf("the second encoding reported %d more", len(got)-before)
			}
			// A failed hook fails the checkpoint: the job restores from
			// the last one, whose restore reports the key again.
			if pending := agg.PendingStateRejects(); pending != tc.frozen {
				t.Errorf("still pending: %v", pending)
			}
		})
	}
}
