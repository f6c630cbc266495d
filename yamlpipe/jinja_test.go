package yamlpipe

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/weir-dev/weir"
)

// A pipeline file is a Jinja template, as in Beam: variables from
// --jinja_variables, {% include %}, {% import %} and {% from %}.
func TestJinjaTemplating(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"main.yaml": `pipeline:
  type: chain
  transforms:
    - type: Create
      config:
        elements:
{% for n in range(count) %}
          - {n: {{ n }}, env: "{{ env }}"}
{% endfor %}
{% include 'parts/filter.yaml' %}
{% import 'macros.yaml' as m %}
{% from 'macros.yaml' import double %}
    - type: MapToFields
      config:
        fields:
          n: n
          label: {{ m.quoted(env ~ "-x") }}
          twice: {{ double("n") }}
    - type: LogForTesting
`,
		"parts/filter.yaml": `    - type: Filter
      config:
        keep: "n >= {{ min }}"`,
		"macros.yaml": `this text is not output
{% macro quoted(s) %}"'{{ s }}'"{% endmacro %}
{% macro double(f) %}"{{ f }} * 2"{% endmacro %}
`,
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	vars, err := ParseJinjaVariables(`{"count": 3, "env": "prod", "min": 1}`)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	p, err := LoadFile(filepath.Join(dir, "main.yaml"), Options{BaseDir: dir, LogOutput: &buf, JinjaVariables: vars})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: 1}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	sort.Strings(lines)
	wantLines(t, lines, `{"n": 1, "label": "prod-x", "twice": 2}`, `{"n": 2, "label": "prod-x", "twice": 4}`)
}

func TestJinjaErrors(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "main.yaml")
	if err := os.WriteFile(filepath.Join(dir, "m.yaml"), []byte("{% macro some() %}x{% endmacro %}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, src, want string }{
		{"missing include", "pipeline:\n  transforms:\n{% include 'nope.yaml' %}\n", "main.yaml:3:1: Jinja: cannot read \"nope.yaml\""},
		{"bad expression", "pipeline:\n  transforms: []\n{{ foo( }}\n", "main.yaml:3:1: Jinja template"},
		{"self include", "{% include 'main.yaml' %}\n", "nest more than 16 deep"},
		{"missing macro", "{% from 'm.yaml' import nothing %}\n", `defines no macro nothing`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(main, []byte(tc.src), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadFile(main, Options{BaseDir: dir})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := ParseJinjaVariables(`[1]`); err == nil || !strings.Contains(err.Error(), "JSON object") {
		t.Errorf("ParseJinjaVariables([1]) = %v", err)
	}
}

// An undefined variable fails the render, as Beam's StrictUndefined does,
// at the position of its first use and by name; guarded and defaulted uses
// and branches that are not rendered do not.
func TestJinjaStrictUndefined(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "part.yaml"), []byte("# part\n    - type: Filter\n      config: {keep: \"n > {{ least }}\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	head := "pipeline:\n  type: chain\n  transforms:\n    - type: Create\n      config: {elements: [{n: 1}, {n: 2}]}\n"
	tests := []struct {
		name, body, vars, want string
	}{
		{"output", "    - type: LogForTesting\n      config: {prefix: '{{ prefix }}'}\n", `{}`, `main.yaml:7:28: Jinja: "prefix" is undefined`},
		{"condition", "{% if verbose %}\n    - type: LogForTesting\n{% endif %}\n", `{}`, `main.yaml:6:7: Jinja: "verbose" is undefined`},
		{"attribute", "    - type: LogForTesting\n      config: {prefix: '{{ cfg.prefix }}'}\n", `{"cfg2": 1}`, `main.yaml:7:28: Jinja: "cfg" is undefined`},
		{"loop", "{% for x in things %}\n    - type: LogForTesting\n{% endfor %}\n", `{}`, `main.yaml:6:13: Jinja: "things" is undefined`},
		{"included file", "{% include 'part.yaml' %}\n", `{}`, `part.yaml:3:30: Jinja: "least" is undefined`},
		{"defined", "    - type: LogForTesting\n      config: {prefix: '{{ prefix if prefix is defined else \"p\" }}{{ other | default(\"q\") }}'}\n", `{}`, ``},
		{"not rendered", "{% if env == 'prod' %}\n    - type: Filter\n      config: {keep: \"n > {{ prod_min }}\"}\n{% endif %}\n    - type: LogForTesting\n", `{"env": "dev"}`, ``},
		{"bound", "{% set p = 'x' %}{% for k in [1] %}{% endfor %}\n    - type: LogForTesting\n      config: {prefix: '{{ p }}{{ loop_var | default(1) }}'}\n", `{}`, ``},
		{"given", "    - type: LogForTesting\n      config: {prefix: '{{ prefix }}'}\n", `{"prefix": "a"}`, ``},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			main := filepath.Join(dir, "main.yaml")
			if err := os.WriteFile(main, []byte(head+tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			vars, err := ParseJinjaVariables(tc.vars)
			if err != nil {
				t.Fatal(err)
			}
			_, err = LoadFile(main, Options{BaseDir: dir, LogOutput: &bytes.Buffer{}, JinjaVariables: vars})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("err = %v, want none", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
