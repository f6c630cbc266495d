package logfortesting

import (
	"fmt"
	"io"
	"sync"

	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/yamlpipe/pyrepr"
)

// NewLines returns the Lines that write to w.
func NewLines(w io.Writer) *Lines { return &Lines{w: w} }

// Lines writes LogForTesting's lines to one writer; the mutex keeps
// lines from several workers whole.
type Lines struct {
	mu sync.Mutex // guards w
	w  io.Writer
}

func (o *Lines) write(line []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, err := o.w.Write(line); err != nil {
		return fmt.Errorf("LogForTesting: writing: %w", err)
	}
	return nil
}

// NewFn returns the DoFn that prints each element after prefix to out.
func NewFn(prefix string, out *Lines) *Fn { return &Fn{prefix: prefix, out: out} }

// Fn is LogForTesting's DoFn: it prints each element and
// passes it on.
type Fn struct {
	prefix string
	out    *Lines
	buf    []byte
}

// Clone gives each worker its own line buffer.
func (f *Fn) Clone() any { return &Fn{prefix: f.prefix, out: f.out} }

// Process implements contract.DoFn.
func (f *Fn) Process(pc *contract.ProcessContext, e contract.Element) error {
	f.buf = append(f.buf[:0], f.prefix...)
	f.buf = pyrepr.AppendJSON(f.buf, e.Value)
	f.buf = append(f.buf, '\n')
	if err := f.out.write(f.buf); err != nil {
		return err
	}
	pc.Emit(0, e)
	return nil
}
