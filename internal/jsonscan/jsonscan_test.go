package jsonscan

import (
	"encoding/json"
	"testing"
)

// TestNumber: Number agrees with encoding/json on what a number is.
func TestNumber(t *testing.T) {
	for _, s := range []string{"0", "-0", "1", "-12", "1.5", "0.25", "1e3", "1E+3", "2.5e-7", "-0.0e0",
		"", "-", "01", "1.", ".5", "+1", "1e", "1e+", "0x1", "1_000", "--1", "1.2.3", "NaN", "Infinity", " 1"} {
		var n json.Number
		want := json.Unmarshal([]byte(s), &n) == nil && s != "" && s[0] != ' '
		if got := Number([]byte(s)); got != want {
			t.Errorf("Number(%q) = %v, encoding/json says %v", s, got, want)
		}
	}
}

// TestPlainString: content with escapes, control characters or invalid
// UTF-8 is not plain.
func TestPlainString(t *testing.T) {
	for s, want := range map[string]bool{"": true, "key-1": true, "café": true, `a\"b`: false, "tab\t": false, "\xff": false} {
		if got := PlainString([]byte(s)); got != want {
			t.Errorf("PlainString(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestSkipSpace(t *testing.T) {
	for _, tc := range []struct {
		in   string
		from int
		want int
	}{{"", 0, 0}, {" \t\r\n x", 0, 5}, {"x  ", 1, 3}, {"ab", 1, 1}} {
		if got := SkipSpace([]byte(tc.in), tc.from); got != tc.want {
			t.Errorf("SkipSpace(%q, %d) = %d, want %d", tc.in, tc.from, got, tc.want)
		}
	}
}
