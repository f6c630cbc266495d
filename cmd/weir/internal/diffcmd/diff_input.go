package diffcmd

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"github.com/weir-dev/weir/cmd/weir/internal/serverconn"
	"github.com/weir-dev/weir/io/files"
	"github.com/weir-dev/weir/manifest"
)

// --input SPEC: what both runs read, counted by weir diff instead of given
// as a number (--input-count): the rows of a file, glob, directory or
// table, or of an input manifest's files (manifest:NAME#PARTITION, each
// file checked against its recorded size and digest first, as a partition
// run checks them), and the sum of the conserved field over them.

// InputRead is what --input read: the input side of conservation.
type InputRead struct {
	// Spec is the --input specifier (a URL's password redacted).
	Spec string `json:"spec"`
	// Files counts the files read (0 for a table).
	Files int `json:"files"`
	// Rows counts the input's rows.
	Rows int64 `json:"rows"`
	// Field is the conserved input field summed (--conserve's IN, or
	// --value's one field); empty when rows are conserved.
	Field string `json:"field,omitempty"`
	// Sum is the sum of Field over the rows (rows without a number there
	// add nothing): the input of conservation when Field is set (else
	// Rows is, and Sum is 0).
	Sum float64 `json:"sum"`
}

// manifestPrefix starts an input manifest specifier.
const manifestPrefix = "manifest:"

// readInput reads --input arg and totals it: its rows, and the sum of
// field over them when field is set.
func readInput(ctx context.Context, server serverconn.Flag, arg, field string) (*InputRead, error) {
	in := &InputRead{Spec: Redact(arg), Field: field}
	add := func(rec map[string]any) error {
		in.Rows++
		if field != "" {
			if f, ok := numberOf(rec[field]); ok {
				in.Sum += f
			}
		}
		return nil
	}
	if rest, ok := strings.CutPrefix(arg, manifestPrefix); ok {
		name, partition, ok := strings.Cut(rest, "#")
		if !ok || name == "" || partition == "" {
			return nil, cli.UsageErrorf("--input %q: an input manifest is manifest:NAME#PARTITION (weir manifests list)", arg)
		}
		c, err := serverconn.NewClient(server)
		if err != nil {
			return nil, err
		}
		cm, err := c.GetManifest(ctx, name, partition)
		if err != nil {
			return nil, serverconn.Error(ctx, c, fmt.Errorf("--input %s: %w", arg, err))
		}
		m := &manifest.Manifest{Name: cm.Name, Partition: cm.Partition}
		for _, f := range cm.Files {
			m.Files = append(m.Files, manifest.File{Path: f.Path, Size: f.Size, SHA256: f.SHA256})
		}
		for _, f := range m.Files {
			format, ok := fileFormats[strings.ToLower(filepath.Ext(f.Path))]
			if !ok {
				return nil, cli.WithCode(cli.ExitRehearsalFailed, fmt.Errorf("--input %s: cannot tell the format of %s from its extension", arg, f.Path))
			}
			if err := m.VerifyFile(f); err != nil {
				return nil, cli.WithCode(cli.ExitRehearsalFailed, fmt.Errorf("--input %s: %w", arg, err))
			}
			if err := files.Records(ctx, f.Path, format, add); err != nil {
				return nil, cli.WithCode(cli.ExitRehearsalFailed, fmt.Errorf("--input %s: %w", arg, err))
			}
			in.Files++
		}
	} else {
		sp, err := parseOutputSpec(arg)
		if err != nil {
			return nil, err
		}
		switch sp.kind {
		case specJob:
			return nil, cli.UsageErrorf("--input %q: a job names an output, not an input; give the input's files, a table or manifest:NAME#PARTITION", arg)
		case specFile, specPublished:
			paths, _, err := sp.filesOf()
			if err != nil {
				return nil, cli.WithCode(cli.ExitRehearsalFailed, fmt.Errorf("--input %s: %w", arg, err))
			}
			in.Files = len(paths)
		}
		if err := sp.records(ctx, add); err != nil {
			return nil, cli.WithCode(cli.ExitRehearsalFailed, fmt.Errorf("--input %s: %w", arg, err))
		}
	}
	return in, nil
}

// total is the input of conservation: the field's sum, or the rows.
func (in *InputRead) total() float64 {
	if in.Field != "" {
		return in.Sum
	}
	return float64(in.Rows)
}
