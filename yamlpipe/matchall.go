package yamlpipe

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/io/files"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// Beam YAML's MatchAll: each input row holds a file pattern (a glob, in
// the field config.file_pattern names, or the row's only field), and the
// transform emits one row per file the pattern matches when the row is
// processed: path, size_in_bytes, last_updated_in_seconds (the file's
// modification time, seconds since the epoch as a float), in path order,
// with the input row's timestamp and window. config.empty_match_treatment
// says what a pattern that matches nothing is: ALLOW (the default, no
// output), DISALLOW (a reject) or ALLOW_IF_WILDCARD (a reject unless the
// pattern has a wildcard). Relative patterns resolve against the
// pipeline's directory, as every path of the pipeline does. On a server,
// a pattern and every file it matches must be inside --file-roots: one
// that is not is a reject (path_not_allowed) naming the path, as is a
// malformed pattern (bad_pattern) and an empty match that is refused
// (empty_match). Rejects go to the error output that error_handling
// declares; without one they fail the run, as every reject does.

// Reject reasons of MatchAll.
const (
	matchReasonEmpty      = "empty_match"
	matchReasonNotAllowed = "path_not_allowed"
	matchReasonBad        = "bad_pattern"
)

// matchAllSchema is the schema of MatchAll's output rows.
func matchAllSchema() *row.Schema {
	return row.MustSchema(
		row.Field{Name: "path", Type: row.Of(row.KindString)},
		row.Field{Name: "size_in_bytes", Type: row.Of(row.KindInt)},
		row.Field{Name: "last_updated_in_seconds", Type: row.Of(row.KindFloat)},
	)
}

// emptyMatch is Beam's EmptyMatchTreatment.
type emptyMatch int

const (
	emptyAllow emptyMatch = iota
	emptyDisallow
	emptyAllowIfWildcard
)

func buildMatchAll(l *loader, t *transformSpec, ins []*coll) (*coll, error) {
	in := ins[0]
	field, fn, err := l.optStr(t.config, "file_pattern")
	if err != nil {
		return nil, err
	}
	fields := in.schema.Fields
	switch {
	case fn != nil:
		i := in.schema.Index(field)
		if i < 0 {
			return nil, l.errf(fn, "MatchAll file_pattern %q is not a field of its input (%s)", field, in.schema)
		}
		if k := fields[i].Type.Kind; k != row.KindString && k != row.KindAny {
			return nil, l.errf(fn, "MatchAll file_pattern %q is a %s field; it must hold the pattern as a string", field, fields[i].Type)
		}
	case len(fields) == 1:
		field = fields[0].Name
	default:
		return nil, l.errf(t.typNode, "MatchAll needs config.file_pattern, the field that holds the file pattern: its input has %d fields (%s)", len(fields), in.schema)
	}
	treat := emptyAllow
	s, sn, err := l.optStr(t.config, "empty_match_treatment")
	if err != nil {
		return nil, err
	}
	if sn != nil {
		switch strings.ToUpper(s) {
		case "ALLOW":
		case "DISALLOW":
			treat = emptyDisallow
		case "ALLOW_IF_WILDCARD":
			treat = emptyAllowIfWildcard
		default:
			return nil, l.errf(sn, "MatchAll empty_match_treatment %q: want ALLOW, DISALLOW or ALLOW_IF_WILDCARD", s)
		}
	}
	out := matchAllSchema()
	m := &matchAllFn{field: field, treat: treat, base: l.opts.BaseDir, roots: l.files(), schema: out}
	res := parDo(l.root, t.name, in, m, stepOpts(t, append(errorOpt(t), weir.WithCoder(out.Coder()))...)...)
	l.registerErrors(t, res)
	return rowsColl(out, res), nil
}

// matchAllFn expands each row's pattern into rows of the files it
// matches. It holds no per-worker state, so workers share it.
type matchAllFn struct {
	field  string
	treat  emptyMatch
	base   string
	roots  *files.Roots
	schema *row.Schema
}

// Process implements contract.DoFn.
func (m *matchAllFn) Process(pc *contract.ProcessContext, e contract.Element) error {
	in, ok := row.AsRow(e.Value)
	if !ok {
		return notARow(e.Value)
	}
	v, _ := in.Get(m.field)
	pattern, ok := v.(string)
	if !ok {
		return &contract.ElementError{Reason: "type_mismatch", Message: fmt.Sprintf("MatchAll: field %s holds %s, not a file pattern string", m.field, row.GoTypeName(v))}
	}
	if pattern == "" {
		return &contract.ElementError{Reason: matchReasonBad, Message: fmt.Sprintf("MatchAll: field %s is empty, not a file pattern", m.field)}
	}
	if remoteURL.MatchString(pattern) {
		return &contract.ElementError{Reason: matchReasonBad, Message: fmt.Sprintf("MatchAll: %s: remote paths are not supported: weir matches local files", pattern)}
	}
	p := pattern
	if m.base != "" && !filepath.IsAbs(p) {
		p = filepath.Join(m.base, p)
	}
	if err := m.roots.CheckPattern(p); err != nil {
		reason := matchReasonBad
		if errors.Is(err, files.ErrPathNotAllowed) {
			reason = matchReasonNotAllowed
		}
		return &contract.ElementError{Reason: reason, Message: "MatchAll: " + err.Error()}
	}
	wild := strings.ContainsAny(p, "*?[")
	var matches []string
	if wild {
		var err error
		if matches, err = filepath.Glob(p); err != nil {
			return &contract.ElementError{Reason: matchReasonBad, Message: fmt.Sprintf("MatchAll: pattern %q: %v", pattern, err)}
		}
	} else {
		matches = []string{p}
	}
	sort.Strings(matches)
	var found []*row.Row
	for _, path := range matches {
		fi, err := os.Stat(path)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // gone since the glob, or a plain path that names nothing
			}
			return &contract.ElementError{Reason: "io_error", Message: fmt.Sprintf("MatchAll: %v", err)}
		}
		if fi.IsDir() {
			continue
		}
		if wild {
			// A match may be a link leading out of the roots.
			if err := m.roots.Check(path); err != nil {
				return &contract.ElementError{Reason: matchReasonNotAllowed, Message: "MatchAll: " + err.Error()}
			}
		}
		r := row.New(m.schema)
		r.Values[0] = path
		r.Values[1] = fi.Size()
		r.Values[2] = float64(fi.ModTime().UnixNano()) / 1e9
		found = append(found, r)
	}
	if len(found) == 0 && (m.treat == emptyDisallow || m.treat == emptyAllowIfWildcard && !wild) {
		return &contract.ElementError{Reason: matchReasonEmpty, Message: fmt.Sprintf("MatchAll: pattern %q matches no file (empty_match_treatment %s)", pattern, m.treat)}
	}
	for _, r := range found {
		out := e
		out.Value = r
		pc.Emit(0, out)
	}
	return nil
}

// String names the treatment as Beam spells it.
func (t emptyMatch) String() string {
	switch t {
	case emptyDisallow:
		return "DISALLOW"
	case emptyAllowIfWildcard:
		return "ALLOW_IF_WILDCARD"
	}
	return "ALLOW"
}
