package textio

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/weir-dev/weir/internal/fileglob"
	"github.com/weir-dev/weir/io/files"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// Reject reasons of MatchAll.
const (
	MatchReasonEmpty      = "empty_match"
	MatchReasonNotAllowed = "path_not_allowed"
	MatchReasonBad        = "bad_pattern"
)

// MatchSchema is the schema of MatchAll's output rows: path,
// size_in_bytes and last_updated_in_seconds (the file's modification
// time, seconds since the epoch as a float).
func MatchSchema() *row.Schema {
	return row.MustSchema(
		row.Field{Name: "path", Type: row.Of(row.KindString)},
		row.Field{Name: "size_in_bytes", Type: row.Of(row.KindInt)},
		row.Field{Name: "last_updated_in_seconds", Type: row.Of(row.KindFloat)},
	)
}

// EmptyMatch is Beam's EmptyMatchTreatment: what a pattern that matches
// no file is.
type EmptyMatch int

const (
	// EmptyAllow lets a pattern match nothing (no output).
	EmptyAllow EmptyMatch = iota
	// EmptyDisallow makes an empty match a reject.
	EmptyDisallow
	// EmptyAllowIfWildcard makes an empty match a reject unless the
	// pattern has a wildcard.
	EmptyAllowIfWildcard
)

// ParseEmptyMatch reads Beam's spelling of a treatment, in any case.
func ParseEmptyMatch(s string) (EmptyMatch, bool) {
	switch strings.ToUpper(s) {
	case "ALLOW":
		return EmptyAllow, true
	case "DISALLOW":
		return EmptyDisallow, true
	case "ALLOW_IF_WILDCARD":
		return EmptyAllowIfWildcard, true
	}
	return EmptyAllow, false
}

// String names the treatment as Beam spells it.
func (t EmptyMatch) String() string {
	switch t {
	case EmptyDisallow:
		return "DISALLOW"
	case EmptyAllowIfWildcard:
		return "ALLOW_IF_WILDCARD"
	}
	return "ALLOW"
}

// Matcher is MatchAll's DoFn: it expands each row's pattern (fileglob.Glob,
// so "**" crosses directories) into rows of the files it matches when the
// row is processed, in path order, with the input row's timestamp and
// window. Directories are not matches. It holds no per-worker state, so
// workers share it.
type Matcher struct {
	cfg    MatchConfig
	schema *row.Schema
}

// NewMatcher returns MatchAll's DoFn for cfg; its rows are of Schema().
func NewMatcher(cfg MatchConfig) *Matcher { return &Matcher{cfg: cfg, schema: MatchSchema()} }

// Schema is the schema of the rows the matcher emits.
func (m *Matcher) Schema() *row.Schema { return m.schema }

// MatchConfig is what MatchAll's config says, resolved by the loader.
type MatchConfig struct {
	// Field names the input field that holds the pattern.
	Field string
	// Treat says what an empty match is.
	Treat EmptyMatch
	// Base is the directory relative patterns resolve against.
	Base string
	// Roots, when not nil, holds every pattern and match inside the
	// server's file roots (a reject path_not_allowed otherwise).
	Roots *files.Roots
	// Remote reports a pattern weir cannot match (a URL): a reject.
	Remote func(string) bool
}

// Process implements contract.DoFn.
func (mt *Matcher) Process(pc *contract.ProcessContext, e contract.Element) error {
	m := &mt.cfg
	in, ok := row.AsRow(e.Value)
	if !ok {
		return &contract.ElementError{Reason: "type_mismatch", Message: fmt.Sprintf("MatchAll: its input is %s, not a row", row.GoTypeName(e.Value))}
	}
	v, _ := in.Get(m.Field)
	pattern, ok := v.(string)
	if !ok {
		return &contract.ElementError{Reason: "type_mismatch", Message: fmt.Sprintf("MatchAll: field %s holds %s, not a file pattern string", m.Field, row.GoTypeName(v))}
	}
	if pattern == "" {
		return &contract.ElementError{Reason: MatchReasonBad, Message: fmt.Sprintf("MatchAll: field %s is empty, not a file pattern", m.Field)}
	}
	if m.Remote != nil && m.Remote(pattern) {
		return &contract.ElementError{Reason: MatchReasonBad, Message: fmt.Sprintf("MatchAll: %s: remote paths are not supported: weir matches local files", pattern)}
	}
	p := pattern
	if m.Base != "" && !filepath.IsAbs(p) {
		p = filepath.Join(m.Base, p)
	}
	if err := m.Roots.CheckPattern(p); err != nil {
		reason := MatchReasonBad
		if errors.Is(err, files.ErrPathNotAllowed) {
			reason = MatchReasonNotAllowed
		}
		return &contract.ElementError{Reason: reason, Message: "MatchAll: " + err.Error()}
	}
	wild := fileglob.HasMeta(p)
	matches := []string{p}
	if wild {
		var err error
		if matches, err = fileglob.Glob(p); err != nil {
			reason := "io_error"
			if errors.Is(err, filepath.ErrBadPattern) {
				reason = MatchReasonBad
			}
			return &contract.ElementError{Reason: reason, Message: "MatchAll: " + err.Error()}
		}
	}
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
			if err := m.Roots.Check(path); err != nil {
				return &contract.ElementError{Reason: MatchReasonNotAllowed, Message: "MatchAll: " + err.Error()}
			}
		}
		r := row.New(mt.schema)
		r.Values[0] = path
		r.Values[1] = fi.Size()
		r.Values[2] = float64(fi.ModTime().UnixNano()) / 1e9
		found = append(found, r)
	}
	if len(found) == 0 && (m.Treat == EmptyDisallow || m.Treat == EmptyAllowIfWildcard && !wild) {
		return &contract.ElementError{Reason: MatchReasonEmpty, Message: fmt.Sprintf("MatchAll: pattern %q matches no file (empty_match_treatment %s)", pattern, m.Treat)}
	}
	for _, r := range found {
		out := e
		out.Value = r
		pc.Emit(0, out)
	}
	return nil
}
