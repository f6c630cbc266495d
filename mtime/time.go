// Package mtime defines event time for weir: an int64 count of milliseconds
// since the Unix epoch, with explicit sentinels for -∞ and +∞ (as in Beam).
//
// It may import only the standard library.
package mtime

import (
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"time"
)

// Time is an event time in milliseconds since the Unix epoch.
type Time int64

// Duration is a span of event or processing time in milliseconds.
type Duration int64

const (
	// MinTimestamp is -∞: the watermark before any data has been seen.
	MinTimestamp Time = math.MinInt64 / 2
	// MaxTimestamp is +∞: the watermark of an input that has ended.
	MaxTimestamp Time = math.MaxInt64 / 2
	// EndOfGlobalWindow is the largest timestamp an element can carry; it is one
	// day before +∞ so that the global window can still fire when the
	// watermark reaches +∞ (Beam's convention).
	EndOfGlobalWindow Time = MaxTimestamp - Time(24*time.Hour/time.Millisecond)
)

// Common durations.
const (
	Millisecond Duration = 1
	Second      Duration = 1000
	Minute      Duration = 60 * Second
	Hour        Duration = 60 * Minute
)

// FromTime converts a time.Time to event time, truncating to milliseconds.
func FromTime(t time.Time) Time { return Time(t.UnixMilli()) }

// FromDuration converts a time.Duration to an event-time Duration.
func FromDuration(d time.Duration) Duration { return Duration(d / time.Millisecond) }

// ToTime converts t to a time.Time in UTC. Sentinels map to far-away instants.
func (t Time) ToTime() time.Time { return time.UnixMilli(int64(t)).UTC() }

// Add returns t+d, saturating at the sentinels so that +∞ stays +∞.
func (t Time) Add(d Duration) Time {
	if t >= MaxTimestamp || t <= MinTimestamp {
		return t
	}
	// Compare before adding: t+d can overflow int64 for very large d.
	switch {
	case d > 0 && t >= MaxTimestamp-Time(d):
		return MaxTimestamp
	case d < 0 && t <= MinTimestamp-Time(d):
		return MinTimestamp
	}
	return t + Time(d)
}

// Before reports whether t is strictly before u.
func (t Time) Before(u Time) bool { return t < u }

// Min returns the smaller of two times.
func Min(a, b Time) Time {
	if a < b {
		return a
	}
	return b
}

// Max returns the larger of two times.
func Max(a, b Time) Time {
	if a > b {
		return a
	}
	return b
}

// Format renders t as RFC 3339 UTC with milliseconds (2026-03-01T10:05:00.000Z),
// or "-inf"/"+inf" for the sentinels.
func (t Time) Format() string {
	switch {
	case t <= MinTimestamp:
		return "-inf"
	case t >= MaxTimestamp:
		return "+inf"
	}
	return string(t.AppendFormat(make([]byte, 0, len(RFC3339Milli))))
}

// AppendFormat appends t as Format renders it to dst. It is Format for
// encoders that write many timestamps (every window's bounds in every
// row a sink writes): it allocates nothing, and for the years 0000 to
// 9999 it computes the date itself rather than going through
// time.Time's layout interpreter, about four times as fast.
func (t Time) AppendFormat(dst []byte) []byte {
	switch {
	case t <= MinTimestamp:
		return append(dst, "-inf"...)
	case t >= MaxTimestamp:
		return append(dst, "+inf"...)
	case t < firstFastYear || t >= afterFastYears:
		return t.ToTime().AppendFormat(dst, RFC3339Milli)
	}
	ms := int64(t)
	days := floorDiv(ms, 86_400_000)
	inDay := ms - days*86_400_000
	y, m, d := civil(days)
	var b [24]byte // 2006-01-02T15:04:05.000Z
	put4(b[0:], int(y))
	b[4] = '-'
	put2(b[5:], m)
	b[7] = '-'
	put2(b[8:], d)
	b[10] = 'T'
	put2(b[11:], int(inDay/3_600_000))
	b[13] = ':'
	put2(b[14:], int(inDay/60_000%60))
	b[16] = ':'
	put2(b[17:], int(inDay/1000%60))
	b[19] = '.'
	ms3 := int(inDay % 1000)
	b[20], b[21], b[22] = byte('0'+ms3/100), byte('0'+ms3/10%10), byte('0'+ms3%10)
	b[23] = 'Z'
	return append(dst, b[:]...)
}

// firstFastYear and afterFastYears bound the times AppendFormat renders
// itself: 0000-01-01 and 10000-01-01, UTC. Outside, time.Time's own
// rendering of years (a sign, more digits) applies.
const (
	firstFastYear  Time = -62_167_219_200_000
	afterFastYears Time = 253_402_300_800_000
)

// floorDiv returns a/b rounded towards −∞ (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// civil returns the proleptic Gregorian date of days since 1970-01-01
// (Howard Hinnant's days-to-civil algorithm, on 400-year eras).
func civil(days int64) (year int64, month, day int) {
	z := days + 719_468
	era := floorDiv(z, 146_097)
	doe := z - era*146_097                                   // [0, 146096]
	yoe := (doe - doe/1460 + doe/36_524 - doe/146_096) / 365 // [0, 399]
	doy := doe - (365*yoe + yoe/4 - yoe/100)                 // [0, 365]
	mp := (5*doy + 2) / 153                                  // [0, 11], from March
	day = int(doy - (153*mp+2)/5 + 1)
	if mp < 10 {
		month = int(mp + 3)
	} else {
		month = int(mp - 9)
	}
	year = yoe + era*400
	if month <= 2 {
		year++
	}
	return year, month, day
}

// put2 writes v (0 to 99) as two digits.
func put2(b []byte, v int) { b[0], b[1] = byte('0'+v/10), byte('0'+v%10) }

// put4 writes v (0 to 9999) as four digits.
func put4(b []byte, v int) {
	put2(b, v/100)
	put2(b[2:], v%100)
}

// String implements fmt.Stringer.
func (t Time) String() string { return t.Format() }

// RFC3339Milli is the layout of every timestamp weir prints.
const RFC3339Milli = "2006-01-02T15:04:05.000Z07:00"

// Parse reads an RFC 3339 timestamp (any precision, any offset) or one of
// the sentinels "-inf", "+inf" and "inf".
func Parse(s string) (Time, error) {
	switch s {
	case "-inf":
		return MinTimestamp, nil
	case "+inf", "inf":
		return MaxTimestamp, nil
	}
	tt, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("timestamp %q is not RFC 3339 (e.g. 2026-03-01T10:05:00Z): %w", s, err)
	}
	return FromTime(tt), nil
}

// ParseDuration reads a duration written as whole seconds ("300"), or with a
// unit ("300s", "5m", "1h", "250ms", "1h30m").
func ParseDuration(s string) (Duration, error) {
	if s == "" {
		return 0, fmt.Errorf("empty duration")
	}
	allDigits := true
	for _, c := range s {
		if c < '0' || c > '9' {
			allDigits = false
			break
		}
	}
	if allDigits {
		// Base 10 always: fmt.Sscan would read "0300" as octal.
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n > math.MaxInt64/int64(Second) {
			return 0, fmt.Errorf("duration %q: too many seconds", s)
		}
		return Duration(n) * Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("duration %q: want seconds (300) or a unit (300s, 5m, 1h): %w", s, err)
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q is negative", s)
	}
	return FromDuration(d), nil
}

// String renders d in Go duration syntax (5m0s).
func (d Duration) String() string { return (time.Duration(d) * time.Millisecond).String() }

// Clock gives processing time. Tests inject a manual clock; production uses
// the wall clock.
type Clock interface {
	Now() Time
}

// WallClock reads the system clock.
type WallClock struct{}

// Now returns the current wall-clock time.
func (WallClock) Now() Time { return FromTime(time.Now()) }

// ManualClock is a clock that only moves when told to. It is safe for
// concurrent use.
type ManualClock struct{ t atomic.Int64 }

// NewManualClock returns a manual clock reading t.
func NewManualClock(t Time) *ManualClock {
	c := &ManualClock{}
	c.t.Store(int64(t))
	return c
}

// Now returns the manual clock's current time.
func (c *ManualClock) Now() Time { return Time(c.t.Load()) }

// Set moves the manual clock to t.
func (c *ManualClock) Set(t Time) { c.t.Store(int64(t)) }

// Advance moves the manual clock forward by d.
func (c *ManualClock) Advance(d Duration) {
	for {
		old := c.t.Load()
		if c.t.CompareAndSwap(old, int64(Time(old).Add(d))) {
			return
		}
	}
}
