package compat_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/graph"
)

func TestParseMapping(t *testing.T) {
	tests := []struct {
		in      string
		want    compat.Mapping
		wantErr string
	}{
		{in: "", want: compat.Mapping{}},
		{in: "  \n", want: compat.Mapping{}},
		{in: "{}", want: compat.Mapping{}},
		{in: `{"CountByUser":"CountByUserId"}`, want: compat.Mapping{"CountByUser": "CountByUserId"}},
		{in: `{"Parse":"Ingest", "Debug":""}`, want: compat.Mapping{"Parse": "Ingest", "Debug": ""}},
		{in: `{"Parse/Validate":"Ingest/Check"}`, want: compat.Mapping{"Parse/Validate": "Ingest/Check"}},
		{in: `[1]`, wantErr: "must be a JSON object"},
		{in: `"Old"`, wantErr: "must be a JSON object"},
		{in: `{"Old":null}`, wantErr: `the value of "Old" must be a string`},
		{in: `{"Old":1}`, wantErr: `the value of "Old" must be a string`},
		{in: `{"Old":{"a":"b"}}`, wantErr: `the value of "Old" must be a string`},
		{in: `{"Old":"A","Old":"B"}`, wantErr: `step "Old" is mapped twice`},
		{in: `{"":"New"}`, wantErr: "step name is empty"},
		{in: `{"Old/":"New"}`, wantErr: `"Old/"`},
		{in: `{"Old":"New//Step"}`, wantErr: `value of "Old"`},
		{in: `{"Old":"New"} {}`, wantErr: "unexpected text after the JSON object"},
		{in: `{"Old":"New"`, wantErr: "not valid JSON"},
		{in: `{"Old" "New"}`, wantErr: "not valid JSON"},
	}
	for _, tc := range tests {
		got, err := compat.ParseMapping(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseMapping(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !maps.Equal(got, tc.want) {
			t.Errorf("ParseMapping(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestMappingRename(t *testing.T) {
	m := compat.Mapping{"Parse": "Ingest", "Parse/Validate": "Check", "Debug": "", "A/B": "C/D"}
	tests := []struct {
		name, want, key string
		applied         bool
	}{
		{"Parse", "Ingest", "Parse", true},
		{"Parse/Explode", "Ingest/Explode", "Parse", true},
		{"Parse/Explode/Inner", "Ingest/Explode/Inner", "Parse", true},
		{"Parse/Validate", "Check", "Parse/Validate", true},     // the longest prefix wins
		{"Parse/Validate/X", "Check/X", "Parse/Validate", true}, // and keeps what follows
		{"Parse/ValidateX", "Ingest/ValidateX", "Parse", true},  // not on a '/' boundary of Parse/Validate
		{"ParseX", "ParseX", "", false},                         // not on a '/' boundary of Parse
		{"ParseX/Validate", "ParseX/Validate", "", false},
		{"Debug", "", "Debug", true},
		{"Debug/Print", "", "Debug", true},
		{"A", "A", "", false},
		{"A/B/C", "C/D/C", "A/B", true},
		{"Other", "Other", "", false},
	}
	for _, tc := range tests {
		got, key, applied := m.Rename(tc.name)
		if got != tc.want || key != tc.key || applied != tc.applied {
			t.Errorf("Rename(%q) = %q, %q, %v; want %q, %q, %v", tc.name, got, key, applied, tc.want, tc.key, tc.applied)
		}
	}
	if got, _, applied := compat.Mapping(nil).Rename("Parse"); got != "Parse" || applied {
		t.Errorf("a nil mapping renamed Parse to %q", got)
	}
}

// FuzzParseMapping checks that ParseMapping never panics, that what it
// accepts holds valid step names only, and that String round-trips.
// Seeds: testdata/fuzz/FuzzParseMapping.
func FuzzParseMapping(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"A":"B"}`, `{"Parse":"Ingest","Debug":""}`, `{"A":"A","A":"B"}`, `[]`, `{"A":null}`, `{"A/":"B"}`, `{"a b.c-d_e":"x/y"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		m, err := compat.ParseMapping(in)
		if err != nil {
			if m != nil {
				t.Fatalf("ParseMapping(%q) returned a mapping and an error", in)
			}
			return
		}
		for k, v := range m {
			if graph.ValidateName(k) != nil {
				t.Fatalf("ParseMapping(%q) accepted key %q", in, k)
			}
			if v != "" && graph.ValidateName(v) != nil {
				t.Fatalf("ParseMapping(%q) accepted value %q", in, v)
			}
			if got, key, applied := m.Rename(k); !applied || key != k || got != v {
				t.Fatalf("Rename(%q) = %q, %q, %v; want %q", k, got, key, applied, v)
			}
		}
		back, err := compat.ParseMapping(m.String())
		if err != nil || !maps.Equal(back, m) {
			t.Fatalf("round trip of %q through %s: %v, %v", in, m.String(), back, err)
		}
	})
}
