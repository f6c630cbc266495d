package window

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/weir-dev/weir/mtime"
)

// Firing shorthands.
func pane(index int64, timing Timing, first, last bool) PaneInfo {
	return PaneInfo{Index: index, Timing: timing, IsFirst: first, IsLast: last}
}

func emit(p PaneInfo, discard, done bool) Firing {
	return Firing{Emit: true, Pane: p, Discard: discard, Done: done}
}

var (
	nothing = Firing{}
	done    = Firing{Done: true}
)

// mstep is one step of a machine scenario for one key and window. The action
// is either an element (elem: event time ev, value v) arriving while the
// input watermark is wm at processing time now, or a watermark / processing
// time move (elem false). Unless noEval, the machine then evaluates the
// window with (wm, now) and must return want.
type mstep struct {
	name   string
	elem   bool
	ev     mtime.Time
	v      int64
	wm     mtime.Time
	now    mtime.Time
	drop   bool // the element is too late: Droppable must say so
	closed bool // the window is closed: the element is rejected
	noEval bool
	want   Firing
	total  int64 // the pane's contents (sum of values), checked when want.Emit
}

// elemAt and wmTo build the common steps.
func elemAt(name string, ev mtime.Time, v int64, wm mtime.Time, want Firing, total int64) mstep {
	return mstep{name: name, elem: true, ev: ev, v: v, wm: wm, want: want, total: total}
}

func wmTo(name string, wm mtime.Time, want Firing, total int64) mstep {
	return mstep{name: name, wm: wm, want: want, total: total}
}

type runOpts struct {
	encodeState bool // round-trip the state through its encoding between steps (checkpointing)
}

// runMachine plays steps against a fresh machine and state for window w,
// checking every step, and returns the emitted firings. Values are summed
// into an accumulator that is cleared when a firing says Discard, so pane
// totals can be checked as a runner would compute them.
func runMachine(t *testing.T, s Strategy, w Window, steps []mstep, opts runOpts) []Firing {
	t.Helper()
	if err := s.Validate(); err != nil {
		t.Fatalf("strategy: %v", err)
	}
	m := NewMachine(s)
	st := m.NewState()
	var acc int64
	var firings []Firing
	for i, step := range steps {
		where := fmt.Sprintf("step %d %q", i, step.name)
		if opts.encodeState {
			b := st.AppendBinary(nil)
			var back State
			if _, err := back.DecodeBinary(b); err != nil {
				t.Fatalf("%s: decode state %x: %v", where, b, err)
			}
			st = back
		}
		if step.elem {
			assigned := m.Strategy.Fn.Assign(nil, step.ev)
			found := false
			for _, aw := range assigned {
				found = found || aw == w
			}
			if !found {
				t.Fatalf("%s: element at %s is assigned to %v, not %v", where, step.ev, assigned, w)
			}
			if got := m.Droppable(w, step.wm); got != step.drop {
				t.Fatalf("%s: Droppable(%v, %s) = %v, want %v", where, w, step.wm, got, step.drop)
			}
			if step.drop {
				continue
			}
			if st.Closed() != step.closed {
				t.Fatalf("%s: Closed = %v, want %v", where, st.Closed(), step.closed)
			}
			if step.closed {
				continue
			}
			m.OnElement(&st, step.now)
			acc += step.v
		}
		if step.noEval {
			continue
		}
		before := clone(st)
		may := m.MayFire(&st, w, step.wm, step.now)
		if !reflect.DeepEqual(sview(st), sview(before)) {
			t.Fatalf("%s: MayFire changed the state", where)
		}
		got := m.Evaluate(&st, w, step.wm, step.now)
		if got.Emit && !got.Done && !may {
			t.Fatalf("%s: Evaluate emitted %+v but MayFire said no", where, got)
		}
		if got != step.want {
			t.Fatalf("%s: Evaluate(wm=%s, now=%s) = %+v, want %+v", where, step.wm, step.now, got, step.want)
		}
		if got.Emit {
			if acc != step.total {
				t.Errorf("%s: pane total = %d, want %d", where, acc, step.total)
			}
			if got.Discard {
				acc = 0
			}
		}
		if got.Emit || got.Done {
			firings = append(firings, got)
		}
	}
	checkPaneSequence(t, firings)
	return firings
}

// checkPaneSequence checks Beam's invariants on the panes of one window:
// indexes 0, 1, 2...; is_first exactly on index 0; timings EARLY* ON_TIME?
// LATE*; nothing after the last pane; is_last on a firing that is Done.
func checkPaneSequence(t *testing.T, firings []Firing) {
	t.Helper()
	next := int64(0)
	phase := 0 // 0: early allowed, 1: after ON_TIME/LATE
	lastSeen, doneSeen := false, false
	for i, f := range firings {
		if doneSeen {
			t.Errorf("firing %d %+v after Done", i, f)
		}
		if f.Done && !f.Emit {
			doneSeen = true
			continue
		}
		if !f.Emit {
			continue
		}
		p := f.Pane
		if lastSeen {
			t.Errorf("pane %+v after the last pane", p)
		}
		if p.Index != next {
			t.Errorf("pane index %d, want %d", p.Index, next)
		}
		if p.IsFirst != (p.Index == 0) {
			t.Errorf("pane %+v: is_first %v on index %d", p, p.IsFirst, p.Index)
		}
		switch p.Timing {
		case Early:
			if phase > 0 {
				t.Errorf("EARLY pane %+v after an ON_TIME or LATE pane", p)
			}
		case OnTime:
			if phase > 0 {
				t.Errorf("second non-early pane %+v is ON_TIME", p)
			}
			phase = 1
		case Late:
			phase = 1
		default:
			t.Errorf("pane %+v has timing %q", p, p.Timing)
		}
		if f.Done && !p.IsLast {
			t.Errorf("pane %+v of an expiring window is not last", p)
		}
		next++
		lastSeen = p.IsLast
		doneSeen = f.Done
	}
}

// TestReferenceFixture is the reference fixture (docs/ARCHITECTURE.md) at the machine level: five-minute
// fixed windows, after_watermark with a late firing after each late element,
// one minute allowed lateness, accumulating panes.
func TestReferenceFixture(t *testing.T) {
	late := AfterCount(1)
	s := Strategy{
		Fn:              FixedFn(5 * mtime.Minute),
		Trigger:         AfterWatermark(nil, &late),
		Accumulation:    Accumulating,
		AllowedLateness: mtime.Minute,
	}
	w := win(at(0, 0), at(5, 0))
	steps := []mstep{
		elemAt("NORTH +250 at 00:01", at(1, 0), 250, mtime.MinTimestamp, nothing, 0),
		elemAt("NORTH +175 at 00:03", at(3, 0), 175, mtime.MinTimestamp, nothing, 0),
		wmTo("watermark 00:04:59.999 is not past the end", at(5, 0)-1, nothing, 0),
		wmTo("watermark to 00:05: ON_TIME 425", at(5, 0), emit(pane(0, OnTime, true, false), false, false), 425),
		wmTo("watermark 00:05:10, nothing new", at(5, 10), nothing, 0),
		elemAt("NORTH +50 at 00:04 while the watermark is 00:05:20: LATE 475", at(4, 0), 50, at(5, 20),
			emit(pane(1, Late, false, false), false, false), 475),
		wmTo("watermark 00:05:59.999 (GC time), nothing new", at(6, 0)-1, nothing, 0),
		wmTo("watermark past 00:06: expired, no pane (FIRE_IF_NON_EMPTY)", at(6, 0), done, 0),
		{name: "+100 for [00:00, 00:05) after 00:06 is dropped", elem: true, ev: at(2, 0), v: 100, wm: at(6, 0), drop: true},
		{name: "and still dropped later", elem: true, ev: at(4, 59), v: 100, wm: at(10, 0), drop: true},
	}
	for _, opts := range []runOpts{{}, {encodeState: true}} {
		t.Run(fmt.Sprintf("encoded=%v", opts.encodeState), func(t *testing.T) {
			firings := runMachine(t, s, w, steps, opts)
			// Upsert keeps the latest pane (475); appending both panes gives 900.
			if len(firings) != 3 || !firings[2].Done || firings[2].Emit {
				t.Fatalf("firings = %+v, want two panes and Done", firings)
			}
		})
	}

	// An event at exactly 00:05 belongs to [00:05, 00:10), which is still
	// open when [00:00, 00:05) expires.
	next, _ := s.Fn.AssignOne(at(5, 0))
	if want := win(at(5, 0), at(10, 0)); next != want {
		t.Errorf("00:05 is assigned to %v, want %v", next, want)
	}
	m := NewMachine(s)
	if m.Droppable(next, at(6, 0)) {
		t.Errorf("[00:05, 00:10) is droppable at 00:06")
	}
	if !m.Droppable(next, at(11, 0)) {
		t.Errorf("[00:05, 00:10) is not droppable at 00:11")
	}
}

func TestReferenceFixtureDiscarding(t *testing.T) {
	late := AfterCount(1)
	s := Strategy{
		Fn:              FixedFn(5 * mtime.Minute),
		Trigger:         AfterWatermark(nil, &late),
		Accumulation:    Discarding,
		AllowedLateness: mtime.Minute,
	}
	runMachine(t, s, win(at(0, 0), at(5, 0)), []mstep{
		elemAt("250 at 00:01", at(1, 0), 250, mtime.MinTimestamp, nothing, 0),
		elemAt("175 at 00:03", at(3, 0), 175, mtime.MinTimestamp, nothing, 0),
		wmTo("00:05", at(5, 0), emit(pane(0, OnTime, true, false), true, false), 425),
		elemAt("50 at 00:04, late", at(4, 0), 50, at(5, 20), emit(pane(1, Late, false, false), true, false), 50),
		wmTo("00:06", at(6, 0), done, 0),
	}, runOpts{})
}

func TestMachineScenarios(t *testing.T) {
	fixed5 := FixedFn(5 * mtime.Minute)
	w := win(at(0, 0), at(5, 0))
	inf := mtime.MaxTimestamp
	minusInf := mtime.MinTimestamp
	p := func(sec int) mtime.Time { return at(100, sec) } // processing times
	tests := []struct {
		name  string
		s     Strategy
		w     Window
		steps []mstep
	}{
		{
			name: "default trigger, zero lateness: the on-time pane is the last",
			s:    Strategy{Fn: fixed5},
			w:    w,
			steps: []mstep{
				elemAt("1", at(1, 0), 1, minusInf, nothing, 0),
				elemAt("2", at(3, 0), 2, at(2, 0), nothing, 0),
				wmTo("end", at(5, 0), emit(pane(0, OnTime, true, true), true, true), 3),
				{name: "late element dropped", elem: true, ev: at(4, 0), wm: at(5, 0), drop: true},
			},
		},
		{
			name: "default trigger, zero lateness, accumulating",
			s:    Strategy{Fn: fixed5, Accumulation: Accumulating},
			w:    w,
			steps: []mstep{
				elemAt("1", at(1, 0), 1, minusInf, nothing, 0),
				wmTo("end", at(7, 0), emit(pane(0, OnTime, true, true), false, true), 1),
			},
		},
		{
			name: "default trigger fires again for every evaluation with late data",
			s:    Strategy{Fn: fixed5, AllowedLateness: mtime.Minute},
			w:    w,
			steps: []mstep{
				elemAt("1", at(1, 0), 1, minusInf, nothing, 0),
				wmTo("end", at(5, 0), emit(pane(0, OnTime, true, false), true, false), 1),
				wmTo("no new data", at(5, 10), nothing, 0),
				elemAt("late 1", at(2, 0), 10, at(5, 20), emit(pane(1, Late, false, false), true, false), 10),
				{name: "late 2, not evaluated yet", elem: true, ev: at(3, 0), v: 20, wm: at(5, 25), noEval: true},
				elemAt("late 3", at(4, 0), 30, at(5, 30), emit(pane(2, Late, false, false), true, false), 50),
				wmTo("no new data", at(5, 40), nothing, 0),
				wmTo("expired", at(6, 0), done, 0),
			},
		},
		{
			name: "late data then expiry in one evaluation: last LATE pane",
			s:    Strategy{Fn: fixed5, Accumulation: Accumulating, AllowedLateness: mtime.Minute},
			w:    w,
			steps: []mstep{
				elemAt("1", at(1, 0), 1, minusInf, nothing, 0),
				wmTo("end", at(5, 0), emit(pane(0, OnTime, true, false), false, false), 1),
				{name: "late, not evaluated", elem: true, ev: at(2, 0), v: 2, wm: at(5, 30), noEval: true},
				wmTo("watermark jumps past expiry", at(30, 0), emit(pane(1, Late, false, true), false, true), 3),
			},
		},
		{
			name: "bounded end, fixed window: ON_TIME and last",
			s:    Strategy{Fn: fixed5, AllowedLateness: mtime.Hour},
			w:    w,
			steps: []mstep{
				elemAt("1", at(1, 0), 1, minusInf, nothing, 0),
				elemAt("2", at(2, 0), 2, minusInf, nothing, 0),
				wmTo("+inf", inf, emit(pane(0, OnTime, true, true), true, true), 3),
			},
		},
		{
			name: "bounded end, global window: ON_TIME and last",
			s:    DefaultStrategy(),
			w:    Global,
			steps: []mstep{
				elemAt("1", at(1, 0), 1, minusInf, nothing, 0),
				elemAt("2", at(-1000, 0), 2, at(1, 0), nothing, 0),
				wmTo("watermark moves", at(100, 0), nothing, 0),
				wmTo("end of global window is not past the end", mtime.EndOfGlobalWindow, nothing, 0),
				wmTo("+inf", inf, emit(pane(0, OnTime, true, true), true, true), 3),
			},
		},
		{
			name: "bounded end after early panes: ON_TIME fires though nothing is new (FIRE_ALWAYS)",
			s:    Strategy{Fn: fixed5, Trigger: AfterWatermark(ptr(AfterCount(1)), nil), Accumulation: Accumulating, AllowedLateness: mtime.Hour},
			w:    w,
			steps: []mstep{
				elemAt("1", at(1, 0), 1, minusInf, emit(pane(0, Early, true, false), false, false), 1),
				wmTo("+inf", inf, emit(pane(1, OnTime, false, true), true, true), 1),
			},
		},
		{
			name: "global window with repeated counts: the bounded end flushes what is new",
			s:    Strategy{Trigger: Repeatedly(AfterCount(2)), Accumulation: Accumulating},
			w:    Global,
			steps: []mstep{
				elemAt("1", at(1, 0), 1, minusInf, nothing, 0),
				elemAt("2", at(2, 0), 2, minusInf, emit(pane(0, Early, true, false), false, false), 3),
				elemAt("3", at(3, 0), 3, minusInf, nothing, 0),
				wmTo("+inf", inf, emit(pane(1, OnTime, false, true), false, true), 6),
			},
		},
		{
			name: "global window with repeated counts: nothing new at the bounded end, no pane",
			s:    Strategy{Trigger: Repeatedly(AfterCount(2))},
			w:    Global,
			steps: []mstep{
				elemAt("1", at(1, 0), 1, minusInf, nothing, 0),
				elemAt("2", at(2, 0), 2, minusInf, emit(pane(0, Early, true, false), true, false), 3),
				wmTo("+inf", inf, done, 0),
			},
		},
		{
			name: "after_count(2) without repeatedly fires once, closed",
			s:    Strategy{Fn: fixed5, Trigger: AfterCount(2), Accumulation: Accumulating, AllowedLateness: mtime.Minute},
			w:    w,
			steps: []mstep{
				elemAt("1", at(1, 0), 1, minusInf, nothing, 0),
				elemAt("2", at(2, 0), 2, minusInf, emit(pane(0, Early, true, true), true, false), 3),
				{name: "3: window closed", elem: true, ev: at(3, 0), v: 3, wm: at(3, 0), closed: true},
				wmTo("end", at(5, 0), nothing, 0),
				wmTo("expiry", at(6, 0), done, 0),
			},
		},
		{
			name: "after_count(2) reached after the end of the window: ON_TIME, closed",
			s:    Strategy{Fn: fixed5, Trigger: AfterCount(2), AllowedLateness: mtime.Minute},
			w:    w,
			steps: []mstep{
				elemAt("1", at(1, 0), 1, minusInf, nothing, 0),
				wmTo("end: not a watermark trigger", at(5, 0), nothing, 0),
				elemAt("2, late", at(2, 0), 2, at(5, 10), emit(pane(0, OnTime, true, true), true, false), 3),
				wmTo("expiry", at(6, 0), done, 0),
			},
		},
		{
			name: "early panes then ON_TIME with nothing new (FIRE_ALWAYS)",
			s:    Strategy{Fn: fixed5, Trigger: AfterWatermark(ptr(AfterCount(1)), nil), Accumulation: Accumulating, AllowedLateness: mtime.Minute},
			w:    w,
			steps: []mstep{
				elemAt("1", at(1, 0), 1, minusInf, emit(pane(0, Early, true, false), false, false), 1),
				elemAt("2", at(2, 0), 2, at(1, 0), emit(pane(1, Early, false, false), false, false), 3),
				wmTo("nothing new before the end", at(4, 0), nothing, 0),
				wmTo("end: on time though nothing is new; closed", at(5, 0), emit(pane(2, OnTime, false, true), true, false), 3),
				{name: "late element: closed", elem: true, ev: at(2, 0), wm: at(5, 10), closed: true},
				wmTo("expiry", at(6, 0), done, 0),
			},
		},
		{
			name: "after_watermark with repeating early and late counts",
			s: Strategy{Fn: fixed5, Trigger: AfterWatermark(ptr(AfterCount(2)), ptr(AfterCount(2))),
				Accumulation: Accumulating, AllowedLateness: mtime.Minute},
			w: w,
			steps: []mstep{
				elemAt("1", at(1, 0), 1, minusInf, nothing, 0),
				elemAt("2", at(1, 0), 2, minusInf, emit(pane(0, Early, true, false), false, false), 3),
				elemAt("3", at(1, 0), 3, minusInf, nothing, 0),
				elemAt("4", at(1, 0), 4, minusInf, emit(pane(1, Early, false, false), false, false), 10),
				elemAt("5", at(1, 0), 5, minusInf, nothing, 0),
				wmTo("end: on time", at(5, 0), emit(pane(2, OnTime, false, false), false, false), 15),
				elemAt("6, late", at(1, 0), 6, at(5, 1), nothing, 0),
				elemAt("7, late", at(1, 0), 7, at(5, 2), emit(pane(3, Late, false, false), false, false), 28),
				elemAt("8, late", at(1, 0), 8, at(5, 3), nothing, 0),
				wmTo("expiry flushes the pending late element", at(6, 0), emit(pane(4, Late, false, true), false, true), 36),
			},
		},
		{
			name: "never: only the expiry emits",
			s:    Strategy{Fn: fixed5, Trigger: Trigger{Kind: TriggerNever}, AllowedLateness: mtime.Minute},
			w:    w,
			steps: []mstep{
				elemAt("1", at(1, 0), 1, minusInf, nothing, 0),
				elemAt("2", at(2, 0), 2, minusInf, nothing, 0),
				wmTo("end", at(5, 0), nothing, 0),
				elemAt("3, late", at(3, 0), 3, at(5, 30), nothing, 0),
				wmTo("expiry", at(6, 0), emit(pane(0, OnTime, true, true), true, true), 6),
			},
		},
		{
			name: "processing-time early firings",
			s:    Strategy{Fn: fixed5, Trigger: AfterWatermark(ptr(AfterProcessingTime(mtime.Minute)), nil)},
			w:    w,
			steps: []mstep{
				{name: "1 at p0", elem: true, ev: at(1, 0), v: 1, wm: minusInf, now: p(0), want: nothing},
				{name: "p59", wm: minusInf, now: p(59), want: nothing},
				{name: "p60: early", wm: minusInf, now: p(60), want: emit(pane(0, Early, true, false), true, false), total: 1},
				{name: "p120: nothing new, no deadline", wm: at(1, 0), now: p(120), want: nothing},
				{name: "2 at p130", elem: true, ev: at(2, 0), v: 2, wm: at(1, 0), now: p(130), want: nothing},
				{name: "end before the deadline: on time, last", wm: at(5, 0), now: p(140), want: emit(pane(1, OnTime, false, true), true, true), total: 2},
			},
		},
		{
			name: "processing-time late firings",
			s: Strategy{Fn: fixed5, Trigger: AfterWatermark(nil, ptr(AfterProcessingTime(30*mtime.Second))),
				Accumulation: Accumulating, AllowedLateness: 10 * mtime.Minute},
			w: w,
			steps: []mstep{
				{name: "1", elem: true, ev: at(1, 0), v: 1, wm: minusInf, now: p(0), want: nothing},
				{name: "end", wm: at(5, 0), now: p(10), want: emit(pane(0, OnTime, true, false), false, false), total: 1},
				{name: "late at p100", elem: true, ev: at(2, 0), v: 2, wm: at(5, 10), now: p(100), want: nothing},
				{name: "p129", wm: at(5, 10), now: p(129), want: nothing},
				{name: "p130: late", wm: at(5, 10), now: p(130), want: emit(pane(1, Late, false, false), false, false), total: 3},
				{name: "expiry, nothing new", wm: at(15, 0), now: p(140), want: done},
			},
		},
		{
			name: "a pending late firing is flushed at expiry (FIRE_IF_NON_EMPTY)",
			s: Strategy{Fn: fixed5, Trigger: AfterWatermark(nil, ptr(AfterProcessingTime(mtime.Hour))),
				Accumulation: Accumulating, AllowedLateness: mtime.Minute},
			w: w,
			steps: []mstep{
				elemAt("1", at(1, 0), 1, minusInf, nothing, 0),
				wmTo("end", at(5, 0), emit(pane(0, OnTime, true, false), false, false), 1),
				elemAt("late", at(2, 0), 2, at(5, 30), nothing, 0),
				wmTo("expiry", at(6, 0), emit(pane(1, Late, false, true), false, true), 3),
			},
		},
		{
			name: "session window",
			s:    Strategy{Fn: SessionsFn(10 * mtime.Minute)},
			w:    win(at(1, 0), at(11, 0)),
			steps: []mstep{
				elemAt("1", at(1, 0), 1, minusInf, nothing, 0),
				wmTo("10:59.999", at(11, 0)-1, nothing, 0),
				wmTo("11:00", at(11, 0), emit(pane(0, OnTime, true, true), true, true), 1),
			},
		},
		{
			name: "sliding window",
			s:    Strategy{Fn: SlidingFn(10*mtime.Minute, 5*mtime.Minute), AllowedLateness: mtime.Minute},
			w:    win(at(0, 0), at(10, 0)),
			steps: []mstep{
				elemAt("at 7:00", at(7, 0), 1, minusInf, nothing, 0),
				wmTo("10:00", at(10, 0), emit(pane(0, OnTime, true, false), true, false), 1),
				elemAt("late at 9:00", at(9, 0), 2, at(10, 30), emit(pane(1, Late, false, false), true, false), 2),
				wmTo("11:00", at(11, 0), done, 0),
			},
		},
		{
			name: "negative event times",
			s:    Strategy{Fn: FixedFn(5 * mtime.Minute), Accumulation: Accumulating, AllowedLateness: mtime.Minute},
			w:    win(mins(-5), 0),
			steps: []mstep{
				elemAt("-1ms", -1, 1, minusInf, nothing, 0),
				elemAt("-5m", mins(-5), 2, minusInf, nothing, 0),
				wmTo("epoch", 0, emit(pane(0, OnTime, true, false), false, false), 3),
				wmTo("expiry", mins(1), done, 0),
			},
		},
		{
			name: "zero strategy behaves as the default strategy",
			s:    Strategy{},
			w:    Global,
			steps: []mstep{
				elemAt("1", at(1, 0), 1, minusInf, nothing, 0),
				wmTo("+inf", inf, emit(pane(0, OnTime, true, true), true, true), 1),
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runMachine(t, tc.s, tc.w, tc.steps, runOpts{})
			runMachine(t, tc.s, tc.w, tc.steps, runOpts{encodeState: true})
		})
	}
}

func TestMachineWithoutData(t *testing.T) {
	// A state that never received an element emits nothing, even on time
	// or at expiry.
	for _, tr := range []Trigger{Default(), AfterWatermark(nil, nil), Trigger{Kind: TriggerNever}} {
		m := NewMachine(Strategy{Fn: FixedFn(5 * mtime.Minute), Trigger: tr, AllowedLateness: mtime.Minute})
		st := m.NewState()
		w := win(at(0, 0), at(5, 0))
		if got := m.Evaluate(&st, w, at(5, 0), 0); got != nothing {
			t.Errorf("%s: on time without data = %+v", tr.Kind, got)
		}
		if got := m.Evaluate(&st, w, at(6, 0), 0); got != done {
			t.Errorf("%s: expiry without data = %+v", tr.Kind, got)
		}
	}
}

func TestMachineDroppable(t *testing.T) {
	w := win(at(0, 0), at(5, 0))
	tests := []struct {
		name     string
		lateness mtime.Duration
		w        Window
		wm       mtime.Time
		want     bool
	}{
		{"before the end", mtime.Minute, w, at(4, 0), false},
		{"past the end, within lateness", mtime.Minute, w, at(5, 20), false},
		{"at GC time", mtime.Minute, w, at(6, 0) - 1, false},
		{"past GC time", mtime.Minute, w, at(6, 0), true},
		{"+inf", mtime.Minute, w, mtime.MaxTimestamp, true},
		{"no lateness, at MaxTimestamp", 0, w, at(5, 0) - 1, false},
		{"no lateness, past the end", 0, w, at(5, 0), true},
		{"global, huge watermark", 0, Global, mtime.EndOfGlobalWindow, false},
		{"global, +inf", 0, Global, mtime.MaxTimestamp, true},
		{"watermark -inf", 0, w, mtime.MinTimestamp, false},
	}
	for _, tc := range tests {
		m := NewMachine(Strategy{Fn: FixedFn(5 * mtime.Minute), AllowedLateness: tc.lateness})
		if got := m.Droppable(tc.w, tc.wm); got != tc.want {
			t.Errorf("%s: Droppable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestMachineNextEventTimeAndDeadline(t *testing.T) {
	w := win(at(0, 0), at(5, 0))
	type check struct {
		onTime   mtime.Time
		ok       bool
		deadline mtime.Time
	}
	tests := []struct {
		name   string
		tr     Trigger
		before check // after one element at processing time p
		after  check // after the watermark passed the end
	}{
		{"default", Default(), check{w.MaxTimestamp(), true, 0}, check{0, false, 0}},
		{"after_watermark with early processing time", AfterWatermark(ptr(AfterProcessingTime(mtime.Minute)), nil),
			check{w.MaxTimestamp(), true, at(101, 0)}, check{0, false, 0}},
		{"after_watermark with late processing time", AfterWatermark(nil, ptr(AfterProcessingTime(mtime.Minute))),
			check{w.MaxTimestamp(), true, 0}, check{0, false, 0}},
		{"after_count: no event-time timer", Repeatedly(AfterCount(5)), check{0, false, 0}, check{0, false, 0}},
		{"processing time", Repeatedly(AfterProcessingTime(mtime.Minute)), check{0, false, at(101, 0)}, check{0, false, at(101, 0)}},
	}
	for _, tc := range tests {
		m := NewMachine(Strategy{Fn: FixedFn(5 * mtime.Minute), Trigger: tc.tr, AllowedLateness: mtime.Hour})
		st := m.NewState()
		m.OnElement(&st, at(100, 0))
		m.Evaluate(&st, w, at(1, 0), at(100, 0))
		got := check{deadline: m.NextDeadline(&st)}
		got.onTime, got.ok = m.NextEventTime(&st, w)
		if got != tc.before {
			t.Errorf("%s: before the end: %+v, want %+v", tc.name, got, tc.before)
		}
		m.Evaluate(&st, w, at(5, 0), at(100, 1))
		got = check{deadline: m.NextDeadline(&st)}
		got.onTime, got.ok = m.NextEventTime(&st, w)
		if got != tc.after {
			t.Errorf("%s: after the end: %+v, want %+v", tc.name, got, tc.after)
		}
	}

	// A closed window has no timers.
	m := NewMachine(Strategy{Fn: FixedFn(5 * mtime.Minute), Trigger: AfterAny(AfterCount(1), AfterProcessingTime(mtime.Minute))})
	st := m.NewState()
	m.OnElement(&st, at(100, 0))
	if m.NextDeadline(&st) != at(101, 0) {
		t.Fatalf("deadline = %s", m.NextDeadline(&st))
	}
	if f := m.Evaluate(&st, w, at(1, 0), at(100, 0)); !f.Emit || !st.Closed() {
		t.Fatalf("after_any(count 1) did not fire and close: %+v", f)
	}
	if d := m.NextDeadline(&st); d != 0 {
		t.Errorf("closed window NextDeadline = %s, want 0", d)
	}
	if _, ok := m.NextEventTime(&st, w); ok {
		t.Errorf("closed window has an event-time timer")
	}
}

func TestMachineMerge(t *testing.T) {
	tr := Repeatedly(AfterAny(AfterCount(3), AfterProcessingTime(mtime.Minute)))
	m := NewMachine(Strategy{Fn: SessionsFn(10 * mtime.Minute), Trigger: tr})
	a, b := m.NewState(), m.NewState()
	m.OnElement(&a, at(100, 10))
	m.OnElement(&a, at(100, 20))
	m.OnElement(&b, at(100, 30))
	a.NextIndex, b.NextIndex = 1, 4
	b.setFlag(flagNonEarlyFired, true)

	for _, dir := range []string{"a<-b", "b<-a"} {
		t.Run(dir, func(t *testing.T) {
			dst, src := a, b
			if dir == "b<-a" {
				dst, src = b, a
			}
			dst = clone(dst)
			m.Merge(&dst, src)
			want := ss{
				Trigger: ts{Sub: []ts{{Sub: []ts{
					{Count: 3},                          // counts add
					{Deadline: at(101, 10)}}}}}.state(), // earliest deadline wins
				NextIndex:     4,
				NewData:       true,
				HasData:       true,
				NonEarlyFired: true,
			}.state()
			if !reflect.DeepEqual(sview(dst), sview(want)) {
				t.Errorf("merged = %+v, want %+v", sview(dst), sview(want))
			}
			if d := m.NextDeadline(&dst); d != at(101, 10) {
				t.Errorf("merged NextDeadline = %s", d)
			}
			sw := win(at(1, 0), at(20, 0))
			f := m.Evaluate(&dst, sw, at(2, 0), at(100, 31))
			if wantF := emit(pane(4, Late, false, false), true, false); f != wantF {
				t.Errorf("merged Evaluate = %+v, want %+v", f, wantF)
			}
		})
	}
}

// TestMachineMergeClosed: a session whose one-shot trigger finished (its
// pane was the last) stays closed when merged with a new session, whichever
// side of the merge it is on; it never emits again.
func TestMachineMergeClosed(t *testing.T) {
	m := NewMachine(Strategy{Fn: SessionsFn(10 * mtime.Minute), Trigger: AfterCount(1), AllowedLateness: mtime.Hour})
	closed := m.NewState()
	m.OnElement(&closed, 0)
	if f := m.Evaluate(&closed, win(at(0, 0), at(10, 0)), at(1, 0), 0); f != emit(pane(0, Early, true, true), true, false) {
		t.Fatalf("first session: %+v", f)
	}
	open := m.NewState()
	m.OnElement(&open, 0)

	merged := win(at(0, 0), at(18, 0))
	for _, dir := range []string{"closed<-open", "open<-closed"} {
		t.Run(dir, func(t *testing.T) {
			dst, src := closed, open
			if dir == "open<-closed" {
				dst, src = open, closed
			}
			dst = clone(dst)
			m.Merge(&dst, src)
			if !dst.Closed() || !dst.Trigger.Finished {
				t.Fatalf("merged state is open: %+v", dst)
			}
			for _, wm := range []mtime.Time{at(2, 0), at(18, 0), at(90, 0)} {
				f := m.Evaluate(&dst, merged, wm, 0)
				if f.Emit {
					t.Errorf("closed merged window emitted %+v at %s", f, wm)
				}
			}
		})
	}
}

// TestMachineMergeTiming: after an ON_TIME pane, a session merge can move
// the window's end past the watermark again; later panes are still LATE
// (Beam: EARLY* ON_TIME? LATE*), never EARLY.
func TestMachineMergeTiming(t *testing.T) {
	late := AfterCount(1)
	m := NewMachine(Strategy{Fn: SessionsFn(10 * mtime.Minute), Trigger: AfterWatermark(nil, &late),
		Accumulation: Accumulating, AllowedLateness: mtime.Hour})
	first := win(at(0, 0), at(10, 0))
	a := m.NewState()
	m.OnElement(&a, 0)
	var firings []Firing
	f := m.Evaluate(&a, first, at(10, 0), 0)
	if f != emit(pane(0, OnTime, true, false), false, false) {
		t.Fatalf("on time: %+v", f)
	}
	firings = append(firings, f)

	// An element at 00:08 opens [00:08, 00:18), which merges with [00:00,
	// 00:10) into [00:00, 00:18); the watermark (00:10) is before its end.
	b := m.NewState()
	m.Merge(&b, a)
	m.OnElement(&b, 0)
	merged := first.Span(win(at(8, 0), at(18, 0)))
	// As in Beam, the merged window's on-time firing is re-armed (only one
	// of the merged windows had fired on time): nothing fires before its new end.
	f = m.Evaluate(&b, merged, at(10, 0), 0)
	if f != (Firing{}) {
		t.Errorf("after the merge: %+v, want no pane before the merged end", f)
	}
	// Passing the merged end (and expiry) fires; the pane is LATE, never
	// EARLY or a second ON_TIME.
	f = m.Evaluate(&b, merged, at(80, 0), 0)
	if f != emit(pane(1, Late, false, true), false, true) {
		t.Errorf("expiry: %+v, want a last LATE pane with index 1", f)
	}
	firings = append(firings, f)
	checkPaneSequence(t, firings)
}

// TestMachineInvariants drives many strategies with random elements,
// watermark and clock moves, and checks Beam's pane invariants: indexes
// count up from 0, timings follow EARLY* ON_TIME? LATE*, EARLY only before
// the end of the window, no pane after the last, and no accepted element is
// lost: when the window expires, everything accepted has been in a pane.
func TestMachineInvariants(t *testing.T) {
	pt := func(s int) Trigger { return AfterProcessingTime(mtime.Duration(s) * mtime.Second) }
	triggers := []Trigger{
		Default(),
		AfterWatermark(nil, nil),
		AfterWatermark(ptr(AfterCount(2)), nil),
		AfterWatermark(nil, ptr(AfterCount(1))),
		AfterWatermark(ptr(pt(30)), ptr(AfterCount(2))),
		AfterWatermark(ptr(Repeatedly(AfterAny(AfterCount(3), pt(20)))), ptr(pt(10))),
		AfterCount(3),
		pt(45),
		Repeatedly(AfterCount(2)),
		Repeatedly(pt(15)),
		AfterAny(AfterCount(4), AfterWatermark(nil, nil)),
		AfterAll(AfterCount(2), pt(10)),
		Repeatedly(AfterAll(AfterCount(2), pt(10))),
		{Kind: TriggerNever},
	}
	fns := []struct {
		fn Fn
		w  Window
	}{
		{FixedFn(5 * mtime.Minute), win(at(0, 0), at(5, 0))},
		{GlobalFn(), Global},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for ti, tr := range triggers {
		for _, f := range fns {
			for _, lateness := range []mtime.Duration{0, mtime.Minute} {
				for _, acc := range []AccumulationMode{Discarding, Accumulating} {
					for run := range 20 {
						name := fmt.Sprintf("trigger %d (%s) %s lateness %s %s run %d", ti, tr.Kind, f.fn.Kind, lateness, acc, run)
						randomRun(t, rng, name, Strategy{Fn: f.fn, Trigger: tr, Accumulation: acc, AllowedLateness: lateness}, f.w)
					}
				}
			}
		}
	}
}

func randomRun(t *testing.T, rng *rand.Rand, name string, s Strategy, w Window) {
	m := NewMachine(s)
	st := m.NewState()
	wm := at(0, 0)
	now := at(100, 0)
	pending := 0 // elements accepted since the last pane
	var firings []Firing
	var sawOnTimeEval bool
	for step := 0; ; step++ {
		switch r := rng.IntN(10); {
		case r < 5:
			if m.Droppable(w, wm) || st.Closed() {
				break
			}
			m.OnElement(&st, now)
			pending++
		case r < 8:
			wm = wm.Add(mtime.Duration(rng.IntN(40)) * mtime.Second)
		default:
			now = now.Add(mtime.Duration(rng.IntN(30)) * mtime.Second)
		}
		if step > 60 {
			wm = mtime.MaxTimestamp
		}
		wasClosed, hadData, hadNonEarly := st.Closed(), st.HasData(), st.NonEarlyFired()
		may := m.MayFire(&st, w, wm, now)
		f := m.Evaluate(&st, w, wm, now)
		if f.Emit && !f.Done && !may {
			t.Fatalf("%s: Evaluate emitted %+v but MayFire said no", name, f)
		}
		past := wm > w.MaxTimestamp()
		if f.Emit {
			firings = append(firings, f)
			if !hadData {
				t.Fatalf("%s: pane %+v without data", name, f)
			}
			if wasClosed {
				t.Fatalf("%s: closed window emitted %+v", name, f)
			}
			if (f.Pane.Timing == Early) == past {
				t.Fatalf("%s: %s pane at watermark %s for %v", name, f.Pane.Timing, wm, w)
			}
			if f.Discard != (s.Accumulation == Discarding || st.Closed()) {
				t.Fatalf("%s: Discard %v (closed %v)", name, f.Discard, st.Closed())
			}
			if f.Pane.IsLast != (f.Done || st.Closed()) {
				t.Fatalf("%s: IsLast %v, Done %v, Closed %v", name, f.Pane.IsLast, f.Done, st.Closed())
			}
			pending = 0
		}
		// The first evaluation past the end of the window fires the on-time
		// pane of a watermark trigger that is still open and has data.
		if past && !sawOnTimeEval {
			sawOnTimeEval = true
			k := s.Trigger.Kind
			if (k == TriggerDefault || k == TriggerAfterWatermark) && !wasClosed && hadData && !hadNonEarly {
				if !f.Emit || f.Pane.Timing != OnTime {
					t.Fatalf("%s: first evaluation past the end gave %+v, want an ON_TIME pane", name, f)
				}
			}
		}
		if f.Done {
			if !f.Emit {
				firings = append(firings, f)
			}
			if pending != 0 && !st.Closed() {
				t.Fatalf("%s: window expired with %d accepted elements never emitted", name, pending)
			}
			if !m.Droppable(w, wm) {
				t.Fatalf("%s: Done but not droppable", name)
			}
			break
		}
		if step > 1000 {
			t.Fatalf("%s: window never expired", name)
		}
	}
	checkPaneSequence(t, firings)
}

func TestMachineMayFire(t *testing.T) {
	w := win(at(0, 0), at(5, 0))
	tests := []struct {
		name  string
		tr    Trigger
		elems int
		wm    mtime.Time
		now   mtime.Time
		want  bool
	}{
		{"default before the end", Default(), 1, at(4, 0), 0, false},
		{"default past the end", Default(), 1, at(5, 0), 0, true},
		{"after_count(2) with one element", AfterCount(2), 1, at(1, 0), 0, false},
		{"after_count(2) with two elements", AfterCount(2), 2, at(1, 0), 0, true},
		{"processing time before the deadline", AfterProcessingTime(mtime.Minute), 1, at(1, 0), at(100, 59), false},
		{"processing time at the deadline", AfterProcessingTime(mtime.Minute), 1, at(1, 0), at(101, 0), true},
		{"never", Trigger{Kind: TriggerNever}, 3, mtime.MaxTimestamp, 0, false},
	}
	for _, tc := range tests {
		m := NewMachine(Strategy{Fn: FixedFn(5 * mtime.Minute), Trigger: tc.tr, AllowedLateness: mtime.Hour})
		st := m.NewState()
		for range tc.elems {
			m.OnElement(&st, at(100, 0))
		}
		before := clone(st)
		if got := m.MayFire(&st, w, tc.wm, tc.now); got != tc.want {
			t.Errorf("%s: MayFire = %v, want %v", tc.name, got, tc.want)
		}
		if !reflect.DeepEqual(sview(st), sview(before)) {
			t.Errorf("%s: MayFire changed the state: %+v, was %+v", tc.name, st, before)
		}
	}
	// A closed window may not fire.
	m := NewMachine(Strategy{Fn: FixedFn(5 * mtime.Minute), Trigger: AfterCount(1), AllowedLateness: mtime.Hour})
	st := m.NewState()
	m.OnElement(&st, 0)
	m.Evaluate(&st, w, at(1, 0), 0)
	st.setFlag(flagNewData, true)
	if !st.Closed() || m.MayFire(&st, w, at(5, 0), 0) {
		t.Errorf("closed window: Closed %v, MayFire true", st.Closed())
	}
}

func TestTiming(t *testing.T) {
	tests := []struct {
		t    Timing
		name string
	}{
		{Unknown, "UNKNOWN"},
		{Early, "EARLY"},
		{OnTime, "ON_TIME"},
		{Late, "LATE"},
	}
	for _, tc := range tests {
		if got := tc.t.String(); got != tc.name {
			t.Errorf("Timing(%d).String() = %q, want %q", uint8(tc.t), got, tc.name)
		}
		back, err := ParseTiming(tc.name)
		if err != nil || back != tc.t {
			t.Errorf("ParseTiming(%q) = %v, %v", tc.name, back, err)
		}
	}
	if got := Timing(42).String(); got != "UNKNOWN" {
		t.Errorf("Timing(42).String() = %q", got)
	}
	for _, bad := range []string{"", "late", "On_Time", "EARLY "} {
		if _, err := ParseTiming(bad); err == nil {
			t.Errorf("ParseTiming(%q) succeeded", bad)
		}
	}
	var p PaneInfo
	if err := json.Unmarshal([]byte(`{"index":1,"timing":"SOMETIME","is_first":false,"is_last":false}`), &p); err == nil {
		t.Errorf("unmarshalled a pane with timing SOMETIME: %+v", p)
	}
}

func TestNoFiring(t *testing.T) {
	if NoFiring != (PaneInfo{Index: 0, Timing: Unknown, IsFirst: true, IsLast: true}) {
		t.Errorf("NoFiring = %+v", NoFiring)
	}
	b, err := json.Marshal(pane(2, Late, false, true))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"index":2,"timing":"LATE","is_first":false,"is_last":true}`; string(b) != want {
		t.Errorf("PaneInfo JSON = %s, want %s", b, want)
	}
	for _, p := range []PaneInfo{NoFiring, pane(0, Early, true, false), pane(1, OnTime, false, false), pane(2, Late, false, true)} {
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var back PaneInfo
		if err := json.Unmarshal(b, &back); err != nil || back != p {
			t.Errorf("PaneInfo JSON round trip of %+v via %s = %+v, %v", p, b, back, err)
		}
	}
}
