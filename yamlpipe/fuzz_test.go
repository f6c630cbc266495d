package yamlpipe

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// FuzzLoad checks that the loader never panics and that every error it
// returns carries a file position. Seeds: testdata/fuzz/FuzzLoad.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(createT))
	f.Add([]byte("pipeline:\n  type: chain\n  transforms:\n    - type: Generate\n      config: {count: 3}\n    - type: Filter\n      config: {keep: amount > 5}\n"))
	// Beam YAML's newer syntax: Python, Join, ExtractWindowingInfo, hints.
	f.Add([]byte(pyInput + "    - type: MapToFields\n      config:\n        language: python\n        fields: {x: \"name.upper() if price > 2 else f'{name}'\", y: {callable: 'lambda r: r.tags'}}\n"))
	f.Add([]byte(pyInput + "    - type: Filter\n      config:\n        language: python\n        keep:\n          callable: |\n            def f(row):\n              import os\n              return row.price\n"))
	f.Add([]byte(joinInputs + "    - type: Join\n      input: {A: A, B: B}\n      config: {equalities: common, type: {outer: [A]}, fields: {A: [a]}}\n"))
	f.Add([]byte(joinPairInputs + "    - type: Join\n      input: {U: Users, O: Orders, C: Cities}\n      config: {type: right, equalities: [{U: uid, O: user}, {U: city, C: id}], fields: {U: [name]}}\n"))
	f.Add([]byte("pipeline:\n  type: chain\n  transforms:\n    - type: Create\n      config: {elements: [{k: a, v: 1}]}\n    - type: Combine\n      windowing: {type: fixed, size: 60s}\n      config: {language: python, group_by: k, combine: {v: sum}}\n    - type: MapToFields\n      config: {fields: {k: k, s: window_start, late: \"pane.timing == 'LATE'\"}}\n"))
	f.Add([]byte(pyInput + "    - type: ExtractWindowingInfo\n      config: {fields: {t: timestamp, w: window_string, p: pane_info}}\n      resource_hints: {min_ram: 1GB}\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		_, err := Load("f.yaml", src, Options{BaseDir: t.TempDir()})
		if err == nil {
			return
		}
		var pe *Error
		if !errors.As(err, &pe) {
			t.Fatalf("error without a position: %v", err)
		}
		if pe.Line < 1 || pe.Col < 1 || !strings.HasPrefix(err.Error(), "f.yaml:") {
			t.Fatalf("bad position in %q", err)
		}
	})
}

// FuzzPython checks that compiling arbitrary Python in the Starlark
// dialect over a fixed schema, and running it on a row, never panics, and
// that every load error carries a position.
func FuzzPython(f *testing.F) {
	for _, s := range []string{"price * 2", "name.upper()", "import os", "lambda row: row.tags[0]", "f'{name}'",
		"x is None", "price ** 2", "def f(row):\n  return row.price", "class A: pass", "[t for t in tags if t]", "'%s' % name"} {
		f.Add(s)
	}
	schema := row.MustSchema(
		row.Field{Name: "name", Type: row.Of(row.KindString)},
		row.Field{Name: "price", Type: row.Of(row.KindInt)},
		row.Field{Name: "tags", Type: row.ListOf(row.Of(row.KindString))},
	)
	r := &row.Row{Schema: schema, Values: []any{"kiwi", int64(7), []any{"a"}}}
	f.Fuzz(func(t *testing.T, src string) {
		l := &loader{file: "f.yaml"}
		n := &yamlnode.Node{Kind: yamlnode.String, Text: src, Line: 3, Col: 9}
		if strings.HasPrefix(strings.TrimSpace(src), "lambda") || strings.HasPrefix(strings.TrimSpace(src), "def") {
			n = &yamlnode.Node{Kind: yamlnode.Map, Line: 3, Col: 9, Keys: []*yamlnode.Node{{Kind: yamlnode.String, Text: "callable", Line: 3, Col: 9}}, Vals: []*yamlnode.Node{n}}
		}
		py, err := l.compilePython(&coll{schema: schema}, n, "fuzz")
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || pe.Line < 1 || pe.Col < 1 {
				t.Fatalf("error without a position: %v", err)
			}
			return
		}
		_, _ = py.NewEval().Eval(r, "fuzz")
	})
}

// FuzzJinja checks that rendering arbitrary templates never panics and
// that errors carry a position.
func FuzzJinja(f *testing.F) {
	for _, s := range []string{"{{ x }}", "{% for i in range(3) %}{{ i }}{% endfor %}", "{% include 'nope' %}",
		"{% import 'nope' as m %}{{ m.f() }}", "{{ foo( }}", "{% if %}", "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1) }}",
		"{{ undefined_var }}", "{% if y is defined %}{{ y }}{% endif %}{{ z | default('d') }}", "{% set a = 1 %}{{ a.b }}{{ q.r }}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if strings.Contains(src, "range") || strings.Contains(src, "*") {
			return // in this process, what a loop prints is bounded only after the engine built it: yamlpipe/jinja's FuzzRender renders these in the sandbox
		}
		_, err := RenderJinja(filepath.Join(t.TempDir(), "f.yaml"), []byte(src), map[string]any{"x": 1})
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || pe.Line < 1 || pe.Col < 1 {
				t.Fatalf("error without a position: %v", err)
			}
		}
	})
}
