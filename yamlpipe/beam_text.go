package yamlpipe

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/io/files"
	"github.com/weir-dev/weir/manifest"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// Beam YAML's ReadFromText and WriteToText: rows of one string field named
// line, one per line of text.

// textSchema is the schema of ReadFromText's rows.
func textSchema() *row.Schema {
	return row.MustSchema(row.Field{Name: "line", Type: row.Of(row.KindString)})
}

// textSource reads the lines of one file or a glob of files, one split per
// file. Lines end at delim (default "\n", with "\r\n" accepted too).
type textSource struct {
	path, delim string
	schema      *row.Schema
	// m and inputs, when m is set, are the manifest files read instead
	// of path, each checked against its size and digest first.
	m      *manifest.Manifest
	inputs []manifest.File
}

// Split implements contract.Source.
func (s *textSource) Split(_ context.Context, _ int) ([]contract.SourceSplit, error) {
	paths, err := files.InputPaths(s.path, s.m, s.inputs)
	if err != nil {
		return nil, err
	}
	out := make([]contract.SourceSplit, 0, len(paths))
	for _, p := range paths {
		out = append(out, &textSplit{src: s, path: p})
	}
	return out, nil
}

type textSplit struct {
	src  *textSource
	path string
	f    *os.File
	sc   *bufio.Scanner
	line int64
	done bool
}

// Read implements contract.SourceSplit.
func (s *textSplit) Read(ctx context.Context, buf []contract.Element) (contract.ReadResult, error) {
	if s.f == nil && !s.done {
		f, err := os.Open(s.path)
		if err != nil {
			return contract.ReadResult{}, err // os.Open's error names the path: "open PATH: no such file or directory"
		}
		s.f = f
		s.sc = bufio.NewScanner(f)
		s.sc.Buffer(make([]byte, 64<<10), 64<<20)
		s.sc.Split(splitAt(s.src.delim))
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
		r := row.New(s.src.schema)
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
func (s *textSplit) Close() error {
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

func buildReadFromText(l *loader, t *transformSpec, _ []*coll) (*coll, error) {
	in, err := l.fileInput(t)
	if err != nil {
		return nil, err
	}
	delim, dn, err := l.optStr(t.config, "delimiter")
	if err != nil {
		return nil, err
	}
	if dn != nil && delim == "" {
		return nil, l.errf(dn, "delimiter must not be empty")
	}
	schema := textSchema()
	src := &textSource{path: in.path, delim: delim, schema: schema, m: in.m, inputs: in.files}
	opts := stepOpts(t, weir.WithCoder(schema.Coder()), weir.WithSourceIdentity("file_text", in.identity, true))
	out := weir.Read[*rowT](l.root, t.name, src, true, opts...)
	return rowsColl(schema, out), nil
}

// textSink writes the sole field of each row as one line of text. Writes
// from several workers are serialised by the mutex.
type textSink struct {
	path string
	mu   struct {
		sync.Mutex // guards f, w, buf, closed
		f          *os.File
		w          *bufio.Writer
		buf        []byte
		closed     bool
	}
}

func (s *textSink) openLocked() error {
	if s.mu.f != nil {
		return nil
	}
	if s.mu.closed {
		return fmt.Errorf("sink %s is closed", s.path)
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o755); err != nil {
		return fmt.Errorf("creating the directory of %s: %w", s.path, err)
	}
	f, err := os.Create(s.path)
	if err != nil {
		return fmt.Errorf("creating %s: %w", s.path, err)
	}
	s.mu.f, s.mu.w = f, bufio.NewWriter(f)
	return nil
}

// Write implements contract.Sink.
func (s *textSink) Write(_ context.Context, _ int, elems []contract.Element) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.openLocked(); err != nil {
		return err
	}
	for _, e := range elems {
		var v any
		if r, ok := row.AsRow(e.Value); ok && len(r.Values) > 0 {
			v = r.Values[0]
		}
		s.mu.buf = append(appendPyStr(s.mu.buf[:0], v), '\n')
		if _, err := s.mu.w.Write(s.mu.buf); err != nil {
			return fmt.Errorf("writing %s: %w", s.path, err)
		}
	}
	return nil
}

// Close implements contract.Sink.
func (s *textSink) Close(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.openLocked(); err != nil {
		return err
	}
	s.mu.closed = true
	if err := s.mu.w.Flush(); err != nil {
		s.mu.f.Close()
		return fmt.Errorf("writing %s: %w", s.path, err)
	}
	if err := s.mu.f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", s.path, err)
	}
	return nil
}

// appendPyStr appends v as Python's str() prints it (Beam's WriteToText
// writes str(value)).
func appendPyStr(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "None"...)
	case string:
		return append(dst, x...)
	case bool:
		if x {
			return append(dst, "True"...)
		}
		return append(dst, "False"...)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case float64:
		return appendPyFloat(dst, x)
	case mtime.Time:
		return append(dst, x.Format()...)
	}
	return appendPyJSON(dst, v)
}

func buildWriteToText(l *loader, t *transformSpec, ins []*coll) (*coll, error) {
	path, pn, err := l.requireStr(t.config, "path", "WriteToText config")
	if err != nil {
		return nil, err
	}
	in := ins[0]
	if n := len(in.schema.Fields); n != 1 {
		return nil, l.errf(t.typNode, "WriteToText requires an input schema with exactly one field, got %d (%s): select it with MapToFields", n, in.schema)
	}
	path = l.path(path)
	if err := l.checkPath(t, pn, path, false); err != nil {
		return nil, err
	}
	write(l.root, t.name, in, &textSink{path: path}, stepOpts(t, weir.WithSinkIdentity("file_text", path))...)
	return nil, nil
}
