package yamlpipe

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/yamlpipe/assertcheck"
)

// AssertEqual passes when its input is exactly config.elements as a
// multiset, and otherwise fails the run with an assert_equal error that
// lists the missing and the unexpected elements.
func TestAssertEqual(t *testing.T) {
	const create = `pipeline:
  type: chain
  transforms:
    - type: Create
      config:
        elements: %s
`
	tests := []struct {
		name     string
		elements string // Create's
		rest     string // transforms after Create
		// want are substrings of the run's error; none: the run passes.
		want []string
	}{
		{name: "equal in any order", elements: "[{a: 1}, {a: 2}]",
			rest: "    - type: AssertEqual\n      config:\n        elements: [{a: 2}, {a: 1}]\n"},
		{name: "a missing field equals null", elements: "[{a: 1, b: x}, {a: 2}]",
			rest: "    - type: AssertEqual\n      config:\n        elements: [{a: 2, b: null}, {b: x, a: 1}]\n"},
		{name: "an int equals the float of its value", elements: "[{a: 1.0}, {a: 2.5}]",
			rest: "    - type: AssertEqual\n      config:\n        elements: [{a: 1}, {a: 2.5}]\n"},
		{name: "scalars are element rows", elements: "[1, 2]",
			rest: "    - type: AssertEqual\n      config:\n        elements: [1, {element: 2}]\n"},
		{name: "lists and nested rows", elements: "[{a: [1, 2], r: {x: s}}]",
			rest: "    - type: AssertEqual\n      config:\n        elements: [{r: {x: s}, a: [1, 2]}]\n"},
		{name: "a missing element fails", elements: "[{a: 1}]",
			rest: "    - type: AssertEqual\n      config:\n        elements: [{a: 1}, {a: 2}]\n",
			want: []string{`step "AssertEqual/Check"`, "assert_equal", `AssertEqual "AssertEqual" (t.yaml:7:13)`,
				"its input (1 elements) is not config.elements (2)", `1 missing (expected, not in the input): {"a":2}`}},
		{name: "an unexpected element fails", elements: "[{a: 1}, {a: 3}]",
			rest: "    - type: AssertEqual\n      config:\n        elements: [{a: 1}]\n",
			want: []string{`1 unexpected (in the input, not expected): {"a":3}`}},
		{name: "duplicates count", elements: "[{a: 1}, {a: 1}]",
			rest: "    - type: AssertEqual\n      config:\n        elements: [{a: 1}]\n",
			want: []string{`1 unexpected (in the input, not expected): {"a":1}`}},
		{name: "an empty input fails", elements: "[{a: 1}]",
			rest: "    - type: Filter\n      config:\n        keep: a > 5\n    - type: AssertEqual\n      config:\n        elements: [{a: 1}]\n",
			want: []string{"its input (0 elements)", `1 missing (expected, not in the input): {"a":1}`}},
		{name: "an empty input equals no elements", elements: "[{a: 1}]",
			rest: "    - type: Filter\n      config:\n        keep: a > 5\n    - type: AssertEqual\n      config:\n        elements: []\n"},
		{name: "types differ", elements: "[{a: '1'}]",
			rest: "    - type: AssertEqual\n      config:\n        elements: [{a: 1}]\n",
			want: []string{`missing (expected, not in the input): {"a":1}`, `unexpected (in the input, not expected): {"a":"1"}`}},
		{name: "after a windowed Combine for Beam", elements: "[{k: x, t: 1}, {k: x, t: 8}, {k: x, t: 11}, {k: y, t: 101}]",
			rest: "    - type: AssignTimestamps\n      config:\n        timestamp: t\n" +
				"    - type: Combine\n      config:\n        language: python\n        group_by: k\n        combine:\n          t: sum\n      windowing:\n        type: fixed\n        size: 10s\n" +
				"    - type: AssertEqual\n      config:\n        elements: [{k: x, t: 9}, {k: x, t: 11}, {k: y, t: 101}]\n"},
		{name: "weir's Combine keeps window columns an element may name", elements: "[{k: x, t: 1}, {k: x, t: 11}]",
			rest: "    - type: AssignTimestamps\n      config:\n        timestamp: t\n" +
				"    - type: Combine\n      config:\n        group_by: k\n        combine:\n          t: sum\n      windowing:\n        type: fixed\n        size: 10s\n" +
				"    - type: AssertEqual\n      config:\n        elements: [{k: x, t: 1, window_start: 0}, {k: x, t: 11, window_start: 10}]\n"},
		{name: "a windowed Combine's wrong sums fail", elements: "[{k: x, t: 1}, {k: x, t: 11}]",
			rest: "    - type: AssignTimestamps\n      config:\n        timestamp: t\n" +
				"    - type: Combine\n      config:\n        group_by: k\n        combine:\n          t: sum\n      windowing:\n        type: fixed\n        size: 10s\n" +
				"    - type: AssertEqual\n      config:\n        elements: [{k: x, t: 12}]\n",
			want: []string{`1 missing (expected, not in the input): {"k":"x","t":12}`, `2 unexpected (in the input, not expected): {"k":"x","t":11}, {"k":"x","t":1}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(create, "%s", tc.elements, 1) + tc.rest
			p, err := Load("t.yaml", []byte(src), Options{BaseDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			_, err = weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: 2})
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var se *runner.StepError
			if !errors.As(err, &se) || se.Reason != assertcheck.Reason {
				t.Fatalf("run error %v, want a StepError with reason %s", err, assertcheck.Reason)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
		})
	}
}

func TestAssertEqualLoadErrors(t *testing.T) {
	tests := []struct{ name, cfg, want string }{
		{"no elements", "      config: {}\n", "t.yaml:7:13: AssertEqual needs config.elements"},
		{"elements not a list", "      config:\n        elements: {a: 1}\n", "t.yaml:9:19: AssertEqual elements must be a list"},
		{"unknown key", "      config:\n        elements: []\n        extra: 1\n", `unknown key "extra"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := "pipeline:\n  type: chain\n  transforms:\n    - type: Create\n      config:\n        elements: [1]\n    - type: AssertEqual\n" + tc.cfg
			_, err := Load("t.yaml", []byte(src), Options{BaseDir: t.TempDir()})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("load error %v, want %q", err, tc.want)
			}
		})
	}
}
