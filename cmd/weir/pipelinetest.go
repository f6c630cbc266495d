package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/weir-dev/weir/sandbox"
)

func newTestCommand(e *env) *cobra.Command {
	var format string
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
mock_inputs and expected_outputs are not supported yet.

Exit codes: 0 every test passed, 1 a test failed (or could not run),
2 usage, 3 invalid pipeline.`,
		Args: exactArgs("PIPELINE.yaml"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPipelineTests(cmd.Context(), e, args[0], format)
		},
	}
	addFormatFlag(cmd, &format)
	return cmd
}

// testReport is one test's outcome (--format json).
type testReport struct {
	Name     string   `json:"name"`
	Passed   bool     `json:"passed"`
	Failures []string `json:"failures"`
}

func runPipelineTests(ctx context.Context, e *env, path, format string) error {
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
	wd, err := workingDir()
	if err != nil {
		return withCode(ExitFailure, err)
	}
	opts := sandbox.Options{BaseDir: wd, JinjaVariables: e.jinja, Logger: e.logger}
	if _, err := sandbox.Load(path, src, opts); err != nil {
		return withCode(ExitInvalidPipeline, err)
	}
	var reports []testReport
	failed := 0
	for _, t := range tests {
		res, err := sandbox.RunTest(ctx, path, src, t, opts)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			res = &sandbox.TestResult{Name: t.Name, Failures: []string{"could not run: " + err.Error()}}
		}
		if !res.Passed() {
			failed++
		}
		reports = append(reports, testReport{Name: res.Name, Passed: res.Passed(), Failures: append([]string{}, res.Failures...)})
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
			if !r.Passed {
				verdict = "FAIL"
			}
			fmt.Fprintf(&b, "%s  %s\n", verdict, r.Name)
			for _, f := range r.Failures {
				fmt.Fprintf(&b, "      %s\n", f)
			}
		}
		fmt.Fprintf(&b, "%d of %d tests passed\n", len(reports)-failed, len(reports))
		if _, err := fmt.Fprint(e.stdout, b.String()); err != nil {
			return withCode(ExitFailure, fmt.Errorf("writing the report: %w", err))
		}
	}
	if failed > 0 {
		return withCode(ExitFailure, fmt.Errorf("%d of %d tests failed", failed, len(reports)))
	}
	return nil
}
