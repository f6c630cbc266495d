package await

import (
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	n := 0
	if !Until(time.Minute, time.Millisecond, func() bool { n++; return n == 3 }) || n != 3 {
		t.Errorf("Until stopped after %d calls, want 3 (the first that held)", n)
	}
	calls := 0
	if Until(5*time.Millisecond, time.Millisecond, func() bool { calls++; return false }) {
		t.Error("Until reported a condition that never held")
	}
	if calls < 2 {
		t.Errorf("cond called %d times, want at least the first and the last", calls)
	}
	if !Until(0, time.Hour, func() bool { return true }) {
		t.Error("a condition that holds at once")
	}
}
