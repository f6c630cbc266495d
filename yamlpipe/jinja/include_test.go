package jinja

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeFiles writes files (name → contents) under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Includes and imports: paths resolve from the base directory (Beam's
// working directory) first, then beside the file that names them; they
// nest; a tag at the end of a line keeps the line break after it, so an
// import that is not on the first line no longer joins the next line to
// it (issue 28 item 3); tags in comments and raw blocks are text.
func TestIncludes(t *testing.T) {
	base := t.TempDir()
	writeFiles(t, base, map[string]string{
		"macros.yaml":            "not output\n{% macro q(s) %}\"{{ s }}\"{% endmacro %}\n{% macro twice(f) %}{{ f }} * 2{% endmacro %}\n",
		"tpl/main.yaml":          "unused",
		"tpl/beside.yaml":        "beside: {{ 1 + 1 }}\n",
		"tpl/parts/outer.yaml":   "outer: 1\n{% include 'parts/inner.yaml' %}\n{% include 'sibling.yaml' %}\n",
		"parts/inner.yaml":       "inner: {{ n }}\n",
		"tpl/parts/sibling.yaml": "sibling: 3\n",
		"shadow.yaml":            "shadow: base\n",
		"tpl/shadow.yaml":        "shadow: beside\n",
	})
	main := filepath.Join(base, "tpl", "main.yaml")
	for _, tc := range []struct{ name, src, want, err string }{
		{name: "import not on the first line", src: "a: 1 {% import 'macros.yaml' as m %}\nb: {{ m.q('x') }}\nc: 3\n", want: "a: 1 \nb: \"x\"\nc: 3\n"},
		{name: "import on its own line", src: "a: 1\n{% import 'macros.yaml' as m %}\nb: {{ m.q('x') }}\n", want: "a: 1\n\nb: \"x\"\n"},
		{name: "from with a new name", src: "a: {% from 'macros.yaml' import twice as double, q %}\nb: {{ double('n') }}\nc: {{ q('y') }}\n", want: "a: \nb: n * 2\nc: \"y\"\n"},
		{name: "nested includes", src: "{% include 'tpl/parts/outer.yaml' %}\nend: 1\n", want: "outer: 1\ninner: 7\nsibling: 3\nend: 1\n"},
		{name: "beside the including file", src: "{% include 'beside.yaml' %}\n", want: "beside: 2\n"},
		{name: "the base directory first", src: "{% include 'shadow.yaml' %}\n", want: "shadow: base\n"},
		{name: "comments and raw blocks", src: "{# {% include 'nope.yaml' %} #}{% raw %}{% include 'nope.yaml' %}{% endraw %}\n", want: "{% include 'nope.yaml' %}"},
		{name: "missing file", src: "a: 1\nb: {% include 'nope.yaml' %}\n", err: "main.yaml:2:4: Jinja: cannot read \"nope.yaml\": no file " + filepath.Join(base, "nope.yaml") + " (from the base directory " + base + ") or " + filepath.Join(base, "tpl", "nope.yaml") + " (beside " + main + ")"},
		{name: "missing macro", src: "{% from 'macros.yaml' import nothing %}", err: "main.yaml:1:1: Jinja: \"macros.yaml\" defines no macro nothing"},
		{name: "a variable for a name", src: "{% include name %}", err: "main.yaml:1:1: Jinja: {% include %} takes a quoted file name"},
		{name: "extends", src: "{% extends 'macros.yaml' %}", err: "{% extends %} (template inheritance) is not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := RenderWith(t.Context(), main, []byte(tc.src), Options{Vars: map[string]any{"n": 7}, BaseDir: base})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || string(out) != tc.want {
				t.Fatalf("= %q, %v; want %q", out, err, tc.want)
			}
		})
	}
}

// A template sent to a server names no file it may read: every include,
// import, from or extends is refused at its position, also in the sandbox.
func TestInlineRefusesFiles(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"a: 1\nb: {% include 'x.yaml' %}\n", "p.yaml:2:4: Jinja: {% include 'x.yaml' %} reads another file"},
		{"{%- import \"m.yaml\" as m -%}\n", "p.yaml:1:1: Jinja: {%- import \"m.yaml\" as m -%} reads another file"},
		{"x\n  {% from 'm' import a %}", "p.yaml:2:3: Jinja: {% from 'm' import a %} reads another file"},
		{"{% include name %}", "p.yaml:1:1: Jinja: {% include name %} reads another file"},
	} {
		for _, sb := range []*Sandbox{nil, testSandbox(t)} {
			_, err := RenderWith(t.Context(), "p.yaml", []byte(tc.src), Options{Inline: true, Sandbox: sb})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%q (sandbox %v): err = %v, want %q", tc.src, sb != nil, err, tc.want)
			}
		}
	}
}
