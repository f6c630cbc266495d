package mtime

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// mustParse parses an RFC 3339 timestamp or fails the test.
func mustParse(t testing.TB, s string) Time {
	t.Helper()
	tt, err := Parse(s)
	if err != nil {
		t.Fatalf("Parse(%q): %v", s, err)
	}
	return tt
}

func TestConstants(t *testing.T) {
	tests := []struct {
		name      string
		got, want int64
	}{
		{"Millisecond", int64(Millisecond), 1},
		{"Second", int64(Second), 1000},
		{"Minute", int64(Minute), 60_000},
		{"Hour", int64(Hour), 3_600_000},
		{"EndOfGlobalWindow is one day before +inf", int64(MaxTimestamp - EndOfGlobalWindow), 24 * 3_600_000},
		{"sentinels are symmetric", int64(MinTimestamp + MaxTimestamp), -1},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s = %d, want %d", tc.name, tc.got, tc.want)
		}
	}
	if !(MinTimestamp < 0 && 0 < EndOfGlobalWindow && EndOfGlobalWindow < MaxTimestamp) {
		t.Errorf("want MinTimestamp < 0 < EndOfGlobalWindow < MaxTimestamp, got %d, %d, %d", MinTimestamp, EndOfGlobalWindow, MaxTimestamp)
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in      string
		want    Duration
		wantErr string // substring of the error; "" means success
	}{
		// Bare integers are seconds.
		{in: "300", want: 300 * Second},
		{in: "0", want: 0},
		{in: "1", want: Second},
		{in: "86400", want: 24 * Hour},
		// Leading zeros are still decimal (fmt.Sscan used to read "0300" as octal: 192 s).
		{in: "0300", want: 300 * Second},
		{in: "010", want: 10 * Second},
		{in: "09", want: 9 * Second},
		// Go duration syntax.
		{in: "300s", want: 300 * Second},
		{in: "5m", want: 5 * Minute},
		{in: "1h", want: Hour},
		{in: "250ms", want: 250},
		{in: "1h30m", want: 90 * Minute},
		{in: "1.5s", want: 1500},
		{in: "+5s", want: 5 * Second},
		{in: "0s", want: 0},
		{in: "-0s", want: 0},
		{in: "1500us", want: 1}, // truncated to whole milliseconds
		{in: "999us", want: 0},
		// Errors.
		{in: "", wantErr: "empty"},
		{in: "-5s", wantErr: "negative"},
		{in: "-1h", wantErr: "negative"},
		{in: "abc", wantErr: "abc"},
		{in: "-5", wantErr: "-5"},
		{in: "5d", wantErr: "5d"},
		{in: "1.5", wantErr: "1.5"},
		{in: " 300", wantErr: "300"},
		{in: "300 ", wantErr: "300"},
		{in: "300 s", wantErr: "300"},
		{in: "0x10", wantErr: "0x10"},
		{in: "s", wantErr: `"s"`},
		// Too many seconds to fit in milliseconds: must not wrap negative.
		{in: "9223372036854775807", wantErr: "9223372036854775807"},
		{in: "9223372036854776", wantErr: "9223372036854776"},
		{in: "99999999999999999999", wantErr: "99999999999999999999"},
		{in: "9999999999h", wantErr: "9999999999h"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseDuration(tc.in)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseDuration(%q) = %d, want error containing %q", tc.in, got, tc.wantErr)
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("ParseDuration(%q) error %q, want it to contain %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseDuration(%q): unexpected error %v", tc.in, err)
			}
			if got != tc.want {
				t.Errorf("ParseDuration(%q) = %d ms, want %d ms", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseDurationLargestSeconds(t *testing.T) {
	max := strconv.FormatInt(math.MaxInt64/1000, 10)
	got, err := ParseDuration(max)
	if err != nil {
		t.Fatalf("ParseDuration(%s): %v", max, err)
	}
	if want := Duration(math.MaxInt64/1000) * Second; got != want || got < 0 {
		t.Errorf("ParseDuration(%s) = %d, want %d", max, got, want)
	}
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{
		"300", "0300", "300s", "5m", "1h", "1h30m", "250ms", "1.5s", "+5s",
		"", "-5s", "-0s", "abc", "5d", "9223372036854775807", "99999999999999999999",
		"2562047h", "1500us", "0x10",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			if d != 0 {
				t.Errorf("ParseDuration(%q) = %d with error %v, want 0", s, d, err)
			}
			return
		}
		if d < 0 {
			t.Fatalf("ParseDuration(%q) = %d: negative", s, d)
		}
		// Bare integers are decimal seconds.
		if n, perr := strconv.ParseUint(s, 10, 64); perr == nil && s[0] != '+' {
			if Duration(n)*Second != d {
				t.Errorf("ParseDuration(%q) = %d, want %d s", s, d, n)
			}
			return
		}
		// Anything else agrees with time.ParseDuration, in milliseconds.
		gd, gerr := time.ParseDuration(s)
		if gerr != nil {
			t.Fatalf("ParseDuration(%q) = %d but time.ParseDuration fails: %v", s, d, gerr)
		}
		if FromDuration(gd) != d {
			t.Errorf("ParseDuration(%q) = %d, want %d", s, d, FromDuration(gd))
		}
	})
}

func TestParse(t *testing.T) {
	base := Time(time.Date(2026, 3, 1, 10, 5, 0, 0, time.UTC).UnixMilli())
	tests := []struct {
		in      string
		want    Time
		wantErr bool
	}{
		{in: "2026-03-01T10:05:00Z", want: base},
		{in: "2026-03-01T10:05:00.000Z", want: base},
		{in: "2026-03-01T10:05:00.1Z", want: base + 100},
		{in: "2026-03-01T10:05:00.123Z", want: base + 123},
		{in: "2026-03-01T10:05:00.123456789Z", want: base + 123}, // truncated to ms
		{in: "2026-03-01T10:05:00.9999Z", want: base + 999},
		{in: "2026-03-01T12:05:00+02:00", want: base},
		{in: "2026-03-01T05:05:00-05:00", want: base},
		{in: "2026-03-01T15:35:00.500+05:30", want: base + 500},
		{in: "2026-03-01T00:05:00-10:00", want: base},
		{in: "1970-01-01T00:00:00Z", want: 0},
		{in: "1970-01-01T01:00:00+01:00", want: 0},
		{in: "1969-12-31T23:59:59.999Z", want: -1},
		{in: "1969-12-31T23:59:59.9995Z", want: -1}, // floor, not round towards zero
		{in: "1969-12-31T23:55:00Z", want: Time(-5 * Minute)},
		{in: "-inf", want: MinTimestamp},
		{in: "+inf", want: MaxTimestamp},
		{in: "inf", want: MaxTimestamp},
		{in: "", wantErr: true},
		{in: "2026-03-01", wantErr: true},
		{in: "2026-03-01T10:05:00", wantErr: true}, // no offset
		{in: "2026-03-01 10:05:00Z", wantErr: true},
		{in: "2026-13-01T00:00:00Z", wantErr: true},
		{in: "2026-02-30T00:00:00Z", wantErr: true},
		{in: "yesterday", wantErr: true},
		{in: "INF", wantErr: true},
		{in: "1772359500000", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := Parse(tc.in)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("Parse(%q) = %v, want an error", tc.in, got)
				}
				if !strings.Contains(err.Error(), "RFC 3339") {
					t.Errorf("Parse(%q) error %q should mention RFC 3339", tc.in, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.in, err)
			}
			if got != tc.want {
				t.Errorf("Parse(%q) = %d (%s), want %d (%s)", tc.in, got, got, tc.want, tc.want)
			}
		})
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		in   Time
		want string
	}{
		{0, "1970-01-01T00:00:00.000Z"},
		{1, "1970-01-01T00:00:00.001Z"},
		{-1, "1969-12-31T23:59:59.999Z"},
		{mustParse(t, "2026-03-01T10:05:00Z"), "2026-03-01T10:05:00.000Z"},
		{mustParse(t, "2026-03-01T12:05:00.25+02:00"), "2026-03-01T10:05:00.250Z"},
		{mustParse(t, "2026-03-01T10:05:00.123456Z"), "2026-03-01T10:05:00.123Z"},
		{MinTimestamp, "-inf"},
		{MinTimestamp - 1, "-inf"},
		{MaxTimestamp, "+inf"},
		{MaxTimestamp + 1, "+inf"},
	}
	for _, tc := range tests {
		if got := tc.in.Format(); got != tc.want {
			t.Errorf("Time(%d).Format() = %q, want %q", int64(tc.in), got, tc.want)
		}
		if got := tc.in.String(); got != tc.want {
			t.Errorf("Time(%d).String() = %q, want %q", int64(tc.in), got, tc.want)
		}
	}
	// The end of the global window is a real (far) instant, not a sentinel.
	if got := EndOfGlobalWindow.Format(); got == "+inf" || got == "" {
		t.Errorf("EndOfGlobalWindow.Format() = %q, want a timestamp", got)
	}
}

func TestFormatParseRoundTrip(t *testing.T) {
	for _, tt := range []Time{
		0, 1, -1, 999, -999, 1772359500000, -1772359500123,
		mustParse(t, "9999-12-31T23:59:59.999Z"), mustParse(t, "0001-01-01T00:00:00Z"),
		MinTimestamp, MaxTimestamp,
	} {
		s := tt.Format()
		back, err := Parse(s)
		if err != nil {
			t.Errorf("Parse(Format(%d) = %q): %v", int64(tt), s, err)
			continue
		}
		if back != tt {
			t.Errorf("Parse(Format(%d)) = %d via %q", int64(tt), int64(back), s)
		}
	}
}

func TestFromTimeToTime(t *testing.T) {
	tests := []struct {
		in   time.Time
		want Time
	}{
		{time.Unix(0, 0), 0},
		{time.Unix(1, 999_999), 1000},
		{time.Unix(0, -1), -1}, // floor to the millisecond
		{time.Date(2026, 3, 1, 12, 5, 0, 0, time.FixedZone("x", 2*3600)), mustParse(t, "2026-03-01T10:05:00Z")},
	}
	for _, tc := range tests {
		if got := FromTime(tc.in); got != tc.want {
			t.Errorf("FromTime(%v) = %d, want %d", tc.in, got, tc.want)
		}
	}
	tt := mustParse(t, "2026-03-01T10:05:00.123Z")
	got := tt.ToTime()
	if got.Location() != time.UTC {
		t.Errorf("ToTime location = %v, want UTC", got.Location())
	}
	if want := time.Date(2026, 3, 1, 10, 5, 0, 123_000_000, time.UTC); !got.Equal(want) {
		t.Errorf("ToTime = %v, want %v", got, want)
	}
	if FromTime(got) != tt {
		t.Errorf("FromTime(ToTime(%d)) = %d", tt, FromTime(got))
	}
}

func TestFromDuration(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want Duration
	}{
		{0, 0},
		{time.Millisecond, 1},
		{999 * time.Microsecond, 0},
		{5 * time.Minute, 5 * Minute},
		{-time.Second, -Second},
	}
	for _, tc := range tests {
		if got := FromDuration(tc.in); got != tc.want {
			t.Errorf("FromDuration(%v) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestDurationString(t *testing.T) {
	tests := []struct {
		in   Duration
		want string
	}{
		{0, "0s"},
		{1, "1ms"},
		{5 * Minute, "5m0s"},
		{90 * Minute, "1h30m0s"},
		{-Second, "-1s"},
	}
	for _, tc := range tests {
		if got := tc.in.String(); got != tc.want {
			t.Errorf("Duration(%d).String() = %q, want %q", int64(tc.in), got, tc.want)
		}
	}
}

func TestAdd(t *testing.T) {
	base := mustParse(t, "2026-03-01T10:05:00Z")
	tests := []struct {
		name string
		t    Time
		d    Duration
		want Time
	}{
		{"zero", base, 0, base},
		{"forward", base, 5 * Minute, mustParse(t, "2026-03-01T10:10:00Z")},
		{"backward", base, -5 * Minute, mustParse(t, "2026-03-01T10:00:00Z")},
		{"across the epoch", 1000, -2 * Second, -1000},
		{"+inf stays +inf going back", MaxTimestamp, -Hour, MaxTimestamp},
		{"+inf stays +inf going forward", MaxTimestamp, Hour, MaxTimestamp},
		{"-inf stays -inf going forward", MinTimestamp, Hour, MinTimestamp},
		{"-inf stays -inf going back", MinTimestamp, -Hour, MinTimestamp},
		{"end of global window plus a day is +inf", EndOfGlobalWindow, 24 * Hour, MaxTimestamp},
		{"end of global window plus lateness saturates", EndOfGlobalWindow, 48 * Hour, MaxTimestamp},
		{"just below +inf", MaxTimestamp - 10, 9, MaxTimestamp - 1},
		{"reaching +inf", MaxTimestamp - 10, 10, MaxTimestamp},
		{"just above -inf", MinTimestamp + 10, -9, MinTimestamp + 1},
		{"reaching -inf", MinTimestamp + 10, -10, MinTimestamp},
		{"huge positive duration does not wrap", base, Duration(math.MaxInt64), MaxTimestamp},
		{"huge negative duration does not wrap", base, Duration(math.MinInt64), MinTimestamp},
		{"huge duration from just below +inf", MaxTimestamp - 1, Duration(math.MaxInt64), MaxTimestamp},
		{"huge negative from just above -inf", MinTimestamp + 1, Duration(math.MinInt64), MinTimestamp},
		{"huge positive from just above -inf", MinTimestamp + 1, Duration(math.MaxInt64), MaxTimestamp},
	}
	for _, tc := range tests {
		if got := tc.t.Add(tc.d); got != tc.want {
			t.Errorf("%s: Time(%d).Add(%d) = %d, want %d", tc.name, int64(tc.t), int64(tc.d), int64(got), int64(tc.want))
		}
	}
}

func TestMinMaxBefore(t *testing.T) {
	tests := []struct {
		a, b             Time
		min, max         Time
		aBeforeB, bBefor bool
	}{
		{1, 2, 1, 2, true, false},
		{2, 1, 1, 2, false, true},
		{3, 3, 3, 3, false, false},
		{-5, 5, -5, 5, true, false},
		{MinTimestamp, MaxTimestamp, MinTimestamp, MaxTimestamp, true, false},
	}
	for _, tc := range tests {
		if got := Min(tc.a, tc.b); got != tc.min {
			t.Errorf("Min(%d, %d) = %d, want %d", tc.a, tc.b, got, tc.min)
		}
		if got := Max(tc.a, tc.b); got != tc.max {
			t.Errorf("Max(%d, %d) = %d, want %d", tc.a, tc.b, got, tc.max)
		}
		if got := tc.a.Before(tc.b); got != tc.aBeforeB {
			t.Errorf("%d.Before(%d) = %v, want %v", tc.a, tc.b, got, tc.aBeforeB)
		}
		if got := tc.b.Before(tc.a); got != tc.bBefor {
			t.Errorf("%d.Before(%d) = %v, want %v", tc.b, tc.a, got, tc.bBefor)
		}
	}
}

func TestManualClock(t *testing.T) {
	start := mustParse(t, "2026-03-01T10:00:00Z")
	c := NewManualClock(start)
	var _ Clock = c
	steps := []struct {
		name string
		do   func()
		want Time
	}{
		{"starts where told", func() {}, start},
		{"reading does not move it", func() { c.Now() }, start},
		{"advance", func() { c.Advance(5 * Minute) }, mustParse(t, "2026-03-01T10:05:00Z")},
		{"advance zero", func() { c.Advance(0) }, mustParse(t, "2026-03-01T10:05:00Z")},
		{"advance by milliseconds", func() { c.Advance(250) }, mustParse(t, "2026-03-01T10:05:00.250Z")},
		{"set forward", func() { c.Set(mustParse(t, "2026-03-01T11:00:00Z")) }, mustParse(t, "2026-03-01T11:00:00Z")},
		{"set backward (it is manual)", func() { c.Set(start) }, start},
		{"advance saturates at +inf", func() { c.Advance(Duration(math.MaxInt64)) }, MaxTimestamp},
		{"+inf stays +inf", func() { c.Advance(-Hour) }, MaxTimestamp},
		{"set to zero", func() { c.Set(0) }, 0},
	}
	for _, s := range steps {
		s.do()
		if got := c.Now(); got != s.want {
			t.Fatalf("%s: Now() = %s, want %s", s.name, got, s.want)
		}
	}

	var zero ManualClock
	if zero.Now() != 0 {
		t.Errorf("zero ManualClock reads %d, want 0", zero.Now())
	}
	zero.Advance(Second)
	if zero.Now() != Time(Second) {
		t.Errorf("zero ManualClock after Advance(1s) reads %d", zero.Now())
	}
}

func TestManualClockConcurrentAdvance(t *testing.T) {
	c := NewManualClock(0)
	const goroutines, each = 8, 500
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				c.Advance(Millisecond)
				_ = c.Now()
			}
		}()
	}
	wg.Wait()
	if got, want := c.Now(), Time(goroutines*each); got != want {
		t.Errorf("after concurrent Advance: Now() = %d, want %d (lost updates)", got, want)
	}
}

func TestWallClock(t *testing.T) {
	var c Clock = WallClock{}
	before := FromTime(time.Now())
	got := c.Now()
	after := FromTime(time.Now())
	if got < before || got > after {
		t.Errorf("WallClock.Now() = %d, want within [%d, %d]", got, before, after)
	}
}

// TestAppendFormatMatchesTheLayout: AppendFormat's own date arithmetic
// renders every instant as time.Time does with RFC3339Milli — the
// boundaries of its years 0000 to 9999, leap days (1600, 1900, 2000,
// 2100), instants before the epoch, and instants drawn at random over
// the whole range of event time — and keeps what dst held.
func TestAppendFormatMatchesTheLayout(t *testing.T) {
	want := func(tt Time) string {
		switch {
		case tt <= MinTimestamp:
			return "-inf"
		case tt >= MaxTimestamp:
			return "+inf"
		}
		return time.UnixMilli(int64(tt)).UTC().Format(RFC3339Milli)
	}
	cases := []Time{
		0, 1, -1, 999, -999, -1000, -1001, 86_399_999, -86_400_000, -86_400_001,
		firstFastYear - 1, firstFastYear, firstFastYear + 1,
		afterFastYears - 1, afterFastYears, afterFastYears + 1,
		MinTimestamp, MinTimestamp + 1, MaxTimestamp - 1, MaxTimestamp, EndOfGlobalWindow,
	}
	for _, day := range []string{"1600-02-29", "1700-02-28", "1700-03-01", "1900-02-28", "1900-03-01",
		"2000-02-29", "2000-03-01", "2024-02-29", "2100-02-28", "2100-03-01", "0000-02-29", "9999-12-31"} {
		d := mustParse(t, day+"T00:00:00Z")
		cases = append(cases, d-1, d, d+86_399_999)
	}
	rng := uint64(1)
	for range 200_000 {
		rng = rng*6364136223846793005 + 1442695040888963407
		span := uint64(afterFastYears-firstFastYear) + 2_000_000_000_000
		cases = append(cases, firstFastYear-1_000_000_000_000+Time(rng%span))
		cases = append(cases, Time(int64(rng>>1)-int64(1<<62))) // the whole range
	}
	for _, tt := range cases {
		got := string(tt.AppendFormat([]byte("x=")))
		if w := "x=" + want(tt); got != w {
			t.Fatalf("Time(%d).AppendFormat = %q, want %q", int64(tt), got, w)
		}
		if f := tt.Format(); f != want(tt) {
			t.Fatalf("Time(%d).Format() = %q, want %q", int64(tt), f, want(tt))
		}
	}
}

// BenchmarkAppendFormat measures the rendering of a window's bound, as a
// sink writes two per row.
func BenchmarkAppendFormat(b *testing.B) {
	buf := make([]byte, 0, 64)
	tt := Time(1_772_359_500_123)
	b.Run("own", func(b *testing.B) {
		for i := range b.N {
			buf = (tt + Time(i)).AppendFormat(buf[:0])
		}
	})
	b.Run("layout", func(b *testing.B) {
		for i := range b.N {
			buf = (tt + Time(i)).ToTime().AppendFormat(buf[:0], RFC3339Milli)
		}
	})
}
