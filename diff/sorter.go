package diff

import (
	"bufio"
	"container/heap"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// RowReader yields rows one at a time. Next returns false at the end.
type RowReader interface {
	Next() (Row, bool, error)
}

// SliceReader reads rows from a slice (sorted by the caller).
type SliceReader struct {
	rows []Row
}

// NewSliceReader returns a reader of rows, which must be sorted.
func NewSliceReader(rows []Row) *SliceReader { return &SliceReader{rows: rows} }

// Next implements RowReader.
func (s *SliceReader) Next() (Row, bool, error) {
	if len(s.rows) == 0 {
		return Row{}, false, nil
	}
	r := s.rows[0]
	s.rows = s.rows[1:]
	return r, true, nil
}

// DefaultMemoryRows is how many rows a Sorter keeps in memory before it
// writes a sorted run to disk.
const DefaultMemoryRows = 200_000

// Sorter collects rows in any order and reads them back sorted (Compare's
// order). Up to MemoryRows rows stay in memory; beyond that each full
// buffer is sorted and written to a temporary file (a sorted run), and
// Reader merges the runs. A Sorter is used by one goroutine; Close removes
// its files.
type Sorter struct {
	dir    string
	max    int
	buf    []Row
	runs   []string
	files  []*os.File
	closed bool
	n      int64
}

// NewSorter returns a sorter that spills to temporary files in dir
// (os.TempDir when empty) beyond memoryRows rows (DefaultMemoryRows when
// <= 0).
func NewSorter(dir string, memoryRows int) *Sorter {
	if memoryRows <= 0 {
		memoryRows = DefaultMemoryRows
	}
	return &Sorter{dir: dir, max: memoryRows}
}

// Len returns how many rows were added.
func (s *Sorter) Len() int64 { return s.n }

// Runs returns how many sorted runs were written to disk.
func (s *Sorter) Runs() int { return len(s.runs) }

// Add adds a row.
func (s *Sorter) Add(r Row) error {
	if s.closed {
		return errors.New("adding a row to a closed sorter")
	}
	s.buf = append(s.buf, r)
	s.n++
	if len(s.buf) >= s.max {
		return s.spill()
	}
	return nil
}

// spill writes the buffer as a sorted run.
func (s *Sorter) spill() error {
	SortRows(s.buf)
	f, err := os.CreateTemp(s.dir, "weir-diff-run-*.jsonl")
	if err != nil {
		return fmt.Errorf("creating a sorted run file: %w", err)
	}
	s.runs = append(s.runs, f.Name())
	w := bufio.NewWriterSize(f, 1<<16)
	enc := json.NewEncoder(w)
	for i := range s.buf {
		if err := enc.Encode(&s.buf[i]); err != nil {
			f.Close()
			return fmt.Errorf("writing a sorted run: %w", err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("writing a sorted run: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing a sorted run: %w", err)
	}
	s.buf = s.buf[:0]
	return nil
}

// Reader returns the rows added, sorted. It is called once, after the
// last Add.
func (s *Sorter) Reader() (RowReader, error) {
	if s.closed {
		return nil, errors.New("reading a closed sorter")
	}
	if len(s.runs) == 0 {
		SortRows(s.buf)
		return NewSliceReader(s.buf), nil
	}
	if len(s.buf) > 0 {
		if err := s.spill(); err != nil {
			return nil, err
		}
	}
	m := &mergeReader{}
	for _, name := range s.runs {
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("opening a sorted run: %w", err)
		}
		s.files = append(s.files, f)
		rr := &runReader{name: name, dec: json.NewDecoder(bufio.NewReaderSize(f, 1<<16))}
		if err := m.push(rr); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Close removes the sorted runs.
func (s *Sorter) Close() error {
	s.closed = true
	var errs []error
	for _, f := range s.files {
		errs = append(errs, f.Close())
	}
	for _, name := range s.runs {
		if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	s.buf, s.files, s.runs = nil, nil, nil
	return errors.Join(errs...)
}

// runReader reads one sorted run.
type runReader struct {
	name string
	dec  *json.Decoder
	head Row
}

func (r *runReader) advance() (bool, error) {
	r.head = Row{}
	if err := r.dec.Decode(&r.head); err != nil {
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		return false, fmt.Errorf("reading sorted run %s: %w", r.name, err)
	}
	return true, nil
}

// mergeReader merges sorted runs (a min-heap of their heads).
type mergeReader struct {
	h runHeap
}

func (m *mergeReader) push(r *runReader) error {
	ok, err := r.advance()
	if err != nil || !ok {
		return err
	}
	heap.Push(&m.h, r)
	return nil
}

// Next implements RowReader.
func (m *mergeReader) Next() (Row, bool, error) {
	if m.h.Len() == 0 {
		return Row{}, false, nil
	}
	r := m.h[0]
	out := r.head
	ok, err := r.advance()
	if err != nil {
		return Row{}, false, err
	}
	if ok {
		heap.Fix(&m.h, 0)
	} else {
		heap.Pop(&m.h)
	}
	return out, true, nil
}

type runHeap []*runReader

func (h runHeap) Len() int           { return len(h) }
func (h runHeap) Less(i, j int) bool { return Compare(&h[i].head, &h[j].head) < 0 }
func (h runHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)        { *h = append(*h, x.(*runReader)) }
func (h *runHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	*h = old[:len(old)-1]
	return r
}
