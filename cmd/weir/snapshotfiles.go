package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/weir-dev/weir/service"
)

// weir snapshots export and import: portable snapshot files, through the
// server's API (so they work against a remote server).

func newSnapshotsExportCommand(e *env) *cobra.Command {
	var format, output string
	var server serverFlag
	cmd := &cobra.Command{
		Use:   "export ID --output FILE",
		Short: "Write a READY snapshot to a portable file (to back a job up or move it)",
		Long: `Export downloads READY snapshot ID from the server as one self-describing file
(format version ` + fmt.Sprint(service.SnapshotFileVersion) + `: a manifest with the graph, positions and sink
progress, the state as parts per key group with a checksum each, and a SHA-256
of the whole; see docs/JOBS.md). The file is written beside FILE first and
checked completely before it takes FILE's name, so FILE is never a partial
file. Import it elsewhere with weir snapshots import FILE.

Exit codes: 0 success, 1 failure (unknown snapshot, a broken transfer, a file
that fails its checks), 2 usage (also a snapshot that is not READY), 5 no weir
server answers.`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			if output == "" {
				return usageErrorf("%s needs --output FILE", cmd.CommandPath())
			}
			c, err := newClient(server)
			if err != nil {
				return err
			}
			tmp, err := os.CreateTemp(filepath.Dir(output), "."+filepath.Base(output)+".partial-*")
			if err != nil {
				return withCode(ExitFailure, fmt.Errorf("creating %s: %w", output, err))
			}
			defer os.Remove(tmp.Name())
			ctx := cmd.Context()
			if _, err := c.ExportSnapshot(ctx, args[0], tmp); err != nil {
				tmp.Close()
				return clientError(ctx, c, err)
			}
			if err := errors.Join(tmp.Sync(), tmp.Close()); err != nil {
				return withCode(ExitFailure, fmt.Errorf("writing %s: %w", output, err))
			}
			f, err := os.Open(tmp.Name())
			if err != nil {
				return withCode(ExitFailure, err)
			}
			info, err := service.VerifySnapshotFile(f)
			f.Close()
			if err != nil {
				return withCode(ExitFailure, fmt.Errorf("the downloaded file fails its checks, %s was not written: %w", output, err))
			}
			if err := os.Rename(tmp.Name(), output); err != nil {
				return withCode(ExitFailure, fmt.Errorf("writing %s: %w", output, err))
			}
			if format == formatJSON {
				return writeJSON(e.stdout, info)
			}
			_, err = fmt.Fprintf(e.stdout, "Exported snapshot %s of job %s to %s (%d bytes, %s, %d state entries, format version %d).\n",
				info.SnapshotID, info.JobName, output, info.Bytes, plural(info.Parts, "part"), info.Entries, info.Version)
			return outputErr(err)
		},
	}
	addFormatFlag(cmd, &format)
	addServerFlag(cmd, &server)
	cmd.Flags().StringVarP(&output, "output", "o", "", "the file to write (required)")
	return cmd
}

func newSnapshotsImportCommand(e *env) *cobra.Command {
	var format, ttl string
	var server serverFlag
	cmd := &cobra.Command{
		Use:   "import FILE [--snapshot-ttl D]",
		Short: "Import a snapshot file as a READY snapshot (same ID, TTL from now)",
		Long: `Import uploads a snapshot file written by weir snapshots export to the server,
which verifies every checksum and records it as a READY snapshot with the
file's snapshot ID (refused with SNAPSHOT_EXISTS when that ID exists) and a TTL
counted from the import (--snapshot-ttl, default 7d). The file is checked here
first: a damaged or truncated file is refused (SNAPSHOT_CORRUPT) before
anything is sent, and the server imports nothing but a whole, verified file.
Subscription snapshots taken with the snapshot do not travel with it.

Exit codes: 0 success, 1 failure (a damaged or truncated file, the ID exists),
2 usage, 5 no weir server answers.`,
		Args: exactArgs("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			if ttl != "" {
				if _, err := service.ParseSnapshotTTL(ttl); err != nil {
					return usageErrorf("--snapshot-ttl: %v", err)
				}
			}
			f, err := os.Open(args[0])
			if err != nil {
				return withCode(ExitFailure, err)
			}
			defer f.Close()
			info, err := service.VerifySnapshotFile(f)
			if err != nil {
				return withCode(ExitFailure, fmt.Errorf("%s: %w (%s)", args[0], err, service.ErrorCode(err)))
			}
			if _, err := f.Seek(0, 0); err != nil {
				return withCode(ExitFailure, err)
			}
			c, err := newClient(server)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			snap, err := c.ImportSnapshot(ctx, f, ttl, nil)
			if err != nil {
				return clientError(ctx, c, err)
			}
			if format == formatJSON {
				return writeJSON(e.stdout, snap)
			}
			_, err = fmt.Fprintf(e.stdout, "Imported snapshot %s of job %s from %s (%d bytes, %s): READY, expires %s.\n",
				snap.ID, snap.JobName, args[0], info.Bytes, plural(info.Parts, "part"), formatTime(snap.ExpireTime))
			return outputErr(err)
		},
	}
	addFormatFlag(cmd, &format)
	addServerFlag(cmd, &server)
	cmd.Flags().StringVar(&ttl, "snapshot-ttl", "", "how long the imported snapshot is kept, from now: 1h to 30d (default 7d)")
	return cmd
}
