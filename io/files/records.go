package files

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// Records reads every record of the files path names (a file or a glob)
// in format and calls fn with each as a field map, numbers as
// json.Number and timestamps as RFC 3339 text, without a declared schema:
// a JSON line keeps every field it has, a CSV file's columns are typed as
// ReadFromCsv types them (CSVInfer), an Avro or Parquet file's fields
// come from its own schema. It decodes through the sources' own code, so a
// comparison (weir diff) reads an output exactly as a pipeline would. A
// line or record that does not parse is an error naming the file and
// line.
func Records(ctx context.Context, path string, format Format, fn func(rec map[string]any) error) error {
	paths, err := Files(path)
	if err != nil {
		return err
	}
	if format == JSONLines {
		for _, p := range paths {
			if err := jsonRecords(ctx, p, fn); err != nil {
				return err
			}
		}
		return nil
	}
	if format == Text {
		for _, p := range paths {
			if err := textRecords(ctx, p, fn); err != nil {
				return err
			}
		}
		return nil
	}
	for _, p := range paths {
		sch, err := recordSchema(p, format)
		if err != nil {
			return err
		}
		if err := schemaRecords(ctx, p, format, sch, fn); err != nil {
			return err
		}
	}
	return nil
}

// recordSchema returns the schema file p is read with.
func recordSchema(p string, format Format) (*row.Schema, error) {
	switch format {
	case Avro:
		return AvroSchema(p)
	case Parquet:
		return ParquetSchema(p)
	}
	header, kinds, err := CSVInfer(p, CSVOptions{})
	if err != nil {
		return nil, err
	}
	fields := make([]row.Field, len(header))
	for i, h := range header {
		fields[i] = row.Field{Name: h, Type: row.Of(kinds[i])}
	}
	sch, err := row.NewSchema(fields...)
	if err != nil {
		return nil, fmt.Errorf("the header of %s: %w", p, err)
	}
	return sch, nil
}

// schemaRecords reads one CSV, Avro or Parquet file through its source.
func schemaRecords(ctx context.Context, p string, format Format, sch *row.Schema, fn func(map[string]any) error) error {
	sp := &split{cfg: &SourceConfig{Path: p, Format: format, Schema: sch, TimestampField: -1}, path: p}
	defer sp.Close()
	buf := make([]contract.Element, 256)
	for {
		res, err := sp.Read(ctx, buf)
		if err != nil {
			return err
		}
		for i := 0; i < res.N; i++ {
			switch v := buf[i].Value.(type) {
			case contract.Reject:
				line := int64(0)
				if v.Source != nil {
					line = v.Source.Offset
				}
				return fmt.Errorf("%s:%d: %s: %s", p, line, v.Reason, v.Message)
			default:
				r, ok := row.AsRow(v)
				if !ok {
					return fmt.Errorf("%s: a value of type %T is not a row", p, v)
				}
				rec, err := decodeRecord(row.AppendJSON(nil, r))
				if err != nil {
					return fmt.Errorf("%s: %w", p, err)
				}
				if err := fn(rec); err != nil {
					return err
				}
			}
		}
		if res.Done {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// jsonRecords reads one JSON lines file.
func jsonRecords(ctx context.Context, p string, fn func(map[string]any) error) error {
	f, err := os.Open(p)
	if err != nil {
		return err // names the path
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			rec, derr := decodeRecord(line)
			if derr != nil {
				return fmt.Errorf("%s:%d: %w", p, n, derr)
			}
			if err := fn(rec); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", p, err)
		}
		if n%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// decodeRecord decodes one JSON object, numbers as json.Number.
func decodeRecord(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("not one JSON object: %w", err)
	}
	if m == nil {
		return nil, errors.New("not one JSON object: null")
	}
	return m, nil
}

// textRecords calls fn with {"line": text} for each line of text file p.
func textRecords(ctx context.Context, p string, fn func(map[string]any) error) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		line, err := r.ReadString('\n')
		if line != "" {
			line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
			if ferr := fn(map[string]any{"line": line}); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", p, err)
		}
	}
}
