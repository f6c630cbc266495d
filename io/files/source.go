// Package files owns the file connectors of YAML pipelines: sources that
// read JSON lines, CSV, Avro and Parquet files into rows (with event time taken from a
// field, and rejects for lines that do not parse) and sinks that write rows
// as JSON lines, CSV, Avro or Parquet. They implement contract.Source and contract.Sink, the
// same connector API a user's own connector would.
//
// It may import row, runner/contract, mtime, window, io/avrorow (the Avro
// records as rows), internal/fileglob,
// internal/setdigest (a staged version's output digest), manifest (the input
// manifests a source reads instead of a path), github.com/hamba/avro/v2
// (with its ocf package), github.com/parquet-go/parquet-go (with its format
// package), io/parquetcheck (a Parquet file's structure is checked before
// parquet-go reads it) and the standard library.
package files

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/weir-dev/weir/internal/fileglob"
	"github.com/weir-dev/weir/manifest"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// Reject reasons of the file sources.
const (
	// ReasonMalformedJSON: a line is not one JSON object.
	ReasonMalformedJSON = "malformed_json"
	// ReasonMalformedCSV: a record does not parse or has the wrong number of fields.
	ReasonMalformedCSV = "malformed_csv"
	// ReasonSchemaMismatch: a value does not have its field's declared type.
	ReasonSchemaMismatch = "schema_mismatch"
	// ReasonBadTimestamp: the timestamp field is missing or unparsable.
	ReasonBadTimestamp = "bad_timestamp"
	// ReasonTimestampInSeconds: a numeric timestamp is below 10^11, so it
	// is plainly seconds since the epoch, not milliseconds
	// (row.ErrTimestampInSeconds).
	ReasonTimestampInSeconds = "timestamp_in_seconds"
	// ReasonLineTooLong: a JSON line or a CSV record is longer than
	// MaxLineBytes; the reject holds its first KiB, and reading goes on at
	// the next line.
	ReasonLineTooLong = "line_too_long"
)

// MaxLineBytes bounds a JSON line or a CSV record read as one element: a
// file without line ends (or a CSV quote left open) would otherwise be held
// in memory whole.
const MaxLineBytes = 64 << 20

// RejectHeadBytes is how much of a line or record too long to read, or a
// CSV record that does not parse, its reject holds: its first KiB.
const RejectHeadBytes = 1 << 10

// LineTooLongMessage is the message of a line_too_long reject of a line of
// n bytes (0: not counted).
func LineTooLongMessage(n int64) string {
	if n > 0 {
		return fmt.Sprintf("a line of %d bytes, longer than the %d read as one element (the element holds its first KiB)", n, MaxLineBytes)
	}
	return fmt.Sprintf("a line longer than the %d bytes read as one element (the element holds its first KiB)", MaxLineBytes)
}

// Format is a file format.
type Format int

// File formats.
const (
	JSONLines Format = iota
	CSV
	// Avro is an Avro object container file of records.
	Avro
	// Parquet is a Parquet file.
	Parquet
	// Text is lines of text, one per row: a sink writes each row's sole
	// field (SinkConfig.Line formats it); read back, each line is a
	// record {"line": text}. Beam's WriteToText.
	Text
)

// SourceConfig configures a file source.
type SourceConfig struct {
	// Step is the name of the source step, recorded in rejects.
	Step string
	// Path is the file to read, or a glob pattern (one split per file).
	Path string
	// Format says how lines are parsed.
	Format Format
	// Schema is the schema of the rows produced. JSON fields that are not in
	// the schema are ignored; missing ones are null.
	Schema *row.Schema
	// TimestampField is the index in Schema of the field holding event time
	// (a timestamp, RFC 3339 string or epoch milliseconds); -1 puts every
	// element at mtime.MinTimestamp.
	TimestampField int
	// Roots, when set, confines the files read: every file the path
	// matches when the source splits is checked again (Roots.Check), so a
	// link created after the submission cannot lead out.
	Roots *Roots
	// CSV is how CSV text is split (the delimiter, comment lines).
	CSV CSVOptions
	// Manifest, when set, makes the source read Inputs (files of the
	// manifest) instead of Path: each is checked against its recorded
	// size and digest when the source splits, before anything is read
	// (an error wrapping manifest.ErrChanged names the file).
	Manifest *manifest.Manifest
	Inputs   []manifest.File
	// FilenameColumn, when set, names a string field of Schema that the
	// file itself does not hold: each row gets the path of the file it was
	// read from (Beam's filename_column).
	FilenameColumn string
	// Required holds the positions in Schema of fields every row must
	// have, not null (a JSON Schema's required): a row without one is a
	// schema_mismatch reject.
	Required []int
}

// CSVOptions are the dialect of a CSV file: Beam's ReadFromCsv delimiter
// and comment.
type CSVOptions struct {
	// Delimiter separates fields; 0 is ','.
	Delimiter rune
	// Comment, when not 0, starts a line that is ignored.
	Comment rune
}

// reader returns a csv.Reader of r in this dialect.
func (o CSVOptions) reader(r io.Reader) *csv.Reader {
	cr := csv.NewReader(r)
	if o.Delimiter != 0 {
		cr.Comma = o.Delimiter
	}
	cr.Comment = o.Comment
	return cr
}

// Source reads rows from files. It is bounded.
type Source struct {
	cfg SourceConfig
}

// NewSource returns a source for cfg.
func NewSource(cfg SourceConfig) *Source { return &Source{cfg: cfg} }

// Files returns the files cfg.Path names: the glob's matches, or the path itself.
func Files(path string) ([]string, error) {
	if !fileglob.HasMeta(path) {
		return []string{path}, nil
	}
	m, err := fileglob.Glob(path)
	if err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("file pattern %q matches no file", path)
	}
	return m, nil
}

// InputPaths returns the files a source reads: with a manifest m, the
// paths of inputs, each checked first against its recorded size and
// digest (an error wrapping manifest.ErrChanged names the first that
// changed); otherwise Files(path).
func InputPaths(path string, m *manifest.Manifest, inputs []manifest.File) ([]string, error) {
	if m == nil {
		return Files(path)
	}
	if err := m.Verify(inputs); err != nil {
		return nil, err
	}
	out := make([]string, len(inputs))
	for i, f := range inputs {
		out[i] = f.Path
	}
	return out, nil
}

// Split returns one split per file (files cannot be split further).
func (s *Source) Split(_ context.Context, _ int) ([]contract.SourceSplit, error) {
	paths, err := InputPaths(s.cfg.Path, s.cfg.Manifest, s.cfg.Inputs)
	if err != nil {
		return nil, err
	}
	out := make([]contract.SourceSplit, 0, len(paths))
	for _, p := range paths {
		if err := s.cfg.Roots.Check(p); err != nil {
			return nil, err
		}
		out = append(out, &split{cfg: &s.cfg, path: p})
	}
	return out, nil
}

type split struct {
	cfg  *SourceConfig
	path string
	f    *os.File
	br   *bufio.Reader
	cr   *csv.Reader
	// limit stands between br and cr (a CSV file): it bounds a record.
	limit *csvLimit
	// csvLine0 is the file's line before cr's first (cr counts from 1),
	// csvBase the file's offset of cr's first byte.
	csvLine0, csvBase int64
	avro              *avroReader
	pq                *parquetReader
	// cols maps a CSV column to its schema field (-1: ignored).
	cols []int
	// nameCol is the field that gets the file's path (-1: none), set by
	// open from cfg.FilenameColumn.
	nameCol int
	line    int64
	done    bool
	long    []byte
	// tooLong is the length of the line nextLine last returned when it
	// was longer than MaxLineBytes (it returned its first KiB); else 0.
	tooLong int64
}

func (s *split) open() error {
	s.nameCol = -1
	if s.cfg.FilenameColumn != "" {
		s.nameCol = s.cfg.Schema.Index(s.cfg.FilenameColumn)
	}
	f, err := os.Open(s.path)
	if err != nil {
		return err // os.Open's error names the path: "open PATH: no such file or directory"
	}
	s.f = f
	s.br = bufio.NewReaderSize(f, 64<<10)
	switch s.cfg.Format {
	case Avro:
		return s.openAvro()
	case Parquet:
		return s.openParquet()
	}
	if s.cfg.Format == CSV {
		s.limit = &csvLimit{r: s.br}
		s.newCSVReader()
		header, err := s.cr.Read()
		if err == io.EOF {
			s.done = true
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the header of %s: %w", s.path, err)
		}
		names := make([]string, len(header))
		for i, h := range header {
			names[i] = strings.TrimSpace(h)
		}
		if s.cols, err = s.columns(names, "header", "column"); err != nil {
			return err
		}
	}
	return nil
}

// columns maps a file's fields (names, in the file's order) to the
// configured schema's (-1: a field not read); every field of the schema
// must be among them, else the error names the file, where the names come
// from (the header, the Avro schema) and what they are (column, field).
func (s *split) columns(names []string, where, what string) ([]int, error) {
	cols := make([]int, len(names))
	seen := make([]bool, s.cfg.Schema.Len())
	if s.nameCol >= 0 {
		seen[s.nameCol] = true // filled from the path, not the file
	}
	for i, n := range names {
		cols[i] = s.cfg.Schema.Index(n)
		if cols[i] >= 0 {
			seen[cols[i]] = true
		}
	}
	for i, ok := range seen {
		if !ok {
			return nil, fmt.Errorf("%s: the %s has no %s %q (%ss: %s)", s.path, where, what, s.cfg.Schema.Fields[i].Name, what, strings.Join(names, ", "))
		}
	}
	return cols, nil
}

// Read fills buf with up to len(buf) elements.
func (s *split) Read(ctx context.Context, buf []contract.Element) (contract.ReadResult, error) {
	if s.f == nil && !s.done {
		if err := s.open(); err != nil {
			return contract.ReadResult{}, err
		}
	}
	n := 0
	for n < len(buf) && !s.done {
		var ok bool
		var err error
		switch s.cfg.Format {
		case CSV:
			ok, err = s.readCSV(&buf[n])
		case Avro:
			ok, err = s.readAvro(&buf[n])
		case Parquet:
			ok, err = s.readParquet(&buf[n])
		default:
			ok, err = s.readJSON(&buf[n])
		}
		if err != nil {
			return contract.ReadResult{N: n}, err
		}
		if ok {
			if r, isRow := buf[n].Value.(*row.Row); isRow && s.nameCol >= 0 {
				r.Values[s.nameCol] = s.path
			}
			n++
		}
	}
	if n == 0 && ctx.Err() != nil {
		return contract.ReadResult{}, ctx.Err()
	}
	if s.done {
		return contract.ReadResult{N: n, Watermark: mtime.MaxTimestamp, Done: true}, nil
	}
	return contract.ReadResult{N: n, Watermark: mtime.MinTimestamp}, nil
}

// nextLine returns the next line without its end, or io.EOF.
func (s *split) nextLine() ([]byte, error) {
	line, err := s.br.ReadSlice('\n')
	s.tooLong = 0
	if err == bufio.ErrBufferFull {
		s.long = append(s.long[:0], line...)
		for err == bufio.ErrBufferFull {
			line, err = s.br.ReadSlice('\n')
			if len(s.long)+len(line) > MaxLineBytes {
				// Past the bound: keep the start, count the rest.
				if s.tooLong == 0 {
					s.tooLong = int64(len(s.long))
					s.long = s.long[:min(len(s.long), RejectHeadBytes)]
				}
				s.tooLong += int64(len(line))
				continue
			}
			s.long = append(s.long, line...)
		}
		line = s.long
	}
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("reading %s: %w", s.path, err)
	}
	if err == io.EOF && len(line) == 0 {
		return nil, io.EOF
	}
	s.line++
	line = bytes.TrimSuffix(line, []byte{'\n'})
	return bytes.TrimSuffix(line, []byte{'\r'}), nil
}

func (s *split) element(v any, t mtime.Time) contract.Element {
	return contract.Element{Value: v, Time: t, Window: window.Global, Pane: window.NoFiring,
		Source: &contract.SourcePos{Source: s.path, Offset: s.line}}
}

func (s *split) reject(dst *contract.Element, elem any, reason, msg string) {
	*dst = s.element(contract.Reject{Element: elem, Step: s.cfg.Step, Reason: reason, Message: msg,
		Source: &contract.SourcePos{Source: s.path, Offset: s.line}}, mtime.MinTimestamp)
}

// timestampReason is the reason of a reject for a conversion error err:
// ReasonTimestampInSeconds for a timestamp in seconds, else def.
func timestampReason(err error, def string) string {
	if errors.Is(err, row.ErrTimestampInSeconds) {
		return ReasonTimestampInSeconds
	}
	return def
}

// finish sets event time from the timestamp field and stores the row.
func (s *split) finish(dst *contract.Element, r *row.Row, raw any) {
	if msg := r.MissingRequired(s.cfg.Required); msg != "" {
		s.reject(dst, raw, ReasonSchemaMismatch, msg)
		return
	}
	t := mtime.MinTimestamp
	if i := s.cfg.TimestampField; i >= 0 {
		ts, err := row.ToTimestamp(r.Values[i])
		if err != nil {
			s.reject(dst, raw, timestampReason(err, ReasonBadTimestamp), fmt.Sprintf("field %s: %v", s.cfg.Schema.Fields[i].Name, err))
			return
		}
		t = ts
	}
	*dst = s.element(r, t)
}

func (s *split) readJSON(dst *contract.Element) (bool, error) {
	line, err := s.nextLine()
	if err == io.EOF {
		s.done = true
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if s.tooLong > 0 {
		s.reject(dst, string(line), ReasonLineTooLong, LineTooLongMessage(s.tooLong))
		return true, nil
	}
	if len(bytes.TrimSpace(line)) == 0 {
		return false, nil
	}
	if r := row.New(s.cfg.Schema); row.DecodeFlatJSON(line, s.cfg.Schema, r) {
		s.finish(dst, r, string(line)) // the common flat shape, without a map
		return true, nil
	}
	var obj map[string]any
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil || obj == nil {
		msg := "want one JSON object per line"
		if err != nil {
			msg = err.Error()
		}
		s.reject(dst, string(line), ReasonMalformedJSON, msg)
		return true, nil
	}
	if _, err := dec.Token(); err != io.EOF {
		s.reject(dst, string(line), ReasonMalformedJSON, "extra data after the JSON object")
		return true, nil
	}
	sch := s.cfg.Schema
	r := row.New(sch)
	for i, f := range sch.Fields {
		v, err := row.FromJSON(obj[f.Name], f.Type)
		if err != nil {
			if i == s.cfg.TimestampField {
				s.reject(dst, string(line), timestampReason(err, ReasonBadTimestamp), fmt.Sprintf("field %s: %v", f.Name, err))
			} else {
				s.reject(dst, string(line), timestampReason(err, ReasonSchemaMismatch), fmt.Sprintf("field %s: %v", f.Name, err))
			}
			return true, nil
		}
		r.Values[i] = v
	}
	s.finish(dst, r, string(line))
	return true, nil
}

func (s *split) readCSV(dst *contract.Element) (bool, error) {
	s.limit.start()
	from := s.cr.InputOffset()
	rec, err := s.cr.Read()
	if err == io.EOF {
		s.done = true
		return false, nil
	}
	if errors.Is(err, errCSVRecordTooLong) {
		return true, s.csvTooLong(dst, from)
	}
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		s.line = s.csvLine0 + int64(pe.StartLine)
		s.reject(dst, s.csvText(from, s.cr.InputOffset()), ReasonMalformedCSV, pe.Error())
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", s.path, err)
	}
	if len(rec) > 0 {
		line, _ := s.cr.FieldPos(0)
		s.line = s.csvLine0 + int64(line)
	}
	sep := ","
	if s.cfg.CSV.Delimiter != 0 {
		sep = string(s.cfg.CSV.Delimiter)
	}
	raw := strings.Join(rec, sep)
	if len(rec) != len(s.cols) {
		s.reject(dst, raw, ReasonMalformedCSV, fmt.Sprintf("record has %d fields, the header has %d", len(rec), len(s.cols)))
		return true, nil
	}
	sch := s.cfg.Schema
	r := row.New(sch)
	for c, i := range s.cols {
		if i < 0 {
			continue
		}
		v, err := row.ParseText(rec[c], sch.Fields[i].Type)
		if err != nil {
			reason := ReasonSchemaMismatch
			if i == s.cfg.TimestampField {
				reason = ReasonBadTimestamp
			}
			s.reject(dst, raw, timestampReason(err, reason), fmt.Sprintf("field %s: %v", sch.Fields[i].Name, err))
			return true, nil
		}
		r.Values[i] = v
	}
	s.finish(dst, r, raw)
	return true, nil
}

// Close closes the file.
func (s *split) Close() error {
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

// CSVInferRows is how many records of a CSV file CSVInfer reads to type
// its columns.
const CSVInferRows = 10000

// CSVInfer reads the header row of a CSV file (the first match of a glob)
// and types its columns from up to CSVInferRows records, as Beam's
// ReadFromCsv (pandas) does: a column whose cells are all integers is
// int, all numbers (or integers with empty cells) float, all true/false
// bool, anything else string. A column with no value at all is string.
func CSVInfer(path string, o CSVOptions) (header []string, kinds []row.Kind, err error) {
	paths, err := Files(path)
	if err != nil {
		return nil, nil, err
	}
	f, err := os.Open(paths[0])
	if err != nil {
		return nil, nil, fmt.Errorf("reading the CSV header: %w", err)
	}
	defer f.Close()
	limit := &csvLimit{r: bufio.NewReaderSize(f, 64<<10)}
	cr := o.reader(limit)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	h, err := cr.Read()
	if err == io.EOF {
		return nil, nil, fmt.Errorf("%s is empty: a CSV file needs a header row", paths[0])
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading the CSV header of %s: %w", paths[0], err)
	}
	header = make([]string, len(h))
	for i := range h {
		header[i] = strings.TrimSpace(h[i])
	}
	// What each column's cells have been so far.
	type seen struct{ ints, floats, bools, empty, other, values int }
	cols := make([]seen, len(header))
	for n := 0; n < CSVInferRows; n++ {
		limit.start()
		rec, err := cr.Read()
		if err == io.EOF || errors.Is(err, errCSVRecordTooLong) {
			break // the columns are typed by the records before it
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				continue // rejected when read; it does not type the columns
			}
			return nil, nil, fmt.Errorf("reading %s: %w", paths[0], err)
		}
		if len(rec) != len(header) {
			continue // malformed_csv when read
		}
		for i, cell := range rec {
			c := &cols[i]
			v := strings.TrimSpace(cell)
			switch {
			case v == "":
				c.empty++
				continue
			case isCSVInt(v):
				c.ints++
			case isCSVFloat(v):
				c.floats++
			case isCSVBool(v):
				c.bools++
			default:
				c.other++
			}
			c.values++
		}
	}
	kinds = make([]row.Kind, len(header))
	for i, c := range cols {
		switch {
		case c.values == 0 || c.other > 0:
			kinds[i] = row.KindString
		case c.bools == c.values && c.empty == 0:
			kinds[i] = row.KindBool
		case c.bools > 0:
			kinds[i] = row.KindString
		case c.ints == c.values && c.empty == 0:
			kinds[i] = row.KindInt
		default:
			kinds[i] = row.KindFloat
		}
	}
	return header, kinds, nil
}

func isCSVInt(v string) bool {
	_, err := strconv.ParseInt(v, 10, 64)
	return err == nil
}

func isCSVFloat(v string) bool {
	_, err := strconv.ParseFloat(v, 64)
	return err == nil
}

// isCSVBool: pandas' default true and false values.
func isCSVBool(v string) bool {
	switch v {
	case "True", "TRUE", "true", "False", "FALSE", "false":
		return true
	}
	return false
}
