package sandbox

import (
	"maps"
	"testing"
)

// TestAddMessageNumbers: the scan of a message's top-level numbers sums
// exactly what encoding/json's object does, on flat objects (scanned) and
// on everything else (decoded).
func TestAddMessageNumbers(t *testing.T) {
	for _, tc := range []struct {
		data    string
		scanned bool
	}{
		{`{"key": "k1", "amount": 12, "ts": "2026-01-01T00:00:00Z"}`, true},
		{`{"a":-1.5e3,"b":0,"c":true,"d":null,"e":"x\"y","f":1E+2}`, true},
		{` { } `, true},
		{`{"amount": 1e400}`, true}, // out of float range: left out, as json.Number.Float64 fails
		{`{"nested": {"amount": 3}, "amount": 4}`, false},
		{`{"list": [1, 2], "amount": 4}`, false},
		{`{"a\u00e9": 2}`, false},
		{`{"a": 1, "a": 2}`, false},
		{`{"a": 01}`, false},
		{`{"a": 1,}`, false},
		{`{"a": 1} trailing`, false},
		{`[1, 2]`, false},
		{`not json`, false},
		{``, false},
	} {
		want := map[string]float64{"amount": 100}
		addNumbers(want, decodeObject([]byte(tc.data)))
		got := map[string]float64{"amount": 100}
		var f flatSums
		f.addMessageNumbers(got, []byte(tc.data))
		if !maps.Equal(got, want) {
			t.Errorf("%s: sums %v, want %v", tc.data, got, want)
		}
		if scanned := f.scan([]byte(tc.data)); scanned != tc.scanned {
			t.Errorf("%s: scanned %v, want %v", tc.data, scanned, tc.scanned)
		}
	}
}
