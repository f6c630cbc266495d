package window

import (
	"fmt"
	"math"

	"github.com/weir-dev/weir/mtime"
)

// TriggerKind names a trigger.
type TriggerKind string

// Trigger kinds, with Beam's semantics.
const (
	// TriggerDefault fires when the watermark passes the end of the window
	// and then again for every late element (Beam's DefaultTrigger).
	TriggerDefault TriggerKind = "default"
	// TriggerAfterWatermark fires once when the watermark passes the end of
	// the window; optional Early and Late sub-triggers repeat before and after.
	TriggerAfterWatermark TriggerKind = "after_watermark"
	// TriggerAfterCount fires once when at least Count elements arrived.
	TriggerAfterCount TriggerKind = "after_count"
	// TriggerAfterProcessingTime fires once, Delay of processing time after
	// the first element of the pane arrived.
	TriggerAfterProcessingTime TriggerKind = "after_processing_time"
	// TriggerRepeatedly fires whenever its sub-trigger fires, forever.
	TriggerRepeatedly TriggerKind = "repeatedly"
	// TriggerAfterAny fires once when any sub-trigger would fire.
	TriggerAfterAny TriggerKind = "after_any"
	// TriggerAfterAll fires once when every sub-trigger has fired.
	TriggerAfterAll TriggerKind = "after_all"
	// TriggerNever never fires; only the window's expiry emits a pane.
	TriggerNever TriggerKind = "never"
)

// Trigger is a trigger specification: a tree of trigger kinds.
type Trigger struct {
	Kind TriggerKind `json:"type"`
	// Early fires repeatedly before the watermark passes the end of the
	// window (after_watermark only).
	Early *Trigger `json:"early,omitempty"`
	// Late fires repeatedly after the on-time pane (after_watermark only).
	Late *Trigger `json:"late,omitempty"`
	// Count is after_count's element threshold.
	Count int64 `json:"count,omitempty"`
	// Delay is after_processing_time's delay.
	Delay mtime.Duration `json:"delay_ms,omitempty"`
	// Triggers are the sub-triggers of repeatedly (exactly one), after_any
	// and after_all.
	Triggers []Trigger `json:"triggers,omitempty"`
}

// Default returns Beam's default trigger.
func Default() Trigger { return Trigger{Kind: TriggerDefault} }

// AfterWatermark returns a trigger that fires when the watermark passes the
// end of the window, with optional early and late firings (either may be nil).
func AfterWatermark(early, late *Trigger) Trigger {
	return Trigger{Kind: TriggerAfterWatermark, Early: early, Late: late}
}

// AfterCount returns a trigger that fires once n elements arrived.
func AfterCount(n int64) Trigger { return Trigger{Kind: TriggerAfterCount, Count: n} }

// AfterProcessingTime returns a trigger that fires d after the pane's first element.
func AfterProcessingTime(d mtime.Duration) Trigger {
	return Trigger{Kind: TriggerAfterProcessingTime, Delay: d}
}

// Repeatedly returns a trigger that fires whenever t fires.
func Repeatedly(t Trigger) Trigger {
	return Trigger{Kind: TriggerRepeatedly, Triggers: []Trigger{t}}
}

// AfterAny returns a trigger that fires once any of ts fires.
func AfterAny(ts ...Trigger) Trigger { return Trigger{Kind: TriggerAfterAny, Triggers: ts} }

// AfterAll returns a trigger that fires once all of ts have fired.
func AfterAll(ts ...Trigger) Trigger { return Trigger{Kind: TriggerAfterAll, Triggers: ts} }

// Validate reports a malformed trigger tree.
func (t Trigger) Validate() error {
	switch t.Kind {
	case TriggerDefault, TriggerNever, "":
	case TriggerAfterWatermark:
		for _, sub := range []*Trigger{t.Early, t.Late} {
			if sub != nil {
				if err := sub.Validate(); err != nil {
					return err
				}
			}
		}
		return nil
	case TriggerAfterCount:
		if t.Count < 1 {
			return fmt.Errorf("after_count needs a count of at least 1")
		}
		if t.Count > math.MaxInt32 {
			return fmt.Errorf("after_count's count is at most %d (as Beam's elementCountAtLeast), not %d", math.MaxInt32, t.Count)
		}
	case TriggerAfterProcessingTime:
		if t.Delay < 0 {
			return fmt.Errorf("after_processing_time needs a non-negative delay")
		}
	case TriggerRepeatedly:
		if len(t.Triggers) != 1 {
			return fmt.Errorf("repeatedly wraps exactly one trigger")
		}
	case TriggerAfterAny, TriggerAfterAll:
		if len(t.Triggers) == 0 {
			return fmt.Errorf("%s needs at least one sub-trigger", t.Kind)
		}
	default:
		return fmt.Errorf("unknown trigger type %q (want default, after_watermark, after_count, after_processing_time, repeatedly, after_any, after_all or never)", t.Kind)
	}
	if t.Kind != TriggerAfterWatermark && (t.Early != nil || t.Late != nil) {
		return fmt.Errorf("only after_watermark takes early and late sub-triggers")
	}
	for _, sub := range t.Triggers {
		if err := sub.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// UsesWatermark reports whether t can fire because the watermark passed the
// end of the window (so the runner must evaluate it then).
func (t Trigger) UsesWatermark() bool {
	switch t.Kind {
	case TriggerDefault, TriggerAfterWatermark, "":
		return true
	}
	for _, sub := range t.Triggers {
		if sub.UsesWatermark() {
			return true
		}
	}
	return false
}

func (t Trigger) usesProcessingTime() bool {
	if t.Kind == TriggerAfterProcessingTime {
		return true
	}
	for _, sub := range append([]*Trigger{t.Early, t.Late}, nil) {
		if sub != nil && sub.usesProcessingTime() {
			return true
		}
	}
	for _, sub := range t.Triggers {
		if sub.usesProcessingTime() {
			return true
		}
	}
	return false
}

// TriggerState is the state of one trigger tree for one key and window. It
// mirrors the trigger's shape: Sub holds the states of sub-triggers (for
// after_watermark, Sub[0] is the early trigger and Sub[1] the late one).
//
// The fields are ordered so that the count and the two flags share a
// word: every window of every key holds one (24 bytes).
type TriggerState struct {
	// Count is the number of elements seen since the last reset, at most
	// math.MaxInt32 (an after_count's largest threshold, as Beam's
	// elementCountAtLeast takes an int): 32 bits, so that it shares a
	// word with the flags.
	Count    int32 `json:"count,omitempty"`
	Finished bool  `json:"finished,omitempty"`
	// OnTimeFired records that after_watermark (or default) fired on time.
	OnTimeFired bool `json:"on_time_fired,omitempty"`
	// Deadline is when an after_processing_time trigger fires (0: unset).
	Deadline mtime.Time `json:"deadline,omitempty"`
	// Sub holds the states of a composite trigger's sub-triggers (an
	// after_watermark's early and late firings), nil for a trigger
	// without: behind a pointer, so that the state of the default
	// trigger, which every window of most keys has, is 16 bytes smaller.
	Sub *[]TriggerState `json:"sub,omitempty"`
}

// TriggerContext is what a trigger sees when it is evaluated.
type TriggerContext struct {
	Window    Window
	Watermark mtime.Time
	Now       mtime.Time
}

func (c TriggerContext) pastEndOfWindow() bool {
	return pastEnd(c.Window, c.Watermark)
}

// pastEnd reports whether the watermark wm has passed the end of w. A
// watermark of +inf is past the end of every window, even one whose end lies
// beyond the end of the global window.
func pastEnd(w Window, wm mtime.Time) bool {
	return wm > w.MaxTimestamp() || wm >= mtime.MaxTimestamp
}

// NewState returns the initial state of trigger t.
func (t Trigger) NewState() TriggerState {
	s := TriggerState{}
	switch t.Kind {
	case TriggerAfterWatermark:
		sub := make([]TriggerState, 2)
		if t.Early != nil {
			sub[0] = t.Early.NewState()
		}
		if t.Late != nil {
			sub[1] = t.Late.NewState()
		}
		s.Sub = &sub
	default:
		if len(t.Triggers) > 0 {
			sub := make([]TriggerState, len(t.Triggers))
			for i, tr := range t.Triggers {
				sub[i] = tr.NewState()
			}
			s.Sub = &sub
		}
	}
	return s
}

// OnElement records the arrival of one element at processing time now.
func (t Trigger) OnElement(s *TriggerState, now mtime.Time) {
	if s.Finished {
		return
	}
	switch t.Kind {
	case TriggerAfterCount:
		if s.Count < math.MaxInt32 {
			s.Count++
		}
	case TriggerAfterProcessingTime:
		if s.Deadline == 0 {
			s.Deadline = now.Add(t.Delay)
			if s.Deadline == 0 {
				// 0 means "unset": a deadline of exactly the epoch (a
				// manual clock at 0 with no delay) would never fire.
				s.Deadline = 1
			}
		}
	case TriggerAfterWatermark:
		if !s.OnTimeFired {
			if t.Early != nil {
				t.Early.OnElement(&(*s.Sub)[0], now)
			}
		} else if t.Late != nil {
			t.Late.OnElement(&(*s.Sub)[1], now)
		}
	default:
		for i, sub := range t.Triggers {
			sub.OnElement(&(*s.Sub)[i], now)
		}
	}
}

// ShouldFire reports whether t fires now.
func (t Trigger) ShouldFire(s *TriggerState, c TriggerContext) bool {
	if s.Finished {
		return false
	}
	switch t.Kind {
	case TriggerDefault, "":
		return c.pastEndOfWindow()
	case TriggerNever:
		return false
	case TriggerAfterWatermark:
		if !s.OnTimeFired {
			if c.pastEndOfWindow() {
				return true
			}
			return t.Early != nil && t.Early.ShouldFire(&(*s.Sub)[0], c)
		}
		return t.Late != nil && t.Late.ShouldFire(&(*s.Sub)[1], c)
	case TriggerAfterCount:
		return int64(s.Count) >= t.Count
	case TriggerAfterProcessingTime:
		return s.Deadline != 0 && c.Now >= s.Deadline
	case TriggerRepeatedly:
		return t.Triggers[0].ShouldFire(&(*s.Sub)[0], c)
	case TriggerAfterAny:
		for i, sub := range t.Triggers {
			if sub.ShouldFire(&(*s.Sub)[i], c) {
				return true
			}
		}
		return false
	case TriggerAfterAll:
		for i, sub := range t.Triggers {
			if !(*s.Sub)[i].Finished && !sub.ShouldFire(&(*s.Sub)[i], c) {
				return false
			}
		}
		return true
	}
	return false
}

// OnFire advances the state after t fired: one-shot triggers finish,
// repeating ones reset. It reports whether the firing was the on-time one of
// a watermark trigger.
func (t Trigger) OnFire(s *TriggerState, c TriggerContext) (onTime bool) {
	switch t.Kind {
	case TriggerDefault, "":
		if !s.OnTimeFired && c.pastEndOfWindow() {
			s.OnTimeFired = true
			return true
		}
		return false
	case TriggerAfterWatermark:
		if !s.OnTimeFired {
			if c.pastEndOfWindow() {
				s.OnTimeFired = true
				if t.Late == nil {
					s.Finished = true
				}
				return true
			}
			// An early firing: the early trigger repeats.
			(*s.Sub)[0] = t.Early.NewState()
			return false
		}
		(*s.Sub)[1] = t.Late.NewState()
		return false
	case TriggerRepeatedly:
		onTime = t.Triggers[0].OnFire(&(*s.Sub)[0], c)
		(*s.Sub)[0] = t.Triggers[0].NewState()
		return onTime
	case TriggerAfterAny, TriggerAfterAll:
		for i, sub := range t.Triggers {
			if sub.ShouldFire(&(*s.Sub)[i], c) {
				if sub.OnFire(&(*s.Sub)[i], c) {
					onTime = true
				}
			}
		}
		s.Finished = true
		return onTime
	default:
		s.Finished = true
		return false
	}
}

// NextDeadline returns the earliest processing time at which an unfinished
// after_processing_time trigger in the tree fires, or 0 if none is pending.
func (t Trigger) NextDeadline(s *TriggerState) mtime.Time {
	if s.Finished {
		return 0
	}
	var best mtime.Time
	consider := func(d mtime.Time) {
		if d != 0 && (best == 0 || d < best) {
			best = d
		}
	}
	switch t.Kind {
	case TriggerAfterProcessingTime:
		return s.Deadline
	case TriggerAfterWatermark:
		if !s.OnTimeFired && t.Early != nil {
			consider(t.Early.NextDeadline(&(*s.Sub)[0]))
		}
		if s.OnTimeFired && t.Late != nil {
			consider(t.Late.NextDeadline(&(*s.Sub)[1]))
		}
	default:
		for i, sub := range t.Triggers {
			consider(sub.NextDeadline(&(*s.Sub)[i]))
		}
	}
	return best
}

// Merge folds src into dst when two session windows merge: counts add up,
// the earliest processing-time deadline wins, and a watermark trigger that
// fired on time is re-armed unless it fired in both windows (as in Beam:
// the merged end is the later end).
//
// A one-shot trigger (after_count, after_processing_time, after_any,
// after_all) that finished in either window stays finished, as Beam's
// AfterPane does: its pane was already the last one. An after_watermark
// trigger is finished only if it finished in both windows, because the other
// window's elements have not had their firing yet.
func (t Trigger) Merge(dst *TriggerState, src TriggerState) {
	if t.Kind == TriggerAfterWatermark {
		dst.Finished = dst.Finished && src.Finished
	} else {
		dst.Finished = dst.Finished || src.Finished
	}
	dst.Count = int32(min(int64(dst.Count)+int64(src.Count), math.MaxInt32))
	if src.Deadline != 0 && (dst.Deadline == 0 || src.Deadline < dst.Deadline) {
		dst.Deadline = src.Deadline
	}
	if dst.Finished {
		dst.Count, dst.Deadline = 0, 0
	}
	// As in Beam, the merged window fires on time again unless every merged
	// window already did: its end is the latest of their ends.
	dst.OnTimeFired = dst.OnTimeFired && src.OnTimeFired
	switch t.Kind {
	case TriggerAfterWatermark:
		if t.Early != nil {
			t.Early.Merge(&(*dst.Sub)[0], (*src.Sub)[0])
		}
		if t.Late != nil {
			t.Late.Merge(&(*dst.Sub)[1], (*src.Sub)[1])
		}
	default:
		for i, sub := range t.Triggers {
			sub.Merge(&(*dst.Sub)[i], (*src.Sub)[i])
		}
	}
}
