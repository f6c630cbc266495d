package runner

import (
	"testing"

	"github.com/weir-dev/weir/mtime"
)

// TestFarTimers: timers at or after the end of the global window are kept
// out of the heap and counted, are due only once the watermark passes the
// earliest of them (or the input ends), and go to the heap once loaded;
// joining instances (a rescale) keeps the earliest and the count.
func TestFarTimers(t *testing.T) {
	end := mtime.EndOfGlobalWindow
	tests := []struct {
		name     string
		times    []mtime.Time
		kept     int
		wm       mtime.Time
		wantDue  bool
		joinWith *farTimers
	}{
		{name: "near timers go to the heap", times: []mtime.Time{0, end - 1}, kept: 0, wm: mtime.MaxTimestamp, wantDue: false},
		{name: "global window: not due at a late watermark", times: []mtime.Time{end, mtime.MaxTimestamp}, kept: 2, wm: end, wantDue: false},
		{name: "due past the earliest", times: []mtime.Time{mtime.MaxTimestamp, end}, kept: 2, wm: end + 1, wantDue: true},
		{name: "due at the input's end", times: []mtime.Time{mtime.MaxTimestamp}, kept: 1, wm: mtime.MaxTimestamp, wantDue: true},
		{name: "a join brings an earlier one", times: []mtime.Time{mtime.MaxTimestamp}, kept: 1, wm: end + 1, wantDue: true,
			joinWith: &farTimers{n: 3, min: end}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var f farTimers
			kept := 0
			for _, tm := range tc.times {
				if f.keep(tm) {
					kept++
				}
			}
			if tc.joinWith != nil {
				f.join(*tc.joinWith)
				kept += tc.joinWith.n
			}
			if kept != tc.kept+n(tc.joinWith) || f.n != kept {
				t.Fatalf("kept %d (count %d), want %d", kept, f.n, tc.kept+n(tc.joinWith))
			}
			if got := f.due(tc.wm); got != tc.wantDue {
				t.Fatalf("due at %d: %v, want %v", tc.wm, got, tc.wantDue)
			}
			f.loaded()
			if f.n != 0 || f.due(mtime.MaxTimestamp) || f.keep(mtime.MaxTimestamp) {
				t.Fatalf("after loading: count %d, due %v; a later timer must go to the heap", f.n, f.due(mtime.MaxTimestamp))
			}
		})
	}
}

func n(f *farTimers) int {
	if f == nil {
		return 0
	}
	return f.n
}
