package yamlpipe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-dev/weir/yamlpipe/schemainfer"
)

// ReadFromJson without a schema infers one from the file, as Beam's
// json.yaml test reads back what WriteToJson wrote.
func TestReadFromJsonInfersSchema(t *testing.T) {
	tests := []struct {
		name, data string
		schema     string // the inferred schema, or
		err        string // the load error
	}{
		{name: "types in first-seen order", data: `{"b": 1, "a": "x"}` + "\n" + `{"a": "y", "c": true, "b": 2}` + "\n",
			schema: "{b:int,a:string,c:bool}"},
		{name: "ints and floats mix into float", data: `{"p": 1}` + "\n\n" + `{"p": 2.5}` + "\n", schema: "{p:float}"},
		{name: "null then a type", data: `{"p": null, "q": null}` + "\n" + `{"p": 3}` + "\n", schema: "{p:int,q:string}"},
		{name: "nested", data: `{"e": {"x": 1}}` + "\n", err: `field "e" is an object: give config.schema`},
		{name: "types disagree", data: `{"e": 1}` + "\n" + `{"e": "one"}` + "\n", err: `line 2: field "e" is string here and int before`},
		{name: "not an object", data: `[1, 2]` + "\n", err: "line 1 is not a JSON object"},
		{name: "empty file", data: "", err: "has no JSON object to infer a schema from"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "in.json"), []byte(tc.data), 0o644); err != nil {
				t.Fatal(err)
			}
			src := "pipeline:\n  type: chain\n  transforms:\n    - type: ReadFromJson\n      config:\n        path: in.json*\n    - type: LogForTesting\n"
			_, err := Load("t.yaml", []byte(src), Options{BaseDir: dir})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "t.yaml:6:15: ReadFromJson without a schema infers it") {
					t.Fatalf("load error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := schemainfer.JSON(filepath.Join(dir, "in.json"))
			if err != nil || got.String() != tc.schema {
				t.Errorf("schema %v (%v), want %s", got, err, tc.schema)
			}
		})
	}
}
