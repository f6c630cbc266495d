package main

import (
	"encoding/json"
	"github.com/weir-dev/weir/cmd/weir/internal/benchcmd"
	"os"
	"path/filepath"
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
	})
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
