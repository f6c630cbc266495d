package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// serverPeakRSS is the peak resident memory of the server process
// (VmHWM), in bytes.
func serverPeakRSS(t *testing.T, p *serverProc) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatalf("reading the server's memory: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in the server's status")
	return 0
}

// budgetCeiling is the server's peak memory the probes must stay under:
// each of them took a server past 2 GiB before the budgets.
const budgetCeiling = 1 << 30

// TestCLIServerBudgets sends a real `weir server` the probes of issue 22
// item 10 ("One small request takes the server down") and checks that
// each is refused, or its element rejected, naming the budget, while the
// server's peak memory stays under budgetCeiling and it keeps answering:
//
//   - a 170-byte validate-only update whose Jinja loops over
//     range(20000000), and one that prints 'x' * 2000000000 (no job
//     needed): 400 PIPELINE_BUDGET_EXCEEDED naming jinja_range_items and
//     jinja_memory;
//   - a 7 MB pipeline whose one 7 MB anchored string is aliased 1,000
//     times: 400 PIPELINE_BUDGET_EXCEEDED naming alias_bytes at the alias;
//   - an element {n: 1000000} to a job whose MapToFields computes
//     lists.range(n).map(x, lists.range(1000)).size() (CEL), and one whose
//     Python builds 'x' * n * 1000: the element goes to the dead letters
//     with reason expression_limit, and the job goes on with the next.
func TestCLIServerBudgets(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	work := t.TempDir()
	srv := startServer(t, t.TempDir())
	post := func(path string, body any) (int, string) {
		t.Helper()
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post(srv.url+path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatalf("POST %s: %v\nserver log:\n%s", path, err, srv.log())
		}
		defer resp.Body.Close()
		var out bytes.Buffer
		_, _ = out.ReadFrom(resp.Body)
		return resp.StatusCode, out.String()
	}
	healthy := func(after string) {
		t.Helper()
		resp, err := http.Get(srv.url + "/healthz")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("after %s the server does not answer /healthz: %v %v\nserver log:\n%s", after, err, resp, srv.log())
		}
		resp.Body.Close()
		if peak := serverPeakRSS(t, srv); peak > budgetCeiling {
			t.Fatalf("after %s the server's peak memory is %d MiB, over the %d MiB ceiling", after, peak>>20, budgetCeiling>>20)
		}
	}

	for _, tc := range []struct{ name, pipeline, want string }{
		{"range", "# {% for i in range(20000000) %}x{% endfor %}\n", "jinja_range_items budget (1000000)"},
		{"multiplication", "# {{ 'x' * 2000000000 }}\n", "jinja_memory budget (256 MiB)"},
	} {
		code, body := post("/v1/jobs:update", map[string]any{"name": "nojob", "pipeline": tc.pipeline, "base_dir": work, "validate_only": true, "jinja_variables": map[string]any{}})
		if code != http.StatusBadRequest || !strings.Contains(body, `"PIPELINE_BUDGET_EXCEEDED"`) || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, want 400 PIPELINE_BUDGET_EXCEEDED naming %s", tc.name, code, body, tc.want)
		}
		healthy("the Jinja " + tc.name + " probe")
	}

	var b strings.Builder
	b.WriteString("x: &big '")
	b.WriteString(strings.Repeat("y", 7_000_000))
	b.WriteString("'\npipeline:\n  transforms:\n    - type: Create\n      config:\n        elements:\n")
	for range 1000 {
		b.WriteString("          - {v: *big}\n")
	}
	code, body := post("/v1/jobs", map[string]any{"name": "aliases", "pipeline": b.String(), "base_dir": work})
	if code != http.StatusBadRequest || !strings.Contains(body, `"PIPELINE_BUDGET_EXCEEDED"`) || !strings.Contains(body, "pipeline.yaml:8:") || !strings.Contains(body, "alias_bytes budget") {
		t.Errorf("aliases: %d %.300s, want 400 PIPELINE_BUDGET_EXCEEDED naming alias_bytes at line 8", code, body)
	}
	healthy("the alias probe")

	pipeline := writeTestFile(t, work, "heavy.yaml", `pipeline:
  transforms:
    - type: Create
      name: Numbers
      config: {elements: [{n: 1000000}, {n: 3}]}
    - type: MapToFields
      name: Cel
      input: Numbers
      config:
        fields: {n: n, size: "lists.range(n).map(x, lists.range(1000)).size()"}
    - type: MapToFields
      name: Python
      input: Numbers
      config:
        language: python
        fields: {n: n, size: "len('x' * n * 1000)"}
    - type: WriteToJson
      name: WriteCel
      input: Cel
      config: {path: out/cel.jsonl}
    - type: WriteToJson
      name: WritePython
      input: Python
      config: {path: out/python.jsonl}
`)
	if r := srv.cli(work, "run", pipeline, "--job-name", "heavy"); r.code != ExitOK {
		t.Fatalf("run heavy.yaml: %d %s", r.code, r.stderr)
	}
	m := srv.waitJob("heavy", "DONE", func(m map[string]any) bool { return m["state"] != "RUNNING" && m["state"] != "PENDING" })
	if m["state"] != "DONE" || m["dead_letters"] != 2.0 {
		t.Errorf("heavy job: state %v (error %v), dead letters %v; want DONE with 2", m["state"], m["error"], m["dead_letters"])
	}
	for file, want := range map[string]string{"cel.jsonl": `{"n":3,"size":3}`, "python.jsonl": `{"n":3,"size":3000}`} {
		if out, err := os.ReadFile(filepath.Join(work, "out", file)); err != nil || !strings.Contains(string(out), want) {
			t.Errorf("%s: %s (%v), want the element n=3 with %s", file, out, err, want)
		}
	}
	logs := srv.cli(work, "jobs", "logs", "heavy", "--format", "json")
	for _, step := range []string{"Cel", "Python"} {
		if !strings.Contains(logs.stdout, step) || !strings.Contains(logs.stdout, "expression_limit") {
			t.Errorf("job logs name no expression_limit reject of %s:\n%.2000s", step, logs.stdout)
		}
	}
	healthy("the expression probes")
	t.Logf("the server's peak memory: %d MiB", serverPeakRSS(t, srv)>>20)
}
