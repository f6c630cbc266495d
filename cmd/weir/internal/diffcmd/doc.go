// Package diffcmd is the weir CLI's `weir diff` command: it compares two
// outputs of bounded runs (files, globs and directories of part files, a
// file sink's published partition, SQLite and PostgreSQL tables, a job's
// WriteToSql table or files found through the server) at the full key,
// with package diff's comparer and weir rehearse's report formats and exit
// codes. Run serves package main's schedule parity check too.
//
// It may import client (a job's type), cmd/weir/internal/cli,
// cmd/weir/internal/serverconn, diff, graph, io/files, io/sqlsink (its
// tables' layout, and the "sqlite" driver), manifest (an --input
// manifest's files checked), row (the row coder's URN), service/record,
// github.com/jackc/pgx/v5 (its database/sql
// driver), github.com/spf13/cobra and the standard library; only package
// main (cmd/weir) imports it.
package diffcmd
