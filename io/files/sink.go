package files

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/hamba/avro/v2/ocf"
	"github.com/parquet-go/parquet-go"

	"github.com/weir-dev/weir/io/avrorow"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// DefaultFileMode is the permission bits of the files a sink creates when
// its configuration gives none: the owner reads and writes, the group
// reads. Directories a sink creates get the same bits plus search
// (0750).
const DefaultFileMode fs.FileMode = 0o640

// SinkConfig configures a file sink.
type SinkConfig struct {
	// Path is the file the sink writes (a bounded run), or the name the
	// part files of a streaming run are derived from (EpochSink).
	Path string
	// Format says how rows are written.
	Format Format
	// Schema gives a CSV sink's header and column order; rows of another
	// schema are written by field name. Nil: the first row's.
	Schema *row.Schema
	// Mode is the permission bits of created files (the umask still
	// applies); 0: DefaultFileMode.
	Mode fs.FileMode
	// Roots, when set, is checked again for every file the sink creates, so
	// a link created after the submission cannot lead out.
	Roots *Roots
	// Owner is the job writing; when set the sink records it in the
	// owner file next to Path (OwnerFile) before creating any output, and
	// refuses to write when another job name owns the path. Nil for
	// in-process runs.
	Owner *Owner
	// Delimiter separates a CSV sink's fields; 0 is ','.
	Delimiter rune
	// Rolling, when set, keeps each worker's part of a streaming job open
	// across checkpoints and rolls it by size and age (EpochSink); zero:
	// a part per checkpoint epoch and worker.
	Rolling Rolling
	// Now gives a rolling part's age; nil: the wall clock.
	Now func() time.Time
	// Line appends the text of a Text sink's row (its sole field) to dst;
	// nil: a string as it is, other values as JSON.
	Line func(dst []byte, v any) []byte
}

// Rolling says when a streaming file sink closes a worker's part and
// starts the next (checked at each checkpoint barrier, as Flink's
// DefaultRollingPolicy is): once the part holds Size bytes, or once it was
// opened Interval ago; a drain or a bounded input's end closes every part.
// Rows become visible when their part rolls. Only appendable formats (JSON
// lines, CSV) roll.
type Rolling struct {
	Size     int64
	Interval time.Duration
}

// On reports whether r rolls parts across checkpoints.
func (r Rolling) On() bool { return r.Size > 0 || r.Interval > 0 }

// ParseByteSize reads a Rolling size as a sink's roll_size gives it: a
// number of bytes, or a number with a unit (KB, MB, GB: powers of 1000;
// KiB, MiB, GiB: powers of 1024).
func ParseByteSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("not a size: %q", s)
	}
	return n * mult, nil
}

func (c *SinkConfig) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *SinkConfig) mode() fs.FileMode {
	if c.Mode == 0 {
		return DefaultFileMode
	}
	return c.Mode.Perm()
}

// dirMode is the mode of directories created for a file of mode m: m with
// search wherever it has read.
func dirMode(m fs.FileMode) fs.FileMode { return m | (m&0o444)>>2 | 0o700 }

// Sink writes rows to one file, as JSON lines or CSV. Write may be called
// concurrently from several workers: writes are serialised by a mutex, each
// bundle is written whole. The file is created (truncated) at the first
// Write or at Close, whichever comes first, with missing parent directories,
// mode SinkConfig.Mode. Close flushes and closes it. Runner rejects are
// written as error rows. It is the sink of bounded runs: streaming jobs of
// the job service use EpochSink.
type Sink struct {
	cfg SinkConfig

	mu struct {
		sync.Mutex
		f      *os.File
		enc    encoder
		closed bool
	}
}

// NewSink returns a sink writing to path with the default file mode. For
// CSV, schema gives the header and column order; rows of another schema are
// written by field name.
func NewSink(path string, format Format, schema *row.Schema) *Sink {
	return NewFileSink(SinkConfig{Path: path, Format: format, Schema: schema})
}

// NewFileSink returns a sink for cfg.
func NewFileSink(cfg SinkConfig) *Sink { return &Sink{cfg: cfg} }

// Path returns the file the sink writes.
func (s *Sink) Path() string { return s.cfg.Path }

func (s *Sink) openLocked() error {
	if s.mu.f != nil {
		return nil
	}
	if s.mu.closed {
		return fmt.Errorf("sink %s is closed", s.cfg.Path)
	}
	if err := prepareOutput(&s.cfg, s.cfg.Path, LayoutFile); err != nil {
		return err
	}
	f, err := os.OpenFile(s.cfg.Path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, s.cfg.mode())
	if err != nil {
		return fmt.Errorf("creating %s: %w", s.cfg.Path, err)
	}
	s.mu.f = f
	return s.mu.enc.init(f, &s.cfg)
}

// prepareOutput checks file (a file the sink is about to create) against
// cfg's roots, records cfg's owner next to cfg.Path, and creates file's
// directory.
func prepareOutput(cfg *SinkConfig, file, layout string) error {
	if err := cfg.Roots.Check(file); err != nil {
		return err
	}
	if dir := filepath.Dir(file); dir != "" {
		if err := os.MkdirAll(dir, dirMode(cfg.mode())); err != nil {
			return fmt.Errorf("creating the directory of %s: %w", file, err)
		}
	}
	if cfg.Owner != nil {
		if err := claimOutput(cfg.Path, *cfg.Owner, layout, cfg.mode()); err != nil {
			return err
		}
	}
	return nil
}

// ReasonNotARow is the reason of the reject of a value a CSV sink cannot
// write: it is not a row (WriteRejecting).
const ReasonNotARow = "not_a_row"

// errNotARow marks a value a CSV sink cannot write as a row.
var errNotARow = errors.New("not a row")

// ReasonValueOutOfRange is the reason of the reject of a value a JSON sink
// cannot write: a float that is NaN or infinite, which JSON has no number
// for (WriteRejecting). Before, it was written as null, changing the data
// silently.
const ReasonValueOutOfRange = "value_out_of_range"

// errNonFinite marks a float JSON cannot hold.
var errNonFinite = errors.New("JSON has no number for it")

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
	return s.mu.enc.write(s.cfg.Path, elems, rejects, reject)
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
	err := errors.Join(s.mu.enc.flush(), s.mu.f.Close())
	s.mu.f = nil
	if err != nil {
		return fmt.Errorf("closing %s: %w", s.cfg.Path, err)
	}
	return nil
}

// encoder writes rows to one file as JSON lines or CSV.
type encoder struct {
	format Format
	// line formats a Text row's field (SinkConfig.Line).
	line   func(dst []byte, v any) []byte
	schema *row.Schema
	w      *bufio.Writer
	cw     *csv.Writer
	buf    []byte
	cells  []string
	rows   int64
	// ae writes an Avro file's container and ar its records (the schema's,
	// or the first row's).
	ae *ocf.Encoder
	ar *avrorow.Encoder
	// pw writes a Parquet file (from the schema, or the first row's).
	pw *parquet.GenericWriter[map[string]any]
}

// init starts encoding into f as cfg says, writing the CSV header when
// the schema is known.
func (e *encoder) init(f *os.File, cfg *SinkConfig) error {
	format, schema, delim := cfg.Format, cfg.Schema, cfg.Delimiter
	e.format, e.schema, e.rows, e.line = format, schema, 0, cfg.Line
	if e.w == nil {
		e.w = bufio.NewWriterSize(f, 64<<10)
	} else {
		e.w.Reset(f)
	}
	e.cw, e.ae, e.ar, e.pw = nil, nil, nil, nil
	if format == Parquet && schema != nil {
		e.pw = parquet.NewGenericWriter[map[string]any](e.w, parquetSchemaOf(schema))
	}
	if format == Avro && schema != nil {
		if err := e.startAvro(schema); err != nil {
			return fmt.Errorf("writing %s: %w", f.Name(), err)
		}
	}
	if format == CSV {
		e.cw = csv.NewWriter(e.w)
		if delim != 0 {
			e.cw.Comma = delim
		}
		if schema != nil {
			if err := e.cw.Write(schema.Names()); err != nil {
				return fmt.Errorf("writing %s: %w", f.Name(), err)
			}
		}
	}
	return nil
}

// write encodes elems; with reject set, a value CSV cannot hold is appended
// to rejects instead of failing.
func (e *encoder) write(path string, elems []contract.Element, rejects []contract.SinkReject, reject bool) ([]contract.SinkReject, error) {
	for i := range elems {
		var err error
		switch e.format {
		case CSV:
			err = e.writeCSV(elems[i].Value)
		case Avro:
			err = e.writeAvro(elems[i].Value)
		case Parquet:
			err = e.writeParquet(elems[i].Value)
		case Text:
			err = e.writeText(elems[i].Value)
		default:
			err = e.writeJSON(elems[i].Value)
		}
		if err != nil {
			if reject && errors.Is(err, errNotARow) {
				rejects = append(rejects, contract.SinkReject{Index: i, Err: contract.ElementError{Reason: ReasonNotARow, Message: fmt.Sprintf("writing %s: %v", path, err)}})
				continue
			}
			if reject && errors.Is(err, errNonFinite) {
				rejects = append(rejects, contract.SinkReject{Index: i, Err: contract.ElementError{Reason: ReasonValueOutOfRange, Message: fmt.Sprintf("writing %s: %v", path, err)}})
				continue
			}
			return rejects, fmt.Errorf("writing %s: %w", path, err)
		}
		e.rows++
	}
	return rejects, nil
}

func (e *encoder) writeJSON(v any) error {
	if steps, f, bad := nonFinite(v); bad {
		where := pathText(steps)
		if where == "" {
			return fmt.Errorf("the value is %v: %w", f, errNonFinite)
		}
		return fmt.Errorf("field %s is %v: %w", where, f, errNonFinite)
	}
	b := e.buf[:0]
	if r, ok := row.AsRow(v); ok {
		b = row.AppendJSON(b, r)
	} else {
		b = row.AppendJSONValue(b, v)
	}
	return e.writeLine(b)
}

// writeLine ends b, encoded in e's buffer, with a newline and writes it.
func (e *encoder) writeLine(b []byte) error {
	b = append(b, '\n')
	e.buf = b
	_, err := e.w.Write(b)
	return err
}

// writeText writes the sole field of row v as one line.
func (e *encoder) writeText(v any) error {
	r, ok := row.AsRow(v)
	if !ok {
		return fmt.Errorf("%w: got %T", errNotARow, v)
	}
	var f any
	if len(r.Values) > 0 {
		f = r.Values[0]
	}
	b := e.buf[:0]
	switch {
	case e.line != nil:
		b = e.line(b, f)
	default:
		if str, ok := f.(string); ok {
			b = append(b, str...)
		} else {
			b = row.AppendJSONValue(b, f)
		}
	}
	return e.writeLine(b)
}

// startAvro starts an Avro container file of rows of schema s.
func (e *encoder) startAvro(s *row.Schema) error {
	sch, err := avrorow.SchemaOf(s)
	if err != nil {
		return err
	}
	if e.ar, err = avrorow.NewEncoder(sch.(*avro.RecordSchema)); err != nil {
		return err
	}
	e.ae, err = ocf.NewEncoderWithSchema(sch, e.w, ocf.WithCodec(ocf.Deflate))
	return err
}

func (e *encoder) writeAvro(v any) error {
	r, ok := row.AsRow(v)
	if !ok {
		return fmt.Errorf("Avro sink got a %T: %w", v, errNotARow)
	}
	if e.ae == nil {
		e.schema = r.Schema
		if err := e.startAvro(r.Schema); err != nil {
			return err
		}
	}
	var err error
	if e.buf, err = e.ar.Append(e.buf[:0], r); err != nil {
		return err
	}
	_, err = e.ae.Write(e.buf)
	return err
}

func (e *encoder) writeParquet(v any) error {
	r, ok := row.AsRow(v)
	if !ok {
		return fmt.Errorf("Parquet sink got a %T: %w", v, errNotARow)
	}
	if e.pw == nil {
		e.schema = r.Schema
		e.pw = parquet.NewGenericWriter[map[string]any](e.w, parquetSchemaOf(r.Schema))
	}
	m := make(map[string]any, e.schema.Len())
	for _, f := range e.schema.Fields {
		x, _ := r.Get(f.Name)
		m[f.Name] = parquetField(x, f.Type)
	}
	_, err := e.pw.Write([]map[string]any{m})
	return err
}

func (e *encoder) writeCSV(v any) error {
	r, ok := row.AsRow(v)
	if !ok {
		return fmt.Errorf("CSV sink got a %T: %w", v, errNotARow)
	}
	if e.schema == nil {
		e.schema = r.Schema
		if err := e.cw.Write(e.schema.Names()); err != nil {
			return err
		}
	}
	cells := e.cells[:0]
	same := r.Schema == e.schema
	for i, f := range e.schema.Fields {
		var x any
		if same {
			x = r.Values[i]
		} else {
			x, _ = r.Get(f.Name)
		}
		e.buf = row.AppendText(e.buf[:0], x)
		cells = append(cells, string(e.buf))
	}
	e.cells = cells
	return e.cw.Write(cells)
}

// flush writes what is buffered to the file.
// sync writes what a JSON lines or CSV encoder buffered to its file,
// leaving it open for more rows (a rolling part at a barrier).
func (e *encoder) sync() error {
	if e.cw != nil {
		e.cw.Flush()
		if err := e.cw.Error(); err != nil {
			return err
		}
	}
	return e.w.Flush()
}

func (e *encoder) flush() error {
	if e.format == Avro && e.ae == nil && e.schema != nil {
		// No row: still a valid, empty container file.
		if err := e.startAvro(e.schema); err != nil {
			return err
		}
	}
	if e.ae != nil {
		if err := e.ae.Close(); err != nil {
			return err
		}
	}
	if e.format == Parquet && e.pw == nil && e.schema != nil {
		e.pw = parquet.NewGenericWriter[map[string]any](e.w, parquetSchemaOf(e.schema))
	}
	if e.pw != nil {
		if err := e.pw.Close(); err != nil {
			return err
		}
	}
	if e.cw != nil {
		e.cw.Flush()
		if err := e.cw.Error(); err != nil {
			return err
		}
	}
	return e.w.Flush()
}

// pathStep is one step of the path to a value inside a row: a field or
// map key (name), or a list's index.
type pathStep struct {
	name    string
	index   int
	isIndex bool
}

// nonFinite finds a NaN or infinite float in v (a row, a list, a map or a
// scalar) and returns where it is: the steps to it, innermost first (none
// for v itself). The steps are collected on the way back from the value
// found, so a row without one costs no path at all (pathText renders
// them).
func nonFinite(v any) ([]pathStep, float64, bool) {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, x, true
		}
	case float32:
		if f := float64(x); math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, f, true
		}
	case *row.Row:
		if x == nil {
			return nil, 0, false
		}
		for i, f := range x.Schema.Fields {
			if i < len(x.Values) {
				if w, g, bad := nonFinite(x.Values[i]); bad {
					return append(w, pathStep{name: f.Name}), g, true
				}
			}
		}
	case []any:
		for i, e := range x {
			if w, g, bad := nonFinite(e); bad {
				return append(w, pathStep{index: i, isIndex: true}), g, true
			}
		}
	case map[string]any:
		for k, e := range x {
			if w, g, bad := nonFinite(e); bad {
				return append(w, pathStep{name: k}), g, true
			}
		}
	}
	return nil, 0, false
}

// pathText renders steps (innermost first) as a field path: names joined
// by dots, list indexes in brackets ("a.b[2].c"); "" for none.
func pathText(steps []pathStep) string {
	var at string
	for i := len(steps) - 1; i >= 0; i-- {
		switch st := steps[i]; {
		case st.isIndex:
			at = fmt.Sprintf("%s[%d]", at, st.index)
		case at == "":
			at = st.name
		default:
			at += "." + st.name
		}
	}
	return at
}
