package flowstep

import (
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/service/record"
)

// TestParityGate walks the parity gate's decisions: it holds while too few
// complete windows agree, or while the new job's watermark lags, records a
// holding decision only when the counts change, passes and reveals the new
// generation, lets the timer rules decide after, and aborts at its
// deadline keeping the old job.
func TestParityGate(t *testing.T) {
	start := day.Add(10 * time.Hour)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	win := func(min int, rows, differing int64) WindowParity {
		w := WindowParity{End: at(time.Duration(min) * time.Minute), Rows: rows, Differing: differing}
		if differing > 0 {
			w.Examples = []string{"key {\"region\":\"EAST\"}: old 5, new missing"}
		}
		return w
	}
	obs := func(ws ...WindowParity) *ParityObservation {
		return &ParityObservation{Windows: ws, OldWatermark: at(10 * time.Minute), NewWatermark: at(10 * time.Minute), WindowSize: time.Minute}
	}
	tests := []struct {
		name    string
		gate    record.ParityGate
		now     time.Duration
		obs     *ParityObservation
		want    []string // the actions, as String prints them (a prefix each)
		why     string   // with no action: what the flow waits for
		done    bool
		figures *record.ParityFigures // RecordGate's figures
	}{
		{name: "no comparison yet", now: time.Minute, why: "waits for a comparison"},
		{name: "comparison failed", now: time.Minute, obs: &ParityObservation{Err: "table t has no generation 2 yet"}, why: "cannot compare the jobs' outputs yet: table t has no generation 2 yet"},
		{name: "too few windows", now: 2 * time.Minute, obs: obs(win(1, 4, 0), win(2, 4, 0)),
			want: []string{"record-gate HOLDING windows=2 rows=8 differing=0 agreed=2"}, figures: &record.ParityFigures{WindowsCompared: 2, RowsCompared: 8, Agreed: 2}},
		{name: "same counts: no new decision", now: 2 * time.Minute, obs: obs(win(1, 4, 0), win(2, 4, 0)),
			gate: record.ParityGate{Report: "holding", Last: record.ParityFigures{WindowsCompared: 2, RowsCompared: 8, Agreed: 2}}, why: "parity gate holding: 2 of 3 consecutive complete windows agreed"},
		{name: "agree", now: 4 * time.Minute, obs: obs(win(1, 4, 0), win(2, 4, 0), win(3, 4, 0)),
			want: []string{"record-gate PASSED windows=3 rows=12 differing=0 agreed=3", "reveal-new"}},
		{name: "an old difference outside the newest windows", now: 5 * time.Minute, obs: obs(win(1, 4, 1), win(2, 4, 0), win(3, 4, 0), win(4, 4, 0)),
			want: []string{"record-gate PASSED windows=4 rows=16 differing=1 agreed=3", "reveal-new"}},
		{name: "a difference in the newest window", now: 5 * time.Minute, obs: obs(win(1, 4, 0), win(2, 4, 0), win(3, 4, 0), win(4, 4, 1)),
			want: []string{"record-gate HOLDING windows=4 rows=16 differing=1 agreed=0"}},
		{name: "within budget", gate: record.ParityGate{Budget: 1}, now: 5 * time.Minute, obs: obs(win(2, 4, 0), win(3, 4, 1), win(4, 4, 0)),
			want: []string{"record-gate PASSED windows=3 rows=12 differing=1 agreed=3", "reveal-new"}},
		{name: "over budget together", gate: record.ParityGate{Budget: 1}, now: 5 * time.Minute, obs: obs(win(2, 4, 1), win(3, 4, 1), win(4, 4, 0)),
			want: []string{"record-gate HOLDING windows=3 rows=12 differing=2 agreed=2"}},
		{name: "new watermark lags", now: 5 * time.Minute, obs: func() *ParityObservation {
			o := obs(win(1, 4, 0), win(2, 4, 0), win(3, 4, 0))
			o.NewWatermark = at(8 * time.Minute)
			return o
		}(), want: []string{"record-gate HOLDING windows=3 rows=12 differing=0 agreed=3"}},
		{name: "deadline", now: 20 * time.Second * 3, gate: record.ParityGate{DeadlineMillis: 60000}, obs: obs(win(1, 4, 1)),
			want: []string{"record-gate ABORTED windows=1 rows=4 differing=1 agreed=0: parity gate aborted: 1m after the overlap began", "give-up FAILED: parity gate aborted"}, done: true,
			figures: &record.ParityFigures{WindowsCompared: 1, RowsCompared: 4, Differing: 1, Examples: []string{"key {\"region\":\"EAST\"}: old 5, new missing"}}},
		{name: "deadline without a comparison keeps the last figures", now: time.Hour, gate: record.ParityGate{DeadlineMillis: 60000, Last: record.ParityFigures{WindowsCompared: 7, Differing: 7}},
			want: []string{"record-gate ABORTED windows=7 rows=0 differing=7 agreed=0", "give-up FAILED"}, done: true},
		{name: "no window comparable after a restart: the last figures stand", now: 5 * time.Minute, obs: &ParityObservation{OldWatermark: at(time.Minute), NewWatermark: at(time.Minute)},
			gate: record.ParityGate{Report: "holding", Last: record.ParityFigures{WindowsCompared: 2, RowsCompared: 8, Differing: 8}}, why: "waits for both jobs' watermarks"},
		{name: "deadline after a failed comparison keeps the last figures", now: time.Hour, gate: record.ParityGate{DeadlineMillis: 60000, Last: record.ParityFigures{WindowsCompared: 2, RowsCompared: 8, Differing: 8}},
			obs: &ParityObservation{Err: "a job's watermark is not known yet"}, want: []string{"record-gate ABORTED windows=2 rows=8 differing=8 agreed=0", "give-up FAILED"}, done: true},
		{name: "passed, not revealed (a crash between)", now: 6 * time.Minute, gate: record.ParityGate{Outcome: record.GatePassed}, want: []string{"reveal-new"}},
		{name: "passed and revealed: the timer rules", now: 6 * time.Minute, gate: record.ParityGate{Outcome: record.GatePassed, Revealed: true}, want: []string{"drain-old"}},
		{name: "aborted, not given up (a crash between)", now: time.Hour, gate: record.ParityGate{Outcome: record.GateAborted, Report: "parity gate aborted: x"}, want: []string{"give-up FAILED: parity gate aborted: x"}, done: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.gate
			if g.Windows == 0 {
				g.Windows = 3
			}
			if g.DeadlineMillis == 0 {
				g.DeadlineMillis = time.Hour.Milliseconds() * 2
			}
			if g.Outcome == "" {
				g.Outcome = record.GateHolding
			}
			os := start
			rep := &record.Replacement{Strategy: record.StrategyParallel, Phase: record.PhaseOverlap, OldJobID: "old-1", NewJobID: "new-1",
				Parallel: &record.ParallelFlow{OverlapStart: &os, Gate: &g}}
			in := Input{Now: at(tc.now), New: &record.Job{ID: "new-1", Name: "sums", State: record.StateRunning, Replacement: rep},
				Old: &record.Job{ID: "old-1", Name: "sums", State: record.StateRunning}, NewRunning: true, OldRunning: true, HasBroker: true,
				OldWatermark: at(10 * time.Minute), Parity: tc.obs}
			d := Step(in)
			if len(d.Actions) != len(tc.want) {
				t.Fatalf("actions %v (why %q), want %v", d.Actions, d.Why, tc.want)
			}
			for i, a := range d.Actions {
				if !strings.HasPrefix(a.String(), tc.want[i]) {
					t.Errorf("action %d: %s, want %s…", i, a, tc.want[i])
				}
				if a.Kind == RecordGate && tc.figures != nil {
					f := *a.Figures
					f.NewestWindowEnd, f.OldWatermark, f.NewWatermark = nil, nil, nil
					if got, want := strings.Join(f.Examples, "|"), strings.Join(tc.figures.Examples, "|"); got != want ||
						f.WindowsCompared != tc.figures.WindowsCompared || f.RowsCompared != tc.figures.RowsCompared || f.Differing != tc.figures.Differing || f.Agreed != tc.figures.Agreed {
						t.Errorf("figures %+v, want %+v", f, *tc.figures)
					}
				}
			}
			if d.Done != tc.done {
				t.Errorf("done %v, want %v", d.Done, tc.done)
			}
			if len(tc.want) == 0 && !strings.Contains(d.Why, tc.why) {
				t.Errorf("waits for %q, want %q", d.Why, tc.why)
			}
		})
	}
}

// TestParityGateOldEnded: an old job that ended by itself before the gate
// passed (the user cancelled it to cut over now) reveals the new
// generation before the cut-over, so the views do not hide the only job
// left.
func TestParityGateOldEnded(t *testing.T) {
	os := day
	rep := &record.Replacement{Strategy: record.StrategyParallel, Phase: record.PhaseOverlap, OldJobID: "old-1", NewJobID: "new-1",
		Parallel: &record.ParallelFlow{OverlapStart: &os, Gate: &record.ParityGate{Outcome: record.GateHolding, Windows: 3, DeadlineMillis: 60000}}}
	d := Step(Input{Now: day.Add(time.Minute), New: &record.Job{ID: "new-1", State: record.StateRunning, Replacement: rep},
		Old: &record.Job{ID: "old-1", State: record.StateCancelled}, NewRunning: true, HasBroker: true})
	if len(d.Actions) != 2 || d.Actions[0].Kind != RevealNew || d.Actions[1].Kind != CompleteCutOver {
		t.Fatalf("actions %v, want reveal-new, complete-cut-over", d.Actions)
	}
}
