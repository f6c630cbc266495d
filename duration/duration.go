// Package duration parses weir's durations: a non-negative decimal number
// followed by one unit, ms, s, m, h or d (a day is 24 hours): "250ms",
// "30m", "1.5h", "7d". It is the one parser of durations that weir's
// flags and requests share.
//
// It may import only the standard library.
package duration

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// units lists the accepted units, longest suffix first so that "ms" is
// not read as "m" followed by garbage.
var units = []struct {
	suffix string
	d      time.Duration
}{
	{"ms", time.Millisecond},
	{"s", time.Second},
	{"m", time.Minute},
	{"h", time.Hour},
	{"d", 24 * time.Hour},
}

// Parse parses s, e.g. "30m", "1.5h" or "7d". The number is decimal
// (digits with at most one '.'), the unit one of ms, s, m, h, d; no sign,
// exponent, spaces or second unit. The result is rounded to the nearest
// nanosecond.
func Parse(s string) (time.Duration, error) {
	for _, u := range units {
		num, ok := strings.CutSuffix(s, u.suffix)
		if !ok {
			continue
		}
		if !decimal(num) {
			return 0, fmt.Errorf("duration %q: %q is not a number (write e.g. 30m, 1.5h or 7d)", s, num)
		}
		f, err := strconv.ParseFloat(num, 64)
		if err != nil {
			return 0, fmt.Errorf("duration %q: %w", s, err)
		}
		v := f * float64(u.d)
		if v >= math.MaxInt64 {
			return 0, fmt.Errorf("duration %q is too long", s)
		}
		return time.Duration(math.Round(v)), nil
	}
	return 0, fmt.Errorf("duration %q needs a unit: ms, s, m, h or d (e.g. 30m, 1.5h, 7d)", s)
}

// decimal reports whether s is digits with at most one '.', and at least
// one digit.
func decimal(s string) bool {
	digits, dots := 0, 0
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
			dots++
		default:
			return false
		}
	}
	return digits > 0 && dots <= 1
}

// Format writes d in the largest unit that shows it exactly ("7d", "90m",
// "1500ms"), falling back to Go's form for durations below a millisecond.
// Parse(Format(d)) == d for every d that is a whole number of milliseconds.
func Format(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	for i := len(units) - 1; i >= 0; i-- {
		u := units[i]
		if d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.suffix
		}
	}
	return d.String()
}
