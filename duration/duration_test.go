package duration

import (
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		err  string
	}{
		{in: "30m", want: 30 * time.Minute},
		{in: "1.5h", want: 90 * time.Minute},
		{in: "7d", want: 7 * 24 * time.Hour},
		{in: "250ms", want: 250 * time.Millisecond},
		{in: "0.5s", want: 500 * time.Millisecond},
		{in: "10s", want: 10 * time.Second},
		{in: "0s", want: 0},
		{in: ".5d", want: 12 * time.Hour},
		{in: "1.d", want: 24 * time.Hour},
		{in: "30", err: "needs a unit"},
		{in: "", err: "needs a unit"},
		{in: "h", err: "not a number"},
		{in: "-1h", err: "not a number"},
		{in: "+1h", err: "not a number"},
		{in: "1e3s", err: "not a number"},
		{in: "1h30m", err: "not a number"},
		{in: "1 h", err: "not a number"},
		{in: "1.2.3s", err: "not a number"},
		{in: "1w", err: "needs a unit"},
		{in: "1us", err: "not a number"},
		{in: "99999999999999d", err: "too long"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := Parse(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Parse(%q) = %v, %v; want an error containing %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Parse(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestFormat(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                       "0s",
		7 * 24 * time.Hour:      "7d",
		90 * time.Minute:        "90m",
		time.Hour:               "1h",
		1500 * time.Millisecond: "1500ms",
		time.Microsecond:        "1µs",
	} {
		if got := Format(d); got != want {
			t.Errorf("Format(%v) = %q, want %q", d, got, want)
		}
		if d%time.Millisecond == 0 {
			if back, err := Parse(want); err != nil || back != d {
				t.Errorf("Parse(Format(%v)) = %v, %v", d, back, err)
			}
		}
	}
}

// FuzzParse: Parse never panics, never returns a negative duration, and
// what it accepts formats back to the same duration.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"30m", "1.5h", "7d", "250ms", "", "1h30m", "-1s", "1e9d", ".s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if err != nil {
			return
		}
		if d < 0 {
			t.Fatalf("Parse(%q) = %v, negative", s, d)
		}
		if d%time.Millisecond == 0 {
			if back, err := Parse(Format(d)); err != nil || back != d {
				t.Fatalf("Parse(Format(%v)) = %v, %v", d, back, err)
			}
		}
	})
}
