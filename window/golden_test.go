package window

import (
	"encoding/hex"
	"testing"

	"github.com/weir-dev/weir/mtime"
)

// goldenStates builds window states through the machine alone (no field
// of State named), so that the same steps give the stored bytes of any
// version: the default trigger, after_count, a repeating processing-time
// trigger, after_watermark with early and late firings, and after_all.
func goldenStates() map[string]State {
	sec := func(n int64) mtime.Time { return mtime.Time(n * 1000) }
	w := Window{Start: 0, End: sec(60)}
	out := map[string]State{}
	run := func(name string, tr Trigger, steps func(m *Machine, st *State)) {
		m := NewMachine(Strategy{Fn: FixedFn(mtime.Minute), Trigger: tr, AllowedLateness: mtime.Hour})
		st := m.NewState()
		steps(m, &st)
		out[name] = st
	}
	run("default", Default(), func(m *Machine, st *State) {
		m.OnElement(st, sec(1))
		m.Evaluate(st, w, sec(70), sec(2))
		m.OnElement(st, sec(3))
	})
	run("after_count", Repeatedly(AfterCount(3)), func(m *Machine, st *State) {
		for i := range int64(4) {
			m.OnElement(st, sec(i))
			m.Evaluate(st, w, sec(10), sec(i))
		}
	})
	run("processing_time", Repeatedly(AfterProcessingTime(5*mtime.Second)), func(m *Machine, st *State) {
		m.OnElement(st, sec(1))
		m.Evaluate(st, w, sec(10), sec(7))
		m.OnElement(st, sec(8))
	})
	early, late := AfterProcessingTime(mtime.Second), AfterCount(2)
	run("after_watermark", AfterWatermark(&early, &late), func(m *Machine, st *State) {
		m.OnElement(st, sec(1))
		m.Evaluate(st, w, sec(10), sec(3))
		m.OnElement(st, sec(4))
		m.Evaluate(st, w, sec(61), sec(5))
		m.OnElement(st, sec(6))
	})
	run("after_all", AfterAll(AfterCount(2), AfterProcessingTime(mtime.Second)), func(m *Machine, st *State) {
		m.OnElement(st, sec(1))
		m.OnElement(st, sec(2))
		m.Evaluate(st, w, sec(10), sec(4))
	})
	return out
}

// TestStateBytesAreStable: the stored encoding of a window's state does
// not change with its layout in memory (these bytes were written by the
// version whose state was 40 bytes).
func TestStateBytesAreStable(t *testing.T) {
	want := map[string]string{
		"after_all":       "0a0201000002010400000100a01f00",
		"after_count":     "03020000000100020000",
		"after_watermark": "0704020000020000904e0000020000",
		"default":         "070202000000",
		"processing_time": "030200000001000090cb0100",
	}
	for name, st := range goldenStates() {
		b := st.AppendBinary(nil)
		if got := hex.EncodeToString(b); got != want[name] {
			t.Errorf("%s: encoded %s, want %s", name, got, want[name])
		}
		var back State
		if _, err := back.DecodeBinary(b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if again := hex.EncodeToString(back.AppendBinary(nil)); again != want[name] {
			t.Errorf("%s: re-encoded %s, want %s", name, again, want[name])
		}
	}
}
