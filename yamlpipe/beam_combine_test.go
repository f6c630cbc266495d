package yamlpipe

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// produceT is the input of Beam's aggregation examples.
const produceT = `pipeline:
  type: chain
  transforms:
    - type: Create
      name: Create produce
      config:
        elements:
          - {produce: '🥕', amount: 3, ok: true, tags: [a]}
          - {produce: '🥕', amount: 2, ok: false, tags: [b, c]}
          - {produce: '🍆', amount: 1, ok: true, tags: []}
          - {produce: '🍅', amount: 4, ok: true, tags: [d]}
          - {produce: '🍅', amount: 5, ok: true, tags: [e]}
          - {produce: '🍅', amount: 3, ok: true, tags: [f]}
`

// sinkJSON is the chain's last step: the rows, as JSON lines, in out.jsonl.
const sinkJSON = "    - type: WriteToJson\n      config: {path: out.jsonl}\n"

// outLines runs src (which writes out.jsonl) and returns its lines sorted.
func outLines(t *testing.T, src string, workers int) []string {
	t.Helper()
	dir := t.TempDir()
	if err := runSrc(t, dir, src, workers); err != nil {
		t.Fatalf("run: %v", err)
	}
	return sortedLines(t, filepath.Join(dir, "out.jsonl"))
}

func sortedLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	sort.Strings(out)
	return out
}

func wantLines(t *testing.T, got []string, want ...string) {
	t.Helper()
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rows:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestCombineBeamFns(t *testing.T) {
	tests := []struct {
		name    string
		combine string
		want    []string
	}{
		{"sum short form", "          amount: sum\n",
			[]string{`{"produce":"🍅","amount":12}`, `{"produce":"🍆","amount":1}`, `{"produce":"🥕","amount":5}`}},
		{"count short form counts elements", "          amount: count\n",
			[]string{`{"produce":"🍅","amount":3}`, `{"produce":"🍆","amount":1}`, `{"produce":"🥕","amount":2}`}},
		{"count without value", "          n: {fn: count}\n",
			[]string{`{"produce":"🍅","n":3}`, `{"produce":"🍆","n":1}`, `{"produce":"🥕","n":2}`}},
		{"fn type form", "          total: {value: amount, fn: {type: sum}}\n",
			[]string{`{"produce":"🍅","total":12}`, `{"produce":"🍆","total":1}`, `{"produce":"🥕","total":5}`}},
		{"min max mean", "          lo: {value: amount, fn: min}\n          hi: {value: amount, fn: max}\n          avg: {value: amount, fn: mean}\n",
			[]string{`{"produce":"🍅","lo":3,"hi":5,"avg":4}`, `{"produce":"🍆","lo":1,"hi":1,"avg":1}`, `{"produce":"🥕","lo":2,"hi":3,"avg":2.5}`}},
		{"all any", "          every: {value: ok, fn: all}\n          some: {value: ok, fn: any}\n",
			[]string{`{"produce":"🍅","every":true,"some":true}`, `{"produce":"🍆","every":true,"some":true}`, `{"produce":"🥕","every":false,"some":true}`}},
		{"concat", "          tags: concat\n",
			[]string{`{"produce":"🍅","tags":["d","e","f"]}`, `{"produce":"🍆","tags":[]}`, `{"produce":"🥕","tags":["a","b","c"]}`}},
		{"largest", "          biggest:\n            value: amount\n            fn:\n              type: 'apache_beam.transforms.combiners.TopCombineFn'\n              config:\n                n: 2\n",
			[]string{`{"produce":"🍅","biggest":[5,4]}`, `{"produce":"🍆","biggest":[1]}`, `{"produce":"🥕","biggest":[3,2]}`}},
		{"smallest", "          smallest:\n            value: amount\n            fn:\n              type: 'apache_beam.transforms.combiners.TopCombineFn'\n              config:\n                n: 2\n                reverse: true\n",
			[]string{`{"produce":"🍅","smallest":[3,4]}`, `{"produce":"🍆","smallest":[1]}`, `{"produce":"🥕","smallest":[2,3]}`}},
		{"smallest shorthand", "          s: {value: amount, fn: {type: smallest, config: {n: 1}}}\n",
			[]string{`{"produce":"🍅","s":[3]}`, `{"produce":"🍆","s":[1]}`, `{"produce":"🥕","s":[2]}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, workers := range []int{1, 3} {
				if tc.name == "concat" && workers > 1 {
					continue // concat keeps arrival order, as group does
				}
				src := produceT + "    - type: Combine\n      config:\n        language: python\n        group_by: produce\n        combine:\n" + tc.combine + sinkJSON
				wantLines(t, outLines(t, src, workers), tc.want...)
			}
		})
	}
}

// group keeps arrival order, so it runs on one worker.
func TestCombineBeamGroup(t *testing.T) {
	src := produceT + "    - type: Combine\n      config:\n        language: generic\n        group_by: [produce]\n        combine:\n          amounts: {value: amount, fn: group}\n" + sinkJSON
	wantLines(t, outLines(t, src, 1), `{"produce":"🍅","amounts":[4,5,3]}`, `{"produce":"🍆","amounts":[1]}`, `{"produce":"🥕","amounts":[3,2]}`)
}

func TestCombineBeamGlobal(t *testing.T) {
	src := produceT + "    - type: Combine\n      config:\n        language: python\n        group_by: []\n        combine:\n          amount: sum\n" + sinkJSON
	wantLines(t, outLines(t, src, 2), `{"amount":18}`)
}

// Without language, a Combine keeps weir's shape: window and pane columns.
func TestCombineWeirShapeKept(t *testing.T) {
	src := produceT + "    - type: Combine\n      config:\n        group_by: produce\n        combine:\n          amount: sum\n          s: {value: amount, fn: {type: smallest, config: {n: 1}}}\n" + sinkJSON
	pane := `"pane":{"index":0,"timing":"ON_TIME","is_first":true,"is_last":true}`
	wantLines(t, outLines(t, src, 1),
		`{"produce":"🍅","amount":12,"s":[3],"window_start":null,"window_end":null,`+pane+`}`,
		`{"produce":"🍆","amount":1,"s":[1],"window_start":null,"window_end":null,`+pane+`}`,
		`{"produce":"🥕","amount":5,"s":[2],"window_start":null,"window_end":null,`+pane+`}`)
}

// A windowed Combine written for Beam (with language) has Beam's rows:
// the window and pane are element metadata, which ExtractWindowingInfo
// gives as Beam's fields and CEL reads as window_start, window_end and pane.
func TestCombineBeamWindowed(t *testing.T) {
	src := `pipeline:
  type: chain
  transforms:
    - type: Create
      config:
        timestamp_field: ts
        elements:
          - {k: a, v: 1, ts: '2026-03-01T00:00:01Z'}
          - {k: a, v: 2, ts: '2026-03-01T00:00:02Z'}
          - {k: a, v: 4, ts: '2026-03-01T00:01:02Z'}
    - type: Combine
      windowing: {type: fixed, size: 60s}
      config:
        language: python
        group_by: k
        combine: {v: sum}
`
	wantLines(t, outLines(t, src+sinkJSON, 2), `{"k":"a","v":3}`, `{"k":"a","v":4}`)
	info := src + `    - type: ExtractWindowingInfo
      config: {fields: [window_start, window_end, window_string, pane_info]}
` + sinkJSON
	pane := `"pane_info":{"index":0,"timing":"ON_TIME","is_first":true,"is_last":true}`
	wantLines(t, outLines(t, info, 2),
		`{"k":"a","v":3,"window_start":"2026-03-01T00:00:00.000Z","window_end":"2026-03-01T00:01:00.000Z","window_string":"[1772323200.0, 1772323260.0)",`+pane+`}`,
		`{"k":"a","v":4,"window_start":"2026-03-01T00:01:00.000Z","window_end":"2026-03-01T00:02:00.000Z","window_string":"[1772323260.0, 1772323320.0)",`+pane+`}`)
	cel := src + `    - type: MapToFields
      config:
        fields: {k: k, v: v, start: window_start, late: pane.timing == 'LATE'}
` + sinkJSON
	wantLines(t, outLines(t, cel, 2),
		`{"k":"a","v":3,"start":"2026-03-01T00:00:00.000Z","late":false}`,
		`{"k":"a","v":4,"start":"2026-03-01T00:01:00.000Z","late":false}`)
	// Python reads them too: timestamps as seconds, as Beam's Timestamp.
	py := src + `    - type: MapToFields
      config:
        language: python
        fields:
          k: k
          size: window_end - window_start
          first: pane.is_first
          span: {callable: 'lambda row: row.window_end - row.window_start'}
          start: window_start
` + sinkJSON
	wantLines(t, outLines(t, py, 2), `{"k":"a","size":60,"first":true,"span":60,"start":1772323200}`, `{"k":"a","size":60,"first":true,"span":60,"start":1772323260}`)
}

// Beam groups a null key like any other value.
func TestCombineNullKey(t *testing.T) {
	src := `pipeline:
  type: chain
  transforms:
    - type: Create
      config:
        elements:
          - {k: a, v: 1}
          - {k: null, v: 2}
          - {v: 3}
          - {k: a, v: 4}
    - type: Combine
      config:
        language: python
        group_by: k
        combine: {v: sum, n: {fn: count}}
` + sinkJSON
	wantLines(t, outLines(t, src, 3), `{"k":"a","v":5,"n":2}`, `{"k":null,"v":5,"n":2}`)
}

// An int64 sum that would overflow keeps its previous value; the element
// that would overflow it is a reject with reason overflow: on the step's
// error output when it declares one, else it fails the bounded run naming
// the step and the reason.
func TestCombineSumOverflow(t *testing.T) {
	const pipeline = `pipeline:
  transforms:
    - type: Create
      name: In
      config:
        elements:
          - {k: a, v: 9223372036854775807}
          - {k: a, v: 9223372036854775807}
    - type: Combine
      name: Sums
      input: In
      config:
        group_by: k
        combine: {v: sum}
%s    - type: MapToFields
      name: Out
      input: Sums
      config: {fields: {k: k, v: v}}
    - type: WriteToJson
      input: Out
      config: {path: out.jsonl}
`
	const errOut = `      error_handling: {output: bad}
    - type: MapToFields
      name: Reasons
      input: Sums.bad
      config: {fields: {reason: error.reason}}
    - type: WriteToJson
      name: WriteBad
      input: Reasons
      config: {path: bad.jsonl}
`
	dir := t.TempDir()
	if err := runSrc(t, dir, fmt.Sprintf(pipeline, errOut), 1); err != nil {
		t.Fatalf("run: %v", err)
	}
	wantLines(t, sortedLines(t, filepath.Join(dir, "out.jsonl")), `{"k":"a","v":9223372036854775807}`)
	wantLines(t, sortedLines(t, filepath.Join(dir, "bad.jsonl")), `{"reason":"overflow"}`)

	err := runSrc(t, t.TempDir(), fmt.Sprintf(pipeline, ""), 1)
	if err == nil || !strings.Contains(err.Error(), `"Sums"`) || !strings.Contains(err.Error(), "overflow") {
		t.Fatalf("run without error_handling: %v, want a failure naming step Sums and reason overflow", err)
	}
}

func TestCombineBeamLoadErrors(t *testing.T) {
	tests := []struct{ name, combine, lang, want string }{
		{"python expression", "          t: {value: 'amount * 2', fn: sum}\n", "python", "expressions in value are not supported yet"},
		{"top without n", "          t: {value: amount, fn: {type: 'apache_beam.transforms.combiners.TopCombineFn'}}\n", "python", "needs config: {n: N}"},
		{"config on sum", "          t: {value: amount, fn: {type: sum, config: {n: 1}}}\n", "python", "takes no config"},
		{"sql language", "          amount: sum\n", "sql", `language "sql" is not supported`},
		{"concat of scalar", "          amount: concat\n", "python", "concat needs a list field"},
		{"top key callable", "          t: {value: amount, fn: {type: TopCombineFn, config: {n: 1, key: 'lambda x: -x'}}}\n", "python", "key is a Python callable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := produceT + "    - type: Combine\n      config:\n        language: " + tc.lang + "\n        group_by: produce\n        combine:\n" + tc.combine
			_, err := Load("p.yaml", []byte(src), Options{BaseDir: t.TempDir()})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "p.yaml:") {
				t.Errorf("err = %v, want a positioned error containing %q", err, tc.want)
			}
		})
	}
}
