package main

import (
	"encoding/json"
	"github.com/weir-dev/weir/cmd/weir/internal/benchcmd"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-dev/weir/bench"
)

// TestCLIBenchCompareUsage checks the flag errors of --compare, which are
// found before anything runs.
func TestCLIBenchCompareUsage(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	notExec := filepath.Join(t.TempDir(), "weir")
	if err := os.WriteFile(notExec, []byte("not a binary"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws := []string{"bench", "windowed-sum", "--events", "1000", "--keys", "3", "--variants", "baseline"}
	runCases(t, "", []cliCase{
		{name: "rounds without compare", args: append(ws, "--rounds", "2"), wantCode: ExitUsage, wantStderr: []string{"--compare"}},
		{name: "fail-if-slower without compare", args: append(ws, "--fail-if-slower"), wantCode: ExitUsage, wantStderr: []string{"--compare"}},
		{name: "no rounds", args: append(ws, "--compare", exe, "--rounds", "0"), wantCode: ExitUsage, wantStderr: []string{"--rounds"}},
		{name: "profiles and compare", args: append(ws, "--compare", exe, "--cpu-profile-dir", t.TempDir()), wantCode: ExitUsage, wantStderr: []string{"--cpu-profile-dir"}},
		{name: "not executable", args: append(ws, "--compare", notExec), wantCode: ExitUsage, wantStderr: []string{"not an executable file"}},
		{name: "unknown revision", args: append(ws, "--compare", "no-such-revision-of-weir"), wantCode: ExitUsage,
			wantStderr: []string{"no-such-revision-of-weir", "neither a weir binary nor a git revision"}},
		{name: "nexmark rounds without compare", args: []string{"bench", "nexmark", "--query", "q0", "--rounds", "2"}, wantCode: ExitUsage, wantStderr: []string{"--compare"}},
		{name: "nexmark no rounds", args: []string{"bench", "nexmark", "--query", "q0", "--compare", exe, "--rounds", "0"}, wantCode: ExitUsage, wantStderr: []string{"--rounds"}},
		{name: "nexmark unbounded and compare", args: []string{"bench", "nexmark", "--query", "q0", "--unbounded", "--compare", exe}, wantCode: ExitUsage, wantStderr: []string{"--compare", "--unbounded"}},
		{name: "state rounds without compare", args: []string{"bench", "state", "--keys", "10", "--rounds", "2"}, wantCode: ExitUsage, wantStderr: []string{"--compare"}},
		{name: "state profiles and compare", args: []string{"bench", "state", "--keys", "10", "--compare", exe, "--heap-profile", t.TempDir()}, wantCode: ExitUsage, wantStderr: []string{"--heap-profile"}},
		{name: "nexmark not executable", args: []string{"bench", "nexmark", "--query", "q0", "--compare", notExec}, wantCode: ExitUsage, wantStderr: []string{"not an executable file"}},
	})
}

// TestCLIBenchNexmarkCompare compares this binary's Nexmark figures with
// its own, end to end, at a tiny size: every query, worker count and
// figure has a verdict, and the builds agree on the results (no note).
func TestCLIBenchNexmarkCompare(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "", "bench", "nexmark", "--query", "q1,q5", "--yaml", "--events", "3000", "--workers", "1,2",
		"--compare", exe, "--rounds", "2", "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("exit code %d\nstderr:\n%s", r.code, r.stderr)
	}
	var rep benchcmd.FigureCompareReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("decoding %q: %v", r.stdout, err)
	}
	if rep.Benchmark != "nexmark" || rep.Rounds != 2 || len(rep.Runs) != 2 || rep.BaseBinary != exe || len(rep.Notes) != 0 {
		t.Errorf("report %+v: want 2 rounds of nexmark against %s, no notes", rep, exe)
	}
	var got []string
	for _, fc := range rep.Figures {
		got = append(got, fc.Variant+" "+fc.Figure)
		if fc.This <= 0 || fc.Base <= 0 || fc.MinRatio > fc.Ratio || fc.Ratio > fc.MaxRatio || fc.LowerIsBetter {
			t.Errorf("figure %+v: want positive medians, min ≤ ratio ≤ max, higher better", fc)
		}
	}
	var want []string
	for _, v := range []string{"generator w1", "q1 w1", "q1 w2", "yaml-q1 w1", "yaml-q1 w2", "q5 w1", "q5 w2", "yaml-q5 w1", "yaml-q5 w2"} {
		want = append(want, v+" events/s", v+" events/CPU-s")
	}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("figures\n%s\nwant\n%s", strings.Join(got, "; "), strings.Join(want, "; "))
	}
}

// TestCLIBenchCompare compares this binary with itself at a tiny size, end
// to end: both sides are re-executions of the test binary acting as weir.
func TestCLIBenchCompare(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "", "bench", "windowed-sum", "--events", "3000", "--keys", "5", "--variants", "baseline,sdk-w1",
		"--compare", exe, "--rounds", "2", "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("exit code %d\nstderr:\n%s", r.code, r.stderr)
	}
	var rep benchcmd.CompareReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("decoding %q: %v", r.stdout, err)
	}
	if rep.Rounds != 2 || len(rep.Runs) != 2 || rep.BaseBinary != exe || rep.Events != 3000 {
		t.Errorf("report %+v: want 2 rounds of 3000 events against %s", rep, exe)
	}
	for i, round := range rep.Runs {
		if len(round.This) != 2 || len(round.Base) != 2 {
			t.Errorf("round %d: %d and %d measurements, want 2 on each side", i, len(round.This), len(round.Base))
		}
	}
	type fig struct{ variant, figure string }
	var got []fig
	for _, fc := range rep.Figures {
		got = append(got, fig{fc.Variant, fc.Figure})
		if fc.This <= 0 || fc.Base <= 0 || fc.Ratio <= 0 || fc.MinRatio > fc.Ratio || fc.Ratio > fc.MaxRatio {
			t.Errorf("figure %+v: want positive medians and min ≤ ratio ≤ max", fc)
		}
		switch fc.Verdict {
		case bench.VerdictFaster, bench.VerdictSlower, bench.VerdictSame:
		default:
			t.Errorf("figure %+v: unknown verdict", fc)
		}
	}
	want := []fig{{"baseline", "events/s"}, {"baseline", "events/CPU-s"}, {"baseline", "warm events/s"}, {"baseline", "warm events/CPU-s"},
		{"sdk-w1", "events/s"}, {"sdk-w1", "events/CPU-s"}, {"sdk-w1", "vs baseline"},
		{"sdk-w1", "warm events/s"}, {"sdk-w1", "warm events/CPU-s"}, {"sdk-w1", "warm vs baseline"}}
	if len(got) != len(want) {
		t.Fatalf("figures %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("figure %d is %v, want %v", i, got[i], want[i])
		}
	}

	args := []string{"bench", "windowed-sum", "--events", "2000", "--keys", "3", "--variants", "baseline,sdk-w1", "--compare", exe, "--rounds", "1"}
	cliCase{args: args, wantCode: ExitOK,
		wantStdout: []string{"VERDICT", "SPREAD", "vs baseline", "1 alternated round(s)", "load average", "spread understates the noise"},
		wantStderr: []string{"round 1/1: this build", "round 1/1: base build"}}.check(t, runCLI(t, "", args...))
}

// TestCLIBenchStateCompare compares this binary's state figures with its
// own, end to end, at a tiny size: the sizes and times are better lower,
// the restore rate higher, and the output says how to read them.
func TestCLIBenchStateCompare(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "", "bench", "state", "--keys", "2000", "--job", "sdk", "--workers", "1", "--compare", exe, "--rounds", "1", "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("exit code %d\nstderr:\n%s", r.code, r.stderr)
	}
	var rep benchcmd.FigureCompareReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("decoding %q: %v", r.stdout, err)
	}
	if rep.Benchmark != "state" || len(rep.Runs) != 1 || len(rep.Notes) != 0 {
		t.Errorf("report %+v: want one round of state, no notes", rep)
	}
	lower := map[string]bool{}
	for _, fc := range rep.Figures {
		if fc.Variant != "sdk 2000" || fc.This <= 0 || fc.Base <= 0 {
			t.Errorf("figure %+v: want sdk 2000 with positive medians", fc)
		}
		lower[fc.Figure] = fc.LowerIsBetter
	}
	want := map[string]bool{"heap B/key": true, "after cp B/key": true, "restored B/key": true, "cp disk B/key": true,
		"full cp ms": true, "1% cp ms": true, "1000 keys cp ms": true, "restore keys/s": false, "1% again cp ms": true, "peak RSS MiB": true}
	if len(lower) != len(want) {
		t.Errorf("figures %v, want %v", lower, want)
	}
	for name, l := range want {
		if got, ok := lower[name]; !ok || got != l {
			t.Errorf("figure %q: present %v, lower is better %v; want lower is better %v", name, ok, got, l)
		}
	}
	args := []string{"bench", "state", "--keys", "1000", "--job", "sdk", "--workers", "1", "--compare", exe, "--rounds", "1"}
	cliCase{args: args, wantCode: ExitOK,
		wantStdout: []string{"VERDICT", "heap B/key (lower is better)", "restore keys/s", "faster (better) or slower (worse)"},
		wantStderr: []string{"round 1/1: this build", "round 1/1: base build"}}.check(t, runCLI(t, "", args...))
}
