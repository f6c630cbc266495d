package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/weir-dev/weir/client"
)

func newTablesCommand(e *env) *cobra.Command {
	return groupCommand("tables", "List, describe and merge the SQL tables a weir server's jobs write",
		`Tables shows the SQL tables the WriteToSql sinks of a running weir server's jobs
write (--server, $WEIR_SERVER, default http://127.0.0.1:7070), read from the
jobs' pipelines and from the databases.

A table written with layout: staged is a view over a principal table
(TABLE__principal) and staging tables (TABLE__staging_vN, one per job
generation): the job writes its staging table, and a merge moves the staging
rows into the principal table in one transaction, every merge_interval and
on demand (weir tables merge). Readers of the view see each key and window
once, at its newest revision, before, during and after a merge.

Exit codes: 0 success, 1 no job writes the table or it is not staged, 5 no weir
server answers.`,
		newTablesListCommand(e), newTablesDescribeCommand(e), newTablesMergeCommand(e))
}

// memberSummary is "table:rows" for each member, comma-separated.
func memberSummary(t client.Table) string {
	parts := make([]string, len(t.Members))
	for i, m := range t.Members {
		rows := "-"
		if m.Rows >= 0 {
			rows = strconv.FormatInt(m.Rows, 10)
		}
		parts[i] = m.Table + ":" + rows
	}
	return strings.Join(parts, ",")
}

func lastMerge(t client.Table) string {
	if len(t.Merges) == 0 {
		return "-"
	}
	m := t.Merges[0]
	return fmt.Sprintf("%s (%d rows)", formatTime(m.At), m.Rows)
}

func newTablesListCommand(e *env) *cobra.Command {
	return showCommand(e, showSpec[[]client.Table]{
		use:   "list",
		short: "List the SQL tables the server's jobs write (NAME LAYOUT DRIVER JOBS MEMBERS LAST_MERGE), by name",
		args:  exactArgs(),
		fetch: func(ctx context.Context, c *client.Client, _ []string) ([]client.Table, error) {
			return c.ListTables(ctx)
		},
		text: func(w io.Writer, ts []client.Table) error {
			return writeTable(w, "NAME\tLAYOUT\tDRIVER\tJOBS\tMEMBERS\tLAST_MERGE", ts, func(t client.Table) string {
				members := memberSummary(t)
				if t.Error != "" {
					members = "(" + t.Error + ")"
				}
				return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", t.Name, t.Layout, t.Driver, strings.Join(t.Jobs, ","), members, lastMerge(t))
			})
		},
	})
}

func newTablesDescribeCommand(e *env) *cobra.Command {
	return showCommand(e, showSpec[*client.Table]{
		use:   "describe TABLE",
		short: "Describe a SQL table: its members with rows and columns, the view's rule, recent merges",
		args:  exactArgs("TABLE"),
		fetch: func(ctx context.Context, c *client.Client, args []string) (*client.Table, error) {
			return c.GetTable(ctx, args[0])
		},
		text: func(w io.Writer, t *client.Table) error {
			err := writeFields(w, func(row func(k, v string)) {
				row("Name", t.Name)
				row("Layout", t.Layout)
				row("Driver", t.Driver)
				row("Jobs", strings.Join(t.Jobs, ", "))
				if t.View != "" {
					row("View", t.View)
				}
				if t.Error != "" {
					row("Error", t.Error)
				}
				for _, m := range t.Members {
					rows := "rows not counted"
					if m.Rows >= 0 {
						rows = fmt.Sprintf("%d rows", m.Rows)
					}
					what := m.Role
					if m.Role == "staging" {
						what = fmt.Sprintf("staging, generation %d", m.Generation)
					}
					row("Member", fmt.Sprintf("%s (%s): %s", m.Table, what, rows))
					if len(m.Columns) > 0 {
						row("  Columns", strings.Join(m.Columns, ", "))
					}
				}
				if len(t.Merges) == 0 && t.Layout == "staged" {
					row("Merges", "none yet")
				}
				for _, m := range t.Merges {
					row("Merge", fmt.Sprintf("%s: %d rows in %s (%s)", formatTime(m.At), m.Rows,
						time.Duration(m.DurationMillis)*time.Millisecond, m.Members))
				}
			})
			return outputErr(err)
		},
	})
}

func newTablesMergeCommand(e *env) *cobra.Command {
	return showCommand(e, showSpec[*client.TableMerge]{
		use:   "merge TABLE",
		short: "Merge a staged table's staging tables into its principal table now, and print what moved",
		args:  exactArgs("TABLE"),
		fetch: func(ctx context.Context, c *client.Client, args []string) (*client.TableMerge, error) {
			return c.MergeTable(ctx, args[0])
		},
		text: func(w io.Writer, m *client.TableMerge) error {
			_, err := fmt.Fprintf(w, "Merged %d rows into %s in %s (%s).\n", m.Rows, m.Principal,
				time.Duration(m.DurationMillis)*time.Millisecond, m.Members)
			return outputErr(err)
		},
	})
}
