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
// mirrors the trigger's shape: Subs returns the states of sub-triggers (for
// after_watermark, the first is the early trigger and the second the late
// one).
//
// Every window of every key holds one, so it is 16 bytes: the count and
// the flags share a word, and what only some triggers keep (an
// after_processing_time's deadline, a composite's sub-triggers) is behind
// one pointer, nil for the default trigger and after_count. The top-level
// state's spare bytes hold its window's flags (State).
type TriggerState struct {
	// Count is the number of elements seen since the last reset, at most
	// math.MaxInt32 (an after_count's largest threshold, as Beam's
	// elementCountAtLeast takes an int).
	Count    int32
	Finished bool
	// OnTimeFired records that after_watermark (or default) fired on time.
	OnTimeFired bool
	// win holds the window's flags (State's) in a top-level state; unused
	// in a sub-trigger's.
	win uint8
	// marks is the runner's bookkeeping of the window (State.Marks), in a
	// top-level state.
	marks uint8
	// x holds the deadline and the sub-triggers' states; nil when the
	// trigger has neither.
	x *triggerExtra
}

// triggerExtra is the part of a trigger's state that only some triggers
// keep.
type triggerExtra struct {
	// deadline is when an after_processing_time trigger fires (0: unset).
	deadline mtime.Time
	// sub holds the states of a composite trigger's sub-triggers.
	sub []TriggerState
}

// Deadline returns when an after_processing_time trigger fires (0: unset).
func (t *TriggerState) Deadline() mtime.Time {
	if t.x == nil {
		return 0
	}
	return t.x.deadline
}

// setDeadline sets the deadline, keeping no extra state for an unset one.
func (t *TriggerState) setDeadline(d mtime.Time) {
	if t.x == nil {
		if d == 0 {
			return
		}
		t.x = &triggerExtra{}
	}
	t.x.deadline = d
}

// Subs returns the states of t's sub-triggers (nil for none). They are
// t's own: changing one changes t.
func (t *TriggerState) Subs() []TriggerState {
	if t.x == nil {
		return nil
	}
	return t.x.sub
}

// sub returns the state of sub-trigger i.
func (t *TriggerState) sub(i int) *TriggerState { return &t.x.sub[i] }

// setSubs sets the states of t's sub-triggers.
func (t *TriggerState) setSubs(sub []TriggerState) {
	if t.x == nil {
		if sub == nil {
			return
		}
		t.x = &triggerExtra{}
	}
	t.x.sub = sub
}

// reset returns t to the initial state of trigger tr in place, keeping its
// extra state's memory: a repeating trigger that fires does not allocate.
func (t *TriggerState) reset(tr Trigger) {
	t.Count, t.Finished, t.OnTimeFired = 0, false, false
	if t.x == nil {
		return
	}
	t.x.deadline = 0
	sub := t.x.sub
	switch tr.Kind {
	case TriggerAfterWatermark:
		if tr.Early != nil {
			sub[0].reset(*tr.Early)
		}
		if tr.Late != nil {
			sub[1].reset(*tr.Late)
		}
	default:
		for i, st := range tr.Triggers {
			sub[i].reset(st)
		}
	}
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
		s.setSubs(sub)
	default:
		if len(t.Triggers) > 0 {
			sub := make([]TriggerState, len(t.Triggers))
			for i, tr := range t.Triggers {
				sub[i] = tr.NewState()
			}
			s.setSubs(sub)
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
		if s.Deadline() == 0 {
			d := now.Add(t.Delay)
			if d == 0 {
				// 0 means "unset": a deadline of exactly the epoch (a
				// manual clock at 0 with no delay) would never fire.
				d = 1
			}
			s.setDeadline(d)
		}
	case TriggerAfterWatermark:
		if !s.OnTimeFired {
			if t.Early != nil {
				t.Early.OnElement(s.sub(0), now)
			}
		} else if t.Late != nil {
			t.Late.OnElement(s.sub(1), now)
		}
	default:
		for i, sub := range t.Triggers {
			sub.OnElement(s.sub(i), now)
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
			return t.Early != nil && t.Early.ShouldFire(s.sub(0), c)
		}
		return t.Late != nil && t.Late.ShouldFire(s.sub(1), c)
	case TriggerAfterCount:
		return int64(s.Count) >= t.Count
	case TriggerAfterProcessingTime:
		d := s.Deadline()
		return d != 0 && c.Now >= d
	case TriggerRepeatedly:
		return t.Triggers[0].ShouldFire(s.sub(0), c)
	case TriggerAfterAny:
		for i, sub := range t.Triggers {
			if sub.ShouldFire(s.sub(i), c) {
				return true
			}
		}
		return false
	case TriggerAfterAll:
		for i, sub := range t.Triggers {
			if !s.sub(i).Finished && !sub.ShouldFire(s.sub(i), c) {
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
			s.sub(0).reset(*t.Early)
			return false
		}
		s.sub(1).reset(*t.Late)
		return false
	case TriggerRepeatedly:
		onTime = t.Triggers[0].OnFire(s.sub(0), c)
		s.sub(0).reset(t.Triggers[0])
		return onTime
	case TriggerAfterAny, TriggerAfterAll:
		for i, sub := range t.Triggers {
			if sub.ShouldFire(s.sub(i), c) {
				if sub.OnFire(s.sub(i), c) {
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
		return s.Deadline()
	case TriggerAfterWatermark:
		if !s.OnTimeFired && t.Early != nil {
			consider(t.Early.NextDeadline(s.sub(0)))
		}
		if s.OnTimeFired && t.Late != nil {
			consider(t.Late.NextDeadline(s.sub(1)))
		}
	default:
		for i, sub := range t.Triggers {
			consider(sub.NextDeadline(s.sub(i)))
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
	if sd, dd := src.Deadline(), dst.Deadline(); sd != 0 && (dd == 0 || sd < dd) {
		dst.setDeadline(sd)
	}
	if dst.Finished {
		dst.Count = 0
		dst.setDeadline(0)
	}
	// As in Beam, the merged window fires on time again unless every merged
	// window already did: its end is the latest of their ends.
	dst.OnTimeFired = dst.OnTimeFired && src.OnTimeFired
	switch t.Kind {
	case TriggerAfterWatermark:
		if t.Early != nil {
			t.Early.Merge(dst.sub(0), *src.sub(0))
		}
		if t.Late != nil {
			t.Late.Merge(dst.sub(1), *src.sub(1))
		}
	default:
		for i, sub := range t.Triggers {
			sub.Merge(dst.sub(i), *src.sub(i))
		}
	}
}
