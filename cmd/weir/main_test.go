package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/testmain"
)

// runAsCLIEnv makes the test binary behave as the weir binary: the tests
// re-execute it with this variable set (the promtool pattern), so every
// test goes through a real process, its exit code and its streams.
const runAsCLIEnv = "WEIR_TEST_RUN_AS_CLI"

// testParallel is how many of this package's parallel tests run at once
// unless -test.parallel says otherwise. They mostly wait on child
// processes (servers restarting, leases expiring, retention passing), so
// more than the default GOMAXPROCS overlap usefully on a 2-core machine.
const testParallel = 4

func TestMain(m *testing.M) {
	if os.Getenv(runAsCLIEnv) == "1" {
		os.Exit(Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(testmain.Run(m, testParallel))
}

// cliResult is what one CLI invocation produced.
type cliResult struct {
	stdout, stderr string
	code           int
}

// runCLI runs the CLI with args in dir (the package directory when empty).
func runCLI(t *testing.T, dir string, args ...string) cliResult {
	t.Helper()
	return runCLIEnv(t, dir, nil, args...)
}

// runCLIEnv is runCLI with more environment variables (KEY=VALUE).
func runCLIEnv(t *testing.T, dir string, env []string, args ...string) cliResult {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	// A weir server the machine runs on the default address is not the
	// test's: without --server or the caller's WEIR_SERVER, the CLI asks
	// an address nothing listens on.
	cmd.Env = append(append(os.Environ(), runAsCLIEnv+"=1", "WEIR_SERVER=http://127.0.0.1:1"), env...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	code := 0
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running weir %v: %v", args, err)
	}
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// cliCase is one CLI invocation and what it must produce.
type cliCase struct {
	name       string
	args       []string
	wantCode   int
	wantStdout []string // substrings
	wantStderr []string // substrings
	noStderr   []string // substrings stderr must not hold
}

func (tc cliCase) check(t *testing.T, r cliResult) {
	t.Helper()
	if r.code != tc.wantCode {
		t.Errorf("weir %s: exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(tc.args, " "), r.code, tc.wantCode, r.stdout, r.stderr)
	}
	for _, s := range tc.wantStdout {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("weir %s: stdout lacks %q:\n%s", strings.Join(tc.args, " "), s, r.stdout)
		}
	}
	for _, s := range tc.wantStderr {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("weir %s: stderr lacks %q:\n%s", strings.Join(tc.args, " "), s, r.stderr)
		}
	}
	for _, s := range tc.noStderr {
		if strings.Contains(r.stderr, s) {
			t.Errorf("weir %s: stderr holds %q:\n%s", strings.Join(tc.args, " "), s, r.stderr)
		}
	}
}

func runCases(t *testing.T, dir string, cases []cliCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.check(t, runCLI(t, dir, tc.args...))
		})
	}
}

func TestCLIUsage(t *testing.T) {
	runCases(t, "", []cliCase{
		{name: "no command prints help", wantCode: ExitOK, wantStdout: []string{"Available Commands", "run", "graph", "bench"}},
		{name: "unknown command", args: []string{"frobnicate"}, wantCode: ExitUsage, wantStderr: []string{`unknown command "frobnicate"`, "Run 'weir --help' for usage."}},
		{name: "unknown jobs command lists every jobs command", args: []string{"jobs", "frobnicate"}, wantCode: ExitUsage,
			wantStderr: []string{`unknown jobs command "frobnicate"`, "cancel, describe, drain, history, list, logs, rollback, update-options"}},
		{name: "unknown flag", args: []string{"run", "--frobnicate", "p.yaml"}, wantCode: ExitUsage, wantStderr: []string{"unknown flag: --frobnicate"}},
		{name: "run needs a file", args: []string{"run"}, wantCode: ExitUsage, wantStderr: []string{"PIPELINE.yaml"}},
		{name: "graph needs a file", args: []string{"graph"}, wantCode: ExitUsage},
		{name: "bad format", args: []string{"run", "--format", "xml", "p.yaml"}, wantCode: ExitUsage, wantStderr: []string{"--format"}},
		{name: "bad workers", args: []string{"run", "--num-workers", "0", "p.yaml"}, wantCode: ExitUsage, wantStderr: []string{"--num-workers"}},
		{name: "bad log level", args: []string{"--log-level", "loud", "version"}, wantCode: ExitUsage, wantStderr: []string{"--log-level"}},
		{name: "unknown service option", args: []string{"run", "--service-options", "go_faster", "p.yaml"}, wantCode: ExitUsage, wantStderr: []string{"go_faster", "create_or_update_job"}},
		{name: "service option without its value", args: []string{"run", "--service-options", "parallel_replace_job_name", "p.yaml"}, wantCode: ExitUsage, wantStderr: []string{"needs a value", "INVALID_SERVICE_OPTION"}},
		{name: "unknown service option lists weir's own", args: []string{"run", "--job-name", "j", "--dataflow_service_options=nope", "p.yaml"}, wantCode: ExitUsage, wantStderr: []string{"UNKNOWN_SERVICE_OPTION", "weir_replace_rewind="}},
		{name: "two strategies", args: []string{"run", "--job_name", "j", "--update", "--additional-experiments", "update_strategy_in_place_update,update_strategy_parallel_job_update", "p.yaml"}, wantCode: ExitUsage, wantStderr: []string{"CONFLICTING_SERVICE_OPTIONS", "two update strategies"}},
		{name: "stop-and-replace needs a duration", args: []string{"run", "--job-name", "j", "--update", "--service-options", "update_strategy_parallel_job_update", "p.yaml"}, wantCode: ExitUsage, wantStderr: []string{"CONFLICTING_SERVICE_OPTIONS", "parallel_replace_job_max_stop_duration=D"}},
		{name: "name and id", args: []string{"run", "--job-name", "j", "--service-options", "parallel_replace_job_name=old", "--service-options", "parallel_replace_job_id=2026-11-30_01_51_02-3f9a0c1d,parallel_replace_job_max_stop_duration=1m", "p.yaml"}, wantCode: ExitUsage, wantStderr: []string{"give one"}},
		{name: "new name with update", args: []string{"run", "--job-name", "j", "--update", "--service-options", "parallel_replace_job_name=old,parallel_replace_job_max_stop_duration=1m", "p.yaml"}, wantCode: ExitUsage, wantStderr: []string{"weir run without --update"}},
		{name: "bad boolean", args: []string{"run", "--job-name", "j", "--update", "--service-options", "update_strategy_parallel_job_update,parallel_replace_job_max_stop_duration=1m,parallel_replace_job_cancel_on_drain_timeout=no", "p.yaml"}, wantCode: ExitUsage, wantStderr: []string{"is a boolean"}},
		{name: "parallel duration too long", args: []string{"run", "--job-name", "j", "--update", "--service-options", "update_strategy_parallel_job_update,parallel_replace_job_min_parallel_pipelines_duration=800h", "p.yaml"}, wantCode: ExitUsage, wantStderr: []string{"between 0s and 744h"}},
		{name: "underscore flag", args: []string{"run", "--num_workers", "0", "p.yaml"}, wantCode: ExitUsage, wantStderr: []string{"--num-workers"}},
		{name: "Java's camel-case flag", args: []string{"run", "--numWorkers", "0", "p.yaml"}, wantCode: ExitUsage, wantStderr: []string{"--num-workers"}},
		{name: "Java's camel-case service options", args: []string{"run", "--jobName", "j", "--dataflowServiceOptions=nope", "p.yaml"}, wantCode: ExitUsage, wantStderr: []string{"UNKNOWN_SERVICE_OPTION"}},
		{name: "Java's camel-case autoscaling", args: []string{"run", "--maxNumWorkers", "2", "--autoscalingAlgorithm", "NONE", "p.yaml"}, wantCode: ExitNeedsServer, wantStderr: []string{"--max-num-workers is a job option"}},
		{name: "bad name mapping", args: []string{"run", "--update", "--transform-name-mapping", "[1]", "p.yaml"}, wantCode: ExitUsage, wantStderr: []string{"--transform-name-mapping"}},
		{name: "bench without workload prints help", args: []string{"bench"}, wantCode: ExitOK, wantStdout: []string{"windowed-sum"}},
		{name: "bench bad events", args: []string{"bench", "windowed-sum", "--events", "0"}, wantCode: ExitUsage, wantStderr: []string{"events"}},
		{name: "bench bad workers", args: []string{"bench", "windowed-sum", "--workers", "0"}, wantCode: ExitUsage, wantStderr: []string{"--workers"}},
		{name: "bench unknown variant", args: []string{"bench", "windowed-sum", "--variants", "java-w1"}, wantCode: ExitUsage, wantStderr: []string{"java-w1"}},
		{name: "bench child unknown variant", args: []string{"bench-child", "windowed-sum", "nope"}, wantCode: ExitUsage},
		{name: "bench child unknown workload", args: []string{"bench-child", "word-count", "baseline"}, wantCode: ExitUsage},
	})
}

// TestCLINeedsServer checks that every job flag the job service does not
// offer yet is refused with the needs-server exit code, before the file is
// even read. (--job-name submits to the server: see server_test.go.)
func TestCLINeedsServer(t *testing.T) {
	var cases []cliCase
	for _, flags := range [][]string{
		{"--service-options", "create_or_update_job"},
		{"--service-options", "parallel_replace_job_name=regional-totals,parallel_replace_job_max_stop_duration=5m"},
		{"--request-id", "r-1"},
	} {
		cases = append(cases, cliCase{
			name:       flags[0] + " " + flags[1],
			args:       append(append([]string{"run"}, flags...), "does-not-exist.yaml"),
			wantCode:   ExitNeedsServer,
			wantStderr: []string{"--request-id are job options", "--job-name NAME"},
		})
	}
	cases = append(cases, cliCase{
		name:       "--max-num-workers in-process",
		args:       []string{"run", "--max-num-workers", "4", "does-not-exist.yaml"},
		wantCode:   ExitNeedsServer,
		wantStderr: []string{"--max-num-workers", "--job-name"},
	})
	// --update needs the name of the running job to replace.
	for _, flags := range [][]string{{"--update"}, {"--transform-name-mapping", `{"Old":"New"}`}} {
		cases = append(cases, cliCase{
			name:       flags[0] + " without --job-name",
			args:       append(append([]string{"run"}, flags...), "does-not-exist.yaml"),
			wantCode:   ExitUsage,
			wantStderr: []string{"--update needs --job-name"},
		})
	}
	cases = append(cases, cliCase{
		name:       "--create-from-snapshot without --job-name",
		args:       []string{"run", "--create-from-snapshot", "snap-1", "does-not-exist.yaml"},
		wantCode:   ExitUsage,
		wantStderr: []string{"--create-from-snapshot needs --job-name"},
	})
	runCases(t, "", cases)
}

func TestCLIVersion(t *testing.T) {
	runCases(t, "", []cliCase{
		{name: "text", args: []string{"version"}, wantCode: ExitOK, wantStdout: []string{"weir ", "go1."}},
		{name: "json", args: []string{"version", "--format", "json"}, wantCode: ExitOK, wantStdout: []string{`"version"`, `"go"`}},
	})
}

// TestCLIBench runs the benchmark end to end at a small size: children
// are re-executions of the test binary acting as weir.
func TestCLIBench(t *testing.T) {
	r := runCLI(t, "", "bench", "windowed-sum", "--events", "30000", "--keys", "10", "--workers", "1,2", "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("exit code %d\nstderr:\n%s", r.code, r.stderr)
	}
	var ms []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &ms); err != nil {
		t.Fatalf("decoding %q: %v", r.stdout, err)
	}
	wantNames := []string{"baseline", "sdk-w1", "sdk-w2", "yaml-w1"}
	if len(ms) != len(wantNames) {
		t.Fatalf("got %d measurements, want %d: %s", len(ms), len(wantNames), r.stdout)
	}
	wantKeys := []string{"cpu_seconds", "events_per_sec", "minor_faults", "name", "peak_rss_bytes", "process_cpu_seconds", "ratio_to_baseline",
		"warm_cpu_seconds", "warm_events_per_sec", "warm_minor_faults", "warm_ratio_to_baseline"}
	for i, m := range ms {
		if m["name"] != wantNames[i] {
			t.Errorf("measurement %d is %v, want %s", i, m["name"], wantNames[i])
		}
		if keys := slices.Sorted(maps.Keys(m)); !slices.Equal(keys, wantKeys) {
			t.Errorf("measurement %d has fields %v, want %v", i, keys, wantKeys)
		}
		for _, k := range []string{"cpu_seconds", "events_per_sec", "peak_rss_bytes", "process_cpu_seconds", "ratio_to_baseline",
			"warm_cpu_seconds", "warm_events_per_sec", "warm_ratio_to_baseline"} {
			if v, _ := m[k].(float64); v <= 0 {
				t.Errorf("%s: %s = %v, want > 0", m["name"], k, m[k])
			}
		}
		// The workload's CPU time is part of the whole process's.
		cpu, _ := m["cpu_seconds"].(float64)
		proc, _ := m["process_cpu_seconds"].(float64)
		if cpu > proc {
			t.Errorf("%s: cpu_seconds %v exceeds process_cpu_seconds %v", m["name"], cpu, proc)
		}
	}

	profiles := t.TempDir()
	args := []string{"bench", "windowed-sum", "--events", "5000", "--keys", "3", "--variants", "baseline,sdk-w1", "--cpu-profile-dir", profiles}
	r = runCLI(t, "", args...)
	cliCase{args: args, wantCode: ExitOK, wantStdout: []string{"VARIANT", "baseline", "sdk-w1", "Targets:", "verified"}}.check(t, r)
	for _, v := range []string{"baseline", "sdk-w1"} {
		if fi, err := os.Stat(filepath.Join(profiles, v+".prof")); err != nil || fi.Size() == 0 {
			t.Errorf("no CPU profile for %s: %v", v, err)
		}
	}
}

// testdata returns the absolute path of a file in testdata.
func testdata(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCLIPipelines runs YAML pipelines end to end, in a temporary working
// directory (outputs are resolved against it).
func TestCLIPipelines(t *testing.T) {
	totals, failing := testdata(t, "totals.yaml"), testdata(t, "failing.yaml")
	runCases(t, t.TempDir(), []cliCase{
		{name: "run text", args: []string{"run", totals}, wantCode: ExitOK,
			wantStdout: []string{"STEP", "ELEMENTS_IN", "ELEMENTS_OUT", "REJECTS", "DROPPED_LATE_ELEMENTS", "CheckRegion", "Totals"}},
		{name: "run two workers", args: []string{"run", "--num-workers", "2", totals}, wantCode: ExitOK, wantStdout: []string{"Totals"}},
		{name: "validate only", args: []string{"run", "--validate-only", totals}, wantCode: ExitOK, wantStdout: []string{"valid pipeline of 5 steps"}},
		{name: "validate only json", args: []string{"run", "--validate-only", "--format", "json", totals}, wantCode: ExitOK, wantStdout: []string{`"valid": true`, `"CheckRegion"`}},
		{name: "validate only a failing pipeline", args: []string{"run", "--validate-only", failing}, wantCode: ExitOK},
		{name: "run failure", args: []string{"run", failing}, wantCode: ExitFailure,
			wantStderr: []string{"CheckRegion", "known_region", "failing.yaml:10"}},
		{name: "unbounded needs a server", args: []string{"run", testdata(t, "unbounded.yaml")}, wantCode: ExitNeedsServer,
			wantStderr: []string{"Events", "needs a weir server", "--job-name"}},
		{name: "unknown transform", args: []string{"run", testdata(t, "unknown_type.yaml")}, wantCode: ExitInvalidPipeline,
			wantStderr: []string{"unknown_type.yaml:8:", "Frobnicate"}},
		{name: "bad yaml", args: []string{"run", testdata(t, "bad_syntax.yaml")}, wantCode: ExitInvalidPipeline,
			wantStderr: []string{"bad_syntax.yaml:4:"}},
		{name: "missing file", args: []string{"run", "no-such-pipeline.yaml"}, wantCode: ExitInvalidPipeline,
			wantStderr: []string{"no-such-pipeline.yaml"}},
		{name: "graph", args: []string{"graph", totals}, wantCode: ExitOK,
			wantStdout: []string{`"format_version": 1`, `"name": "CheckRegion"`, `"urn": "weir:yaml:Validate"`}},
		{name: "graph of an invalid pipeline", args: []string{"graph", testdata(t, "unknown_type.yaml")}, wantCode: ExitInvalidPipeline,
			wantStderr: []string{"unknown_type.yaml:8:"}},
	})
}

// TestCLIRunJSON checks the exact shape of `weir run --format json` and
// that outputs land relative to the working directory.
func TestCLIRunJSON(t *testing.T) {
	dir := t.TempDir()
	r := runCLI(t, dir, "run", "--format", "json", testdata(t, "totals.yaml"))
	if r.code != ExitOK {
		t.Fatalf("exit code %d\nstderr:\n%s", r.code, r.stderr)
	}
	var got struct {
		Steps []map[string]any `json:"steps"`
	}
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("decoding %s: %v", r.stdout, err)
	}
	wantKeys := []string{"dropped_late_elements", "elements_in", "elements_out", "name", "rejects"}
	byName := map[string]map[string]any{}
	for _, s := range got.Steps {
		if keys := slices.Sorted(maps.Keys(s)); !slices.Equal(keys, wantKeys) {
			t.Errorf("step %v has fields %v, want %v", s["name"], keys, wantKeys)
		}
		byName[s["name"].(string)] = s
	}
	tests := []struct {
		step, field string
		want        float64
	}{
		{"Transactions", "elements_out", 4},
		{"CheckRegion", "elements_in", 4},
		{"CheckRegion", "rejects", 1},
		{"Totals", "elements_in", 3},
		{"Totals", "elements_out", 2},
		{"WriteRejects", "elements_in", 1},
	}
	for _, tt := range tests {
		if got := byName[tt.step][tt.field]; got != tt.want {
			t.Errorf("%s.%s = %v, want %v", tt.step, tt.field, got, tt.want)
		}
	}
	out, err := os.ReadFile(filepath.Join(dir, "out", "totals.jsonl"))
	if err != nil {
		t.Fatalf("the pipeline's output is not relative to the working directory: %v", err)
	}
	for _, want := range []string{`"NORTH"`, `425`, `"WEST"`, `100`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("totals.jsonl lacks %s:\n%s", want, out)
		}
	}
}

// TestCLIQuickStart runs the README's in-process example, `weir run
// examples/regional-totals.yaml`, on a copy of examples/ so that its
// outputs land in a temporary directory rather than the repository. (The
// README's first command, `weir server`, is exercised by server_test.go.)
func TestCLIQuickStart(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "examples"), os.DirFS(filepath.Join("..", "..", "examples"))); err != nil {
		t.Fatalf("copying examples: %v", err)
	}
	r := runCLI(t, dir, "run", "examples/regional-totals.yaml")
	cliCase{args: []string{"run", "examples/regional-totals.yaml"}, wantCode: ExitOK, wantStdout: []string{"STEP", "RegionTotals"}}.check(t, r)
	out, err := os.ReadFile(filepath.Join(dir, "out", "regional-totals.jsonl"))
	if err != nil {
		t.Fatalf("the example wrote no totals: %v", err)
	}
	if !strings.Contains(string(out), `"window_start"`) {
		t.Errorf("totals lack window bounds:\n%s", out)
	}
}

// TestCLIRunInProcessWithServerEnv: $WEIR_SERVER (set for the job
// commands) does not turn `weir run P.yaml` into a submission: without
// --job-name or --server a bounded pipeline runs in this process and
// writes its output, and an unbounded one needs --job-name (exit 4).
func TestCLIRunInProcessWithServerEnv(t *testing.T) {
	dir := t.TempDir()
	env := []string{serverEnv + "=http://127.0.0.1:1"} // no server answers there
	for run := 1; run <= 2; run++ {
		r := runCLIEnv(t, dir, env, "run", testdata(t, "totals.yaml"))
		cliCase{name: "bounded run " + strconv.Itoa(run), wantCode: ExitOK, wantStdout: []string{"Totals"}}.check(t, r)
		if b, err := os.ReadFile(filepath.Join(dir, "out", "totals.jsonl")); err != nil || !strings.Contains(string(b), "425") {
			t.Errorf("run %d wrote %q (%v), want the totals", run, b, err)
		}
	}
	r := runCLIEnv(t, dir, env, "run", testdata(t, "unbounded.yaml"))
	cliCase{name: "unbounded", wantCode: ExitNeedsServer, wantStderr: []string{"needs a weir server", "--job-name", serverEnv}}.check(t, r)
}
