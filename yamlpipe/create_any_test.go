package yamlpipe

import "testing"

// TestCreateMixedLiterals: a Create field whose literals disagree in type
// holds any value, as Beam's schema inference makes it; a step that wants
// one type rejects the others (ValidateWithSchema, a CEL comparison), and
// the field's other literals keep their own types.
func TestCreateMixedLiterals(t *testing.T) {
	const src = "pipeline:\n  transforms:\n    - type: Create\n      config:\n        elements:\n" +
		"          - {a: 1, b: {x: 1}}\n          - {a: x, b: 2}\n          - {a: 2.5, b: [1]}\n" +
		"    - type: LogForTesting\n      input: Create\n"
	lines, _ := runLogged(t, src, 1)
	wantLines(t, lines,
		`{"a": "x", "b": 2}`,
		`{"a": 1, "b": {"x": 1}}`,
		`{"a": 2.5, "b": [1]}`)
	p, err := Load("p.yaml", []byte(src), Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Graph().Collections {
		if c.ID == "Create.main" && c.Coder.String() != "weir:coder:row{a:any,b:any}" {
			t.Errorf("Create's rows: coder %s, want the mixed fields typed any", c.Coder.String())
		}
	}
}
