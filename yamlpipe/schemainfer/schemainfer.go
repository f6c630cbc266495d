package schemainfer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/weir-dev/weir/io/files"
	"github.com/weir-dev/weir/row"
)

// ReadFromJson without a schema, as Beam's tests use it: the schema is
// inferred at load time, like ReadFromCsv's header, from the first
// jsonInferLines lines of the first file the path matches. Fields are in
// the order they first appear; a number is an int unless one of its values
// has a fraction or an exponent (then float); only nulls make a string
// field. Nested objects and lists cannot be read as flat rows: the error
// says to give config.schema.

// kindOnlyNull marks a field seen only as null so far.
const kindOnlyNull = row.KindAny

// jsonInferLines bounds the lines read to infer a schema.
const jsonInferLines = 100

// JSON infers the schema of the JSON lines at path (a glob).
func JSON(path string) (*row.Schema, error) {
	paths, err := files.Files(path)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(paths[0])
	if err != nil {
		return nil, fmt.Errorf("reading %s to infer its schema: %w", paths[0], err)
	}
	defer f.Close()
	var names []string
	kinds := map[string]row.Kind{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	for n := 0; n < jsonInferLines && sc.Scan(); {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		n++
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return nil, fmt.Errorf("%s line %d is not a JSON object: give config.schema", paths[0], n)
		}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return nil, fmt.Errorf("%s line %d: %w", paths[0], n, err)
			}
			name, _ := tok.(string)
			var v any
			if err := dec.Decode(&v); err != nil {
				return nil, fmt.Errorf("%s line %d: %w", paths[0], n, err)
			}
			k, err := jsonKind(v)
			if err != nil {
				return nil, fmt.Errorf("%s line %d: field %q %w: give config.schema (field: int|float|bool|string|timestamp) and read nested values as strings", paths[0], n, name, err)
			}
			prev, seen := kinds[name]
			if !seen {
				names = append(names, name)
			}
			switch {
			case !seen || prev == kindOnlyNull:
				kinds[name] = k
			case k == kindOnlyNull || k == prev:
			case (prev == row.KindInt && k == row.KindFloat) || (prev == row.KindFloat && k == row.KindInt):
				kinds[name] = row.KindFloat
			default:
				return nil, fmt.Errorf("%s line %d: field %q is %s here and %s before: give config.schema", paths[0], n, name, k, prev)
			}
		}
	}
	if err := sc.Err(); err != nil && err != io.EOF {
		return nil, fmt.Errorf("reading %s to infer its schema: %w", paths[0], err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s has no JSON object to infer a schema from: give config.schema", paths[0])
	}
	fields := make([]row.Field, len(names))
	for i, n := range names {
		k := kinds[n]
		if k == kindOnlyNull {
			k = row.KindString
		}
		fields[i] = row.Field{Name: n, Type: row.Of(k)}
	}
	return row.NewSchema(fields...)
}

func jsonKind(v any) (row.Kind, error) {
	switch x := v.(type) {
	case nil:
		return kindOnlyNull, nil
	case bool:
		return row.KindBool, nil
	case string:
		return row.KindString, nil
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return row.KindInt, nil
		}
		return row.KindFloat, nil
	case map[string]any:
		return 0, fmt.Errorf("is an object")
	case []any:
		return 0, fmt.Errorf("is a list")
	}
	return 0, fmt.Errorf("has an unknown JSON type")
}

// CSV types the header's columns from the declared schema, and the
// undeclared ones by what their cells hold (kinds, files.CSVInfer); every
// declared field must be in the header.
func CSV(header []string, kinds []row.Kind, declared *row.Schema) (*row.Schema, error) {
	fields := make([]row.Field, 0, len(header))
	for i, h := range header {
		f := row.Field{Name: h, Type: row.Of(kinds[i])}
		if declared != nil {
			if i := declared.Index(h); i >= 0 {
				f.Type = declared.Fields[i].Type
			}
		}
		fields = append(fields, f)
	}
	s, err := row.NewSchema(fields...)
	if err != nil {
		return nil, err
	}
	if declared != nil {
		for _, f := range declared.Fields {
			if s.Index(f.Name) < 0 {
				return nil, fmt.Errorf("the header has no column %q", f.Name)
			}
		}
	}
	return s, nil
}
