package yamlpipe

import (
	"strings"
	"testing"
)

// TestValidateWithSchema: Beam YAML's ValidateWithSchema passes the rows
// that match a JSON Schema and rejects the others (schema_mismatch, with
// where and why) on its error output; a schema that is not one, or that
// refers to a file, is a load error at its line.
func TestValidateWithSchema(t *testing.T) {
	const head = "pipeline:\n  transforms:\n" +
		"    - type: Create\n      config:\n        elements:\n" +
		"          - {region: NORTH, amount: 250}\n          - {region: west, amount: 100}\n" +
		"          - {region: SOUTH, amount: -5}\n          - {region: EAST}\n" +
		"    - type: ValidateWithSchema\n      input: Create\n      config:\n        error_handling: {output: invalid}\n"
	const tail = "    - type: LogForTesting\n      name: Good\n      input: ValidateWithSchema\n" +
		"    - type: MapToFields\n      input: ValidateWithSchema.invalid\n" +
		"      config: {language: python, fields: {region: element.region, reason: error.reason, message: error.message}}\n" +
		"    - type: LogForTesting\n      name: Bad\n      input: MapToFields\n"
	tests := []struct {
		name, schema string
		want         []string
		loadErr      string
	}{
		{name: "pattern, minimum and required",
			schema: "        schema:\n          type: object\n          required: [region, amount]\n" +
				"          properties:\n            region: {type: string, pattern: '^[A-Z]+$'}\n            amount: {type: integer, minimum: 0}\n",
			want: []string{
				`{"region": "EAST", "reason": "schema_mismatch", "message": "the row does not match the schema: at '/amount': got null, want integer"}`,
				`{"region": "NORTH", "amount": 250}`,
				`{"region": "SOUTH", "reason": "schema_mismatch", "message": "the row does not match the schema: at '/amount': minimum: got -5, want 0"}`,
				`{"region": "west", "reason": "schema_mismatch", "message": "the row does not match the schema: at '/region': 'west' does not match pattern '^[A-Z]+$'"}`,
			}},
		{name: "a $ref inside the schema",
			schema: "        schema:\n          $defs: {positive: {type: integer, minimum: 1}}\n" +
				"          properties: {amount: {$ref: '#/$defs/positive'}}\n",
			want: []string{
				`{"region": "EAST", "reason": "schema_mismatch", "message": "the row does not match the schema: at '/amount': got null, want integer"}`,
				`{"region": "NORTH", "amount": 250}`,
				`{"region": "SOUTH", "reason": "schema_mismatch", "message": "the row does not match the schema: at '/amount': minimum: got -5, want 1"}`,
				`{"region": "west", "amount": 100}`,
			}},
		{name: "a $ref to a file is refused",
			schema:  "        schema: {properties: {amount: {$ref: 'file:///etc/passwd'}}}\n",
			loadErr: "may only refer to itself"},
		{name: "not a schema",
			schema:  "        schema: {type: object, properties: {amount: {type: whole}}}\n",
			loadErr: "p.yaml:14:17: schema is not a JSON Schema"},
		{name: "no schema", schema: "",
			loadErr: "ValidateWithSchema needs config.schema"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := head + tc.schema + tail
			if tc.loadErr != "" {
				_, err := Load("p.yaml", []byte(src), Options{BaseDir: t.TempDir()})
				if err == nil || !strings.Contains(err.Error(), tc.loadErr) {
					t.Fatalf("load error %v, want %q", err, tc.loadErr)
				}
				return
			}
			lines, _ := runLogged(t, src, 2)
			wantLines(t, lines, tc.want...)
		})
	}
}
