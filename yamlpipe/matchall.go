package yamlpipe

import (
	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/yamlpipe/textio"
)

// Beam YAML's MatchAll: each input row holds a file pattern (a glob, in
// the field config.file_pattern names, or the row's only field; "**"
// crosses directories), and the transform emits one row per file the pattern matches when the row is
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
	treat := textio.EmptyAllow
	s, sn, err := l.optStr(t.config, "empty_match_treatment")
	if err != nil {
		return nil, err
	}
	if sn != nil {
		var ok bool
		if treat, ok = textio.ParseEmptyMatch(s); !ok {
			return nil, l.errf(sn, "MatchAll empty_match_treatment %q: want ALLOW, DISALLOW or ALLOW_IF_WILDCARD", s)
		}
	}
	m := textio.NewMatcher(textio.MatchConfig{Field: field, Treat: treat, Base: l.opts.BaseDir, Roots: l.files(), Remote: remoteURL.MatchString})
	out := m.Schema()
	res := parDo(l.root, t.name, in, m, stepOpts(t, append(errorOpt(t), weir.WithCoder(out.Coder()))...)...)
	l.registerErrors(t, res)
	return rowsColl(out, res), nil
}
