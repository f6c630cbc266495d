package window

import (
	"reflect"
	"testing"
	"unsafe"

	"github.com/weir-dev/weir/mtime"
)

func TestStateBinaryRoundTrip(t *testing.T) {
	early, late := AfterCount(2), AfterProcessingTime(5000)
	tests := []ss{
		{},
		{NewData: true, HasData: true, NextIndex: 3},
		{Closed: true, NonEarlyFired: true, NextIndex: 1 << 40, Trigger: ts{Finished: true, Count: -1}.state()},
		{HasData: true, Trigger: AfterWatermark(&early, &late).NewState()},
		{Trigger: ts{OnTimeFired: true, Sub: []ts{{Count: 5}, {Deadline: 1767225600000, Sub: []ts{{Finished: true}}}}}.state()},
	}
	for i, spec := range tests {
		st := spec.state()
		b := st.AppendBinary(nil)
		var got State
		rest, err := got.DecodeBinary(append(b, 0xAA))
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if len(rest) != 1 || rest[0] != 0xAA {
			t.Errorf("case %d: rest %v", i, rest)
		}
		if !reflect.DeepEqual(sview(got), sview(st)) {
			t.Errorf("case %d: got %+v, want %+v", i, got, st)
		}
		for cut := 0; cut < len(b); cut++ {
			var s State
			if _, err := s.DecodeBinary(b[:cut]); err == nil {
				t.Errorf("case %d: a truncated encoding (%d of %d bytes) decoded", i, cut, len(b))
			}
		}
	}
}

func FuzzStateDecode(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0})
	st := ss{HasData: true, Trigger: ts{Sub: []ts{{}, {}}}.state()}.state()
	f.Add(st.AppendBinary(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		var st State
		if _, err := st.DecodeBinary(b); err == nil {
			// Whatever decodes must re-encode to something that decodes.
			var again State
			if _, err := again.DecodeBinary(st.AppendBinary(nil)); err != nil {
				t.Fatalf("re-decoding failed: %v", err)
			}
		}
	})
}

// TestStateSize: every window of every key holds a State, so it stays at
// 24 bytes (40 before the trigger's deadline and sub-triggers went behind
// one pointer and the window's flags into the trigger state's spare
// bytes).
func TestStateSize(t *testing.T) {
	if n := unsafe.Sizeof(TriggerState{}); n > 16 {
		t.Errorf("TriggerState is %d bytes, want at most 16", n)
	}
	if n := unsafe.Sizeof(State{}); n > 24 {
		t.Errorf("State is %d bytes, want at most 24", n)
	}
}

// TestRepeatingTriggerKeepsItsMemory: a repeating processing-time trigger
// that fires resets its state in place: its deadline is unset again, and
// firing allocates nothing once the state holds a deadline.
func TestRepeatingTriggerKeepsItsMemory(t *testing.T) {
	tr := Repeatedly(AfterProcessingTime(mtime.Second))
	st := tr.NewState()
	c := TriggerContext{Window: Global, Watermark: mtime.MinTimestamp}
	now := mtime.Time(1)
	round := func() {
		tr.OnElement(&st, now)
		c.Now = now + mtime.Time(mtime.Second)
		if !tr.ShouldFire(&st, c) {
			t.Fatalf("the trigger does not fire a second after its element at %s", now)
		}
		tr.OnFire(&st, c)
		if d := tr.NextDeadline(&st); d != 0 || st.Subs()[0].Deadline() != 0 {
			t.Fatalf("after firing the deadline is %s, want unset", d)
		}
		now += mtime.Time(2 * mtime.Second)
	}
	round()
	if n := testing.AllocsPerRun(100, round); n != 0 {
		t.Errorf("a firing allocates %.1f times, want 0", n)
	}
}
