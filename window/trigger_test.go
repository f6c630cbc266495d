package window

import (
	"encoding/binary"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/weir-dev/weir/mtime"
)

func ptr(t Trigger) *Trigger { return &t }

func TestTriggerConstructors(t *testing.T) {
	tests := []struct {
		name      string
		got, want Trigger
	}{
		{"Default", Default(), Trigger{Kind: TriggerDefault}},
		{"AfterWatermark()", AfterWatermark(nil, nil), Trigger{Kind: TriggerAfterWatermark}},
		{"AfterWatermark(early, late)", AfterWatermark(ptr(AfterCount(2)), ptr(AfterCount(1))),
			Trigger{Kind: TriggerAfterWatermark, Early: &Trigger{Kind: TriggerAfterCount, Count: 2}, Late: &Trigger{Kind: TriggerAfterCount, Count: 1}}},
		{"AfterCount", AfterCount(3), Trigger{Kind: TriggerAfterCount, Count: 3}},
		{"AfterProcessingTime", AfterProcessingTime(mtime.Minute), Trigger{Kind: TriggerAfterProcessingTime, Delay: mtime.Minute}},
		{"Repeatedly", Repeatedly(AfterCount(2)), Trigger{Kind: TriggerRepeatedly, Triggers: []Trigger{AfterCount(2)}}},
		{"AfterAny", AfterAny(AfterCount(2), Default()), Trigger{Kind: TriggerAfterAny, Triggers: []Trigger{AfterCount(2), Default()}}},
		{"AfterAll", AfterAll(AfterCount(2)), Trigger{Kind: TriggerAfterAll, Triggers: []Trigger{AfterCount(2)}}},
	}
	for _, tc := range tests {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s = %+v, want %+v", tc.name, tc.got, tc.want)
		}
	}
}

func TestTriggerValidate(t *testing.T) {
	tests := []struct {
		name    string
		t       Trigger
		wantErr string
	}{
		{"default", Default(), ""},
		{"unset", Trigger{}, ""},
		{"never", Trigger{Kind: TriggerNever}, ""},
		{"after_watermark", AfterWatermark(nil, nil), ""},
		{"after_watermark early and late", AfterWatermark(ptr(AfterProcessingTime(mtime.Minute)), ptr(AfterCount(1))), ""},
		{"after_watermark bad early", AfterWatermark(ptr(AfterCount(0)), nil), "at least 1"},
		{"after_watermark bad late", AfterWatermark(nil, ptr(AfterProcessingTime(-1))), "non-negative delay"},
		{"after_count 1", AfterCount(1), ""},
		{"after_count 0", AfterCount(0), "at least 1"},
		{"after_count negative", AfterCount(-3), "at least 1"},
		{"after_count beyond 32 bits", AfterCount(math.MaxInt32 + 1), "at most 2147483647"},
		{"after_processing_time 0", AfterProcessingTime(0), ""},
		{"after_processing_time negative", AfterProcessingTime(-1), "non-negative delay"},
		{"repeatedly", Repeatedly(AfterCount(2)), ""},
		{"repeatedly of nothing", Trigger{Kind: TriggerRepeatedly}, "exactly one"},
		{"repeatedly of two", Trigger{Kind: TriggerRepeatedly, Triggers: []Trigger{AfterCount(1), AfterCount(2)}}, "exactly one"},
		{"repeatedly of a bad trigger", Repeatedly(AfterCount(0)), "at least 1"},
		{"after_any", AfterAny(AfterCount(1), AfterProcessingTime(1)), ""},
		{"after_any empty", AfterAny(), "at least one sub-trigger"},
		{"after_all empty", AfterAll(), "at least one sub-trigger"},
		{"after_any with a bad sub-trigger", AfterAny(AfterCount(1), AfterCount(0)), "at least 1"},
		{"deeply nested bad trigger", AfterAll(Repeatedly(AfterAny(AfterProcessingTime(-5)))), "non-negative delay"},
		{"unknown", Trigger{Kind: "after_pane"}, "unknown trigger type"},
		{"unknown nested", Repeatedly(Trigger{Kind: "sometimes"}), "unknown trigger type"},
		{"early on after_count", Trigger{Kind: TriggerAfterCount, Count: 1, Early: ptr(AfterCount(1))}, "only after_watermark"},
		{"late on default", Trigger{Kind: TriggerDefault, Late: ptr(AfterCount(1))}, "only after_watermark"},
		{"early on repeatedly", Trigger{Kind: TriggerRepeatedly, Triggers: []Trigger{AfterCount(1)}, Early: ptr(AfterCount(1))}, "only after_watermark"},
	}
	for _, tc := range tests {
		err := tc.t.Validate()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: Validate() = %v, want nil", tc.name, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: Validate() = %v, want error containing %q", tc.name, err, tc.wantErr)
		}
	}
}

func TestTriggerUsesWatermark(t *testing.T) {
	tests := []struct {
		name string
		t    Trigger
		want bool
	}{
		{"default", Default(), true},
		{"unset means default", Trigger{}, true},
		{"after_watermark", AfterWatermark(nil, nil), true},
		{"after_watermark with early", AfterWatermark(ptr(AfterCount(1)), nil), true},
		{"after_count", AfterCount(1), false},
		{"after_processing_time", AfterProcessingTime(1), false},
		{"never", Trigger{Kind: TriggerNever}, false},
		{"repeatedly(after_count)", Repeatedly(AfterCount(1)), false},
		{"repeatedly(after_watermark)", Repeatedly(AfterWatermark(nil, nil)), true},
		{"after_any(count, watermark)", AfterAny(AfterCount(5), AfterWatermark(nil, nil)), true},
		{"after_all(count, processing time)", AfterAll(AfterCount(5), AfterProcessingTime(1)), false},
	}
	for _, tc := range tests {
		if got := tc.t.UsesWatermark(); got != tc.want {
			t.Errorf("%s: UsesWatermark() = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestTriggerNewState(t *testing.T) {
	tests := []struct {
		name string
		t    Trigger
		want TriggerState
	}{
		{"default", Default(), TriggerState{}},
		{"after_count", AfterCount(3), TriggerState{}},
		{"after_watermark always has early and late slots", AfterWatermark(nil, nil), ts{Sub: []ts{{}, {}}}.state()},
		{"after_watermark nested", AfterWatermark(ptr(AfterAny(AfterCount(1), AfterCount(2))), nil),
			ts{Sub: []ts{{Sub: []ts{{}, {}}}, {}}}.state()},
		{"repeatedly", Repeatedly(AfterCount(2)), ts{Sub: []ts{{}}}.state()},
		{"after_all", AfterAll(AfterCount(2), Repeatedly(AfterCount(1))),
			ts{Sub: []ts{{}, {Sub: []ts{{}}}}}.state()},
	}
	for _, tc := range tests {
		if got := tc.t.NewState(); !reflect.DeepEqual(view(got), view(tc.want)) || (got.x == nil) != (tc.want.x == nil) {
			t.Errorf("%s: NewState() = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// trigStep is one step of a trigger-level scenario: optionally some elements
// arrive at processing time now, then the trigger is asked whether it fires
// with the watermark wm; if it does, OnFire is applied.
type trigStep struct {
	name     string
	elems    int
	wm, now  mtime.Time
	fire     bool
	onTime   bool       // OnFire's result, when fire
	finished bool       // state.Finished after the step
	deadline mtime.Time // NextDeadline after the step
}

func runTrigger(t *testing.T, tr Trigger, w Window, steps []trigStep) {
	t.Helper()
	if err := tr.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	st := tr.NewState()
	for i, s := range steps {
		for range s.elems {
			tr.OnElement(&st, s.now)
		}
		c := TriggerContext{Window: w, Watermark: s.wm, Now: s.now}
		fire := tr.ShouldFire(&st, c)
		if fire != s.fire {
			t.Fatalf("step %d %q: ShouldFire = %v, want %v (state %+v)", i, s.name, fire, s.fire, st)
		}
		if fire {
			if onTime := tr.OnFire(&st, c); onTime != s.onTime {
				t.Errorf("step %d %q: OnFire onTime = %v, want %v", i, s.name, onTime, s.onTime)
			}
		}
		if st.Finished != s.finished {
			t.Errorf("step %d %q: Finished = %v, want %v", i, s.name, st.Finished, s.finished)
		}
		if d := tr.NextDeadline(&st); d != s.deadline {
			t.Errorf("step %d %q: NextDeadline = %s, want %s", i, s.name, d, s.deadline)
		}
	}
}

func TestTriggers(t *testing.T) {
	w := win(at(0, 0), at(5, 0))
	end := at(5, 0) // first watermark past the end of w
	max := w.MaxTimestamp()
	inf := mtime.MaxTimestamp
	minusInf := mtime.MinTimestamp
	p := func(sec int) mtime.Time { return at(100, sec) } // processing times
	tests := []struct {
		name  string
		t     Trigger
		w     Window
		steps []trigStep
	}{
		{"default fires once the watermark is past the end, and at every later evaluation", Default(), w, []trigStep{
			{name: "element, watermark -inf", elems: 1, wm: minusInf},
			{name: "watermark before end", wm: at(4, 0)},
			{name: "watermark at MaxTimestamp is not past the end", elems: 1, wm: max},
			{name: "watermark past the end: on time", wm: end, fire: true, onTime: true},
			{name: "again: fires but not on time", wm: end, fire: true},
			{name: "late element", elems: 1, wm: at(5, 30), fire: true},
			{name: "+inf", wm: inf, fire: true},
		}},
		{"unset trigger kind behaves as default", Trigger{}, w, []trigStep{
			{name: "before end", elems: 1, wm: at(4, 0)},
			{name: "past end", wm: end, fire: true, onTime: true},
			{name: "again", wm: end, fire: true},
		}},
		{"never", Trigger{Kind: TriggerNever}, w, []trigStep{
			{name: "elements", elems: 10, wm: at(1, 0)},
			{name: "past end", wm: end},
			{name: "+inf", wm: inf},
		}},
		{"after_watermark without sub-triggers fires once, on time", AfterWatermark(nil, nil), w, []trigStep{
			{name: "element", elems: 1, wm: at(1, 0)},
			{name: "at MaxTimestamp", wm: max},
			{name: "past end", wm: end, fire: true, onTime: true, finished: true},
			{name: "late element: finished", elems: 1, wm: at(5, 30), finished: true},
		}},
		{"after_watermark, early after_count(2) repeats, late after_count(1) repeats",
			AfterWatermark(ptr(AfterCount(2)), ptr(AfterCount(1))), w, []trigStep{
				{name: "1st element", elems: 1, wm: at(1, 0)},
				{name: "2nd element: early firing", elems: 1, wm: at(1, 0), fire: true},
				{name: "3rd element: early count restarted", elems: 1, wm: at(2, 0)},
				{name: "4th element: early again", elems: 1, wm: at(2, 0), fire: true},
				{name: "5th element, nothing", elems: 1, wm: at(3, 0)},
				{name: "watermark past end: on time", wm: end, fire: true, onTime: true},
				{name: "no late element yet", wm: at(5, 10)},
				{name: "late element fires", elems: 1, wm: at(5, 20), fire: true},
				{name: "no new late element", wm: at(5, 30)},
				{name: "another late element fires", elems: 1, wm: at(5, 40), fire: true},
				{name: "two late elements fire once", elems: 2, wm: at(5, 50), fire: true},
			}},
		{"after_watermark: elements counted for early firings do not count as late ones",
			AfterWatermark(ptr(AfterCount(3)), ptr(AfterCount(2))), w, []trigStep{
				{name: "two early elements", elems: 2, wm: at(1, 0)},
				{name: "on time", wm: end, fire: true, onTime: true},
				{name: "one late element is not enough", elems: 1, wm: at(5, 10)},
				{name: "second late element fires", elems: 1, wm: at(5, 20), fire: true},
			}},
		{"after_watermark, on time wins over a pending early firing",
			AfterWatermark(ptr(AfterCount(1)), nil), w, []trigStep{
				{name: "element just before the on-time firing", elems: 1, wm: end, fire: true, onTime: true, finished: true},
			}},
		{"after_watermark with processing-time early and late firings",
			AfterWatermark(ptr(AfterProcessingTime(mtime.Minute)), ptr(AfterProcessingTime(30*mtime.Second))), w, []trigStep{
				{name: "element at p0 sets the early deadline", elems: 1, wm: at(1, 0), now: p(0), deadline: p(60)},
				{name: "another element keeps it", elems: 1, wm: at(1, 0), now: p(10), deadline: p(60)},
				{name: "before the deadline", wm: at(1, 0), now: p(59), deadline: p(60)},
				{name: "at the deadline: early firing", wm: at(1, 0), now: p(60), fire: true},
				{name: "no element, no deadline", wm: at(2, 0), now: p(200)},
				{name: "element at p210", elems: 1, wm: at(2, 0), now: p(210), deadline: p(270)},
				{name: "on time: early deadline dropped", wm: end, now: p(220), fire: true, onTime: true},
				{name: "late element at p300", elems: 1, wm: at(5, 10), now: p(300), deadline: p(330)},
				{name: "late deadline", wm: at(5, 10), now: p(330), fire: true},
			}},
		{"after_count(3) fires once", AfterCount(3), w, []trigStep{
			{name: "2 elements", elems: 2, wm: at(1, 0)},
			{name: "3rd element", elems: 1, wm: at(1, 0), fire: true, finished: true},
			{name: "more elements: finished", elems: 5, wm: at(2, 0), finished: true},
			{name: "watermark past end: finished", wm: inf, finished: true},
		}},
		{"after_count(1) with several elements at once", AfterCount(1), w, []trigStep{
			{name: "no element", wm: at(1, 0)},
			{name: "3 elements", elems: 3, wm: at(1, 0), fire: true, finished: true},
		}},
		{"after_processing_time(1m): deadline is the first element's time plus the delay",
			AfterProcessingTime(mtime.Minute), w, []trigStep{
				{name: "no element: never fires", wm: at(1, 0), now: p(600)},
				{name: "first element at p610", elems: 1, wm: at(1, 0), now: p(610), deadline: p(670)},
				{name: "second element does not move it", elems: 1, wm: at(1, 0), now: p(620), deadline: p(670)},
				{name: "1ms before", wm: at(1, 0), now: p(670) - 1, deadline: p(670)},
				{name: "at the deadline", wm: at(1, 0), now: p(670), fire: true, finished: true},
				{name: "later elements: finished", elems: 1, wm: at(1, 0), now: p(700), finished: true},
			}},
		{"after_processing_time ignores the watermark", AfterProcessingTime(mtime.Minute), w, []trigStep{
			{name: "element", elems: 1, wm: at(1, 0), now: p(0), deadline: p(60)},
			{name: "watermark +inf", wm: inf, now: p(1), deadline: p(60)},
			{name: "deadline", wm: inf, now: p(61), fire: true, finished: true},
		}},
		{"after_processing_time(0) at the epoch still fires", AfterProcessingTime(0), w, []trigStep{
			{name: "element at processing time 0", elems: 1, wm: at(1, 0), now: 0, deadline: 1},
			{name: "fires", wm: at(1, 0), now: 1, fire: true, finished: true},
		}},
		{"repeatedly(after_count(2))", Repeatedly(AfterCount(2)), w, []trigStep{
			{name: "1", elems: 1, wm: at(1, 0)},
			{name: "2 fires", elems: 1, wm: at(1, 0), fire: true},
			{name: "3", elems: 1, wm: at(1, 0)},
			{name: "4 fires", elems: 1, wm: at(1, 0), fire: true},
			{name: "5 and 6 fire once", elems: 2, wm: at(2, 0), fire: true},
			{name: "nothing", wm: inf},
		}},
		{"repeatedly(after_processing_time(1m))", Repeatedly(AfterProcessingTime(mtime.Minute)), w, []trigStep{
			{name: "element at p0", elems: 1, wm: at(1, 0), now: p(0), deadline: p(60)},
			{name: "fires at p60 and resets", wm: at(1, 0), now: p(60), fire: true},
			{name: "element at p90", elems: 1, wm: at(1, 0), now: p(90), deadline: p(150)},
			{name: "fires at p150", wm: at(1, 0), now: p(150), fire: true},
		}},
		{"repeatedly(after_watermark) acts as default", Repeatedly(AfterWatermark(nil, nil)), w, []trigStep{
			{name: "before end", elems: 1, wm: at(1, 0)},
			{name: "past end", wm: end, fire: true, onTime: true},
			{name: "again", elems: 1, wm: at(5, 30), fire: true, onTime: true},
		}},
		{"after_any(after_count(2), after_processing_time(1m)) by time", AfterAny(AfterCount(2), AfterProcessingTime(mtime.Minute)), w, []trigStep{
			{name: "element", elems: 1, wm: at(1, 0), now: p(0), deadline: p(60)},
			{name: "time", wm: at(1, 0), now: p(60), fire: true, finished: true},
			{name: "finished", elems: 5, wm: at(1, 0), now: p(120), finished: true},
		}},
		{"after_any(after_count(2), after_processing_time(1m)) by count", AfterAny(AfterCount(2), AfterProcessingTime(mtime.Minute)), w, []trigStep{
			{name: "element", elems: 1, wm: at(1, 0), now: p(0), deadline: p(60)},
			{name: "count", elems: 1, wm: at(1, 0), now: p(1), fire: true, finished: true},
			{name: "deadline passes: finished", wm: at(1, 0), now: p(60), finished: true},
		}},
		{"after_any(after_watermark, after_count(10)) is on time", AfterAny(AfterWatermark(nil, nil), AfterCount(10)), w, []trigStep{
			{name: "element", elems: 1, wm: at(1, 0)},
			{name: "end", wm: end, fire: true, onTime: true, finished: true},
		}},
		{"after_all(after_count(2), after_processing_time(1m))", AfterAll(AfterCount(2), AfterProcessingTime(mtime.Minute)), w, []trigStep{
			{name: "element at p0", elems: 1, wm: at(1, 0), now: p(0), deadline: p(60)},
			{name: "deadline passed, count not reached", wm: at(1, 0), now: p(60), deadline: p(60)},
			{name: "second element: both satisfied", elems: 1, wm: at(1, 0), now: p(61), fire: true, finished: true},
			{name: "finished", elems: 2, wm: at(1, 0), now: p(200), finished: true},
		}},
		{"after_all(after_watermark, after_count(2))", AfterAll(AfterWatermark(nil, nil), AfterCount(2)), w, []trigStep{
			{name: "element", elems: 1, wm: at(1, 0)},
			{name: "past end, 1 element", wm: end},
			{name: "late element", elems: 1, wm: at(5, 10), fire: true, onTime: true, finished: true},
		}},
		{"repeatedly(after_any(count, time)) resets both", Repeatedly(AfterAny(AfterCount(2), AfterProcessingTime(mtime.Minute))), w, []trigStep{
			{name: "element at p0", elems: 1, wm: at(1, 0), now: p(0), deadline: p(60)},
			{name: "count fires, deadline reset", elems: 1, wm: at(1, 0), now: p(10), fire: true},
			{name: "element at p20", elems: 1, wm: at(1, 0), now: p(20), deadline: p(80)},
			{name: "time fires at p80, count reset", wm: at(1, 0), now: p(80), fire: true},
			{name: "one element is not enough again", elems: 1, wm: at(1, 0), now: p(81), deadline: p(141)},
		}},
		{"global window fires at +inf only", Default(), Global, []trigStep{
			{name: "element", elems: 1, wm: at(1, 0)},
			{name: "watermark at the end of the global window", wm: mtime.EndOfGlobalWindow},
			{name: "+inf", wm: inf, fire: true, onTime: true},
		}},
		{"a window ending after the end of the global window fires at +inf",
			AfterWatermark(nil, nil), win(mtime.EndOfGlobalWindow, mtime.MaxTimestamp+mtime.Time(mtime.Hour)), []trigStep{
				{name: "element", elems: 1, wm: mtime.EndOfGlobalWindow},
				{name: "+inf", wm: inf, fire: true, onTime: true, finished: true},
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { runTrigger(t, tc.t, tc.w, tc.steps) })
	}
}

func TestTriggerNextDeadline(t *testing.T) {
	tests := []struct {
		name string
		t    Trigger
		st   TriggerState
		want mtime.Time
	}{
		{"no processing-time trigger", Default(), TriggerState{}, 0},
		{"after_processing_time unset", AfterProcessingTime(1), TriggerState{}, 0},
		{"after_processing_time set", AfterProcessingTime(1), ts{Deadline: 42}.state(), 42},
		{"finished", AfterProcessingTime(1), ts{Deadline: 42, Finished: true}.state(), 0},
		{"after_any takes the earliest", AfterAny(AfterProcessingTime(1), AfterProcessingTime(2), AfterCount(1)),
			ts{Sub: []ts{{Deadline: 50}, {Deadline: 40}, {Count: 1}}}.state(), 40},
		{"after_any skips unset", AfterAny(AfterProcessingTime(1), AfterProcessingTime(2)),
			ts{Sub: []ts{{}, {Deadline: 40}}}.state(), 40},
		{"after_any skips finished sub-triggers", AfterAny(AfterProcessingTime(1), AfterProcessingTime(2)),
			ts{Sub: []ts{{Deadline: 30, Finished: true}, {Deadline: 40}}}.state(), 40},
		{"repeatedly", Repeatedly(AfterProcessingTime(1)), ts{Sub: []ts{{Deadline: 7}}}.state(), 7},
		{"after_watermark early before on time", AfterWatermark(ptr(AfterProcessingTime(1)), ptr(AfterProcessingTime(1))),
			ts{Sub: []ts{{Deadline: 10}, {Deadline: 5}}}.state(), 10},
		{"after_watermark late after on time", AfterWatermark(ptr(AfterProcessingTime(1)), ptr(AfterProcessingTime(1))),
			ts{OnTimeFired: true, Sub: []ts{{Deadline: 10}, {Deadline: 20}}}.state(), 20},
		{"after_watermark without sub-triggers", AfterWatermark(nil, nil), ts{Sub: []ts{{}, {}}}.state(), 0},
	}
	for _, tc := range tests {
		st := tc.st
		if got := tc.t.NextDeadline(&st); got != tc.want {
			t.Errorf("%s: NextDeadline = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestTriggerMerge(t *testing.T) {
	tests := []struct {
		name     string
		t        Trigger
		dst, src TriggerState
		want     TriggerState
	}{
		{"counts add", AfterCount(5), ts{Count: 2}.state(), ts{Count: 1}.state(), ts{Count: 3}.state()},
		{"earliest deadline wins (src)", AfterProcessingTime(1), ts{Deadline: 500}.state(), ts{Deadline: 300}.state(), ts{Deadline: 300}.state()},
		{"earliest deadline wins (dst)", AfterProcessingTime(1), ts{Deadline: 300}.state(), ts{Deadline: 500}.state(), ts{Deadline: 300}.state()},
		{"unset deadline in dst", AfterProcessingTime(1), TriggerState{}, ts{Deadline: 300}.state(), ts{Deadline: 300}.state()},
		{"unset deadline in src", AfterProcessingTime(1), ts{Deadline: 300}.state(), TriggerState{}, ts{Deadline: 300}.state()},
		{"nested counts and deadlines", Repeatedly(AfterAny(AfterCount(3), AfterProcessingTime(1))),
			ts{Sub: []ts{{Sub: []ts{{Count: 2}, {Deadline: 900}}}}}.state(),
			ts{Sub: []ts{{Sub: []ts{{Count: 1}, {Deadline: 700}}}}}.state(),
			ts{Sub: []ts{{Sub: []ts{{Count: 3}, {Deadline: 700}}}}}.state()},
		{"after_watermark merges early and late", AfterWatermark(ptr(AfterCount(2)), ptr(AfterProcessingTime(1))),
			ts{Sub: []ts{{Count: 1}, {Deadline: 50}}}.state(),
			ts{Sub: []ts{{Count: 1}, {Deadline: 40}}}.state(),
			ts{Sub: []ts{{Count: 2}, {Deadline: 40}}}.state()},
		// Beam re-arms the on-time firing of a merged window unless every
		// merged window fired on time: the merged end is the latest end.
		{"on-time firing in src only is re-armed", AfterWatermark(nil, ptr(AfterCount(1))),
			ts{Sub: []ts{{}, {}}}.state(),
			ts{OnTimeFired: true, Sub: []ts{{}, {}}}.state(),
			ts{Sub: []ts{{}, {}}}.state()},
		{"on-time firing in dst only is re-armed", AfterWatermark(nil, ptr(AfterCount(1))),
			ts{OnTimeFired: true, Sub: []ts{{}, {}}}.state(),
			ts{Sub: []ts{{}, {}}}.state(),
			ts{Sub: []ts{{}, {}}}.state()},
		{"on-time firing in both stays fired", AfterWatermark(nil, ptr(AfterCount(1))),
			ts{OnTimeFired: true, Sub: []ts{{}, {}}}.state(),
			ts{OnTimeFired: true, Sub: []ts{{}, {}}}.state(),
			ts{OnTimeFired: true, Sub: []ts{{}, {}}}.state()},
		// A one-shot trigger that finished in either window stays finished:
		// its pane was already the last one (Beam's AfterPane.onMerge).
		{"finished after_count in src", AfterCount(2), ts{Count: 1}.state(), ts{Count: 2, Finished: true}.state(), ts{Finished: true}.state()},
		{"finished after_count in dst", AfterCount(2), ts{Count: 2, Finished: true}.state(), ts{Count: 1}.state(), ts{Finished: true}.state()},
		{"finished after_processing_time", AfterProcessingTime(1), ts{Deadline: 9}.state(), ts{Deadline: 5, Finished: true}.state(), ts{Finished: true}.state()},
		{"finished after_any", AfterAny(AfterCount(1)), ts{Sub: []ts{{}}}.state(), ts{Finished: true, Sub: []ts{{Count: 1, Finished: true}}}.state(),
			ts{Finished: true, Sub: []ts{{Finished: true}}}.state()},
		// An after_watermark trigger is still active if it is active in either window.
		{"after_watermark finished in one window only", AfterWatermark(nil, nil),
			ts{Sub: []ts{{}, {}}}.state(),
			ts{Finished: true, OnTimeFired: true, Sub: []ts{{}, {}}}.state(),
			ts{Sub: []ts{{}, {}}}.state()},
		{"after_watermark finished in both", AfterWatermark(nil, nil),
			ts{Finished: true, OnTimeFired: true, Sub: []ts{{}, {}}}.state(),
			ts{Finished: true, OnTimeFired: true, Sub: []ts{{}, {}}}.state(),
			ts{Finished: true, OnTimeFired: true, Sub: []ts{{}, {}}}.state()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := tc.dst
			tc.t.Merge(&dst, tc.src)
			if !reflect.DeepEqual(view(dst), view(tc.want)) {
				t.Errorf("Merge = %+v, want %+v", view(dst), view(tc.want))
			}
		})
	}
}

// TestTriggerMergeThenFire checks that merged state drives firing: two
// sessions with one element each merge into one with two.
func TestTriggerMergeThenFire(t *testing.T) {
	tr := Repeatedly(AfterAny(AfterCount(3), AfterProcessingTime(mtime.Minute)))
	a, b := tr.NewState(), tr.NewState()
	tr.OnElement(&a, at(100, 10))
	tr.OnElement(&a, at(100, 20))
	tr.OnElement(&b, at(100, 30))
	c := TriggerContext{Window: win(at(0, 0), at(20, 0)), Watermark: at(1, 0), Now: at(100, 30)}
	if tr.ShouldFire(&a, c) || tr.ShouldFire(&b, c) {
		t.Fatalf("unmerged states fire")
	}
	tr.Merge(&a, b)
	if got := tr.NextDeadline(&a); got != at(101, 10) {
		t.Errorf("merged NextDeadline = %s, want %s", got, at(101, 10))
	}
	if !tr.ShouldFire(&a, c) {
		t.Errorf("merged count 3 does not fire")
	}
}

// TestTriggerCountSaturates: the element count of a trigger's state stops
// at the largest after_count threshold instead of wrapping, on arrival, in
// a merge and when read from a state stored with a larger count.
func TestTriggerCountSaturates(t *testing.T) {
	tr := AfterCount(math.MaxInt32)
	st := ts{Count: math.MaxInt32 - 1}.state()
	tr.OnElement(&st, 0)
	tr.OnElement(&st, 0)
	if st.Count != math.MaxInt32 {
		t.Errorf("after two arrivals from MaxInt32-1 the count is %d", st.Count)
	}
	if !tr.ShouldFire(&st, TriggerContext{}) {
		t.Error("a count at the threshold does not fire")
	}
	dst := ts{Count: math.MaxInt32 - 5}.state()
	tr.Merge(&dst, ts{Count: 100}.state())
	if dst.Count != math.MaxInt32 {
		t.Errorf("merged count %d, want %d", dst.Count, math.MaxInt32)
	}
	// A count stored as a varint beyond 32 bits reads back clamped.
	big := State{}
	b := big.AppendBinary(nil)
	// Rewrite the trigger's count (after the state's flags, its next
	// index and the trigger's flags) as 1<<40.
	enc := append([]byte{}, b[:3]...)
	enc = binary.AppendVarint(enc, 1<<40)
	enc = append(enc, b[4:]...)
	var got State
	if _, err := got.DecodeBinary(enc); err != nil {
		t.Fatal(err)
	}
	if got.Trigger.Count != math.MaxInt32 {
		t.Errorf("a stored count of 1<<40 reads as %d, want %d", got.Trigger.Count, math.MaxInt32)
	}
}
