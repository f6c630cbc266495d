package window

import (
	"reflect"
	"testing"
)

func TestStateBinaryRoundTrip(t *testing.T) {
	early, late := AfterCount(2), AfterProcessingTime(5000)
	tests := []State{
		{},
		{NewData: true, HasData: true, NextIndex: 3},
		{Closed: true, NonEarlyFired: true, NextIndex: 1 << 40, Trigger: TriggerState{Finished: true, Count: -1}},
		{HasData: true, Trigger: AfterWatermark(&early, &late).NewState()},
		{Trigger: TriggerState{OnTimeFired: true, Sub: subs([]TriggerState{{Count: 5}, {Deadline: 1767225600000, Sub: subs([]TriggerState{{Finished: true}})}})}},
	}
	for i, st := range tests {
		b := st.AppendBinary(nil)
		var got State
		rest, err := got.DecodeBinary(append(b, 0xAA))
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if len(rest) != 1 || rest[0] != 0xAA {
			t.Errorf("case %d: rest %v", i, rest)
		}
		if !reflect.DeepEqual(normalise(got), normalise(st)) {
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

// normalise makes empty and nil sub-trigger lists compare equal.
func normalise(st State) State {
	st.Trigger = normaliseT(st.Trigger)
	return st
}

func normaliseT(t TriggerState) TriggerState {
	if len(t.subs()) == 0 {
		t.Sub = nil
		return t
	}
	sub := make([]TriggerState, len(*t.Sub))
	for i, st := range *t.Sub {
		sub[i] = normaliseT(st)
	}
	t.Sub = &sub
	return t
}

func FuzzStateDecode(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0})
	f.Add((&State{HasData: true, Trigger: TriggerState{Sub: subs([]TriggerState{{}, {}})}}).AppendBinary(nil))
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
