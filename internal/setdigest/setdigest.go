// Package setdigest computes the digest of a set of lines — the SHA-256
// of the lines sorted bytewise, each followed by '\n' — in bounded memory:
// beyond a bound, the lines held are sorted into run files in a temporary
// directory and merged into the hash at the end. Outputs of bounded runs
// (a staged file version, a staged SQL table) are described by such a
// digest, so that two outputs holding the same rows in other files or
// orders agree, whatever their size.
//
// It may import only the standard library.
package setdigest

import (
	"bufio"
	"container/heap"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Digest computes the digest of a set of lines: the SHA-256 of the lines
// sorted (bytewise), each followed by '\n'. It holds at most about
// maxBytes of lines in memory: beyond that it sorts what it holds into a
// run file in a temporary directory and, at the end, merges the runs into
// the hash. Lines must not contain '\n' (JSON lines and quoted values do
// not). Not safe for concurrent use; Close removes the run files.
type Digest struct {
	maxBytes int
	lines    []string
	held     int
	n        int64
	tmp      string   // the run files' directory, created on the first spill
	runs     []string // run files, each sorted
}

// DefaultMemory is how many bytes of lines a Digest holds before it
// spills them to a run file, unless told otherwise.
const DefaultMemory = 64 << 20

// New returns an empty Digest holding at most about maxBytes of lines in
// memory (0: DefaultMemory).
func New(maxBytes int) *Digest {
	if maxBytes <= 0 {
		maxBytes = DefaultMemory
	}
	return &Digest{maxBytes: maxBytes}
}

// Add adds one line.
func (d *Digest) Add(line string) error {
	d.lines = append(d.lines, line)
	d.held += len(line) + 16 // the string header too
	d.n++
	if d.held >= d.maxBytes {
		return d.spill()
	}
	return nil
}

// Len is the number of lines added.
func (d *Digest) Len() int64 { return d.n }

// spill writes the lines held, sorted, to a new run file.
func (d *Digest) spill() error {
	if len(d.lines) == 0 {
		return nil
	}
	if d.tmp == "" {
		dir, err := os.MkdirTemp("", "weir-digest-")
		if err != nil {
			return fmt.Errorf("digesting the rows: %w", err)
		}
		d.tmp = dir
	}
	sort.Strings(d.lines)
	p := filepath.Join(d.tmp, fmt.Sprintf("run-%d", len(d.runs)))
	f, err := os.Create(p)
	if err != nil {
		return fmt.Errorf("digesting the rows: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<16)
	for _, l := range d.lines {
		w.WriteString(l)
		w.WriteByte('\n')
	}
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		return fmt.Errorf("digesting the rows (writing %s): %w", p, err)
	}
	d.runs = append(d.runs, p)
	clear(d.lines)
	d.lines, d.held = d.lines[:0], 0
	if len(d.runs) >= maxRuns {
		return d.compact()
	}
	return nil
}

// maxRuns is how many run files a Digest keeps before it merges them
// into one: the merge reads every run at once, each an open file.
const maxRuns = 64

// compact merges the run files into one.
func (d *Digest) compact() error {
	p := filepath.Join(d.tmp, fmt.Sprintf("merged-%d", d.n))
	f, err := os.Create(p)
	if err != nil {
		return fmt.Errorf("digesting the rows: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<16)
	if err := d.merge(w, false); err != nil {
		f.Close()
		return err
	}
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		return fmt.Errorf("digesting the rows (writing %s): %w", p, err)
	}
	for _, r := range d.runs {
		if err := os.Remove(r); err != nil {
			return fmt.Errorf("digesting the rows: %w", err)
		}
	}
	d.runs = []string{p}
	return nil
}

// Sum returns "sha256:" and the hex digest of the lines added.
func (d *Digest) Sum() (string, error) {
	h := sha256.New()
	sort.Strings(d.lines)
	if err := d.merge(h, true); err != nil { // the lines held alone, when no run spilled
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// merge writes to w every line of the runs and, with mem, the lines held
// (sorted), in one bytewise order, each followed by '\n'.
func (d *Digest) merge(w io.Writer, mem bool) error {
	var m mergeHeap
	for _, p := range d.runs {
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("digesting the rows: %w", err)
		}
		defer f.Close()
		c := &mergeCursor{r: bufio.NewReaderSize(f, 1<<16)}
		if err := c.next(); err != nil {
			return fmt.Errorf("digesting the rows (reading %s): %w", p, err)
		}
		if c.ok {
			m = append(m, c)
		}
	}
	if mem && len(d.lines) > 0 {
		c := &mergeCursor{mem: d.lines}
		_ = c.next()
		m = append(m, c)
	}
	heap.Init(&m)
	for len(m) > 0 {
		c := m[0]
		if _, err := io.WriteString(w, c.line); err != nil {
			return err
		}
		if _, err := w.Write([]byte{'\n'}); err != nil {
			return err
		}
		if err := c.next(); err != nil {
			return fmt.Errorf("digesting the rows (reading a run): %w", err)
		}
		if c.ok {
			heap.Fix(&m, 0)
		} else {
			heap.Pop(&m)
		}
	}
	return nil
}

// Close removes the run files.
func (d *Digest) Close() error {
	if d.tmp == "" {
		return nil
	}
	err := os.RemoveAll(d.tmp)
	d.tmp, d.runs = "", nil
	return err
}

// mergeCursor reads one sorted run (a file, or the lines held in memory).
type mergeCursor struct {
	r    *bufio.Reader
	mem  []string
	line string
	ok   bool
}

func (c *mergeCursor) next() error {
	if c.r == nil {
		c.ok = len(c.mem) > 0
		if c.ok {
			c.line, c.mem = c.mem[0], c.mem[1:]
		}
		return nil
	}
	l, err := c.r.ReadString('\n')
	switch {
	case err == io.EOF && l == "":
		c.ok = false
		return nil
	case err != nil && err != io.EOF:
		return err
	}
	c.line, c.ok = strings.TrimSuffix(l, "\n"), true
	return nil
}

// mergeHeap orders cursors by their current line, bytewise (as
// sort.Strings orders them).
type mergeHeap []*mergeCursor

func (m mergeHeap) Len() int           { return len(m) }
func (m mergeHeap) Less(i, j int) bool { return m[i].line < m[j].line }
func (m mergeHeap) Swap(i, j int)      { m[i], m[j] = m[j], m[i] }
func (m *mergeHeap) Push(x any)        { *m = append(*m, x.(*mergeCursor)) }
func (m *mergeHeap) Pop() any {
	old := *m
	x := old[len(old)-1]
	*m = old[:len(old)-1]
	return x
}
