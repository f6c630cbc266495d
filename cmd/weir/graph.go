package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newGraphCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "graph PIPELINE.yaml",
		Short: "Print the canonical graph JSON of a pipeline",
		Long: `Graph loads a YAML pipeline and prints its graph in canonical JSON: steps
sorted by name, collections by ID, with coder identities and windowing
strategies. Two pipelines can be diffed through it; it is what an update is
checked against.

Exit codes: 0 success, 2 usage, 3 invalid pipeline.`,
		Args: exactArgs("PIPELINE.yaml"),
		RunE: func(_ *cobra.Command, args []string) error {
			p, err := inspectPipeline(args[0], e.jinja, false)
			if err != nil {
				return err
			}
			out, err := p.Graph().Canonical()
			if err != nil {
				return withCode(ExitFailure, fmt.Errorf("encoding the graph of %s: %w", args[0], err))
			}
			_, err = fmt.Fprintf(e.stdout, "%s\n", out)
			return outputErr(err)
		},
	}
}
