package rewind

import (
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/errcode"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/window"
)

// TestRewindTimes: the rule of service/rewind.go on windowings — where the
// re-read starts (T) and below which it skips — at the old job's final
// watermark.
func TestRewindTimes(t *testing.T) {
	sec := func(n int64) mtime.Time { return mtime.Time(n * 1000) }
	fixed := func(size, late int64) window.Strategy {
		ws := window.Strategy{Fn: window.FixedFn(mtime.Duration(size * 1000)), AllowedLateness: mtime.Duration(late * 1000)}
		ws.EnsureDefaults()
		return ws
	}
	global := window.DefaultStrategy()
	one := func(ws window.Strategy) map[string]window.Strategy { return map[string]window.Strategy{"Sums": ws} }
	tests := []struct {
		name           string
		wm             mtime.Time
		old, new       map[string]window.Strategy
		wantT, wantSkp mtime.Time
	}{
		{"same fixed windows: from the open window", sec(19), one(fixed(10, 0)), one(fixed(10, 0)), sec(10), sec(10)},
		{"on a window boundary the window ending there has expired", sec(20), one(fixed(10, 0)), one(fixed(10, 0)), sec(20), sec(20)},
		{"allowed lateness keeps older windows", sec(35), one(fixed(10, 15)), one(fixed(10, 15)), sec(20), sec(20)},
		{"a larger new window covers more", sec(19), one(fixed(10, 0)), one(fixed(20, 0)), sec(0), sec(0)},
		{"a smaller new window: its windows that expired inside the old open one are not re-read", sec(29), one(fixed(20, 0)), one(fixed(5, 0)), sec(25), sec(25)},
		{"a smaller new window with lateness: from the old open window", sec(29), one(fixed(20, 0)), one(fixed(5, 10)), sec(15), sec(15)},
		{"the new job's lateness reaches further back", sec(19), one(fixed(10, 0)), one(fixed(10, 30)), sec(-20), sec(-20)},
		{"the global window: everything", sec(19), one(global), one(global), mtime.MinTimestamp, mtime.MinTimestamp},
		{"nothing read yet", mtime.MinTimestamp, one(fixed(10, 0)), one(fixed(10, 0)), mtime.MinTimestamp, mtime.MinTimestamp},
		{"no keyed step in the new pipeline: nothing to re-read", sec(19), one(fixed(10, 0)), nil, mtime.MaxTimestamp, mtime.MinTimestamp},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gotT, gotSkip := rewindTimes(tc.wm, tc.old, tc.new)
			if gotT != tc.wantT || gotSkip != tc.wantSkp {
				t.Fatalf("T %v skip %v, want T %v skip %v", gotT, gotSkip, tc.wantT, tc.wantSkp)
			}
		})
	}
}

// TestCheckRewindable: windowing a re-read cannot make complete is refused
// with REPLACEMENT_UNAVAILABLE, naming the step.
func TestCheckRewindable(t *testing.T) {
	early := window.Strategy{Fn: window.FixedFn(10_000), Trigger: window.AfterWatermark(&window.Trigger{Kind: window.TriggerAfterCount, Count: 5}, nil)}
	earlyAcc := early
	earlyAcc.Accumulation = window.Accumulating
	repeated := window.Strategy{Fn: window.SlidingFn(20_000, 10_000), Trigger: window.Repeatedly(window.AfterCount(3))}
	repeatedAcc := repeated
	repeatedAcc.Accumulation = window.Accumulating
	tests := []struct {
		name     string
		old, new window.Strategy
		want     string
	}{
		{"fixed", window.Strategy{Fn: window.FixedFn(10_000)}, window.Strategy{Fn: window.FixedFn(20_000)}, ""},
		{"old sessions", window.Strategy{Fn: window.SessionsFn(10_000)}, window.Strategy{Fn: window.FixedFn(10_000)}, "step Sums of the old pipeline uses session windows"},
		{"new sessions", window.Strategy{Fn: window.FixedFn(10_000)}, window.Strategy{Fn: window.SessionsFn(10_000)}, "step Sums of the new pipeline uses session windows"},
		{"new sliding", window.Strategy{Fn: window.FixedFn(10_000)}, window.Strategy{Fn: window.SlidingFn(20_000, 10_000)}, ""},
		{"old sliding", window.Strategy{Fn: window.SlidingFn(20_000, 10_000)}, window.Strategy{Fn: window.FixedFn(10_000)}, ""},
		{"new early trigger, accumulating", window.Strategy{Fn: window.FixedFn(10_000)}, earlyAcc, ""},
		{"new repeated count trigger, accumulating", window.Strategy{Fn: window.FixedFn(10_000)}, repeatedAcc, ""},
		{"new early trigger, discarding", window.Strategy{Fn: window.FixedFn(10_000)}, early, "early or repeated trigger (after_watermark) in discarding mode"},
		{"new repeated trigger, discarding", window.Strategy{Fn: window.FixedFn(10_000)}, repeated, "early or repeated trigger (repeatedly) in discarding mode"},
		{"old early trigger, discarding", early, window.Strategy{Fn: window.FixedFn(10_000)}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, ws := range []*window.Strategy{&tc.old, &tc.new} {
				ws.EnsureDefaults()
			}
			err := checkRewindable(&record.Job{ID: "j1", Name: "sums"}, map[string]window.Strategy{"Sums": tc.old}, map[string]window.Strategy{"Sums": tc.new})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (!(errcode.Of(err) == errcode.ReplacementUnavailable) || !containsAll(err.Error(), tc.want, "weir_replace_rewind=false")):
				t.Fatalf("got %v, want REPLACEMENT_UNAVAILABLE saying %q", err, tc.want)
			}
		})
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// TestRewindOwns: the new job of a re-reading replacement leaves out the
// windows that start before the skip bound (they expired at the old job's
// watermark and the re-read would make them partial), keeps the global
// window and every later window, and still defers to the ownership it is
// layered on (the cut-over rule of a parallel replacement).
func TestRewindOwns(t *testing.T) {
	skip := time.Date(2026, 11, 30, 0, 0, 20, 0, time.UTC)
	at := func(sec int) mtime.Time { return mtime.FromTime(skip.Add(time.Duration(sec-20) * time.Second)) }
	win := func(from, to int) window.Window { return window.Window{Start: at(from), End: at(to)} }
	refuseAll := func(window.Window) bool { return false }
	tests := []struct {
		name string
		rp   *record.RewindPoint
		base func(window.Window) bool // a restriction the sink had already
		w    window.Window
		want bool
	}{
		{"expired sliding window", &record.RewindPoint{SkipBefore: skip}, nil, win(10, 30), false},
		{"window at the bound", &record.RewindPoint{SkipBefore: skip}, nil, win(20, 40), true},
		{"later window", &record.RewindPoint{SkipBefore: skip}, nil, win(30, 50), true},
		{"global window", &record.RewindPoint{SkipBefore: skip}, nil, window.Global, true},
		{"nothing skipped", &record.RewindPoint{SkipBefore: rewindMinTime}, nil, win(10, 30), true},
		{"no rewind point", nil, nil, win(10, 30), true},
		{"the earlier restriction still decides", &record.RewindPoint{SkipBefore: skip}, refuseAll, win(30, 50), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			owns := tc.base
			if keep := rewindKeep(tc.rp); keep != nil {
				owns = contract.Restrict(owns, keep)
			}
			got := owns == nil || owns(tc.w)
			if got != tc.want {
				t.Fatalf("owns(%v) = %v, want %v", tc.w, got, tc.want)
			}
		})
	}
}
