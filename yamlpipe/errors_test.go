package yamlpipe

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// A valid preamble most error cases extend.
const createT = `pipeline:
  transforms:
    - type: Create
      name: In
      config:
        elements:
          - {region: NORTH, amount: 250, ts: "2026-03-01T00:01:00Z"}
`

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name      string
		src       string
		line, col int
		msg       string
	}{
		{"invalid yaml", "pipeline:\n  transforms: [\n", 2, 15, "invalid YAML"},
		{"tab indentation", "pipeline:\n\ttransforms: []\n", 2, 1, "invalid YAML"},
		{"empty file", "", 1, 1, "empty"},
		{"not a mapping", "- a\n- b\n", 1, 1, "must be a mapping"},
		{"no pipeline", "options: {}\n", 1, 1, "no pipeline key"},
		{"unknown top key", "pipeline: {transforms: []}\nfoo: 1\n", 2, 1, `unknown key "foo"`},
		{"empty transforms", "pipeline:\n  transforms: []\n", 2, 15, "empty"},
		{"unknown type", "pipeline:\n  transforms:\n    - type: Frobnicate\n", 3, 13, `unknown transform type "Frobnicate"`},
		{"missing type", "pipeline:\n  transforms:\n    - name: X\n", 3, 7, `needs "type"`},
		{"unknown transform key", createT + "      colour: red\n", 8, 7, `unknown key "colour"`},
		{"unknown config key", "pipeline:\n  transforms:\n    - type: Create\n      config:\n        elements: []\n        elemnts: []\n", 6, 9, `unknown key "elemnts" in Create config`},
		{"duplicate key", "pipeline:\n  transforms:\n    - type: Create\n      type: Create\n", 4, 7, `already defined`},
		{"duplicate names", createT + "    - type: Create\n      name: In\n      config: {elements: [{a: 1}]}\n", 9, 13, `duplicate transform name "In"`},
		{"two unnamed read by their type", "pipeline:\n  transforms:\n    - type: Create\n      config: {elements: [{a: 1}]}\n    - type: Create\n      config: {elements: [{a: 1}]}\n    - type: LogForTesting\n      input: Create\n", 8, 14, "is ambiguous: 2 unnamed Create transforms"},
		{"unknown input", createT + "    - type: Filter\n      input: Nope\n      config: {keep: 'amount > 0'}\n", 9, 14, `unknown input "Nope"`},
		{"missing input", createT + "    - type: Filter\n      config: {keep: 'amount > 0'}\n", 8, 13, "needs an input"},
		{"unknown output tag", createT + "    - type: Filter\n      input: In.bad\n      config: {keep: 'amount > 0'}\n", 9, 14, `has no output "bad"`},
		{"cycle", "pipeline:\n  transforms:\n    - type: Filter\n      name: A\n      input: B\n      config: {keep: 'true'}\n    - type: Filter\n      name: B\n      input: A\n      config: {keep: 'true'}\n", 9, 14, "cycle"},
		{"cel syntax error", createT + "    - type: Filter\n      input: In\n      config: {keep: 'amount >'}\n", 10, 31, "Syntax error"},
		{"cel unknown field", createT + "    - type: Filter\n      input: In\n      config:\n        keep: amount > 0 && colour == 'red'\n", 11, 29, "undeclared reference to 'colour'"},
		{"cel type error", createT + "    - type: Filter\n      input: In\n      config:\n        keep: region + 1\n", 11, 22, "no matching overload"},
		{"filter not bool", createT + "    - type: Filter\n      input: In\n      config:\n        keep: amount + 1\n", 11, 15, "must be a boolean expression"},
		{"validate rule error", createT + "    - type: Validate\n      input: In\n      config:\n        rules:\n          ok: amount > 'x'\n", 12, 22, "rule ok: CEL"},
		{"map field error", createT + "    - type: MapToFields\n      input: In\n      config:\n        fields:\n          x: nope\n", 12, 14, "undeclared reference to 'nope'"},
		{"bad window type", createT + "    - type: WindowInto\n      input: In\n      config:\n        windowing: {type: hourly}\n", 11, 27, `unknown window type "hourly"`},
		{"bad duration", createT + "    - type: WindowInto\n      input: In\n      config:\n        windowing: {type: fixed, size: 5 minutes}\n", 11, 40, "bad size"},
		{"fixed without size", createT + "    - type: WindowInto\n      input: In\n      windowing: {type: fixed}\n", 10, 25, "fixed windows need size"},
		{"sessions with size", createT + "    - type: WindowInto\n      input: In\n      windowing: {type: sessions, gap: 1m, size: 5m}\n", 10, 44, "sessions windows take no size"},
		{"bad trigger", createT + "    - type: WindowInto\n      input: In\n      windowing:\n        type: fixed\n        size: 60\n        trigger: {type: after_count}\n", 13, 25, "after_count needs a count"},
		{"after_count beyond Beam's int", createT + "    - type: WindowInto\n      input: In\n      windowing:\n        type: fixed\n        size: 60\n        trigger: {type: after_count, count: 3000000000}\n", 13, 45, "count is at most 2147483647"},
		{"bad sub trigger", createT + "    - type: WindowInto\n      input: In\n      windowing:\n        type: fixed\n        size: 60\n        trigger: {type: after_watermark, late: {type: sometimes}}\n", 13, 55, `unknown trigger type "sometimes"`},
		{"bad accumulation", createT + "    - type: WindowInto\n      input: In\n      windowing: {type: global, accumulation_mode: hoarding}\n", 10, 52, `unknown accumulation_mode "hoarding"`},
		{"sliding period > size", createT + "    - type: WindowInto\n      input: In\n      windowing: {type: sliding, size: 1m, period: 5m}\n", 10, 18, "bad windowing"},
		{"error output not consumed", createT + "    - type: Filter\n      input: In\n      config: {keep: 'true'}\n      error_handling: {output: bad}\n", 11, 32, `error output "bad" of "Filter" is not consumed`},
		{"error handling unsupported", createT + "    - type: WindowInto\n      input: In\n      windowing: {type: fixed, size: 60s}\n      error_handling: {output: bad}\n", 11, 23, "takes no error_handling"},
		{"combine unknown field", createT + "    - type: Combine\n      input: In\n      config:\n        group_by: colour\n        combine: {amount: sum}\n", 11, 19, `group_by: "colour" is not a field`},
		{"combine unknown fn", createT + "    - type: Combine\n      input: In\n      config:\n        group_by: region\n        combine: {amount: median}\n", 12, 27, `unknown combine fn "median"`},
		{"combine sum of string", createT + "    - type: Combine\n      input: In\n      config:\n        group_by: amount\n        combine: {r: {value: region, fn: sum}}\n", 12, 42, "needs a numeric field"},
		{"combine reserved name", createT + "    - type: Combine\n      input: In\n      config:\n        combine: {pane: {value: amount, fn: sum}}\n", 11, 19, "reserved name"},
		{"read json without schema and no file", "pipeline:\n  transforms:\n    - type: ReadFromJson\n      config: {path: x.jsonl}\n", 4, 22, "without a schema infers it from the file at load time: reading x.jsonl"},
		{"read json bad type", "pipeline:\n  transforms:\n    - type: ReadFromJson\n      config: {path: x.jsonl, schema: {a: integer64}}\n", 4, 43, `unknown type "integer64"`},
		{"timestamp field not in schema", "pipeline:\n  transforms:\n    - type: ReadFromJson\n      config: {path: x.jsonl, schema: {a: int}, timestamp_field: ts}\n", 4, 66, `timestamp_field "ts" is not in the schema`},
		{"flatten schema mismatch", createT + "    - type: Create\n      name: Other\n      config: {elements: [{x: 1}]}\n    - type: Flatten\n      input: [In, Other]\n      \n", 12, 19, "same fields"},
		{"side input unknown", createT + "    - type: Filter\n      input: In\n      config:\n        keep: 'true'\n        side_inputs: {k: Nope}\n", 12, 26, `unknown input "Nope"`},
		{"side input key unknown", createT + "    - type: Filter\n      input: In\n      config:\n        keep: region in k\n        side_inputs: {k: In}\n        side_input_key: colour\n", 13, 25, `side_input_key "colour" is not a field`},
		{"chain with input", "pipeline:\n  type: chain\n  transforms:\n    - type: Create\n      config: {elements: [{a: 1}]}\n    - type: Filter\n      input: Create\n      config: {keep: 'true'}\n", 7, 7, "remove input"},
		{"chain starting with filter", "pipeline:\n  type: chain\n  transforms:\n    - type: Filter\n      config: {keep: 'true'}\n", 4, 13, "must start with a source"},
		{"source with input", createT + "    - type: Create\n      name: C2\n      input: In\n      config: {elements: [{a: 1}]}\n", 10, 7, "takes no input"},
		{"bad roll_size", createT + "    - type: WriteToJson\n      input: In\n      config: {path: o.jsonl, roll_size: 12 parsecs}\n", 10, 42, "roll_size \"12 parsecs\": want a positive size"},
		{"zero roll_interval", createT + "    - type: WriteToCsv\n      input: In\n      config: {path: o.csv, roll_interval: 0s}\n", 10, 44, "roll_interval must be a positive duration"},
		{"roll_size on Parquet", createT + "    - type: WriteToParquet\n      input: In\n      config: {path: o.parquet, roll_size: 1MiB}\n", 10, 33, `unknown key "roll_size"`},
		{"sink used as input", createT + "    - type: WriteToJson\n      input: In\n      config: {path: o.jsonl}\n    - type: Filter\n      input: WriteToJson\n      config: {keep: 'true'}\n", 12, 14, "is a sink and has no output"},
		{"generate negative count", "pipeline:\n  transforms:\n    - type: Generate\n      config: {count: -1}\n", 4, 23, "must not be negative"},
		{"teststream two keys", "pipeline:\n  transforms:\n    - type: TestStream\n      config:\n        events:\n          - {add: [{a: 1}], advance_watermark_to: 5}\n", 6, 13, "exactly one of"},
		{"teststream bad time", "pipeline:\n  transforms:\n    - type: TestStream\n      config:\n        events:\n          - advance_watermark_to: yesterday\n", 6, 35, "bad advance_watermark_to"},
		{"alias to nothing", "pipeline:\n  transforms: *nope\n", 2, 15, "refers to no anchor"},
		{"merge key", "base: &b {type: Create}\npipeline:\n  transforms:\n    - <<: *b\n", 4, 7, "merge keys"},
		{"two documents", "pipeline: {transforms: []}\n---\npipeline: {transforms: []}\n", 2, 1, "2 YAML documents"},
		{"bad name", createT + "    - type: Filter\n      name: 'a*b'\n      input: In\n      config: {keep: 'true'}\n", 9, 13, "bad transform name"},
		{"map to fields drop without append", createT + "    - type: MapToFields\n      input: In\n      config: {fields: {x: amount}, drop: [region]}\n", 10, 37, "drop only applies with append"},
		{"language python", createT + "    - type: Filter\n      input: In\n      config: {language: python, keep: 'true'}\n", 10, 41, `name "true" is not defined: Python spells it True`},
		{"language ruby", createT + "    - type: Filter\n      input: In\n      config: {language: ruby, keep: 'true'}\n", 10, 26, `language "ruby" is not supported`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("p.yaml", []byte(tc.src), Options{})
			if err == nil {
				t.Fatalf("Load succeeded; want an error containing %q", tc.msg)
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %q carries no position", err)
			}
			want := fmt.Sprintf("p.yaml:%d:%d: ", tc.line, tc.col)
			if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error = %q\nwant prefix %q and fragment %q", err, want, tc.msg)
			}
		})
	}
}
