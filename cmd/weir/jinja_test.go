package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// weir run, check and graph render a pipeline file as a Jinja template
// with --jinja-variables (or Beam's --jinja_variables), as Beam does.
func TestCLIJinjaVariables(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	main := filepath.Join(dir, "p.yaml")
	src := `pipeline:
  type: chain
  transforms:
    - type: Create
      config:
        elements: [{{ elems }}]
{% include 'log.yaml' %}
`
	if err := os.WriteFile(main, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "log.yaml"), []byte("    - type: LogForTesting\n      config: {prefix: '{{ prefix }}'}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"--jinja-variables", "--jinja_variables"} {
		r := runCLI(t, dir, "run", main, flag, `{"elems": "1, 2", "prefix": "n="}`)
		if r.code != ExitOK {
			t.Fatalf("%s: exit code %d\nstderr:\n%s", flag, r.code, r.stderr)
		}
		if got := r.stdout; got != "n={\"element\": 1}\nn={\"element\": 2}\n" && got != "n={\"element\": 2}\nn={\"element\": 1}\n" {
			t.Errorf("%s: stdout = %q", flag, got)
		}
	}
	if r := runCLI(t, dir, "graph", main, "--jinja-variables", `{"elems": "1", "prefix": "x"}`); r.code != ExitOK || !strings.Contains(r.stdout, "LogForTesting") {
		t.Errorf("graph: exit code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, dir, "run", main, "--jinja-variables", `[1]`); r.code != ExitUsage || !strings.Contains(r.stderr, "JSON object") {
		t.Errorf("bad variables: exit code %d, stderr %q", r.code, r.stderr)
	}
	// Beam renders strictly: an undefined variable fails run, check and
	// graph with its file:line:column and name (here in the included file).
	for _, args := range [][]string{{"run", main}, {"check", main, main}, {"graph", main}} {
		cmd := args[0]
		r := runCLI(t, dir, append(args, "--jinja-variables", `{"elems": "1"}`)...)
		if r.code != ExitInvalidPipeline || !strings.Contains(r.stderr, "log.yaml:2:28: Jinja: \"prefix\" is undefined") {
			t.Errorf("%s without prefix: exit code %d, stderr %q", cmd, r.code, r.stderr)
		}
	}
}
