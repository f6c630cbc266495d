package textio

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"

	"github.com/weir-dev/weir/io/files"
	"github.com/weir-dev/weir/manifest"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// Schema is the schema of ReadFromText's rows: one string field, line.
func Schema() *row.Schema {
	return row.MustSchema(row.Field{Name: "line", Type: row.Of(row.KindString)})
}

// Source reads the lines of one file or a glob of files, one split per
// file. Lines end at delim (default "\n", with "\r\n" accepted too).
type Source struct {
	// Path is the file or glob read; Delim ends lines ("": "\n" or "\r\n").
	Path, Delim string
	// Schema is the rows' schema (Schema()).
	Schema *row.Schema
	// Manifest and Inputs, when Manifest is set, are the manifest files
	// read instead of Path, each checked against its size and digest first.
	Manifest *manifest.Manifest
	Inputs   []manifest.File
}

// Split implements contract.Source.
func (s *Source) Split(_ context.Context, _ int) ([]contract.SourceSplit, error) {
	paths, err := files.InputPaths(s.Path, s.Manifest, s.Inputs)
	if err != nil {
		return nil, err
	}
	out := make([]contract.SourceSplit, 0, len(paths))
	for _, p := range paths {
		out = append(out, &split{src: s, path: p})
	}
	return out, nil
}

type split struct {
	src  *Source
	path string
	f    *os.File
	sc   *bufio.Scanner
	line int64
	done bool
}

// Read implements contract.SourceSplit.
func (s *split) Read(ctx context.Context, buf []contract.Element) (contract.ReadResult, error) {
	if s.f == nil && !s.done {
		f, err := os.Open(s.path)
		if err != nil {
			return contract.ReadResult{}, err // os.Open's error names the path: "open PATH: no such file or directory"
		}
		s.f = f
		s.sc = bufio.NewScanner(f)
		s.sc.Buffer(make([]byte, 64<<10), 64<<20)
		s.sc.Split(splitAt(s.src.Delim))
	}
	n := 0
	for n < len(buf) && !s.done {
		if !s.sc.Scan() {
			if err := s.sc.Err(); err != nil {
				return contract.ReadResult{N: n}, fmt.Errorf("reading %s: %w", s.path, err)
			}
			s.done = true
			break
		}
		s.line++
		r := row.New(s.src.Schema)
		r.Values[0] = s.sc.Text()
		buf[n] = contract.Element{Value: r, Time: mtime.MinTimestamp, Window: window.Global, Pane: window.NoFiring,
			Source: &contract.SourcePos{Source: s.path, Offset: s.line}}
		n++
	}
	if n == 0 && ctx.Err() != nil {
		return contract.ReadResult{}, ctx.Err()
	}
	if s.done {
		return contract.ReadResult{N: n, Watermark: mtime.MaxTimestamp, Done: true}, nil
	}
	return contract.ReadResult{N: n, Watermark: mtime.MinTimestamp}, nil
}

// Close implements contract.SourceSplit.
func (s *split) Close() error {
	if s.f == nil {
		return nil
	}
	if err := s.f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", s.path, err)
	}
	return nil
}

// splitAt splits at delim; the default splits lines ending in \n or \r\n.
func splitAt(delim string) bufio.SplitFunc {
	if delim == "" {
		return bufio.ScanLines
	}
	d := []byte(delim)
	return func(data []byte, atEOF bool) (int, []byte, error) {
		if i := bytes.Index(data, d); i >= 0 {
			return i + len(d), data[:i], nil
		}
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	}
}
