package yamlpipe

import (
	"encoding/json"
	"testing"
)

// resource_hints are accepted at every level and recorded, merged, in the
// step's config; they do not change the output.
func TestResourceHintsRecorded(t *testing.T) {
	src := `pipeline:
  resource_hints: {min_ram: 2GB, cpu_count: 2}
  transforms:
    - type: Create
      config: {elements: [{a: 1}]}
    - type: composite
      name: Inner
      input: Create
      resource_hints: {accelerator: "type:nvidia-tesla-t4;count:1"}
      transforms:
        - type: MapToFields
          input: input
          resource_hints: {min_ram: 8GB}
          config: {fields: {b: a + 1}}
      output: MapToFields
    - type: LogForTesting
      input: Inner
`
	p, err := Load("p.yaml", []byte(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]any{
		"Create":            {"min_ram": "2GB", "cpu_count": float64(2)},
		"Inner/MapToFields": {"min_ram": "8GB", "cpu_count": float64(2), "accelerator": "type:nvidia-tesla-t4;count:1"},
		"LogForTesting":     {"min_ram": "2GB", "cpu_count": float64(2)},
	}
	for _, s := range p.Graph().Steps {
		w, ok := want[s.Name]
		if !ok {
			continue
		}
		delete(want, s.Name)
		var cfg map[string]any
		if s.Fn == nil || json.Unmarshal(s.Fn.Config, &cfg) != nil {
			t.Fatalf("step %s has no config", s.Name)
		}
		got, _ := json.Marshal(cfg[resourceHintsKey])
		exp, _ := json.Marshal(w)
		if string(got) != string(exp) {
			t.Errorf("step %s hints = %s, want %s", s.Name, got, exp)
		}
	}
	for name := range want {
		t.Errorf("no step %s", name)
	}
	lines, _ := runLogged(t, src, 1)
	wantLines(t, lines, `{"b": 2}`)
}

func TestResourceHintsAndProvidersErrors(t *testing.T) {
	loadErr(t, "pipeline:\n  transforms:\n    - type: Create\n      resource_hints: [min_ram]\n      config: {elements: [1]}\n", "resource_hints must be a mapping")
	loadErr(t, "pipeline:\n  transforms:\n    - type: Create\n      resource_hints: {min_ram: [1]}\n      config: {elements: [1]}\n", "resource hint min_ram must be a scalar")
	loadErr(t, "providers:\n  - type: javaJar\n    config: {jar: x.jar}\n    transforms: {MyT: a.b.C}\npipeline:\n  transforms: []\n", "providers are not supported")
}
