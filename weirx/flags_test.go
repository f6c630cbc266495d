package weirx_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/weirx"
)

func createOnly(p *weir.Pipeline) error {
	weir.Collect(p.Root(), "Out", weir.Create(p.Root(), "In", []int{1, 2, 3}))
	return nil
}

// TestRunFlags: usage errors and --validate-only need no data directory.
func TestRunFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"no job name", nil, weirx.ExitUsage, "--job-name is required"},
		{"bad job name", []string{"--job-name", "Counts"}, weirx.ExitUsage, "must match"},
		{"unknown flag", []string{"--job-name", "c", "--nope"}, weirx.ExitUsage, "nope"},
		{"mapping without update", []string{"--job-name", "c", "--transform-name-mapping", `{"A":"B"}`}, weirx.ExitUsage, "apply to --update"},
		{"bad mapping", []string{"--job-name", "c", "--update", "--transform-name-mapping", `[1]`}, weirx.ExitUsage, "--transform-name-mapping"},
		{"bad format", []string{"--job-name", "c", "--format", "yaml"}, weirx.ExitUsage, "--format"},
		{"bad workers", []string{"--job-name", "c", "--num-workers", "0"}, weirx.ExitUsage, "num_workers"},
		{"validate only", []string{"--job-name", "c", "--validate-only", "--data-dir", t.TempDir()}, weirx.ExitOK, "is valid"},
		{"bad trace memory", []string{"--job-name", "c", "--rehearse-trace-memory", "lots"}, weirx.ExitUsage, `--rehearse-trace-memory "lots": not a size`},
		{"zero trace memory", []string{"--job-name", "c", "--rehearse-trace-memory", "0"}, weirx.ExitUsage, "the budget must be more than 0 bytes"},
		{"missing trace dir", []string{"--job-name", "c", "--rehearse-trace-dir", "/no/such/dir"}, weirx.ExitUsage, `--rehearse-trace-dir "/no/such/dir": directory /no/such/dir does not exist`},
		{"trace budget", []string{"--job-name", "c", "--validate-only", "--data-dir", t.TempDir(), "--rehearse-trace-memory", "64MiB", "--rehearse-trace-dir", t.TempDir()}, weirx.ExitOK, "is valid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := weirx.Run(context.Background(), tc.args, &out, createOnly)
			if code := weirx.ExitCode(err); code != tc.wantCode {
				t.Fatalf("exit code %d (%v), want %d", code, err, tc.wantCode)
			}
			text := out.String()
			if err != nil {
				text = err.Error()
			}
			if !strings.Contains(text, tc.want) {
				t.Errorf("got %q, want it to contain %q", text, tc.want)
			}
		})
	}
}

// TestRunBuildError: a build function's error is an invalid pipeline.
func TestRunBuildError(t *testing.T) {
	t.Parallel()
	err := weirx.Run(context.Background(), []string{"--job-name", "c", "--data-dir", t.TempDir()}, &bytes.Buffer{}, func(p *weir.Pipeline) error {
		return context.DeadlineExceeded
	})
	if weirx.ExitCode(err) != weirx.ExitInvalidPipeline {
		t.Fatalf("build error: %v (exit %d), want exit %d", err, weirx.ExitCode(err), weirx.ExitInvalidPipeline)
	}
}

// TestRunBoundedJob: a program whose sources are all bounded runs its job
// to DONE and returns; the next start submits the name's next generation.
func TestRunBoundedJob(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for gen, want := range []string{"generation 1", "generation 2"} {
		var out bytes.Buffer
		err := weirx.Run(context.Background(), []string{"--job-name", "c", "--data-dir", dir, "--checkpoint-interval", "50ms"}, &out, createOnly)
		if err != nil {
			t.Fatalf("run %d: %v\n%s", gen+1, err, out.String())
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 3 || !strings.Contains(lines[0], "listening on http://") || !strings.Contains(lines[1], want) || !strings.HasSuffix(lines[2], "ended DONE") {
			t.Fatalf("run %d printed:\n%s\nwant the address, %q and the end", gen+1, out.String(), want)
		}
	}
}
