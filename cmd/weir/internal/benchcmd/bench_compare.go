package benchcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/weir-dev/weir/bench"
)

// This file is `weir bench windowed-sum --compare BASE`: the same benchmark
// run by this binary and by another build, in alternated rounds, with a
// verdict per figure.

// CompareReport is what `--compare --format json` prints.
type CompareReport struct {
	// Base is what --compare named; BaseBinary the binary that ran it and
	// BaseCommit the commit it was built from (for a git revision).
	Base       string `json:"base"`
	BaseBinary string `json:"base_binary"`
	BaseCommit string `json:"base_commit,omitempty"`
	Binary     string `json:"binary"`
	Events     int64  `json:"events"`
	Keys       int64  `json:"keys"`
	Rounds     int    `json:"rounds"`
	// LoadBefore and LoadAfter are the one-minute load averages around the
	// rounds (0 where the platform does not expose it).
	LoadBefore float64                  `json:"load_before"`
	LoadAfter  float64                  `json:"load_after"`
	CPUs       int                      `json:"cpus"`
	Figures    []bench.FigureComparison `json:"figures"`
	Runs       []bench.CompareRound     `json:"runs"`
}

// compareBase is the base build of a comparison, ready to run.
type compareBase struct {
	binary string
	// commit is the commit the binary was built from ("" for a binary
	// given by path).
	commit string
	// cleanup removes what building it left behind.
	cleanup func()
}

// run runs one side of round round (of rounds) of a comparison: args by
// this build's binary exe or by the base's, the child's standard error
// passed on. It returns the binary that ran and its standard output.
func (b compareBase) run(ctx context.Context, e *cli.Env, exe string, side bench.Side, round, rounds int, args []string) (string, []byte, error) {
	bin := exe
	if side == bench.SideBase {
		bin = b.binary
	}
	fmt.Fprintf(e.Stderr, "round %d/%d: %s build\n", round+1, rounds, side)
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, e.Stderr
	if err := cmd.Run(); err != nil {
		return bin, nil, fmt.Errorf("%s %s: %w", bin, strings.Join(args, " "), err)
	}
	return bin, stdout.Bytes(), nil
}

// resolveCompareBase returns the binary of base: base itself when it is an
// executable file, else the build of base as a git revision of the
// repository holding the working directory (in a temporary worktree).
func resolveCompareBase(ctx context.Context, e *cli.Env, base string) (compareBase, error) {
	if fi, err := os.Stat(base); err == nil {
		if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return compareBase{}, cli.UsageErrorf("--compare %q: not an executable file (want a weir binary or a git revision)", base)
		}
		abs, err := filepath.Abs(base)
		if err != nil {
			return compareBase{}, cli.WithCode(cli.ExitFailure, fmt.Errorf("--compare %q: %w", base, err))
		}
		return compareBase{binary: abs, cleanup: func() {}}, nil
	}
	git := func(dir string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return strings.TrimSpace(string(out)), nil
	}
	top, err := git("", "rev-parse", "--show-toplevel")
	if err != nil {
		return compareBase{}, cli.UsageErrorf("--compare %q: no such file, and the working directory is in no git repository to build it from as a revision: %w", base, err)
	}
	commit, err := git(top, "rev-parse", "--verify", "--quiet", base+"^{commit}")
	if err != nil {
		return compareBase{}, cli.UsageErrorf("--compare %q: neither a weir binary nor a git revision of %s", base, top)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return compareBase{}, cli.WithCode(cli.ExitFailure, fmt.Errorf("--compare %q: building a git revision needs the go tool: %w", base, err))
	}
	tmp, err := os.MkdirTemp("", "weir-compare-")
	if err != nil {
		return compareBase{}, cli.WithCode(cli.ExitFailure, fmt.Errorf("--compare: creating a build directory: %w", err))
	}
	src := filepath.Join(tmp, "src")
	cleanup := func() {
		if _, err := git(top, "worktree", "remove", "--force", src); err != nil {
			e.Logger.Warn("removing the base build's git worktree", "dir", src, "error", err)
		}
		if err := os.RemoveAll(tmp); err != nil {
			e.Logger.Warn("removing the base build's directory", "dir", tmp, "error", err)
		}
	}
	if _, err := git(top, "worktree", "add", "--detach", src, commit); err != nil {
		os.RemoveAll(tmp)
		return compareBase{}, cli.WithCode(cli.ExitFailure, fmt.Errorf("--compare %q: checking the revision out: %w", base, err))
	}
	bin := filepath.Join(tmp, "weir")
	fmt.Fprintf(e.Stderr, "building the base %s (%.12s) into %s ...\n", base, commit, bin)
	build := exec.CommandContext(ctx, goTool, "build", "-o", bin, "./cmd/weir")
	build.Dir = src
	var out bytes.Buffer
	build.Stdout, build.Stderr = &out, &out
	if err := build.Run(); err != nil {
		cleanup()
		return compareBase{}, cli.WithCode(cli.ExitFailure, fmt.Errorf("--compare %q: building %.12s: %w\n%s", base, commit, err, out.String()))
	}
	return compareBase{binary: bin, commit: commit, cleanup: cleanup}, nil
}

// runWindowedSumCompare runs `weir bench windowed-sum` with the same flags
// by this binary and the base's, alternately, rounds times, and prints the
// comparison.
func runWindowedSumCompare(ctx context.Context, e *cli.Env, f windowedSumFlags, cfg bench.Config, variants []bench.Variant) error {
	if f.rounds < 1 {
		return cli.UsageErrorf("--rounds must be at least 1, got %d", f.rounds)
	}
	if f.profileDir != "" {
		return cli.UsageErrorf("--cpu-profile-dir cannot be combined with --compare")
	}
	exe, err := os.Executable()
	if err != nil {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("finding the weir binary: %w", err))
	}
	base, err := resolveCompareBase(ctx, e, f.compare)
	if err != nil {
		return err
	}
	defer base.cleanup()
	names := make([]string, len(variants))
	for i, v := range variants {
		names[i] = v.String()
	}
	args := []string{"bench", "windowed-sum", "--format", "json",
		"--events", strconv.FormatInt(cfg.Events, 10), "--keys", strconv.FormatInt(cfg.Keys, 10),
		"--variants", strings.Join(names, ","), "--log-level", childLogLevel(ctx, e)}
	if !f.warm {
		// Only when asked: a base build from before warm runs has no such
		// flag (and runs each variant once anyway).
		args = append(args, "--warm=false")
	}
	run := func(ctx context.Context, side bench.Side, round int) ([]bench.Measurement, error) {
		bin, out, err := base.run(ctx, e, exe, side, round, f.rounds, args)
		if err != nil {
			return nil, err
		}
		var ms []bench.Measurement
		if err := json.Unmarshal(out, &ms); err != nil {
			return nil, fmt.Errorf("reading the measurements of %s: %w (output %q)", bin, err, out)
		}
		if len(ms) != len(variants) {
			return nil, fmt.Errorf("%s measured %d variants, want %d (%s)", bin, len(ms), len(variants), strings.Join(names, ","))
		}
		for i := range ms {
			// Each side checked its own variants' results against the
			// generated events; the JSON leaves the count out.
			ms[i].Outcome.Events = cfg.Events
		}
		return ms, nil
	}
	rep := CompareReport{Base: f.compare, BaseBinary: base.binary, BaseCommit: base.commit, Binary: exe,
		Events: cfg.Events, Keys: cfg.Keys, Rounds: f.rounds, CPUs: runtime.NumCPU()}
	rep.LoadBefore, _ = bench.LoadAverage()
	rounds, err := bench.RunCompare(ctx, f.rounds, run)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return err
		}
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("benchmark windowed-sum --compare: %w", err))
	}
	rep.LoadAfter, _ = bench.LoadAverage()
	rep.Runs = rounds
	if rep.Figures, err = bench.Summarize(rounds); err != nil {
		return cli.WithCode(cli.ExitFailure, err)
	}
	if f.format == cli.FormatJSON {
		err = cli.WriteJSON(e.Stdout, rep)
	} else {
		err = writeCompareTable(e.Stdout, rep)
	}
	if err != nil {
		return err
	}
	if f.failIfSlower {
		return slowerThan(f.compare, rep.Figures)
	}
	return nil
}

// writeCompareTable prints a comparison: a line on what ran, then one row
// per figure.
func writeCompareTable(w io.Writer, rep CompareReport) error {
	base := rep.BaseBinary
	if rep.BaseCommit != "" {
		base = fmt.Sprintf("%s (commit %.12s)", rep.Base, rep.BaseCommit)
	}
	title := fmt.Sprintf("windowed-sum: %d events, %d keys; this build (%s) against the base %s, %d alternated round(s); load average %.2f → %.2f on %d CPUs",
		rep.Events, rep.Keys, rep.Binary, base, rep.Rounds, rep.LoadBefore, rep.LoadAfter, rep.CPUs)
	return writeFigureTable(w, title, rep.Figures, rep.Rounds, nil)
}

// writeFigureTable prints a comparison's title, its figures one a row,
// the notes, and how to read it.
func writeFigureTable(w io.Writer, title string, figures []bench.FigureComparison, rounds int, notes []string) error {
	var b strings.Builder
	b.WriteString(title + "\n\n")
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "VARIANT\tFIGURE\tTHIS\tBASE\tRATIO\tSPREAD\tVERDICT\t")
	lower := false
	for _, fc := range figures {
		name := fc.Figure
		if fc.LowerIsBetter {
			name += " (lower is better)"
			lower = true
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.2f\t%.2f..%.2f\t%s\t\n", fc.Variant, name,
			formatFigure(fc.This), formatFigure(fc.Base), fc.Ratio, fc.MinRatio, fc.MaxRatio, fc.Verdict)
	}
	if err := tw.Flush(); err != nil {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("formatting output: %w", err))
	}
	for _, n := range notes {
		b.WriteString("\nNote: " + n)
	}
	if len(notes) > 0 {
		b.WriteString("\n")
	}
	ratio := "RATIO is the median of the per-round ratios this/base (higher is better)"
	if lower {
		ratio = "RATIO is the median of the per-round ratios this/base (base/this for a figure that is better lower, so that above 1 is always better)"
	}
	verdicts := "faster or slower"
	if lower {
		verdicts = "faster (better) or slower (worse)"
	}
	fmt.Fprintf(&b, "\nTHIS and BASE are medians over the rounds; %s\n"+
		"and SPREAD their range. The verdict is %s only when every round's ratio is beyond 1 ± %.0f%%.\n", ratio, verdicts, 100*bench.CompareTolerance)
	if rounds < 3 {
		fmt.Fprintf(&b, "With %d round(s) the spread understates the noise: use --rounds 3 or more before trusting a verdict.\n", rounds)
	}
	return cli.WriteReport(w, &b)
}

// slowerThan is the error of --fail-if-slower: nil when no figure is
// slower than the base's.
func slowerThan(base string, figures []bench.FigureComparison) error {
	var slower []string
	for _, fc := range figures {
		if fc.Verdict == bench.VerdictSlower {
			slower = append(slower, fc.Variant+" "+fc.Figure)
		}
	}
	if len(slower) == 0 {
		return nil
	}
	return cli.WithCode(cli.ExitFailure, fmt.Errorf("slower than the base %s: %s", base, strings.Join(slower, ", ")))
}
