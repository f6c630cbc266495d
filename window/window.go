// Package window owns windows, window functions, triggers and panes: the
// deterministic core that decides, for one key and one window, when a pane
// fires and what it is. It takes inputs (elements, watermark and
// processing-time moves) and returns what to do; it starts no goroutines and
// does no I/O, so it can be tested step by step.
//
// It may import only mtime and the standard library.
package window

import (
	"fmt"

	"github.com/weir-dev/weir/mtime"
)

// Window is a half-open interval of event time [Start, End). The global
// window spans all of time.
type Window struct {
	Start mtime.Time
	End   mtime.Time
}

// Global is the single window of the global windowing function.
var Global = Window{Start: mtime.MinTimestamp, End: mtime.MaxTimestamp}

// IsGlobal reports whether w is the global window.
func (w Window) IsGlobal() bool { return w == Global }

// MaxTimestamp is the largest event time inside w: End-1ms, or
// mtime.EndOfGlobalWindow for the global window.
func (w Window) MaxTimestamp() mtime.Time {
	if w.IsGlobal() {
		return mtime.EndOfGlobalWindow
	}
	return w.End - 1
}

// Contains reports whether t falls inside w.
func (w Window) Contains(t mtime.Time) bool { return t >= w.Start && t < w.End }

// Intersects reports whether w and o overlap.
func (w Window) Intersects(o Window) bool { return w.Start < o.End && o.Start < w.End }

// Span returns the smallest window covering both w and o.
func (w Window) Span(o Window) Window {
	return Window{Start: mtime.Min(w.Start, o.Start), End: mtime.Max(w.End, o.End)}
}

// String renders w as [start, end).
func (w Window) String() string {
	if w.IsGlobal() {
		return "[global]"
	}
	return fmt.Sprintf("[%s, %s)", w.Start.Format(), w.End.Format())
}

// Kind names a window function.
type Kind string

// Window function kinds.
const (
	KindGlobal   Kind = "global"
	KindFixed    Kind = "fixed"
	KindSliding  Kind = "sliding"
	KindSessions Kind = "sessions"
)

// Fn is a window function: how elements are assigned to windows.
type Fn struct {
	Kind Kind `json:"type"`
	// Size is the length of fixed and sliding windows.
	Size mtime.Duration `json:"size_ms,omitempty"`
	// Period is how often a sliding window starts.
	Period mtime.Duration `json:"period_ms,omitempty"`
	// Gap is the inactivity gap that closes a session.
	Gap mtime.Duration `json:"gap_ms,omitempty"`
	// Offset shifts fixed and sliding window boundaries away from the epoch.
	Offset mtime.Duration `json:"offset_ms,omitempty"`
}

// GlobalFn returns the global window function.
func GlobalFn() Fn { return Fn{Kind: KindGlobal} }

// FixedFn returns fixed (tumbling) windows of the given size.
func FixedFn(size mtime.Duration) Fn { return Fn{Kind: KindFixed, Size: size} }

// SlidingFn returns windows of the given size starting every period.
func SlidingFn(size, period mtime.Duration) Fn {
	return Fn{Kind: KindSliding, Size: size, Period: period}
}

// SessionsFn returns session windows closed by an inactivity gap.
func SessionsFn(gap mtime.Duration) Fn { return Fn{Kind: KindSessions, Gap: gap} }

// MaxSlidingWindows bounds the sliding windows one element belongs to
// (size divided by period): each is a window of state of its own, and an
// hour every millisecond would put every element in 3.6 million.
const MaxSlidingWindows = 10_000

// Validate reports a window function whose parameters cannot work.
func (f Fn) Validate() error {
	switch f.Kind {
	case KindGlobal, "":
		return nil
	case KindFixed:
		if f.Size <= 0 {
			return fmt.Errorf("fixed windows need a positive size")
		}
	case KindSliding:
		if f.Size <= 0 || f.Period <= 0 {
			return fmt.Errorf("sliding windows need a positive size and period")
		}
		if f.Period > f.Size {
			return fmt.Errorf("sliding window period %s is longer than its size %s: elements between windows would be lost", f.Period, f.Size)
		}
		if n := (f.Size + f.Period - 1) / f.Period; n > MaxSlidingWindows {
			return fmt.Errorf("sliding windows of size %s every %s put each element in %d windows, more than the %d allowed (each window keeps state of its own): use a longer period, or fixed windows of the period and a sliding sum downstream", f.Size, f.Period, n, MaxSlidingWindows)
		}
	case KindSessions:
		if f.Gap <= 0 {
			return fmt.Errorf("session windows need a positive gap")
		}
	default:
		return fmt.Errorf("unknown window type %q (want global, fixed, sliding or sessions)", f.Kind)
	}
	return nil
}

// IsMerging reports whether windows of this function merge (sessions).
func (f Fn) IsMerging() bool { return f.Kind == KindSessions }

func floorMod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// fixedWindow returns the fixed window containing t. As in Beam, the last
// window before the end of the global window is truncated so that its
// MaxTimestamp never passes mtime.EndOfGlobalWindow (it can still fire when
// the watermark reaches +inf).
func (f Fn) fixedWindow(t mtime.Time) Window {
	start := t - mtime.Time(floorMod(int64(t)-int64(f.Offset), int64(f.Size)))
	endOfGlobal := mtime.EndOfGlobalWindow + 1
	if start < endOfGlobal && start > endOfGlobal-mtime.Time(f.Size) {
		return Window{Start: start, End: endOfGlobal}
	}
	return Window{Start: start, End: start + mtime.Time(f.Size)}
}

// Assign appends the windows that an element with event time t belongs to.
func (f Fn) Assign(dst []Window, t mtime.Time) []Window {
	switch f.Kind {
	case KindFixed:
		return append(dst, f.fixedWindow(t))
	case KindSliding:
		last := t - mtime.Time(floorMod(int64(t)-int64(f.Offset), int64(f.Period)))
		for s := last; s > t-mtime.Time(f.Size); s -= mtime.Time(f.Period) {
			dst = append(dst, Window{Start: s, End: s + mtime.Time(f.Size)})
		}
		return dst
	case KindSessions:
		return append(dst, Window{Start: t, End: t + mtime.Time(f.Gap)})
	default:
		return append(dst, Global)
	}
}

// AssignOne returns the single window of a non-sliding function; ok is false
// for sliding windows, where an element may belong to several.
func (f Fn) AssignOne(t mtime.Time) (w Window, ok bool) {
	switch f.Kind {
	case KindFixed:
		return f.fixedWindow(t), true
	case KindSessions:
		return Window{Start: t, End: t + mtime.Time(f.Gap)}, true
	case KindSliding:
		return Window{}, false
	default:
		return Global, true
	}
}

// AccumulationMode says whether a pane carries everything seen so far in the
// window (accumulating) or only what arrived since the previous pane.
type AccumulationMode string

// Accumulation modes.
const (
	Discarding   AccumulationMode = "discarding"
	Accumulating AccumulationMode = "accumulating"
)

// TimestampCombiner chooses the event time of a pane's output element.
type TimestampCombiner string

// Timestamp combiners. The default is EndOfWindow, as in Beam.
const (
	EndOfWindow TimestampCombiner = "end_of_window"
	Earliest    TimestampCombiner = "earliest"
	Latest      TimestampCombiner = "latest"
)

// Strategy is a collection's windowing strategy.
type Strategy struct {
	Fn                Fn                `json:"window_fn"`
	Trigger           Trigger           `json:"trigger"`
	Accumulation      AccumulationMode  `json:"accumulation_mode"`
	AllowedLateness   mtime.Duration    `json:"allowed_lateness_ms"`
	TimestampCombiner TimestampCombiner `json:"timestamp_combiner"`
}

// DefaultStrategy is the strategy of a collection that was never windowed:
// the global window, the default trigger, discarding panes, no lateness.
func DefaultStrategy() Strategy {
	return Strategy{Fn: GlobalFn(), Trigger: Default(), Accumulation: Discarding, TimestampCombiner: EndOfWindow}
}

// EnsureDefaults fills unset fields with their defaults.
func (s *Strategy) EnsureDefaults() {
	if s.Fn.Kind == "" {
		s.Fn.Kind = KindGlobal
	}
	if s.Trigger.Kind == "" {
		s.Trigger = Default()
	}
	if s.Accumulation == "" {
		s.Accumulation = Discarding
	}
	if s.TimestampCombiner == "" {
		s.TimestampCombiner = EndOfWindow
	}
}

// Validate reports a strategy that cannot work.
func (s Strategy) Validate() error {
	if err := s.Fn.Validate(); err != nil {
		return err
	}
	if s.AllowedLateness < 0 {
		return fmt.Errorf("allowed lateness is negative")
	}
	switch s.Accumulation {
	case Discarding, Accumulating, "":
	default:
		return fmt.Errorf("unknown accumulation mode %q (want accumulating or discarding)", s.Accumulation)
	}
	switch s.TimestampCombiner {
	case EndOfWindow, Earliest, Latest, "":
	default:
		return fmt.Errorf("unknown timestamp combiner %q", s.TimestampCombiner)
	}
	return s.Trigger.Validate()
}

// GCTime is the watermark past which w expires: its state is dropped, a last
// pane fires if anything is new, and later elements are dropped as too late.
func (s Strategy) GCTime(w Window) mtime.Time {
	return w.MaxTimestamp().Add(s.AllowedLateness)
}

// Expired reports whether the watermark wm has passed w's garbage-collection time.
func (s Strategy) Expired(w Window, wm mtime.Time) bool {
	return wm >= mtime.MaxTimestamp || wm > s.GCTime(w)
}

// OutputTimestamp returns the event time of a pane's output for w, given the
// earliest and latest element times in the pane.
func (s Strategy) OutputTimestamp(w Window, earliest, latest mtime.Time) mtime.Time {
	switch s.TimestampCombiner {
	case Earliest:
		return earliest
	case Latest:
		return latest
	default:
		return w.MaxTimestamp()
	}
}
