package window

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/weir-dev/weir/mtime"
)

// day0 is the reference fixture's date; at(m, s) is m minutes and s seconds
// into it.
var day0 = func() mtime.Time {
	t, err := mtime.Parse("2026-03-01T00:00:00Z")
	if err != nil {
		panic(err)
	}
	return t
}()

func at(min, sec int) mtime.Time {
	return day0.Add(mtime.Duration(min)*mtime.Minute + mtime.Duration(sec)*mtime.Second)
}

// mins is a short way to write epoch-relative times and durations in minutes.
func mins(m int64) mtime.Time { return mtime.Time(m * int64(mtime.Minute)) }

func win(start, end mtime.Time) Window { return Window{Start: start, End: end} }

func TestWindowMethods(t *testing.T) {
	w := win(at(0, 0), at(5, 0))
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"MaxTimestamp is End-1ms", w.MaxTimestamp(), at(5, 0) - 1},
		{"global MaxTimestamp", Global.MaxTimestamp(), mtime.EndOfGlobalWindow},
		{"global spans all of time", Global, Window{Start: mtime.MinTimestamp, End: mtime.MaxTimestamp}},
		{"IsGlobal(global)", Global.IsGlobal(), true},
		{"IsGlobal(fixed)", w.IsGlobal(), false},
		{"contains start", w.Contains(at(0, 0)), true},
		{"contains MaxTimestamp", w.Contains(w.MaxTimestamp()), true},
		{"excludes end", w.Contains(at(5, 0)), false},
		{"excludes before start", w.Contains(at(0, 0) - 1), false},
		{"global contains -inf", Global.Contains(mtime.MinTimestamp), true},
		{"global contains end of global window", Global.Contains(mtime.EndOfGlobalWindow), true},
		{"overlapping intersect", w.Intersects(win(at(4, 0), at(9, 0))), true},
		{"contained intersect", w.Intersects(win(at(1, 0), at(2, 0))), true},
		{"touching windows do not intersect", w.Intersects(win(at(5, 0), at(10, 0))), false},
		{"touching windows do not intersect (other side)", win(at(5, 0), at(10, 0)).Intersects(w), false},
		{"disjoint", w.Intersects(win(at(6, 0), at(7, 0))), false},
		{"1ms overlap intersects", w.Intersects(win(at(5, 0)-1, at(6, 0))), true},
		{"span of overlapping", w.Span(win(at(3, 0), at(8, 0))), win(at(0, 0), at(8, 0))},
		{"span of disjoint", win(at(10, 0), at(12, 0)).Span(w), win(at(0, 0), at(12, 0))},
		{"span of contained", w.Span(win(at(1, 0), at(2, 0))), w},
		{"String", w.String(), "[2026-03-01T00:00:00.000Z, 2026-03-01T00:05:00.000Z)"},
		{"String of global", Global.String(), "[global]"},
		{"String of negative window", win(-5*mtime.Time(mtime.Minute), 0).String(), "[1969-12-31T23:55:00.000Z, 1970-01-01T00:00:00.000Z)"},
	}
	for _, tc := range tests {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

func TestFixedAssign(t *testing.T) {
	m := mins
	tests := []struct {
		name   string
		size   mtime.Duration
		offset mtime.Duration
		t      mtime.Time
		want   Window
	}{
		{"start of window", 5 * mtime.Minute, 0, at(0, 0), win(at(0, 0), at(5, 0))},
		{"fixture 00:01", 5 * mtime.Minute, 0, at(1, 0), win(at(0, 0), at(5, 0))},
		{"fixture 00:03", 5 * mtime.Minute, 0, at(3, 0), win(at(0, 0), at(5, 0))},
		{"fixture 00:04", 5 * mtime.Minute, 0, at(4, 0), win(at(0, 0), at(5, 0))},
		{"last millisecond", 5 * mtime.Minute, 0, at(5, 0) - 1, win(at(0, 0), at(5, 0))},
		{"exactly 00:05 belongs to the next window", 5 * mtime.Minute, 0, at(5, 0), win(at(5, 0), at(10, 0))},
		{"epoch", 5 * mtime.Minute, 0, 0, win(0, m(5))},
		{"1ms before the epoch", 5 * mtime.Minute, 0, -1, win(m(-5), 0)},
		{"negative boundary", 5 * mtime.Minute, 0, m(-5), win(m(-5), 0)},
		{"just before a negative boundary", 5 * mtime.Minute, 0, m(-5) - 1, win(m(-10), m(-5))},
		{"far negative", 5 * mtime.Minute, 0, m(-1_000_001), win(m(-1_000_005), m(-1_000_000))},
		{"offset 1m", 5 * mtime.Minute, mtime.Minute, m(0) + 30_000, win(m(-4), m(1))},
		{"offset 1m at boundary", 5 * mtime.Minute, mtime.Minute, m(1), win(m(1), m(6))},
		{"offset 1m just before boundary", 5 * mtime.Minute, mtime.Minute, m(1) - 1, win(m(-4), m(1))},
		{"negative offset", 5 * mtime.Minute, -mtime.Minute, 0, win(m(-1), m(4))},
		{"negative offset at boundary", 5 * mtime.Minute, -mtime.Minute, m(4), win(m(4), m(9))},
		{"negative offset, negative time", 5 * mtime.Minute, -mtime.Minute, m(-1) - 1, win(m(-6), m(-1))},
		{"offset larger than size (7m = 2m)", 5 * mtime.Minute, 7 * mtime.Minute, 0, win(m(-3), m(2))},
		{"offset equal to size", 5 * mtime.Minute, 5 * mtime.Minute, m(2), win(0, m(5))},
		{"size 1ms", 1, 0, 12345, win(12345, 12346)},
		{"hourly", mtime.Hour, 0, at(59, 59), win(at(0, 0), at(60, 0))},
		{"daily with offset", 24 * mtime.Hour, 2 * mtime.Hour, at(60, 0), win(at(-22*60, 0), at(2*60, 0))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := FixedFn(tc.size)
			f.Offset = tc.offset
			if err := f.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			prefix := []Window{Global}
			got := f.Assign(prefix, tc.t)
			if want := []Window{Global, tc.want}; !reflect.DeepEqual(got, want) {
				t.Errorf("Assign(%d) = %v, want %v", tc.t, got, want)
			}
			one, ok := f.AssignOne(tc.t)
			if !ok || one != tc.want {
				t.Errorf("AssignOne(%d) = %v, %v, want %v, true", tc.t, one, ok, tc.want)
			}
			if !one.Contains(tc.t) {
				t.Errorf("window %v does not contain %d", one, tc.t)
			}
		})
	}
}

func TestFixedAssignNearEndOfGlobalWindow(t *testing.T) {
	// As in Beam, the last fixed window is truncated so that it ends with the
	// global window: its MaxTimestamp is never past EndOfGlobalWindow, so the
	// watermark +inf is past its end and it can fire on time.
	eogw := mtime.EndOfGlobalWindow
	for _, size := range []mtime.Duration{mtime.Minute, 7 * 24 * mtime.Hour, 365 * 24 * mtime.Hour} {
		f := FixedFn(size)
		for _, ts := range []mtime.Time{eogw, eogw - 1, eogw - mtime.Time(size)/2} {
			w, _ := f.AssignOne(ts)
			if !w.Contains(ts) {
				t.Errorf("size %s: window %v does not contain %d", size, w, ts)
			}
			if w.MaxTimestamp() > eogw {
				t.Errorf("size %s, t=%d: window MaxTimestamp %d is past EndOfGlobalWindow %d", size, ts, w.MaxTimestamp(), eogw)
			}
			if got := f.Assign(nil, ts); len(got) != 1 || got[0] != w {
				t.Errorf("Assign = %v, AssignOne = %v", got, w)
			}
		}
	}
	// Windows well before the end are untouched.
	w, _ := FixedFn(7 * 24 * mtime.Hour).AssignOne(0)
	if w.End-w.Start != mtime.Time(7*24*mtime.Hour) {
		t.Errorf("ordinary window %v was truncated", w)
	}
}

func TestSlidingAssign(t *testing.T) {
	m := mins
	tests := []struct {
		name                 string
		size, period, offset mtime.Duration
		t                    mtime.Time
		want                 []Window
	}{
		{"size 10m period 5m", 10 * mtime.Minute, 5 * mtime.Minute, 0, m(7),
			[]Window{win(m(5), m(15)), win(m(0), m(10))}},
		{"at a period boundary", 10 * mtime.Minute, 5 * mtime.Minute, 0, m(5),
			[]Window{win(m(5), m(15)), win(m(0), m(10))}},
		{"just before a boundary", 10 * mtime.Minute, 5 * mtime.Minute, 0, m(5) - 1,
			[]Window{win(m(0), m(10)), win(m(-5), m(5))}},
		{"negative time", 10 * mtime.Minute, 5 * mtime.Minute, 0, -1,
			[]Window{win(m(-5), m(5)), win(m(-10), m(0))}},
		{"period does not divide size", 10 * mtime.Minute, 3 * mtime.Minute, 0, m(7),
			[]Window{win(m(6), m(16)), win(m(3), m(13)), win(m(0), m(10))}},
		{"period does not divide size, 4 windows", 10 * mtime.Minute, 3 * mtime.Minute, 0, m(0),
			[]Window{win(m(0), m(10)), win(m(-3), m(7)), win(m(-6), m(4)), win(m(-9), m(1))}},
		{"with offset", 10 * mtime.Minute, 5 * mtime.Minute, mtime.Minute, m(7),
			[]Window{win(m(6), m(16)), win(m(1), m(11))}},
		{"with negative offset", 10 * mtime.Minute, 5 * mtime.Minute, -mtime.Minute, m(4),
			[]Window{win(m(4), m(14)), win(m(-1), m(9))}},
		{"size equals period is fixed", 5 * mtime.Minute, 5 * mtime.Minute, 0, m(7),
			[]Window{win(m(5), m(10))}},
		{"hourly windows every 15 minutes", mtime.Hour, 15 * mtime.Minute, 0, m(61),
			[]Window{win(m(60), m(120)), win(m(45), m(105)), win(m(30), m(90)), win(m(15), m(75))}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := SlidingFn(tc.size, tc.period)
			f.Offset = tc.offset
			if err := f.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			got := f.Assign(nil, tc.t)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Assign(%d) = %v, want %v", tc.t, got, tc.want)
			}
			if _, ok := f.AssignOne(tc.t); ok {
				t.Errorf("AssignOne of sliding windows reported ok")
			}
		})
	}
}

// TestAssignProperties checks, for many timestamps, that an element belongs
// to exactly the windows of the function that contain it.
func TestAssignProperties(t *testing.T) {
	fns := []Fn{
		FixedFn(5 * mtime.Minute),
		{Kind: KindFixed, Size: 5 * mtime.Minute, Offset: 2 * mtime.Minute},
		{Kind: KindFixed, Size: 5 * mtime.Minute, Offset: -7 * mtime.Minute},
		{Kind: KindFixed, Size: 7, Offset: 3},
		SlidingFn(10*mtime.Minute, 5*mtime.Minute),
		SlidingFn(10*mtime.Minute, 3*mtime.Minute),
		{Kind: KindSliding, Size: 10 * mtime.Minute, Period: 4 * mtime.Minute, Offset: -mtime.Minute},
		SlidingFn(7, 2),
		SlidingFn(6, 6),
	}
	for _, f := range fns {
		period := f.Period
		if f.Kind == KindFixed {
			period = f.Size
		}
		for ts := mtime.Time(-25 * mtime.Minute); ts <= mtime.Time(25*mtime.Minute); ts += 997 {
			got := f.Assign(nil, ts)
			// Every window whose start is offset+k*period and that contains ts.
			var want []Window
			first := ts - mtime.Time(floorMod(int64(ts)-int64(f.Offset), int64(period)))
			for s := first; s+mtime.Time(f.Size) > ts; s -= mtime.Time(period) {
				want = append(want, win(s, s+mtime.Time(f.Size)))
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%+v: Assign(%d) = %v, want %v", f, ts, got, want)
			}
			for _, w := range got {
				if !w.Contains(ts) || w.End-w.Start != mtime.Time(f.Size) {
					t.Fatalf("%+v: window %v for %d", f, w, ts)
				}
				if floorMod(int64(w.Start)-int64(f.Offset), int64(period)) != 0 {
					t.Fatalf("%+v: window %v does not start on a period boundary", f, w)
				}
			}
			wantN := int(f.Size / period)
			if len(got) < wantN || len(got) > wantN+1 {
				t.Fatalf("%+v: %d windows for %d, want %d or %d", f, len(got), ts, wantN, wantN+1)
			}
		}
	}
}

func TestSessionsGlobalAssign(t *testing.T) {
	tests := []struct {
		name  string
		f     Fn
		t     mtime.Time
		want  Window
		merge bool
	}{
		{"session is [t, t+gap)", SessionsFn(10 * mtime.Minute), at(3, 0), win(at(3, 0), at(13, 0)), true},
		{"session before the epoch", SessionsFn(mtime.Minute), -1, win(-1, mins(1)-1), true},
		{"session with 1ms gap", SessionsFn(1), 42, win(42, 43), true},
		{"global", GlobalFn(), at(3, 0), Global, false},
		{"global at -inf", GlobalFn(), mtime.MinTimestamp, Global, false},
		{"global at end of global window", GlobalFn(), mtime.EndOfGlobalWindow, Global, false},
		{"unset kind is global", Fn{}, at(3, 0), Global, false},
		{"fixed does not merge", FixedFn(mtime.Minute), 0, win(0, mins(1)), false},
	}
	for _, tc := range tests {
		got := tc.f.Assign(nil, tc.t)
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s: Assign = %v, want [%v]", tc.name, got, tc.want)
		}
		one, ok := tc.f.AssignOne(tc.t)
		if !ok || one != tc.want {
			t.Errorf("%s: AssignOne = %v, %v, want %v, true", tc.name, one, ok, tc.want)
		}
		if tc.f.IsMerging() != tc.merge {
			t.Errorf("%s: IsMerging = %v, want %v", tc.name, tc.f.IsMerging(), tc.merge)
		}
	}
	if SlidingFn(2, 1).IsMerging() {
		t.Errorf("sliding windows reported merging")
	}
}

func TestFnConstructors(t *testing.T) {
	tests := []struct {
		got, want Fn
	}{
		{GlobalFn(), Fn{Kind: KindGlobal}},
		{FixedFn(5), Fn{Kind: KindFixed, Size: 5}},
		{SlidingFn(10, 5), Fn{Kind: KindSliding, Size: 10, Period: 5}},
		{SessionsFn(7), Fn{Kind: KindSessions, Gap: 7}},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("got %+v, want %+v", tc.got, tc.want)
		}
	}
}

func TestFnValidate(t *testing.T) {
	tests := []struct {
		name    string
		f       Fn
		wantErr string
	}{
		{"global", GlobalFn(), ""},
		{"unset", Fn{}, ""},
		{"fixed", FixedFn(mtime.Minute), ""},
		{"fixed with negative offset", Fn{Kind: KindFixed, Size: mtime.Minute, Offset: -1}, ""},
		{"fixed size 0", FixedFn(0), "positive size"},
		{"fixed negative size", FixedFn(-1), "positive size"},
		{"sliding", SlidingFn(10, 5), ""},
		{"sliding size equals period", SlidingFn(5, 5), ""},
		{"sliding period 0", SlidingFn(10, 0), "positive"},
		{"sliding size 0", SlidingFn(0, 5), "positive"},
		{"sliding negative period", SlidingFn(10, -5), "positive"},
		{"sliding period longer than size", SlidingFn(5, 10), "longer than its size"},
		{"sliding in MaxSlidingWindows windows", SlidingFn(MaxSlidingWindows*5, 5), ""},
		{"sliding in one window more", SlidingFn(MaxSlidingWindows*5+1, 5), "more than the 10000 allowed"},
		{"sliding an hour every millisecond", SlidingFn(mtime.Hour, 1), "3600000 windows"},
		{"sessions", SessionsFn(mtime.Minute), ""},
		{"sessions gap 0", SessionsFn(0), "positive gap"},
		{"sessions negative gap", SessionsFn(-1), "positive gap"},
		{"unknown", Fn{Kind: "tumbling"}, "unknown window type"},
	}
	for _, tc := range tests {
		err := tc.f.Validate()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: Validate() = %v, want nil", tc.name, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: Validate() = %v, want error containing %q", tc.name, err, tc.wantErr)
		}
	}
}

func TestStrategyDefaults(t *testing.T) {
	d := DefaultStrategy()
	want := Strategy{Fn: GlobalFn(), Trigger: Default(), Accumulation: Discarding, TimestampCombiner: EndOfWindow}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("DefaultStrategy() = %+v, want %+v", d, want)
	}
	if err := d.Validate(); err != nil {
		t.Errorf("DefaultStrategy().Validate() = %v", err)
	}

	var zero Strategy
	zero.EnsureDefaults()
	if !reflect.DeepEqual(zero, want) {
		t.Errorf("zero Strategy after EnsureDefaults = %+v, want %+v", zero, want)
	}

	set := Strategy{
		Fn:                FixedFn(mtime.Minute),
		Trigger:           AfterCount(3),
		Accumulation:      Accumulating,
		AllowedLateness:   mtime.Hour,
		TimestampCombiner: Earliest,
	}
	got := set
	got.EnsureDefaults()
	if !reflect.DeepEqual(got, set) {
		t.Errorf("EnsureDefaults changed set fields: %+v, want %+v", got, set)
	}
}

func TestStrategyValidate(t *testing.T) {
	ok := DefaultStrategy()
	tests := []struct {
		name    string
		mod     func(*Strategy)
		wantErr string
	}{
		{"default", func(*Strategy) {}, ""},
		{"zero value", func(s *Strategy) { *s = Strategy{} }, ""},
		{"fixed, accumulating, lateness", func(s *Strategy) {
			s.Fn, s.Accumulation, s.AllowedLateness = FixedFn(mtime.Minute), Accumulating, mtime.Minute
		}, ""},
		{"bad window fn", func(s *Strategy) { s.Fn = FixedFn(0) }, "positive size"},
		{"negative lateness", func(s *Strategy) { s.AllowedLateness = -1 }, "allowed lateness is negative"},
		{"bad accumulation", func(s *Strategy) { s.Accumulation = "retracting" }, "unknown accumulation mode"},
		{"bad combiner", func(s *Strategy) { s.TimestampCombiner = "median" }, "unknown timestamp combiner"},
		{"latest combiner", func(s *Strategy) { s.TimestampCombiner = Latest }, ""},
		{"bad trigger", func(s *Strategy) { s.Trigger = AfterCount(0) }, "at least 1"},
		{"bad nested trigger", func(s *Strategy) {
			late := Repeatedly(AfterCount(0))
			s.Trigger = AfterWatermark(nil, &late)
		}, "at least 1"},
	}
	for _, tc := range tests {
		s := ok
		tc.mod(&s)
		err := s.Validate()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: Validate() = %v, want nil", tc.name, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: Validate() = %v, want error containing %q", tc.name, err, tc.wantErr)
		}
	}
}

func TestStrategyGCTimeAndExpired(t *testing.T) {
	w := win(at(0, 0), at(5, 0))
	late := Strategy{AllowedLateness: mtime.Minute}
	none := Strategy{}
	tests := []struct {
		name    string
		s       Strategy
		w       Window
		wm      mtime.Time
		gc      mtime.Time
		expired bool
	}{
		{"before the end", late, w, at(4, 0), at(6, 0) - 1, false},
		{"at MaxTimestamp", late, w, at(5, 0) - 1, at(6, 0) - 1, false},
		{"past the end, within lateness", late, w, at(5, 20), at(6, 0) - 1, false},
		{"exactly at GC time is not expired", late, w, at(6, 0) - 1, at(6, 0) - 1, false},
		{"past 00:06 is expired", late, w, at(6, 0), at(6, 0) - 1, true},
		{"+inf", late, w, mtime.MaxTimestamp, at(6, 0) - 1, true},
		{"-inf", late, w, mtime.MinTimestamp, at(6, 0) - 1, false},
		{"no lateness, at MaxTimestamp", none, w, at(5, 0) - 1, at(5, 0) - 1, false},
		{"no lateness, at end", none, w, at(5, 0), at(5, 0) - 1, true},
		{"global, no lateness, at end of global window", none, Global, mtime.EndOfGlobalWindow, mtime.EndOfGlobalWindow, false},
		{"global, no lateness, after end of global window", none, Global, mtime.EndOfGlobalWindow + 1, mtime.EndOfGlobalWindow, true},
		{"global, +inf", none, Global, mtime.MaxTimestamp, mtime.EndOfGlobalWindow, true},
		{"global, lateness saturates", Strategy{AllowedLateness: 48 * mtime.Hour}, Global, mtime.MaxTimestamp - 1, mtime.MaxTimestamp, false},
		{"global, lateness saturates, +inf still expires", Strategy{AllowedLateness: 48 * mtime.Hour}, Global, mtime.MaxTimestamp, mtime.MaxTimestamp, true},
		{"huge lateness does not wrap", Strategy{AllowedLateness: mtime.Duration(1 << 62)}, w, at(60, 0), mtime.MaxTimestamp, false},
	}
	for _, tc := range tests {
		if got := tc.s.GCTime(tc.w); got != tc.gc {
			t.Errorf("%s: GCTime = %s, want %s", tc.name, got, tc.gc)
		}
		if got := tc.s.Expired(tc.w, tc.wm); got != tc.expired {
			t.Errorf("%s: Expired(wm=%s) = %v, want %v", tc.name, tc.wm, got, tc.expired)
		}
	}
}

func TestOutputTimestamp(t *testing.T) {
	w := win(at(0, 0), at(5, 0))
	tests := []struct {
		c    TimestampCombiner
		w    Window
		want mtime.Time
	}{
		{EndOfWindow, w, at(5, 0) - 1},
		{"", w, at(5, 0) - 1},
		{Earliest, w, at(1, 0)},
		{Latest, w, at(3, 0)},
		{EndOfWindow, Global, mtime.EndOfGlobalWindow},
	}
	for _, tc := range tests {
		s := Strategy{TimestampCombiner: tc.c}
		if got := s.OutputTimestamp(tc.w, at(1, 0), at(3, 0)); got != tc.want {
			t.Errorf("%q on %v: OutputTimestamp = %s, want %s", tc.c, tc.w, got, tc.want)
		}
	}
}

func TestStrategyJSONRoundTrip(t *testing.T) {
	early := Repeatedly(AfterProcessingTime(30 * mtime.Second))
	late := AfterCount(1)
	s := Strategy{
		Fn:                Fn{Kind: KindSliding, Size: 10 * mtime.Minute, Period: 5 * mtime.Minute, Offset: mtime.Minute},
		Trigger:           AfterWatermark(&early, &late),
		Accumulation:      Accumulating,
		AllowedLateness:   mtime.Minute,
		TimestampCombiner: Latest,
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"window_fn"`, `"type":"sliding"`, `"size_ms":600000`, `"period_ms":300000`, `"offset_ms":60000`,
		`"trigger"`, `"type":"after_watermark"`, `"early"`, `"late"`, `"count":1`, `"delay_ms":30000`,
		`"accumulation_mode":"accumulating"`, `"allowed_lateness_ms":60000`, `"timestamp_combiner":"latest"`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON %s lacks %s", b, key)
		}
	}
	var back Strategy
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, s) {
		t.Errorf("round trip = %+v, want %+v", back, s)
	}
}
