package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/weir-dev/weir/client"
)

func newManifestsCommand(e *env) *cobra.Command {
	return groupCommand("manifests", "Create, list and show the immutable input manifests of bounded jobs",
		`Manifests pins the exact input of a bounded job's partition on a weir server
(--server, $WEIR_SERVER, default http://127.0.0.1:7070): the files (absolute
paths, sizes, SHA-256 content digests) and the side inputs' files, with a
digest of the whole manifest. The server reads the files itself, within its
--file-roots.

A manifest (NAME, partition) is immutable: creating it again with the same
files and contents prints the existing one and changes nothing; with other
files or contents it is refused (MANIFEST_EXISTS): pin the new input under a
new partition or name. A job reads a manifest with 'weir run P.yaml
--job-name J --manifest NAME --partition P' (or 'manifest: NAME' in a file
source with --partition P): it reads exactly the manifest's files, and is
refused (MANIFEST_CHANGED, naming the file) when one of them changed.

Exit codes: 0 success, 1 refused (the manifest exists with other content, a
file is missing) or not found, 2 usage, 3 a path outside the server's
--file-roots (PATH_NOT_ALLOWED), 5 no weir server answers.`,
		newManifestsCreateCommand(e), newManifestsListCommand(e), newManifestsShowCommand(e))
}

func newManifestsCreateCommand(e *env) *cobra.Command {
	var partition string
	var patterns, sides []string
	var req client.CreateManifestRequest
	return showCommand(e, showSpec[*client.Manifest]{
		use:   "create NAME --partition P --files GLOB... [--side-input NAME=FILE]...",
		short: "Record the exact input files of a partition (paths, sizes, SHA-256 digests)",
		long: `Create records manifest NAME's partition P: every file the --files paths and
globs match now (relative ones resolve against the current directory; a
shell-expanded list of files after NAME is taken as --files too), and each
--side-input NAME=FILE. The server computes sizes and digests. Creating the
same manifest again prints the existing one (nothing changes); other content
is refused (MANIFEST_EXISTS).`,
		args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 {
				return usageErrorf("%s takes the manifest's NAME", cmd.CommandPath())
			}
			return nil
		},
		check: func(_ *cobra.Command, args []string) error {
			if partition == "" {
				return usageErrorf("--partition is required: the partition this input is (a date, a batch ID)")
			}
			files := append(append([]string(nil), patterns...), args[1:]...)
			if len(files) == 0 {
				return usageErrorf("--files is required: the input files or globs of the partition")
			}
			req = client.CreateManifestRequest{Name: args[0], Partition: partition}
			for _, f := range files {
				abs, err := filepath.Abs(f)
				if err != nil {
					return usageErrorf("--files %s: %v", f, err)
				}
				req.Files = append(req.Files, abs)
			}
			for _, s := range sides {
				name, path, ok := strings.Cut(s, "=")
				if !ok || name == "" || path == "" {
					return usageErrorf("--side-input %q: want NAME=FILE", s)
				}
				abs, err := filepath.Abs(path)
				if err != nil {
					return usageErrorf("--side-input %s: %v", s, err)
				}
				if req.SideInputs == nil {
					req.SideInputs = map[string]string{}
				}
				if _, dup := req.SideInputs[name]; dup {
					return usageErrorf("--side-input %s is given twice", name)
				}
				req.SideInputs[name] = abs
			}
			return nil
		},
		fetch: func(ctx context.Context, c *client.Client, _ []string) (*client.Manifest, error) {
			return c.CreateManifest(ctx, req)
		},
		text: func(w io.Writer, m *client.Manifest) error {
			verb := "Created"
			if m.Existed {
				verb = "Manifest exists (unchanged):"
			}
			if _, err := fmt.Fprintf(w, "%s manifest %s partition %s: %d file(s), %d side input(s), digest %s\n",
				verb, m.Name, m.Partition, len(m.Files), len(m.SideInputs), m.Digest); err != nil {
				return outputErr(err)
			}
			return nil
		},
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&partition, "partition", "", "the partition this input is (a date, a batch ID): letters, digits, '-', '_', '.', '='")
			fs.StringArrayVar(&patterns, "files", nil, "input file or glob (repeatable)")
			fs.StringArrayVar(&sides, "side-input", nil, "side input NAME=FILE (repeatable)")
		},
	})
}

func newManifestsListCommand(e *env) *cobra.Command {
	return showCommand(e, showSpec[[]*client.Manifest]{
		use:     "list",
		short:   "List manifests (NAME PARTITION FILES BYTES DIGEST CREATED), by name and partition",
		offline: true,
		args:    exactArgs(),
		fetch: func(ctx context.Context, c *client.Client, _ []string) ([]*client.Manifest, error) {
			return c.ListManifests(ctx, "")
		},
		text: writeManifestTable,
	})
}

func newManifestsShowCommand(e *env) *cobra.Command {
	var partition string
	return showCommand(e, showSpec[[]*client.Manifest]{
		use:     "show NAME [--partition P]",
		short:   "Show a manifest's partitions, or with --partition its files, sizes and digests",
		offline: true,
		args:    exactArgs("NAME"),
		fetch: func(ctx context.Context, c *client.Client, args []string) ([]*client.Manifest, error) {
			if partition == "" {
				return c.ListManifests(ctx, args[0])
			}
			m, err := c.GetManifest(ctx, args[0], partition)
			if err != nil {
				return nil, err
			}
			return []*client.Manifest{m}, nil
		},
		text: func(w io.Writer, ms []*client.Manifest) error {
			if partition == "" {
				return writeManifestTable(w, ms)
			}
			m := ms[0]
			if err := writeFields(w, func(row func(k, v string)) {
				row("Name", m.Name)
				row("Partition", m.Partition)
				row("Digest", m.Digest)
				row("Create time", formatTime(m.CreateTime))
			}); err != nil {
				return err
			}
			type line struct {
				kind, name string
				f          client.ManifestFile
			}
			var lines []line
			for _, f := range m.Files {
				lines = append(lines, line{"input", "-", f})
			}
			for _, s := range m.SideInputs {
				lines = append(lines, line{"side", s.Name, s.ManifestFile})
			}
			return writeTable(w, "KIND\tNAME\tBYTES\tSHA256\tPATH", lines, func(l line) string {
				return fmt.Sprintf("%s\t%s\t%d\t%s\t%s", l.kind, l.name, l.f.Size, l.f.SHA256, l.f.Path)
			})
		},
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&partition, "partition", "", "show this partition's files")
		},
	})
}

// writeManifestTable prints manifests one per line.
func writeManifestTable(w io.Writer, ms []*client.Manifest) error {
	return writeTable(w, "NAME\tPARTITION\tFILES\tBYTES\tDIGEST\tCREATED", ms, func(m *client.Manifest) string {
		var n int64
		for _, f := range m.Files {
			n += f.Size
		}
		return fmt.Sprintf("%s\t%s\t%d\t%d\t%s\t%s", m.Name, m.Partition, len(m.Files), n, m.Digest, formatTime(m.CreateTime))
	})
}
