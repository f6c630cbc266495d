package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"
	"github.com/spf13/cobra"

	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"github.com/weir-dev/weir/sandbox"
)

func newTestCommand(e *env) *cobra.Command {
	var format string
	var fix bool
	cmd := &cobra.Command{
		Use:   "test PIPELINE.yaml",
		Short: "Run the test cases of a pipeline file's tests: section",
		Long: `Test runs the test cases of the pipeline file's Beam YAML tests: section,
each in the sandbox 'weir rehearse' uses (sources replaced by the mocked
elements, sinks captured; nothing is written):

  tests:
    - name: reference fixture
      mock_outputs:            # what a source step outputs
        - name: ReadTransactions
          elements:
            - {element: {region: NORTH, amount: 250}, event_time: "2026-03-01T00:01:00Z"}
            - {watermark: "2026-03-01T00:05:00Z"}
      expected_inputs:         # what a sink step receives
        - name: WriteTotals
          elements:
            - {region: NORTH, total: 425, window_start: "2026-03-01T00:00:00Z", pane: {index: 0, timing: ON_TIME}}

A mocked element is a row (at the minimum event time, as Beam's), or weir's
{element, event_time}; {watermark: TIME} moves the source's watermark. An
expected element is compared on the fields it names (window_start,
window_end and pane too; for a reject element, error.reason, error.step,
error.message), and expected and received elements must pair one to one.
As in Beam, mock_inputs feed a transform's input instead of its producer
(TRANSFORM, or TRANSFORM.INPUT for one named input) and expected_outputs
check any transform's output (TRANSFORM, or TRANSFORM.OUTPUT such as an
error output); a test then runs only the transforms its expectations need:

  tests:
    - name: tagging
      mock_inputs:
        - name: Tag
          elements: [{region: NORTH, amount: 700}]
      expected_outputs:
        - name: Tag
          elements: [{region: NORTH, amount: 700, big: true}]

--fix-tests rewrites, in the file, every expectation that did not match with
the elements received instead (as Beam's --fix_tests does), and reports those
tests as FIXED; review the change before you commit it.

Exit codes: 0 every test passed (or was fixed), 1 a test failed (or could
not run), 2 usage, 3 invalid pipeline.`,
		Args: exactArgs("PIPELINE.yaml"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPipelineTests(cmd.Context(), e, args[0], format, fix)
		},
	}
	addFormatFlag(cmd, &format)
	cmd.Flags().BoolVar(&fix, "fix-tests", false, "rewrite the expectations that did not match with what was received, in the pipeline file")
	return cmd
}

// testReport is one test's outcome (--format json).
type testReport struct {
	Name     string   `json:"name"`
	Passed   bool     `json:"passed"`
	Failures []string `json:"failures"`
	// Fixed is set by --fix-tests when the file now states what the test
	// received.
	Fixed bool `json:"fixed,omitempty"`
}

func runPipelineTests(ctx context.Context, e *env, path, format string, fix bool) error {
	if err := checkFormat(format); err != nil {
		return err
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return withCode(ExitInvalidPipeline, fmt.Errorf("reading the pipeline file: %w", err))
	}
	tests, err := sandbox.ParseTests(path, src)
	if err != nil {
		return withCode(ExitInvalidPipeline, err)
	}
	if len(tests) == 0 {
		return withCode(ExitFailure, fmt.Errorf("%s has no tests: section", path))
	}
	wd, err := cli.WorkingDir()
	if err != nil {
		return withCode(ExitFailure, err)
	}
	opts := sandbox.Options{BaseDir: wd, JinjaVariables: e.jinja, Logger: e.logger}
	if _, err := sandbox.Load(path, src, opts); err != nil {
		return withCode(ExitInvalidPipeline, err)
	}
	var reports []testReport
	var fixes []testFix
	failed := 0
	for _, t := range tests {
		res, err := sandbox.RunTest(ctx, path, src, t, opts)
		ran := err == nil
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			res = &sandbox.TestResult{Name: t.Name, Failures: []string{"could not run: " + err.Error()}}
		}
		r := testReport{Name: res.Name, Passed: res.Passed(), Failures: append([]string{}, res.Failures...)}
		if fix && ran && !res.Passed() {
			for _, f := range res.Fixes {
				fixes = append(fixes, testFix{test: t.Index, TestFix: f})
			}
			r.Fixed = true
		}
		if !r.Passed && !r.Fixed {
			failed++
		}
		reports = append(reports, r)
	}
	if len(fixes) > 0 {
		fixed, err := fixTests(src, fixes)
		if err != nil {
			return withCode(ExitFailure, fmt.Errorf("--fix-tests: %w", err))
		}
		if err := writeFileAtomic(path, fixed); err != nil {
			return withCode(ExitFailure, fmt.Errorf("--fix-tests: %w", err))
		}
	}
	if format == formatJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{"tests": reports, "failed": failed}); err != nil {
			return withCode(ExitFailure, fmt.Errorf("writing the report: %w", err))
		}
	} else {
		var b strings.Builder
		for _, r := range reports {
			verdict := "PASS"
			switch {
			case r.Fixed:
				verdict = "FIXED"
			case !r.Passed:
				verdict = "FAIL"
			}
			fmt.Fprintf(&b, "%s  %s\n", verdict, r.Name)
			for _, f := range r.Failures {
				fmt.Fprintf(&b, "      %s\n", f)
			}
		}
		fmt.Fprintf(&b, "%d of %d tests passed\n", len(reports)-failed, len(reports))
		if len(fixes) > 0 {
			fmt.Fprintf(&b, "%s: rewrote %d expectation(s) with what the tests received\n", path, len(fixes))
		}
		if _, err := fmt.Fprint(e.stdout, b.String()); err != nil {
			return withCode(ExitFailure, fmt.Errorf("writing the report: %w", err))
		}
	}
	if failed > 0 {
		return withCode(ExitFailure, fmt.Errorf("%d of %d tests failed", failed, len(reports)))
	}
	return nil
}

// testFix is one expectation --fix-tests rewrites: of the test at index
// test of the tests: list.
type testFix struct {
	test int
	sandbox.TestFix
}

// fixTests returns src with the elements of each fixed expectation
// replaced by what was received; the rest of the file (comments,
// layout) stays as it was.
func fixTests(src []byte, fixes []testFix) ([]byte, error) {
	file, err := parser.ParseBytes(src, parser.ParseComments)
	if err != nil {
		return nil, fmt.Errorf("reading the pipeline file again: %w", err)
	}
	for _, f := range fixes {
		p, err := yaml.PathString(fmt.Sprintf("$.tests[%d].%s[%d].elements", f.test, f.Section, f.Index))
		if err != nil {
			return nil, err
		}
		elems := make([]any, len(f.Elements))
		for i, el := range f.Elements {
			elems[i] = el
		}
		b, err := yaml.MarshalWithOptions(elems, yaml.Flow(true))
		if err != nil {
			return nil, fmt.Errorf("writing the elements of %s %s: %w", f.Section, f.Name, err)
		}
		if err := p.ReplaceWithReader(file, bytes.NewReader(b)); err != nil {
			return nil, fmt.Errorf("replacing the elements of %s %s: %w", f.Section, f.Name, err)
		}
	}
	return []byte(file.String() + "\n"), nil
}

// writeFileAtomic replaces path's content with b through a temporary
// file beside it, keeping its mode.
func writeFileAtomic(path string, b []byte) error {
	mode := os.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
