package yamlpipe

import (
	"bytes"
	"context"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/weir-dev/weir"
)

// pyJSON renders a Go string literal as Beam's LogForTesting prints it:
// JSON with non-ASCII characters escaped.
func pyJSON(s string) string { return string(appendPyString(nil, s)) }

// Beam's published examples (testdata/beam, see its README) load unchanged
// and print the rows Beam's documentation gives.
func TestBeamPublishedExamples(t *testing.T) {
	plants := func(names ...string) []string {
		var out []string
		for _, n := range names {
			out = append(out, `{"element": `+pyJSON(n)+`}`)
		}
		return out
	}
	strip := plants("🍓Strawberry", "🥕Carrot", "🍆Eggplant", "🍅Tomato", "🥔Potato")
	tests := []struct {
		file string
		want []string
	}{
		{"filter_callable.yaml", []string{
			`{"icon": ` + pyJSON("🍓") + `, "name": "Strawberry", "duration": "perennial"}`,
			`{"icon": ` + pyJSON("🍆") + `, "name": "Eggplant", "duration": "perennial"}`,
			`{"icon": ` + pyJSON("🥔") + `, "name": "Potato", "duration": "perennial"}`,
		}},
		{"map_to_fields_callable.yaml", strip},
		{"map_to_fields_with_resource_hints.yaml", strip},
		{"combine_sum_windowed.yaml", []string{
			`{"user": "bob", "window_string": "[7.0, 30.0)"}`,
			`{"user": "alice", "window_string": "[101.0, 125.0)"}`,
		}},
		{"join.yaml", []string{
			`{"common": "x", "a": 1, "b": 10, "c": 100, "common_c": "x"}`,
			`{"common": "y", "a": 2, "b": 20, "c": 200, "common_c": "y"}`,
			`{"common": "z", "a": 3, "b": 30, "c": null, "common_c": null}`,
			`{"a": 1, "c": 100}`, `{"a": 2, "c": 200}`, `{"a": 3, "c": null}`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			var buf bytes.Buffer
			p, err := LoadFile(filepath.Join("testdata", "beam", tc.file), Options{BaseDir: t.TempDir(), LogOutput: &buf})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: 2}); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
			sort.Strings(lines)
			wantLines(t, lines, tc.want...)
		})
	}
}
