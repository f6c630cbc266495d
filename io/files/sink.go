package files

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// Sink writes rows to one file, as JSON lines or CSV. Write may be called
// concurrently from several workers: writes are serialised by a mutex, each
// bundle is written whole. The file is created (truncated) at the first
// Write or at Close, whichever comes first, with missing parent directories.
// Close flushes and closes it. Runner rejects are written as error rows.
type Sink struct {
	path   string
	format Format
	schema *row.Schema

	mu struct {
		sync.Mutex
		f      *os.File
		w      *bufio.Writer
		cw     *csv.Writer
		buf    []byte
		cells  []string
		closed bool
	}
}

// NewSink returns a sink writing to path. For CSV, schema gives the header
// and column order; rows of another schema are written by field name.
func NewSink(path string, format Format, schema *row.Schema) *Sink {
	return &Sink{path: path, format: format, schema: schema}
}

// Path returns the file the sink writes.
func (s *Sink) Path() string { return s.path }

func (s *Sink) openLocked() error {
	if s.mu.f != nil {
		return nil
	}
	if s.mu.closed {
		return fmt.Errorf("sink %s is closed", s.path)
	}
	if dir := filepath.Dir(s.path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("creating the directory of %s: %w", s.path, err)
		}
	}
	f, err := os.Create(s.path)
	if err != nil {
		return fmt.Errorf("creating %s: %w", s.path, err)
	}
	s.mu.f = f
	s.mu.w = bufio.NewWriterSize(f, 64<<10)
	if s.format == CSV {
		s.mu.cw = csv.NewWriter(s.mu.w)
		if s.schema != nil {
			if err := s.mu.cw.Write(s.schema.Names()); err != nil {
				return fmt.Errorf("writing %s: %w", s.path, err)
			}
		}
	}
	return nil
}

// ReasonNotARow is the reason of the reject of a value a CSV sink cannot
// write: it is not a row (WriteRejecting).
const ReasonNotARow = "not_a_row"

// errNotARow marks a value a CSV sink cannot write as a row.
var errNotARow = errors.New("not a row")

// Write appends the rows of elems to the file.
func (s *Sink) Write(ctx context.Context, worker int, elems []contract.Element) error {
	_, err := s.write(elems, nil, false)
	return err
}

// WriteRejecting is Write, except that an element the file cannot hold (for
// CSV, a value that is not a row: reason ReasonNotARow) is left out and
// appended to rejects instead of failing the call (contract.RejectingSink).
func (s *Sink) WriteRejecting(_ context.Context, _ int, elems []contract.Element, rejects []contract.SinkReject) ([]contract.SinkReject, error) {
	return s.write(elems, rejects, true)
}

func (s *Sink) write(elems []contract.Element, rejects []contract.SinkReject, reject bool) ([]contract.SinkReject, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.openLocked(); err != nil {
		return rejects, err
	}
	for i := range elems {
		var err error
		if s.format == CSV {
			err = s.writeCSVLocked(elems[i].Value)
		} else {
			err = s.writeJSONLocked(elems[i].Value)
		}
		if err != nil {
			if reject && errors.Is(err, errNotARow) {
				rejects = append(rejects, contract.SinkReject{Index: i, Err: contract.ElementError{Reason: ReasonNotARow, Message: fmt.Sprintf("writing %s: %v", s.path, err)}})
				continue
			}
			return rejects, fmt.Errorf("writing %s: %w", s.path, err)
		}
	}
	return rejects, nil
}

func (s *Sink) writeJSONLocked(v any) error {
	b := s.mu.buf[:0]
	if r, ok := row.AsRow(v); ok {
		b = row.AppendJSON(b, r)
	} else {
		b = row.AppendJSONValue(b, v)
	}
	b = append(b, '\n')
	s.mu.buf = b
	_, err := s.mu.w.Write(b)
	return err
}

func (s *Sink) writeCSVLocked(v any) error {
	r, ok := row.AsRow(v)
	if !ok {
		return fmt.Errorf("CSV sink got a %T: %w", v, errNotARow)
	}
	if s.schema == nil {
		s.schema = r.Schema
		if err := s.mu.cw.Write(s.schema.Names()); err != nil {
			return err
		}
	}
	cells := s.mu.cells[:0]
	same := r.Schema == s.schema
	for i, f := range s.schema.Fields {
		var x any
		if same {
			x = r.Values[i]
		} else {
			x, _ = r.Get(f.Name)
		}
		s.mu.buf = row.AppendText(s.mu.buf[:0], x)
		cells = append(cells, string(s.mu.buf))
	}
	s.mu.cells = cells
	return s.mu.cw.Write(cells)
}

// Close flushes and closes the file, creating it if nothing was written.
func (s *Sink) Close(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil
	}
	if err := s.openLocked(); err != nil {
		return err
	}
	s.mu.closed = true
	var errs []error
	if s.mu.cw != nil {
		s.mu.cw.Flush()
		errs = append(errs, s.mu.cw.Error())
	}
	errs = append(errs, s.mu.w.Flush(), s.mu.f.Close())
	s.mu.f = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("closing %s: %w", s.path, err)
	}
	return nil
}
