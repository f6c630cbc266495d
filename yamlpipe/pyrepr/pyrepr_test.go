package pyrepr

import (
	"math"
	"testing"
)

// Floats print as Python's repr: always a decimal point or an exponent.
func TestAppendFloat(t *testing.T) {
	for f, want := range map[float64]string{
		1: "1.0", 0.1: "0.1", 2.5: "2.5", 1e-05: "1e-05", 0.0001: "0.0001", 1e16: "1e+16", 1.5e16: "1.5e+16",
		123456789012345: "123456789012345.0", 9999999999999998: "9999999999999998.0", 12345678901234567: "1.2345678901234568e+16",
		-3: "-3.0", 1e22: "1e+22", 0: "0.0", math.Inf(1): "Infinity", 9.5e-5: "9.5e-05",
	} {
		if got := string(AppendFloat(nil, f)); got != want {
			t.Errorf("AppendFloat(%v) = %s, want %s", f, got, want)
		}
	}
	if got := string(AppendFloat(nil, math.NaN())); got != "NaN" {
		t.Errorf("NaN prints %s", got)
	}
}
