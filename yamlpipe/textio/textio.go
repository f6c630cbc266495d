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
	ls   *lineSplitter
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
		s.sc.Buffer(make([]byte, 64<<10), files.MaxLineBytes)
		s.ls = &lineSplitter{split: splitAt(s.src.Delim), delim: []byte(s.src.Delim)}
		if s.src.Delim == "" {
			s.ls.delim = []byte{'\n'}
		}
		s.sc.Split(s.ls.next)
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
		pos := &contract.SourcePos{Source: s.path, Offset: s.line}
		if s.ls.tooLong {
			s.ls.tooLong = false
			buf[n] = contract.Element{Value: contract.Reject{Element: s.sc.Text(), Reason: files.ReasonLineTooLong, Source: pos,
				Message: files.LineTooLongMessage(0)},
				Time: mtime.MinTimestamp, Window: window.Global, Pane: window.NoFiring, Source: pos}
			n++
			continue
		}
		r := row.New(s.src.Schema)
		r.Values[0] = s.sc.Text()
		buf[n] = contract.Element{Value: r, Time: mtime.MinTimestamp, Window: window.Global, Pane: window.NoFiring, Source: pos}
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

// lineSplitter splits lines with split, turning a line longer than the
// scanner's buffer (files.MaxLineBytes) into a token of its first KiB
// (tooLong set) and skipping the rest of it, where a bufio.Scanner would
// stop with ErrTooLong.
type lineSplitter struct {
	split bufio.SplitFunc
	// delim ends lines (the last byte of "\r\n" for the default).
	delim []byte
	// tooLong says the token last returned is the start of a line too long.
	tooLong bool
	// skipping says the rest of a line too long is being skipped.
	skipping bool
}

func (l *lineSplitter) next(data []byte, atEOF bool) (int, []byte, error) {
	if l.skipping {
		if i := bytes.Index(data, l.delim); i >= 0 {
			l.skipping = false
			return i + len(l.delim), nil, nil
		}
		if atEOF {
			l.skipping = false
			return len(data), nil, nil
		}
		// Keep what could be the start of a delimiter the next read ends.
		return max(len(data)-(len(l.delim)-1), 0), nil, nil
	}
	adv, tok, err := l.split(data, atEOF)
	if adv == 0 && tok == nil && err == nil && !atEOF && len(data) >= files.MaxLineBytes {
		// The buffer is full and holds no line end: a line too long.
		l.tooLong, l.skipping = true, true
		return len(data), data[:files.RejectHeadBytes], nil
	}
	return adv, tok, err
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
