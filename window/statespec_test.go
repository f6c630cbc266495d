package window

import "github.com/weir-dev/weir/mtime"

// ts is a trigger state written out field by field, for tests to build
// and compare: a TriggerState keeps its deadline and sub-triggers behind
// a pointer.
type ts struct {
	Count       int32
	Finished    bool
	OnTimeFired bool
	Deadline    mtime.Time
	Sub         []ts
}

// state returns the TriggerState s describes.
func (s ts) state() TriggerState {
	t := TriggerState{Count: s.Count, Finished: s.Finished, OnTimeFired: s.OnTimeFired}
	t.setDeadline(s.Deadline)
	if s.Sub != nil {
		sub := make([]TriggerState, len(s.Sub))
		for i, x := range s.Sub {
			sub[i] = x.state()
		}
		t.setSubs(sub)
	}
	return t
}

// view returns t written out (no sub-triggers and an empty list alike).
func view(t TriggerState) ts {
	v := ts{Count: t.Count, Finished: t.Finished, OnTimeFired: t.OnTimeFired, Deadline: t.Deadline()}
	for _, s := range t.Subs() {
		v.Sub = append(v.Sub, view(s))
	}
	return v
}

// ss is a window's state written out field by field.
type ss struct {
	Trigger       TriggerState
	NextIndex     int64
	NewData       bool
	HasData       bool
	NonEarlyFired bool
	Closed        bool
	Marks         uint8
}

// state returns the State s describes.
func (s ss) state() State {
	st := State{Trigger: s.Trigger, NextIndex: s.NextIndex}
	st.setFlag(flagNewData, s.NewData)
	st.setFlag(flagHasData, s.HasData)
	st.setFlag(flagNonEarlyFired, s.NonEarlyFired)
	st.setFlag(flagClosed, s.Closed)
	st.SetMarks(s.Marks)
	return st
}

// stateView is a State written out, for comparisons.
type stateView struct {
	Trigger                                 ts
	NextIndex                               int64
	NewData, HasData, NonEarlyFired, Closed bool
	Marks                                   uint8
}

// sview returns st written out.
func sview(st State) stateView {
	return stateView{Trigger: view(st.Trigger), NextIndex: st.NextIndex, NewData: st.NewData(), HasData: st.HasData(),
		NonEarlyFired: st.NonEarlyFired(), Closed: st.Closed(), Marks: st.Marks()}
}

// clone returns a deep copy of st, through its encoding (which drops
// the runner's marks).
func clone(st State) State {
	var out State
	if _, err := out.DecodeBinary(st.AppendBinary(nil)); err != nil {
		panic(err)
	}
	return out
}
