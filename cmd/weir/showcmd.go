package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/weir-dev/weir/client"
)

// showSpec describes a command that asks the weir server for something (to
// read it, or to create or change it) and prints the answer: as JSON with
// --format json, otherwise as text.
type showSpec[T any] struct {
	use, short, long string
	args             cobra.PositionalArgs
	// check, when set, validates the flags and arguments before the client
	// is made (after --format is checked); its error is returned as it is.
	check func(cmd *cobra.Command, args []string) error
	// fetch asks the server.
	fetch func(ctx context.Context, c *client.Client, args []string) (T, error)
	// text prints the result for people.
	text func(w io.Writer, v T) error
	// clientErr maps a client error to an exit code (default clientError).
	clientErr func(ctx context.Context, c *client.Client, err error) error
	// flags adds the command's own flags.
	flags func(fs *pflag.FlagSet)
	// offline, for a command that only reads, adds --data-dir: it reads
	// a stopped process's data directory instead (inspect.go).
	offline bool
}

// showCommand builds the command s describes, with --format (every format
// of parseFormat) and --server. A list command (its use starts with "list")
// also takes gcloud's --filter, --sort-by and --limit, applied to the JSON
// fields of the listed resources before any format prints them.
func showCommand[T any](e *env, s showSpec[T]) *cobra.Command {
	var format string
	var server serverFlag
	var lo listOptions
	isList := strings.HasPrefix(s.use, "list")
	cmd := &cobra.Command{
		Use:   s.use,
		Short: s.short,
		Long:  s.long,
		Args:  s.args,
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := parseFormat(format)
			if err != nil {
				return err
			}
			if isList { // usage errors before the server is asked
				if _, err := lo.apply(nil); err != nil {
					return err
				}
			}
			if s.check != nil {
				if err := s.check(cmd, args); err != nil {
					return err
				}
			}
			c, done, err := openClient(cmd.Context(), server)
			if err != nil {
				return err
			}
			defer done()
			v, err := s.fetch(cmd.Context(), c, args)
			if err != nil {
				if s.clientErr != nil {
					return s.clientErr(cmd.Context(), c, err)
				}
				return clientError(cmd.Context(), c, err)
			}
			if isList && (lo.filter != "" || len(lo.sortBy) > 0 || lo.limit > 0) {
				if v, err = selectRows(v, lo); err != nil {
					return err
				}
			}
			return f.write(e.stdout, v, func(w io.Writer) error { return s.text(w, v) })
		},
	}
	cmd.Flags().StringVar(&format, "format", formatText, formatHelp)
	addServerFlag(cmd, &server)
	if s.offline {
		addDataDirFlag(cmd, &server)
	}
	if isList {
		fl := cmd.Flags()
		fl.StringVar(&lo.filter, "filter", "", "gcloud's filter expression on the JSON fields, such as 'name:orders AND backlog>0' (see docs/PUBSUB.md)")
		fl.StringSliceVar(&lo.sortBy, "sort-by", nil, "JSON fields to sort by, comma-separated; ~FIELD sorts descending")
		fl.IntVar(&lo.limit, "limit", 0, "most items to print, after --filter and --sort-by (0: all)")
	}
	if s.flags != nil {
		s.flags(cmd.Flags())
	}
	return cmd
}

// selectRows applies lo to the list v through its JSON form and decodes the
// rows kept back into a T, so that every format prints the same rows.
func selectRows[T any](v T, lo listOptions) (T, error) {
	var zero T
	g, err := toGeneric(v)
	if err != nil {
		return zero, err
	}
	rows, _ := g.([]any) // a null list is no rows
	kept, err := lo.apply(rows)
	if err != nil {
		return zero, err
	}
	b, err := json.Marshal(kept)
	if err != nil {
		return zero, fmt.Errorf("encoding the selected rows: %w", err)
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		return zero, fmt.Errorf("decoding the selected rows: %w", err)
	}
	return out, nil
}

// writeTable prints items as an aligned table for people: the header line
// (tab-separated columns), then the line row makes of each item.
func writeTable[T any](w io.Writer, header string, items []T, row func(T) string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, it := range items {
		fmt.Fprintln(tw, row(it))
	}
	return flush(tw)
}

// writeFields prints one resource for people as aligned "Key:  value"
// lines, those fill adds with the row function it is given, in order.
func writeFields(w io.Writer, fill func(row func(key, value string))) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fill(func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) })
	return flush(tw)
}

// writeReport writes the text built in b (a benchmark report, a rollback)
// to w, a failure as a failed write to stdout.
func writeReport(w io.Writer, b *strings.Builder) error { return cli.WriteReport(w, b) }
