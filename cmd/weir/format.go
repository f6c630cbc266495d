package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/goccy/go-yaml"
)

// Output formats of --format, as gcloud's: text (weir's own, for people),
// json, yaml, and the projections table(KEY, ...), value(KEY, ...) and
// csv(KEY, ...) of the resource's JSON fields.
const (
	formatText  = cli.FormatText
	formatJSON  = cli.FormatJSON
	formatYAML  = "yaml"
	formatTable = "table"
	formatValue = "value"
	formatCSV   = "csv"
)

// formatHelp is the usage of --format on the commands that take every
// format (showCommand's).
const formatHelp = "output format: text, json, yaml, or gcloud's projections table(KEY,...), value(KEY,...), csv(KEY,...) of the JSON fields (KEY: a field, a.b for nested fields, KEY:label=NAME; [no-heading] after table or csv)"

// outputFormat is a parsed --format.
type outputFormat struct {
	kind string
	// noHeading leaves out the header line of table and csv.
	noHeading bool
	// cols are the projected columns of table, value and csv.
	cols []column
}

// column is one projected key of a table, value or csv format.
type column struct {
	key   string   // as written
	path  []string // key split at '.'
	label string   // header: label=NAME, else the key
}

// parseFormat parses a --format value. Errors are usage errors.
func parseFormat(s string) (outputFormat, error) {
	s = strings.TrimSpace(s)
	switch s {
	case formatText, formatJSON, formatYAML:
		return outputFormat{kind: s}, nil
	}
	name, rest := s, ""
	if i := strings.IndexAny(s, "[("); i >= 0 {
		name, rest = s[:i], s[i:]
	}
	switch name {
	case formatTable, formatValue, formatCSV:
	default:
		return outputFormat{}, usageErrorf("--format %q: want text, json, yaml, table(KEY,...), value(KEY,...) or csv(KEY,...)", s)
	}
	f := outputFormat{kind: name}
	if strings.HasPrefix(rest, "[") {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return outputFormat{}, usageErrorf("--format %q: '[' without ']'", s)
		}
		for _, attr := range strings.Split(rest[1:end], ",") {
			switch strings.TrimSpace(attr) {
			case "":
			case "no-heading":
				f.noHeading = true
			default:
				return outputFormat{}, usageErrorf("--format %q: unknown format attribute %q (weir knows no-heading)", s, strings.TrimSpace(attr))
			}
		}
		rest = rest[end+1:]
	}
	if !strings.HasPrefix(rest, "(") || !strings.HasSuffix(rest, ")") {
		return outputFormat{}, usageErrorf("--format %q: want %s(KEY,...) with the keys to show, such as %s(name,topic)", s, name, name)
	}
	for _, item := range strings.Split(rest[1:len(rest)-1], ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		key, attrs, _ := strings.Cut(item, ":")
		key = strings.TrimSpace(key)
		if key == "" || strings.ContainsAny(key, "() ") {
			return outputFormat{}, usageErrorf("--format %q: %q is not a key (want a field name, a.b for a nested one; weir has no projection transforms)", s, item)
		}
		c := column{key: key, path: strings.Split(key, "."), label: key}
		if f.kind == formatTable {
			c.label = strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
		}
		if attrs != "" {
			for _, a := range strings.Split(attrs, ":") {
				k, v, _ := strings.Cut(strings.TrimSpace(a), "=")
				if k != "label" {
					return outputFormat{}, usageErrorf("--format %q: unknown key attribute %q (weir knows label=NAME)", s, k)
				}
				c.label = strings.Trim(v, `"'`)
			}
		}
		f.cols = append(f.cols, c)
	}
	if len(f.cols) == 0 {
		return outputFormat{}, usageErrorf("--format %q: name at least one key, such as %s(name)", s, name)
	}
	return f, nil
}

// toGeneric returns v as its JSON decoding: maps, slices, strings,
// json.Numbers, bools and nils.
func toGeneric(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding the result: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var g any
	if err := dec.Decode(&g); err != nil {
		return nil, fmt.Errorf("decoding the result: %w", err)
	}
	return g, nil
}

// write prints v in format f; text prints it as weir's text for people.
func (f outputFormat) write(w io.Writer, v any, text func(io.Writer) error) error {
	switch f.kind {
	case formatText:
		return text(w)
	case formatJSON:
		return writeJSON(w, v)
	case formatYAML:
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encoding the result: %w", err)
		}
		y, err := yaml.JSONToYAML(b)
		if err != nil {
			return fmt.Errorf("encoding the result as YAML: %w", err)
		}
		_, err = w.Write(y)
		return outputErr(err)
	}
	g, err := toGeneric(v)
	if err != nil {
		return err
	}
	rows, ok := g.([]any)
	if !ok {
		rows = []any{g} // one resource: one row
	}
	cells := make([][]string, len(rows))
	for i, r := range rows {
		cells[i] = make([]string, len(f.cols))
		for j, c := range f.cols {
			if x, ok := lookupKey(r, c.path); ok {
				cells[i][j] = cellText(x)
			}
		}
	}
	header := make([]string, len(f.cols))
	for j, c := range f.cols {
		header[j] = c.label
	}
	switch f.kind {
	case formatCSV:
		cw := csv.NewWriter(w)
		if !f.noHeading {
			_ = cw.Write(header)
		}
		_ = cw.WriteAll(cells) // flushes
		return outputErr(cw.Error())
	case formatTable:
		var b bytes.Buffer
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		if !f.noHeading {
			fmt.Fprintln(tw, strings.Join(header, "\t"))
		}
		for _, r := range cells {
			fmt.Fprintln(tw, strings.Join(r, "\t"))
		}
		_ = tw.Flush() // to memory
		var out strings.Builder
		for _, line := range strings.SplitAfter(b.String(), "\n") {
			if line != "" {
				out.WriteString(strings.TrimRight(line, " \n") + "\n")
			}
		}
		_, err := io.WriteString(w, out.String())
		return outputErr(err)
	default: // value: tab-separated, no header
		var b strings.Builder
		for _, r := range cells {
			b.WriteString(strings.Join(r, "\t"))
			b.WriteByte('\n')
		}
		_, err := io.WriteString(w, b.String())
		return outputErr(err)
	}
}

// lookupKey returns the field at path in the decoded JSON value v. A
// segment names an object's field (gcloud's camelCase spelling finds
// weir's snake_case field: ackWait is ack_wait) or a list's index.
func lookupKey(v any, path []string) (any, bool) {
	for _, seg := range path {
		switch x := v.(type) {
		case map[string]any:
			f, ok := x[seg]
			if !ok {
				f, ok = x[snakeCase(seg)]
			}
			if !ok {
				return nil, false
			}
			v = f
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// snakeCase spells a camelCase key in snake_case: ackWait → ack_wait.
func snakeCase(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// cellText is a decoded JSON value as one cell, as gcloud prints it:
// lists joined with ';', objects as k=v;k2=v2 by key.
func cellText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = cellText(e)
		}
		return strings.Join(parts, ";")
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + "=" + cellText(x[k])
		}
		return strings.Join(parts, ";")
	default:
		return fmt.Sprint(x)
	}
}
