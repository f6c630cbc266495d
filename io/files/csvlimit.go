package files

// This file bounds a CSV record: encoding/csv holds a record whole, so a
// quote left open, or a file without line ends, would make it hold the
// rest of the file.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/weir-dev/weir/runner/contract"
)

// errCSVRecordTooLong is what a csvLimit answers once a record passed
// MaxLineBytes.
var errCSVRecordTooLong = fmt.Errorf("a CSV record is longer than %d bytes (a quote left open?)", MaxLineBytes)

// csvLimit passes a file's bytes to its csv.Reader, at most MaxLineBytes
// from the start of a record (start) on, and counts the line ends it
// passed.
type csvLimit struct {
	r *bufio.Reader
	// n is the bytes passed since start.
	n int64
	// lines is the line ends passed in all.
	lines int64
	// total is the bytes taken from r in all (passed or skipped): the file
	// offset r is at.
	total int64
}

// start begins a record: the next MaxLineBytes bytes may pass.
func (l *csvLimit) start() { l.n = 0 }

// Read implements io.Reader.
func (l *csvLimit) Read(p []byte) (int, error) {
	if l.n >= MaxLineBytes {
		return 0, errCSVRecordTooLong
	}
	p = p[:min(int64(len(p)), MaxLineBytes-l.n)]
	n, err := l.r.Read(p)
	l.n += int64(n)
	l.total += int64(n)
	l.lines += int64(bytes.Count(p[:n], []byte{'\n'}))
	return n, err
}

// skipLine discards the rest of the current line, its end included, and
// returns how many bytes it discarded.
func (l *csvLimit) skipLine() (int64, error) {
	var n int64
	for {
		b, err := l.r.ReadSlice('\n')
		n += int64(len(b))
		l.total += int64(len(b))
		switch {
		case err == nil:
			l.lines++
			return n, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF:
			return n, nil
		default:
			return n, err
		}
	}
}

// newCSVReader gives the split a new csv.Reader over its limit, in its
// dialect: at the file's start, and after a record too long for the last.
func (s *split) newCSVReader() {
	s.cr = s.cfg.CSV.reader(s.limit)
	s.cr.FieldsPerRecord = -1
	s.cr.ReuseRecord = true
	// The new reader counts lines and bytes from the start again: from
	// the line after those passed so far (every byte passed belonged to
	// records read) and the byte the file is at.
	s.csvLine0 = s.limit.lines
	s.csvBase = s.limit.total
}

// csvText returns up to RejectHeadBytes of the file's bytes from offset
// from to offset to of the current reader's input (a record that did not
// parse, or was too long, read again from the file): what a reject shows
// of it.
func (s *split) csvText(from, to int64) string {
	b := make([]byte, min(to-from, RejectHeadBytes))
	n, _ := s.f.ReadAt(b, s.csvBase+from)
	return strings.Trim(string(b[:n]), "\r\n") // the empty lines before it, its line end
}

// csvTooLong makes the record the reader gave up on, which began at offset
// from of its input, a line_too_long reject holding its first KiB, skips
// to the next line and reads on from there with a new reader.
func (s *split) csvTooLong(dst *contract.Element, from int64) error {
	s.line = s.limit.lines + 1
	text := s.csvText(from, from+RejectHeadBytes)
	skipped, err := s.limit.skipLine()
	if err != nil {
		return fmt.Errorf("reading %s: %w", s.path, err)
	}
	s.reject(dst, text, ReasonLineTooLong, fmt.Sprintf("a CSV record of more than %d bytes (%d more to its next line end), longer than the %d read as one element: a quote left open, or no line ends (the element holds its first KiB); reading goes on at the next line",
		MaxLineBytes, skipped, MaxLineBytes))
	s.newCSVReader()
	return nil
}
