package window

import (
	"fmt"

	"github.com/weir-dev/weir/mtime"
)

// Timing says when a pane fired relative to the watermark. It is a small
// enum (elements carry it), rendered as Beam's names in text and JSON.
type Timing uint8

// Pane timings, as in Beam.
const (
	Unknown Timing = iota
	Early
	OnTime
	Late
)

var timingNames = [...]string{Unknown: "UNKNOWN", Early: "EARLY", OnTime: "ON_TIME", Late: "LATE"}

// String returns EARLY, ON_TIME, LATE or UNKNOWN.
func (t Timing) String() string {
	if int(t) < len(timingNames) {
		return timingNames[t]
	}
	return "UNKNOWN"
}

// ParseTiming reads a timing name as String writes it.
func ParseTiming(s string) (Timing, error) {
	for i, n := range timingNames {
		if n == s {
			return Timing(i), nil
		}
	}
	return Unknown, fmt.Errorf("unknown pane timing %q (want EARLY, ON_TIME, LATE or UNKNOWN)", s)
}

// MarshalText renders the timing name.
func (t Timing) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText parses a timing name.
func (t *Timing) UnmarshalText(b []byte) error {
	v, err := ParseTiming(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// PaneInfo describes one firing of a window for a key.
type PaneInfo struct {
	Index   int64  `json:"index"`
	Timing  Timing `json:"timing"`
	IsFirst bool   `json:"is_first"`
	IsLast  bool   `json:"is_last"`
	// CutShort says the job that fired the pane did not see all of the
	// window's input: it was drained (or otherwise ended) before the
	// watermark passed the window's end, so the pane fired early under a
	// final-looking timing, or it started reading its sources after the
	// window began. A consumer keeps a complete revision over a cut-short
	// one. Beam has no such flag; it is not part of the pane row
	// (row.PaneSchema), only of the element's pane.
	CutShort bool `json:"cut_short,omitempty"`
}

// NoFiring is the pane of an element that was not produced by a trigger.
var NoFiring = PaneInfo{Timing: Unknown, IsFirst: true, IsLast: true}

// State is the trigger and pane bookkeeping of one key in one window:
// 24 bytes, since every window of every key holds one. Its flags (NewData,
// HasData, NonEarlyFired, Closed) and the runner's Marks sit in the spare
// bytes of its trigger's state.
type State struct {
	Trigger TriggerState
	// NextIndex is the index the next pane will carry.
	NextIndex int64
}

// NewData reports whether elements arrived since the last pane.
func (st *State) NewData() bool { return st.Trigger.win&flagNewData != 0 }

// HasData reports whether any element arrived in the window.
func (st *State) HasData() bool { return st.Trigger.win&flagHasData != 0 }

// NonEarlyFired reports whether an ON_TIME or LATE pane was emitted.
func (st *State) NonEarlyFired() bool { return st.Trigger.win&flagNonEarlyFired != 0 }

// Closed reports whether the trigger finished: later elements are dropped.
func (st *State) Closed() bool { return st.Trigger.win&flagClosed != 0 }

// setFlag sets or clears one of the flags above.
func (st *State) setFlag(f uint8, on bool) {
	if on {
		st.Trigger.win |= f
	} else {
		st.Trigger.win &^= f
	}
}

// Marks returns the runner's own bookkeeping of the window (whether it is
// queued for evaluation, whether its pane is held back): the machine never
// reads or changes it, and it is never encoded.
func (st *State) Marks() uint8 { return st.Trigger.marks }

// SetMarks sets what Marks returns.
func (st *State) SetMarks(m uint8) { st.Trigger.marks = m }

// MayFire reports whether st could fire now for window w at watermark wm
// and processing time now, without changing anything. The runner uses it to
// evaluate only the windows an element can make fire.
func (m *Machine) MayFire(st *State, w Window, wm, now mtime.Time) bool {
	if st.Closed() {
		return false
	}
	if m.defaultTrigger {
		return pastEnd(w, wm)
	}
	return m.Strategy.Trigger.ShouldFire(&st.Trigger, TriggerContext{Window: w, Watermark: wm, Now: now})
}

// Firing is what the machine tells the runner to do for one window.
type Firing struct {
	// Emit says a pane must be output now, described by Pane.
	Emit bool
	Pane PaneInfo
	// Discard says the window's accumulated contents must be cleared after
	// emitting (discarding mode, or a closed window).
	Discard bool
	// Done says the window expired: drop all of its state.
	Done bool
}

// Machine applies a windowing strategy to per-window states. It holds no
// per-key data and is safe to share.
type Machine struct {
	Strategy         Strategy
	watermarkTrigger bool
	processingTime   bool
	defaultTrigger   bool
}

// NewMachine returns a machine for strategy s.
func NewMachine(s Strategy) *Machine {
	s.EnsureDefaults()
	return &Machine{Strategy: s, watermarkTrigger: s.Trigger.UsesWatermark(), processingTime: s.Trigger.usesProcessingTime(),
		defaultTrigger: s.Trigger.Kind == TriggerDefault || s.Trigger.Kind == ""}
}

// FiresOnWatermarkOnly reports whether the strategy's trigger is the
// default one, which fires when the watermark passes a window's end and
// at nothing else.
func (m *Machine) FiresOnWatermarkOnly() bool { return m.defaultTrigger }

// NewState returns the state of a window that has just received its first element.
func (m *Machine) NewState() State {
	return State{Trigger: m.Strategy.Trigger.NewState()}
}

// Droppable reports whether an element of window w arriving when the input
// watermark is wm is too late: w has expired (its end plus the allowed
// lateness is behind the watermark).
func (m *Machine) Droppable(w Window, wm mtime.Time) bool { return m.Strategy.Expired(w, wm) }

// OnElement records an element of the window arriving at processing time now.
// The caller must have checked Droppable and st.Closed() first.
func (m *Machine) OnElement(st *State, now mtime.Time) {
	st.Trigger.win |= flagNewData | flagHasData
	if m.defaultTrigger {
		return // the default trigger keeps no per-element state
	}
	m.Strategy.Trigger.OnElement(&st.Trigger, now)
}

// Evaluate decides whether window w fires now, given the input watermark wm
// and processing time now, and advances st accordingly. Call it after a
// bundle's elements for the window were added, when the watermark passes the
// window's end or expiry, and when a processing-time deadline passes.
//
// Behaviour follows Beam's defaults: the on-time pane fires even if nothing
// is new since an early pane (FIRE_ALWAYS); when the window expires, a last
// pane fires only if something is new (FIRE_IF_NON_EMPTY).
func (m *Machine) Evaluate(st *State, w Window, wm, now mtime.Time) Firing {
	c := TriggerContext{Window: w, Watermark: wm, Now: now}
	closedBefore := st.Closed()
	expired := m.Strategy.Expired(w, wm)
	past := pastEnd(w, wm)
	emit := false
	if !st.Closed() && m.Strategy.Trigger.ShouldFire(&st.Trigger, c) {
		onTime := past && !st.NonEarlyFired() && m.watermarkTrigger
		m.Strategy.Trigger.OnFire(&st.Trigger, c)
		emit = st.NewData() || (onTime && st.HasData())
		if st.Trigger.Finished {
			st.setFlag(flagClosed, true)
		}
	}
	// A closed window never fires again (Beam only fires windows that are
	// active and open at garbage collection).
	if expired && st.NewData() && !closedBefore {
		emit = true
	}
	if !emit {
		return Firing{Done: expired}
	}
	p := PaneInfo{Index: st.NextIndex, IsFirst: st.NextIndex == 0, IsLast: expired || st.Closed()}
	// Timings follow EARLY* ON_TIME? LATE*: once a non-early pane fired,
	// every later pane is LATE, even if a session merge moved the window's
	// end past the watermark again.
	switch {
	case st.NonEarlyFired():
		p.Timing = Late
	case !past:
		p.Timing = Early
	default:
		p.Timing = OnTime
	}
	st.NextIndex++
	st.setFlag(flagNewData, false)
	if p.Timing != Early {
		st.setFlag(flagNonEarlyFired, true)
	}
	return Firing{
		Emit:    true,
		Pane:    p,
		Discard: m.Strategy.Accumulation == Discarding || st.Closed(),
		Done:    expired,
	}
}

// NextEventTime returns the watermark values at which w must be evaluated
// again: the end of the window (for watermark triggers, before the on-time
// pane) and its expiry. The runner sets event-time timers for them.
func (m *Machine) NextEventTime(st *State, w Window) (onTime mtime.Time, ok bool) {
	if m.watermarkTrigger && !st.NonEarlyFired() && !st.Closed() {
		return w.MaxTimestamp(), true
	}
	return 0, false
}

// NextDeadline returns the processing time at which the window must be
// evaluated again, or 0 if no processing-time trigger is pending.
func (m *Machine) NextDeadline(st *State) mtime.Time {
	if !m.processingTime || st.Closed() {
		return 0
	}
	return m.Strategy.Trigger.NextDeadline(&st.Trigger)
}

// Merge folds the state of a merged-away session window into dst.
//
// The merged window is closed exactly when the merged trigger is finished
// (see Trigger.Merge), whichever of the two states was closed.
func (m *Machine) Merge(dst *State, src State) {
	m.Strategy.Trigger.Merge(&dst.Trigger, src.Trigger)
	dst.setFlag(flagClosed, dst.Trigger.Finished)
	if src.NextIndex > dst.NextIndex {
		dst.NextIndex = src.NextIndex
	}
	dst.Trigger.win |= src.Trigger.win & (flagNewData | flagHasData | flagNonEarlyFired)
}
