package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/weir-dev/weir/graph"
)

// checkBase is the running pipeline of the `weir check` tests.
const checkBase = `pipeline:
  transforms:
    - type: ReadFromJson
      name: ReadEvents
      config:
        path: events.jsonl
        schema: {user: string, amount: int, ts: timestamp}
        timestamp_field: ts
    - type: MapToFields
      name: Enrich
      input: ReadEvents
      config:
        fields:
          user: user
          amount: amount
    - type: Combine
      name: CountByUser
      input: Enrich
      windowing:
        type: fixed
        size: 5m
      config:
        group_by: user
        combine:
          total: {value: amount, fn: sum}
    - type: WriteToJson
      name: WriteTotals
      input: CountByUser
      config:
        path: out/totals.jsonl
`

// checkFiles writes the pipelines of the tests into dir and returns their
// paths by name: old, renamed (CountByUser -> CountByUserId), wider (an
// unrelated field upstream, a 10m window), rekeyed (group_by gains a
// field), moved (another input file).
func checkFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	r := strings.NewReplacer
	variants := map[string]string{
		"old":     checkBase,
		"renamed": r("name: CountByUser", "name: CountByUserId", "input: CountByUser", "input: CountByUserId").Replace(checkBase),
		"wider":   r("          amount: amount\n", "          amount: amount\n          big: amount > 100\n", "size: 5m", "size: 10m").Replace(checkBase),
		"rekeyed": r("group_by: user", "group_by: [user, amount]").Replace(checkBase),
		"moved":   r("path: events.jsonl", "path: events-v2.jsonl").Replace(checkBase),
	}
	paths := map[string]string{}
	for name, src := range variants {
		if name != "old" && src == checkBase {
			t.Fatalf("variant %s changes nothing", name)
		}
		p := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		paths[name] = p
	}
	return paths
}

// checkRoot returns the command tree of newRootCommand with its `weir
// check` replaced by one that asks jobs for running graphs (a fake job
// service; nil: none) instead of a weir server.
func checkRoot(e *env, jobs runningGraphs) *cobra.Command {
	root := newRootCommand(e)
	if c, _, err := root.Find([]string{"check"}); err == nil && c != root {
		root.RemoveCommand(c)
	}
	root.AddCommand(newCheckCommandWith(e, jobs))
	return root
}

// runCheckCLI runs `weir args...` in this process as Main does, with
// `weir check` asking jobs for running graphs (see checkRoot).
func runCheckCLI(t *testing.T, jobs runningGraphs, args ...string) cliResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	e := &env{stdout: &stdout, stderr: &stderr, logger: slog.New(slog.NewTextHandler(&stderr, nil))}
	root := checkRoot(e, jobs)
	root.SetArgs(args)
	ctx := context.Background()
	err := root.ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintf(&stderr, "weir: %v\n", err)
	}
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), code: exitCode(ctx, err)}
}

func TestCLICheck(t *testing.T) {
	f := checkFiles(t, t.TempDir())
	cases := []cliCase{
		{name: "unchanged", args: []string{"check", f["old"], f["old"]}, wantCode: ExitOK,
			wantStdout: []string{"compatible: the new pipeline can take over the running job's state (0 warnings)", "CountByUser (combine_per_key)"}},
		{name: "unrelated field and window size", args: []string{"check", f["old"], f["wider"]}, wantCode: ExitOK,
			wantStdout: []string{"compatible:", "(1 warning)", "warning WINDOW_PARAMS_CHANGED: CountByUser", "windows already buffered keep their old boundaries"}},
		{name: "rename without a mapping", args: []string{"check", f["old"], f["renamed"]}, wantCode: ExitIncompatible,
			wantStdout: []string{"incompatible: 1 error", "error STEP_MISSING: CountByUser", "step CountByUser has no match",
				`fix: CountByUserId has the same kind, coders and windowing — add --transform-name-mapping '{"CountByUser":"CountByUserId"}'`},
			wantStderr: []string{"renamed.yaml cannot update", "1 incompatible change(s)"}},
		{name: "rename with a mapping", args: []string{"check", "--transform-name-mapping", `{"CountByUser":"CountByUserId"}`, f["old"], f["renamed"]}, wantCode: ExitOK,
			wantStdout: []string{"CountByUser -> CountByUserId (combine_per_key)"}},
		{name: "key changed", args: []string{"check", f["old"], f["rekeyed"]}, wantCode: ExitIncompatible,
			wantStdout: []string{"error KEY_CODER_CHANGED: CountByUser", "weir:coder:row{user:string,amount:int}"}},
		{name: "key changed, state dropped on purpose", args: []string{"check", "--transform-name-mapping", `{"CountByUser":""}`, f["old"], f["rekeyed"]}, wantCode: ExitOK,
			wantStdout: []string{"warning STATE_DROPPED: CountByUser", "state dropped on purpose:", "CountByUser (combine_per_key): keys weir:coder:row{user:string}"}},
		{name: "source changed", args: []string{"check", f["old"], f["moved"]}, wantCode: ExitIncompatible,
			wantStdout: []string{"error SOURCE_CHANGED: ReadEvents", "events-v2.jsonl", "--allow-source-change"}},
		{name: "source change allowed", args: []string{"check", "--allow-source-change", f["old"], f["moved"]}, wantCode: ExitOK,
			wantStdout: []string{"warning SOURCE_POSITIONS_DROPPED: ReadEvents"}},

		{name: "one argument", args: []string{"check", f["old"]}, wantCode: ExitUsage, wantStderr: []string{"OLD.yaml NEW.yaml"}},
		{name: "bad format", args: []string{"check", "--format", "xml", f["old"], f["old"]}, wantCode: ExitUsage, wantStderr: []string{"--format"}},
		{name: "mapping not an object", args: []string{"check", "--transform-name-mapping", `["CountByUser"]`, f["old"], f["old"]}, wantCode: ExitUsage,
			wantStderr: []string{"--transform-name-mapping", "must be a JSON object"}},
		{name: "mapping with a bad name", args: []string{"check", "--transform-name-mapping", `{"Count//ByUser":"X"}`, f["old"], f["old"]}, wantCode: ExitUsage,
			wantStderr: []string{"--transform-name-mapping", "Count//ByUser"}},
		{name: "invalid new pipeline", args: []string{"check", f["old"], testdata(t, "unknown_type.yaml")}, wantCode: ExitInvalidPipeline,
			wantStderr: []string{"unknown_type.yaml:8:", "Frobnicate"}},
		{name: "invalid old pipeline", args: []string{"check", testdata(t, "bad_syntax.yaml"), f["old"]}, wantCode: ExitInvalidPipeline,
			wantStderr: []string{"bad_syntax.yaml:4:"}},
		{name: "missing file", args: []string{"check", f["old"], "no-such-pipeline.yaml"}, wantCode: ExitInvalidPipeline,
			wantStderr: []string{"no-such-pipeline.yaml"}},
		{name: "job name without a server", args: []string{"check", "regional-totals", f["old"]}, wantCode: ExitNeedsServer,
			wantStderr: []string{`"regional-totals" is not a pipeline file`, "needs the job service"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, runCheckCLI(t, nil, tc.args...))
		})
	}
}

// TestCLICheckJSON checks the exact shape of `weir check --format json`.
func TestCLICheckJSON(t *testing.T) {
	f := checkFiles(t, t.TempDir())
	type finding struct{ Step, Code, Reason, Fix string }
	type report struct {
		Compatible   bool             `json:"compatible"`
		Errors       []finding        `json:"errors"`
		Warnings     []finding        `json:"warnings"`
		DroppedState []map[string]any `json:"dropped_state"`
		Matches      []map[string]any `json:"matches"`
	}
	decode := func(t *testing.T, out string) report {
		t.Helper()
		var top map[string]json.RawMessage
		if err := json.Unmarshal([]byte(out), &top); err != nil {
			t.Fatalf("decoding %s: %v", out, err)
		}
		if keys := slices.Sorted(maps.Keys(top)); !slices.Equal(keys, []string{"compatible", "dropped_state", "errors", "matches", "warnings"}) {
			t.Errorf("top-level keys %v", keys)
		}
		for _, k := range []string{"errors", "warnings", "dropped_state", "matches"} {
			if string(top[k]) == "null" {
				t.Errorf("%s is null; want a list", k)
			}
		}
		var errs []map[string]any
		if err := json.Unmarshal(top["errors"], &errs); err != nil {
			t.Fatal(err)
		}
		for _, e := range errs {
			if keys := slices.Sorted(maps.Keys(e)); !slices.Equal(keys, []string{"code", "fix", "reason", "step"}) {
				t.Errorf("error keys %v", keys)
			}
		}
		var r report
		dec := json.NewDecoder(strings.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("decoding %s: %v", out, err)
		}
		return r
	}

	t.Run("incompatible", func(t *testing.T) {
		res := runCheckCLI(t, nil, "check", "--format", "json", f["old"], f["rekeyed"])
		if res.code != ExitIncompatible {
			t.Fatalf("exit code %d, want %d\n%s", res.code, ExitIncompatible, res.stderr)
		}
		r := decode(t, res.stdout)
		if r.Compatible || len(r.Errors) != 1 || r.Errors[0].Step != "CountByUser" || r.Errors[0].Code != "KEY_CODER_CHANGED" || r.Errors[0].Fix == "" {
			t.Errorf("report %+v", r)
		}
	})
	t.Run("compatible with dropped state", func(t *testing.T) {
		res := runCheckCLI(t, nil, "check", "--format", "json", "--transform-name-mapping", `{"CountByUser":""}`, f["old"], f["rekeyed"])
		if res.code != ExitOK {
			t.Fatalf("exit code %d\n%s", res.code, res.stderr)
		}
		r := decode(t, res.stdout)
		if !r.Compatible || len(r.Errors) != 0 || len(r.Warnings) != 1 || r.Warnings[0].Code != "STATE_DROPPED" {
			t.Errorf("report %+v", r)
		}
		if len(r.DroppedState) != 1 || r.DroppedState[0]["step"] != "CountByUser" || r.DroppedState[0]["kind"] != "combine_per_key" || r.DroppedState[0]["key_coder"] == nil {
			t.Errorf("dropped_state %v", r.DroppedState)
		}
	})
	t.Run("matches", func(t *testing.T) {
		res := runCheckCLI(t, nil, "check", "--format", "json", "--transform-name-mapping", `{"CountByUser":"CountByUserId"}`, f["old"], f["renamed"])
		if res.code != ExitOK {
			t.Fatalf("exit code %d\n%s", res.code, res.stderr)
		}
		r := decode(t, res.stdout)
		want := []map[string]any{{"old": "CountByUser", "new": "CountByUserId", "kind": "combine_per_key"}, {"old": "ReadEvents", "new": "ReadEvents", "kind": "source"}}
		if len(r.Matches) != len(want) {
			t.Fatalf("matches %v, want %v", r.Matches, want)
		}
		for i := range want {
			if !maps.Equal(r.Matches[i], want[i]) {
				t.Errorf("match %d = %v, want %v", i, r.Matches[i], want[i])
			}
		}
	})
}

// fakeJobs is a job service that knows one running job.
type fakeJobs struct {
	name string
	g    *graph.Pipeline
}

func (f fakeJobs) RunningGraph(_ context.Context, name string) (*graph.Pipeline, error) {
	if name != f.name {
		return nil, errors.New("no running job named " + name)
	}
	return f.g, nil
}

// TestCLICheckJobName checks the seam for OLD as a running job's name.
func TestCLICheckJobName(t *testing.T) {
	f := checkFiles(t, t.TempDir())
	p, err := loadPipeline(f["old"])
	if err != nil {
		t.Fatal(err)
	}
	jobs := fakeJobs{name: "user-counts", g: p.Graph()}
	for _, tc := range []cliCase{
		{name: "compatible", args: []string{"check", "user-counts", f["wider"]}, wantCode: ExitOK, wantStdout: []string{"compatible:"}},
		{name: "incompatible", args: []string{"check", "user-counts", f["renamed"]}, wantCode: ExitIncompatible, wantStdout: []string{"STEP_MISSING"}},
		{name: "unknown job", args: []string{"check", "other-job", f["old"]}, wantCode: ExitFailure, wantStderr: []string{"finding the graph of job other-job", "no running job named other-job"}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, runCheckCLI(t, jobs, tc.args...)) })
	}
}

// TestCLICheckEndToEnd runs `weir check` as a process, like a user would,
// once root.go registers the command.
func TestCLICheckEndToEnd(t *testing.T) {
	if c, _, err := newRootCommand(&env{}).Find([]string{"check"}); err != nil || c.Name() != "check" {
		t.Skip("weir check is not registered in root.go yet")
	}
	dir := t.TempDir()
	f := checkFiles(t, dir)
	runCases(t, dir, []cliCase{
		{name: "compatible", args: []string{"check", "old.yaml", "wider.yaml"}, wantCode: ExitOK, wantStdout: []string{"compatible:"}},
		{name: "incompatible", args: []string{"check", f["old"], f["renamed"]}, wantCode: ExitIncompatible,
			wantStdout: []string{`add --transform-name-mapping '{"CountByUser":"CountByUserId"}'`}, wantStderr: []string{"weir: "}},
		{name: "json", args: []string{"check", "--format", "json", f["old"], f["moved"]}, wantCode: ExitIncompatible, wantStdout: []string{`"code": "SOURCE_CHANGED"`}},
	})
}
