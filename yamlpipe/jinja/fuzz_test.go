package jinja

import (
	"errors"
	"os"
	"testing"
	"time"
)

// FuzzRender renders arbitrary templates in the sandbox, as a server does,
// with the budgets on: the render ends (within Time), every error carries
// a position, and the output is within OutputBytes. Loops and string
// multiplication are no longer skipped. Seeds: testdata/fuzz/FuzzRender
// (among them the probes of issue 22, and a loop whose output passed the
// budget inside the engine, before the in-process check could see it).
func FuzzRender(f *testing.F) {
	for _, s := range []string{"{{ x }}", "{% for i in range(3) %}{{ i }}{% endfor %}", "{% include 'nope' %}",
		"# {% for i in range(20000000) %}x{% endfor %}", "{% for i in range(999999) %}{% for j in range(999999) %}{% endfor %}{% endfor %}",
		"{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", "{% import 'x' as m %}{{ m.f() }}", "{{ foo( }}", "{% raw %}{% endraw %}", "{{ 'x' * 2000000000 }}"} {
		f.Add(s)
	}
	lim := DefaultLimits()
	lim.OutputBytes, lim.Time = 1<<20, 2*time.Second
	exe, err := os.Executable()
	if err != nil {
		f.Fatal(err)
	}
	sb := &Sandbox{Exe: exe}
	f.Fuzz(func(t *testing.T, src string) {
		out, err := RenderWith(t.Context(), "f.yaml", []byte(src), Options{Vars: map[string]any{"x": 1}, Limits: lim, BaseDir: t.TempDir(), Sandbox: sb})
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || pe.Line < 1 || pe.Col < 1 {
				t.Fatalf("error without a position: %v", err)
			}
			return
		}
		if len(out) > lim.OutputBytes {
			t.Fatalf("rendered %d bytes, past the %d budget", len(out), lim.OutputBytes)
		}
	})
}
