package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/weir-dev/weir/client"
)

func newJobsLogsCommand(e *env) *cobra.Command {
	var format string
	var server serverFlag
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs ID|NAME",
		Short: "Show a job's events: state changes, checkpoint failures, dead letters, updates, snapshots, LogForTesting lines",
		Long: `Logs prints the events of a job, oldest first (a job keeps its last 10,000):
TIME SEVERITY TYPE MESSAGE per line, or one JSON object per line with
--format json ({seq, time, type, severity, message, details}). The event
types are listed in docs/METRICS.md.

--follow keeps printing new events as they happen, until the job ends.`,
		Args: exactArgs("ID|NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			if follow && server.DataDir != "" {
				return usageErrorf("--follow needs a running server: a data directory read with --data-dir has no job running")
			}
			c, done, err := openClient(cmd.Context(), server)
			if err != nil {
				return err
			}
			defer done()
			ctx := cmd.Context()
			print := func(ev client.Event) error { return writeEvent(e.stdout, format, ev) }
			ref := args[0]
			var after uint64
			for {
				page, err := c.Events(ctx, ref, after, client.DefaultEventLimit)
				if err != nil {
					return clientError(ctx, c, err)
				}
				for _, ev := range page.Events {
					if err := print(ev); err != nil {
						return err
					}
					after = ev.Seq
				}
				if len(page.Events) < client.DefaultEventLimit {
					// Follow the job the first page named: a name may move
					// on to a new job meanwhile.
					ref = page.JobID
					break
				}
			}
			if !follow {
				return nil
			}
			err = c.FollowEvents(ctx, ref, after, print)
			if errors.Is(err, client.ErrStreamEnded) {
				return withCode(ExitFailure, fmt.Errorf("the weir server ended the event stream before job %s ended (it is shutting down or handing its data directory over): run logs --follow again once it is back", ref))
			}
			return clientError(ctx, c, err)
		},
	}
	addFormatFlag(cmd, &format)
	addServerFlag(cmd, &server)
	addDataDirFlag(cmd, &server)
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new events until the job ends")
	return cmd
}

// writeEvent prints one event as a text line or a JSON object line.
func writeEvent(w io.Writer, format string, ev client.Event) error {
	var err error
	if format == formatJSON {
		var b []byte
		if b, err = json.Marshal(ev); err == nil {
			_, err = fmt.Fprintf(w, "%s\n", b)
		}
	} else {
		msg := strings.ReplaceAll(ev.Message, "\n", " ")
		_, err = fmt.Fprintf(w, "%s  %-7s  %-18s  %s\n", ev.Time.UTC().Format("2006-01-02T15:04:05.000Z"), strings.ToUpper(string(ev.Severity)), ev.Type, msg)
	}
	if err != nil {
		return withCode(ExitFailure, fmt.Errorf("writing output: %w", err))
	}
	return nil
}
