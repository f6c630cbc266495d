package jinja

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMain makes the test binary a Sandbox's child when a test starts it
// as one.
func TestMain(m *testing.M) {
	if IsSandboxChild() {
		os.Exit(ServeSandbox(os.Stdin, os.Stdout))
	}
	os.Exit(m.Run())
}

// testSandbox renders in this test binary as a child process.
func testSandbox(t *testing.T) *Sandbox {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return &Sandbox{Exe: exe}
}

// A template that would compute or print too much fails its render with
// an error naming the budget, within the budget's bounds, instead of
// taking the process's memory (issue 22: range(20000000) and
// 'x' * 2000000000 took a server past 2 GiB).
func TestRenderBudgets(t *testing.T) {
	chain := ""
	for i := 1; i <= 40; i++ {
		chain += "{% macro m" + strconv.Itoa(i) + "() %}{{ m" + strconv.Itoa(i-1) + "() }}{{ m" + strconv.Itoa(i-1) + "() }}{% endmacro %}"
	}
	chain = "{% macro m0() %}{% endmacro %}" + chain + "{{ m40() }}"
	tests := []struct {
		name, src string
		sandbox   bool
		limits    Limits
		limit     string // the budget passed, or "" for none
		want      string // the output, when it renders
	}{
		{name: "range probe", src: "# {% for i in range(20000000) %}x{% endfor %}", limit: "jinja_range_items budget (1000000)"},
		{name: "ranges add up", src: "{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}{% for k in range(10) %}{% endfor %}", limit: "jinja_range_items"},
		{name: "output", src: "{% for i in range(900000) %}{{ 'x' * 10 }}{% endfor %}", limit: "jinja_output_bytes budget (8388608)"},
		{name: "range within", src: "{% for i in range(3) %}{{ i }}{% endfor %}{{ range(5, 0, -2) | join(',') }}", want: "0125,3,1"},
		{name: "multiplication probe", src: "{{ 'x' * 2000000000 }}", sandbox: true, limit: "jinja_memory budget (256 MiB)"},
		{name: "macro chain", src: chain, sandbox: true, limits: Limits{Time: time.Second, MemoryBytes: 256 << 20, OutputBytes: 8 << 20, RangeItems: 1000}, limit: "jinja_time budget (1s)"},
		{name: "range probe in the sandbox", src: "# {% for i in range(20000000) %}x{% endfor %}", sandbox: true, limit: "jinja_range_items budget (1000000)"},
		{name: "sandbox renders", src: "a: {{ a is float }}\nb: {{ b is integer }}\nc: {{ c.d[0] }}\n", sandbox: true, want: "a: True\nb: True\nc: x\n"},
	}
	vars, err := ParseVariables(`{"a": 3.0, "b": 7, "c": {"d": ["x"]}}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{Vars: vars, Limits: tc.limits}
			if tc.sandbox {
				opts.Sandbox = testSandbox(t)
			}
			out, err := RenderWith(context.Background(), "p.yaml", []byte(tc.src), opts)
			if tc.limit == "" {
				if err != nil || string(out) != tc.want {
					t.Fatalf("= %q, %v; want %q", out, err, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.limit) || !strings.HasPrefix(err.Error(), "p.yaml:1:1: Jinja: the template passed its ") {
				t.Fatalf("err = %v, want the %s budget", err, tc.limit)
			}
			if !errors.Is(err, ErrBudgetExceeded) {
				t.Errorf("err = %v does not match ErrBudgetExceeded", err)
			}
		})
	}
}

// A macro that calls itself, directly or through others, is refused before
// rendering: the engine's recursion has no bound, and a stack overflow
// would end the process.
func TestRecursiveMacros(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"a: 1\n{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", "p.yaml:2:1: Jinja: macro f calls itself (f → f)"},
		{"{% macro f() %}{{ g() }}{% endmacro %}\n{% macro g() %}{{ h() }}{% endmacro %}{% macro h() %}{{ f() }}{% endmacro %}{{ f() }}", "macro f calls itself (f → g → h → f)"},
		{"{% macro f() %}x{% endmacro %}{% macro g() %}{{ f() }}{{ f() }}{% endmacro %}{{ g() }}", ""},
	} {
		out, err := Render("p.yaml", []byte(tc.src), nil)
		if tc.want == "" {
			if err != nil || string(out) != "xx" {
				t.Errorf("%q: %q, %v", tc.src, out, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.src, err, tc.want)
		}
	}
}
