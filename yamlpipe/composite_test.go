package yamlpipe

import "testing"

func TestNestedComposite(t *testing.T) {
	src := `pipeline:
  transforms:
    - type: Create
      config:
        elements: [{k: a, v: 1}, {k: b, v: 2}, {k: a, v: 3}]
    - type: composite
      name: Totals
      input: Create
      transforms:
        - type: Filter
          input: input
          config: {keep: v > 1}
        - type: chain
          name: Sum
          input: Filter
          transforms:
            - type: Combine
              config: {language: python, group_by: k, combine: {v: sum}}
            - type: MapToFields
              config: {fields: {k: k, total: v}}
      output: Sum
    - type: composite
      name: Two
      input: {rows: Create}
      transforms:
        - type: MapToFields
          name: Double
          input: rows
          config: {fields: {k: k, v2: v * 2}}
        - type: MapToFields
          name: Triple
          input: rows
          config: {fields: {k: k, v3: v * 3}}
      output: {double: Double, triple: Triple}
    - type: LogForTesting
      input: Totals
      config: {prefix: 'total '}
    - type: LogForTesting
      name: LogTriple
      input: Two.triple
      config: {prefix: 'triple '}
`
	lines, _ := runLogged(t, src, 2)
	wantLines(t, lines, `total {"k": "a", "total": 3}`, `total {"k": "b", "total": 2}`,
		`triple {"k": "a", "v3": 3}`, `triple {"k": "b", "v3": 6}`, `triple {"k": "a", "v3": 9}`)

	// Steps are named after their composite.
	p, err := Load("p.yaml", []byte(src), Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"Totals/Filter", "Totals/Sum/Combine", "Totals/Sum/MapToFields", "Two/Double"} {
		if p.Graph().Step(name) == nil {
			t.Errorf("no step %q", name)
		}
	}
	loadErr(t, "pipeline:\n  transforms:\n    - type: Create\n      config: {elements: [{v: 1}]}\n    - type: composite\n      name: C\n      input: Create\n      transforms:\n        - type: Filter\n          input: Create\n          config: {keep: v > 0}\n",
		`unknown input "Create" in C`)
	loadErr(t, "pipeline:\n  transforms:\n    - type: Create\n      config: {elements: [{v: 1}]}\n    - type: composite\n      name: C\n      input: Create\n      transforms: []\n", "needs a non-empty transforms list")
	loadErr(t, "pipeline:\n  transforms:\n    - type: Create\n      config: {elements: [{v: 1}]}\n    - type: composite\n      name: Create\n      input: Create\n      transforms:\n        - type: Filter\n          input: input\n          config: {keep: v > 0}\n", `duplicate transform name "Create"`)
}
