package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/weir-dev/weir/api"
)

// showSpec describes a command that asks the weir server for something and
// prints it: as JSON with --format json, otherwise as text.
type showSpec[T any] struct {
	use, short string
	args       cobra.PositionalArgs
	// fetch asks the server.
	fetch func(ctx context.Context, c *api.Client, args []string) (T, error)
	// text prints the result for people.
	text func(w io.Writer, v T) error
	// clientErr maps a client error to an exit code (default clientError).
	clientErr func(ctx context.Context, c *api.Client, err error) error
	// flags adds the command's own flags.
	flags func(fs *pflag.FlagSet)
}

// showCommand builds the command s describes, with --format and --server.
func showCommand[T any](e *env, s showSpec[T]) *cobra.Command {
	var format string
	var server serverFlag
	cmd := &cobra.Command{
		Use:   s.use,
		Short: s.short,
		Args:  s.args,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			c, err := newClient(server)
			if err != nil {
				return err
			}
			v, err := s.fetch(cmd.Context(), c, args)
			if err != nil {
				if s.clientErr != nil {
					return s.clientErr(cmd.Context(), c, err)
				}
				return clientError(cmd.Context(), c, err)
			}
			if format == formatJSON {
				return writeJSON(e.stdout, v)
			}
			return s.text(e.stdout, v)
		},
	}
	addFormatFlag(cmd, &format)
	addServerFlag(cmd, &server)
	if s.flags != nil {
		s.flags(cmd.Flags())
	}
	return cmd
}
