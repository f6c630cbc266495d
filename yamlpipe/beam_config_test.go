package yamlpipe

import (
	"strings"
	"testing"
)

// Beam config keys weir accepts with Beam's meaning: Create's output_schema
// and reshuffle, Reshuffle, repeated unnamed sinks; and the load errors of
// their wrong uses.
func TestBeamConfigKeys(t *testing.T) {
	const head = "pipeline:\n  type: chain\n  transforms:\n"
	tests := []struct {
		name, src string
		want      []string // LogForTesting lines, sorted
		loadErr   string
	}{
		{name: "output_schema keeps matching elements", src: head +
			"    - type: Create\n      config:\n        elements: [{a: 1, b: x}, {a: 2.5}]\n" +
			"        output_schema: {type: object, properties: {a: {type: number}, b: {type: string}}}\n    - type: LogForTesting\n",
			want: []string{`{"a": 1.0, "b": "x"}`, `{"a": 2.5, "b": null}`}},
		{name: "output_schema rejects to Beam's error output", src: "pipeline:\n  transforms:\n" +
			"    - type: Create\n      config:\n        elements: [{a: 1}, {a: one}]\n" +
			"        output_schema:\n          type: object\n          properties: {a: {type: integer}}\n          error_handling: {output: bad}\n" +
			"    - type: LogForTesting\n      name: Good\n      input: Create\n" +
			"    - type: MapToFields\n      input: Create.bad\n      config: {language: python, fields: {a: element.a, reason: error.reason, message: error.message}}\n" +
			"    - type: LogForTesting\n      name: Bad\n      input: MapToFields\n",
			want: []string{`{"a": "one", "reason": "schema_mismatch", "message": "field a is string \"one\", output_schema wants integer"}`, `{"a": 1}`}},
		{name: "output_schema unknown type", src: head +
			"    - type: Create\n      config:\n        elements: [{a: 1}]\n        output_schema: {type: object, properties: {a: {type: int}}}\n    - type: LogForTesting\n",
			loadErr: `t.yaml:7:62: output_schema property "a": unknown JSON Schema type "int" (want string, integer, number, boolean, array, object, null)`},
		{name: "output_schema error_handling twice", src: head +
			"    - type: Create\n      config:\n        elements: [{a: 1}]\n        error_handling: {output: x}\n        output_schema: {type: object, error_handling: {output: y}}\n    - type: LogForTesting\n",
			loadErr: "error_handling is given twice"},
		{name: "reshuffle must be a bool", src: head +
			"    - type: Create\n      config:\n        elements: [1]\n        reshuffle: maybe\n    - type: LogForTesting\n",
			loadErr: "t.yaml:7:20: Create reshuffle must be true or false"},
		{name: "Reshuffle passes elements on", src: head +
			"    - type: Create\n      config:\n        elements: [1, 2]\n    - type: Reshuffle\n      config: {num_buckets: 4}\n    - type: LogForTesting\n",
			want: []string{`{"element": 1}`, `{"element": 2}`}},
		{name: "Reshuffle num_buckets", src: head +
			"    - type: Create\n      config:\n        elements: [1]\n    - type: Reshuffle\n      config: {num_buckets: 0}\n",
			loadErr: "t.yaml:8:29: Reshuffle num_buckets must be a positive integer"},
		{name: "unnamed transforms of one type in a chain", src: head +
			"    - type: Create\n      config: {elements: [{a: 1}]}\n    - type: MapToFields\n      config: {fields: {a: a + 1}}\n" +
			"    - type: MapToFields\n      config: {fields: {a: a * 10}}\n    - type: LogForTesting\n",
			want: []string{`{"a": 20}`}},
		{name: "the bare type of repeated unnamed transforms is ambiguous", src: "pipeline:\n  transforms:\n" +
			"    - type: Create\n      config: {elements: [1]}\n    - type: Create\n      config: {elements: [2]}\n" +
			"    - type: LogForTesting\n      input: Create\n",
			loadErr: `t.yaml:8:14: input "Create" is ambiguous: 2 unnamed Create transforms (Create (line 3), Create@5 (line 5)); give them names, or read one by its automatic name`},
		{name: "remote paths are refused", src: head +
			"    - type: ReadFromText\n      config:\n        path: gs://bucket/kinglear.txt\n    - type: LogForTesting\n",
			loadErr: "t.yaml:6:15: gs:// paths are not supported: weir reads and writes local files"},
		{name: "sql names a field", src: head +
			"    - type: Create\n      config:\n        elements: [{rank: 1}]\n    - type: MapToFields\n      config:\n        language: sql\n        fields: {a: '`rank`', b: rank}\n    - type: LogForTesting\n",
			want: []string{`{"a": 1, "b": 1}`}},
		{name: "sql expressions", src: head +
			"    - type: Create\n      config:\n        elements: [{rank: 1, name: ann}, {rank: 3, name: bo}]\n    - type: MapToFields\n      config:\n        language: sql\n" +
			"        fields: {a: rank + 1, \"b c\": \"upper(name) || '!'\", rank: '`rank`'}\n    - type: LogForTesting\n",
			want: []string{`{"a": 2, "b c": "ANN!", "rank": 1}`, `{"a": 4, "b c": "BO!", "rank": 3}`}},
		{name: "sql expressions appended", src: head +
			"    - type: Create\n      config:\n        elements: [{rank: 1, name: ann}]\n    - type: MapToFields\n      config:\n        language: sql\n" +
			"        append: true\n        drop: [name]\n        fields: {rank: rank * 10, len: length(name)}\n    - type: LogForTesting\n",
			want: []string{`{"rank": 10, "len": 3}`}},
		{name: "sql expression that does not compile", src: head +
			"    - type: Create\n      config:\n        elements: [{rank: 1}]\n    - type: MapToFields\n      config:\n        language: sql\n        fields: {a: rank +, b: nope}\n",
			loadErr: `t.yaml:10:21: field a: SQL expression: the query does not compile: near "FROM": syntax error`},
		{name: "sql aggregate in MapToFields", src: head +
			"    - type: Create\n      config:\n        elements: [{rank: 1}]\n    - type: MapToFields\n      config:\n        language: sql\n        fields: {a: sum(rank)}\n",
			loadErr: `aggregates, window functions and subqueries over the input belong in a Sql transform`},
		{name: "sql in Filter", src: head +
			"    - type: Create\n      config:\n        elements: [{rank: 1, name: ann}, {rank: 2, name: null}, {rank: 3, name: cy}]\n    - type: Filter\n      config:\n        language: sql\n        keep: rank > 1 AND name <> 'x'\n    - type: LogForTesting\n",
			want: []string{`{"rank": 3, "name": "cy"}`}},
		{name: "sql in Filter that does not compile", src: head +
			"    - type: Create\n      config:\n        elements: [{rank: 1}]\n    - type: Filter\n      config:\n        language: sql\n        keep: ranks > 1\n",
			loadErr: `t.yaml:10:15: keep: SQL condition: the query does not compile: no such column: ranks`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.loadErr != "" {
				_, err := Load("t.yaml", []byte(tc.src), Options{BaseDir: t.TempDir()})
				if err == nil || !strings.Contains(err.Error(), tc.loadErr) {
					t.Fatalf("load error %v, want %q", err, tc.loadErr)
				}
				return
			}
			lines, _ := runLogged(t, tc.src, 2)
			wantLines(t, lines, tc.want...)
		})
	}
}
