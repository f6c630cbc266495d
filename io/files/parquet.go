package files

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/weir-dev/weir/io/avrorow"
	"github.com/weir-dev/weir/io/parquetcheck"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// Parquet files (Beam YAML's ReadFromParquet and WriteToParquet): the file
// carries its schema, so a reader needs none; top-level columns become
// fields (BOOLEAN → bool, INT32 and INT64 → int, or timestamp with a
// TIMESTAMP annotation in any unit, FLOAT and DOUBLE → float, BYTE_ARRAY
// and FIXED_LEN_BYTE_ARRAY → string, a repeated column → a list, a group →
// a value as read). A written file's columns come from the rows' schema,
// every one optional (lists repeated; nested rows and untyped values as
// JSON text).

// parquetColumn is how one top-level column of a file becomes a field.
type parquetColumn struct {
	name string
	typ  row.Type
	// unit is a TIMESTAMP column's unit (0: not a timestamp).
	unit time.Duration
}

func parquetColumns(s *parquet.Schema) (cols []parquetColumn, err error) {
	var name string
	defer func() {
		// parquet-go panics on a type it cannot tell the kind of (a leaf
		// annotated as a MAP, say), which only a corrupted file has.
		if p := recover(); p != nil {
			cols, err = nil, fmt.Errorf("%w: column %q: %v", parquetcheck.ErrCorrupt, name, p)
		}
	}()
	for _, f := range s.Fields() {
		name = f.Name()
		c := parquetColumn{name: f.Name(), typ: row.Of(row.KindAny)}
		if f.Leaf() {
			switch f.Type().Kind() {
			case parquet.Boolean:
				c.typ = row.Of(row.KindBool)
			case parquet.Int32, parquet.Int64:
				c.typ = row.Of(row.KindInt)
				if lt := f.Type().LogicalType(); lt != nil {
					if ts, ok := lt.Value.(*format.TimestampType); ok && ts.Unit.Value != nil {
						c.typ, c.unit = row.Of(row.KindTimestamp), ts.Unit.Value.Duration()
					}
				}
			case parquet.Float, parquet.Double:
				c.typ = row.Of(row.KindFloat)
			case parquet.ByteArray, parquet.FixedLenByteArray:
				c.typ = row.Of(row.KindString)
			case parquet.Int96:
				c.typ = row.Of(row.KindAny)
			}
			if f.Repeated() {
				elem := c.typ
				c.typ = row.Type{Kind: row.KindList, Elem: &elem}
			}
		}
		cols = append(cols, c)
	}
	return cols, nil
}

// ParquetSchema reads the schema of a Parquet file (the first match of a
// glob) as a row schema.
func ParquetSchema(path string) (*row.Schema, error) {
	paths, err := Files(path)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(paths[0])
	if err != nil {
		return nil, fmt.Errorf("reading the Parquet schema: %w", err)
	}
	defer f.Close()
	pf, err := openParquet(f, paths[0], false) // the schema is in the footer
	if err != nil {
		return nil, err
	}
	cols, err := parquetColumns(pf.Schema())
	if err != nil {
		return nil, fmt.Errorf("%s is not a Parquet file: %w", paths[0], err)
	}
	fields := make([]row.Field, len(cols))
	for i, c := range cols {
		fields[i] = row.Field{Name: c.name, Type: c.typ}
	}
	return row.NewSchema(fields...)
}

// parquetReader is the Parquet part of a split.
type parquetReader struct {
	r    *parquet.Reader
	cols []parquetColumn
	// to maps the file's columns to the configured schema's (-1: not read).
	to []int
}

// openParquet opens the Parquet file f, read from path, once its footer
// is checked (parquetcheck.Footer) and, when pages is set, its pages
// (parquetcheck.Pages): reading its schema alone needs only the footer.
func openParquet(f *os.File, path string, pages bool) (pf *parquet.File, err error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	footer, err := parquetcheck.Footer(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s is not a Parquet file: %w", path, err)
	}
	defer func() {
		if p := recover(); p != nil {
			pf, err = nil, fmt.Errorf("%s is not a Parquet file: %w: %v", path, parquetcheck.ErrCorrupt, p)
		}
	}()
	// The page indexes and Bloom filters are not read: rows are read in
	// order, and their stated sizes would be allocated unchecked.
	pf, err = parquet.OpenFile(f, st.Size(), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, fmt.Errorf("%s is not a Parquet file: %w", path, err)
	}
	if !pages {
		return pf, nil
	}
	if err := parquetcheck.Pages(f, pf.Metadata(), st.Size()-8-int64(len(footer))); err != nil {
		return nil, fmt.Errorf("%s is not a Parquet file: %w", path, err)
	}
	return pf, nil
}

func (s *split) openParquet() error {
	pf, err := openParquet(s.f, s.path, true)
	if err != nil {
		return err
	}
	cols, err := parquetColumns(pf.Schema())
	if err != nil {
		return fmt.Errorf("%s: %w", s.path, err)
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.name
	}
	to, err := s.columns(names, "Parquet file", "column")
	if err != nil {
		return err
	}
	pr := &parquetReader{r: parquet.NewReader(pf), cols: cols, to: to}
	s.pq = pr
	return nil
}

func (s *split) readParquet(dst *contract.Element) (ok bool, err error) {
	pr := s.pq
	m := map[string]any{}
	defer func() {
		// parquet-go reads a page whose bytes contradict its header (a
		// corrupted page) into a panic: the file cannot be read on.
		if p := recover(); p != nil {
			ok, err = false, fmt.Errorf("reading row %d of %s: %w: %v", s.line+1, s.path, parquetcheck.ErrCorrupt, p)
		}
	}()
	if err := pr.r.Read(&m); err != nil {
		if err == io.EOF {
			s.done = true
			return false, nil
		}
		return false, fmt.Errorf("reading row %d of %s: %w", s.line+1, s.path, err)
	}
	s.line++ // the row's number in the file
	sch := s.cfg.Schema
	r := row.New(sch)
	for c, i := range pr.to {
		if i < 0 {
			continue
		}
		col := pr.cols[c]
		v := avrorow.Plain(m[col.name])
		if col.unit != 0 {
			if n, ok := v.(int64); ok {
				v = mtime.FromTime(time.Unix(0, 0).Add(time.Duration(n) * col.unit))
			}
		}
		x, err := row.FromJSON(v, sch.Fields[i].Type)
		if err != nil {
			reason := ReasonSchemaMismatch
			if i == s.cfg.TimestampField {
				reason = ReasonBadTimestamp
			}
			s.reject(dst, fmt.Sprint(m), timestampReason(err, reason), fmt.Sprintf("column %s: %v", col.name, err))
			return true, nil
		}
		r.Values[i] = x
	}
	s.finish(dst, r, nil)
	return true, nil
}

// parquetSchemaOf is the Parquet schema of rows of s.
func parquetSchemaOf(s *row.Schema) *parquet.Schema {
	g := parquet.Group{}
	for _, f := range s.Fields {
		g[f.Name] = parquetNode(f.Type)
	}
	return parquet.NewSchema("Row", g)
}

func parquetNode(t row.Type) parquet.Node {
	if t.Kind == row.KindList {
		if t.Elem != nil {
			if leaf := parquetLeaf(t.Elem.Kind); leaf != nil {
				// A repeated column of the element's type (its nulls dropped).
				return parquet.Repeated(leaf)
			}
		}
		return parquet.Optional(parquet.String())
	}
	if leaf := parquetLeaf(t.Kind); leaf != nil {
		return parquet.Optional(leaf)
	}
	return parquet.Optional(parquet.String())
}

// parquetLeaf is the column type of a scalar kind (nil for the others).
func parquetLeaf(k row.Kind) parquet.Node {
	switch k {
	case row.KindInt:
		return parquet.Int(64)
	case row.KindFloat:
		return parquet.Leaf(parquet.DoubleType)
	case row.KindBool:
		return parquet.Leaf(parquet.BooleanType)
	case row.KindString:
		return parquet.String()
	case row.KindTimestamp:
		return parquet.Timestamp(parquet.Millisecond)
	}
	return nil
}

// parquetField is the value a Parquet writer takes for a row's top-level
// field v of type t. A present value of an optional column is passed by
// pointer: the writer takes an optional column's zero value (0, "",
// false, 0.0) for null, which would turn a count of 0 into a null.
func parquetField(v any, t row.Type) any {
	pv := parquetValue(v, t)
	if pv == nil || parquetRepeated(t) {
		return pv
	}
	switch x := pv.(type) {
	case int64:
		return &x
	case float64:
		return &x
	case bool:
		return &x
	case string:
		return &x
	case time.Time:
		return &x
	}
	return pv
}

// parquetRepeated reports whether type t is written as a repeated column
// (parquetNode), whose elements are never null.
func parquetRepeated(t row.Type) bool {
	return t.Kind == row.KindList && t.Elem != nil && parquetLeaf(t.Elem.Kind) != nil
}

// parquetValue is the value a Parquet writer takes for row value v of type
// t (nested rows and untyped values as JSON text).
func parquetValue(v any, t row.Type) any {
	if v == nil {
		if t.Kind == row.KindList {
			return []any{}
		}
		return nil
	}
	switch t.Kind {
	case row.KindInt:
		if i, ok := v.(int); ok {
			return int64(i)
		}
		return v
	case row.KindFloat, row.KindBool:
		return v
	case row.KindString:
		if s, ok := v.(string); ok {
			return s
		}
	case row.KindTimestamp:
		ts, err := row.ToTimestamp(v)
		if err != nil {
			return nil
		}
		return ts.ToTime()
	case row.KindList:
		l, _ := v.([]any)
		if n := parquetNode(t); n.Repeated() && t.Elem != nil {
			out := make([]any, 0, len(l))
			for _, e := range l {
				if e != nil {
					out = append(out, parquetValue(e, *t.Elem))
				}
			}
			return out
		}
	}
	return string(row.AppendJSONValue(nil, v))
}
