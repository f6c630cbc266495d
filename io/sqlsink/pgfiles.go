package sqlsink

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
)

// This file finds the files a PostgreSQL DSN makes the driver read
// (certificates, keys, the password and service files) without reading
// them, so that a server can confine them to its file roots before pgx
// opens any of them.

// PostgresFileKeys are the DSN parameters whose values are files pgx reads:
// the TLS root certificate, the client certificate and key, the password
// file and the service file.
var PostgresFileKeys = []string{"sslrootcert", "sslcert", "sslkey", "passfile", "servicefile"}

// DSNFile is a file a PostgreSQL DSN names.
type DSNFile struct {
	// Key is the parameter (sslrootcert, sslcert, sslkey, passfile,
	// servicefile).
	Key string
	// Path is the file, absolute (a relative value resolved against the
	// base directory).
	Path string
}

// PostgresFiles returns the files PostgreSQL DSN dsn names (URL or
// keyword/value form) and the DSN rewritten so that every relative file is
// absolute, resolved against base (the pipeline's directory: a server's
// working directory means nothing to its clients). sslrootcert=system
// names no file. It reads no file and connects to nothing.
func PostgresFiles(dsn, base string) (files []DSNFile, resolved string, err error) {
	var settings [][2]string
	isURL := strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
	if isURL {
		settings, err = urlSettings(dsn)
	} else {
		settings, err = keywordValueSettings(dsn)
	}
	if err != nil {
		return nil, "", fmt.Errorf("%w: the PostgreSQL dsn does not parse: %w", ErrConfig, err)
	}
	last := map[string]string{}
	var order []string
	for _, kv := range settings {
		if !isFileKey(kv[0]) {
			continue
		}
		if _, seen := last[kv[0]]; !seen {
			order = append(order, kv[0])
		}
		last[kv[0]] = kv[1]
	}
	resolved = dsn
	var rewrite []DSNFile
	for _, k := range order {
		v := last[k]
		if v == "" || k == "sslrootcert" && v == "system" {
			continue
		}
		p := v
		if !filepath.IsAbs(p) {
			if base == "" {
				base = "."
			}
			if p, err = filepath.Abs(filepath.Join(base, p)); err != nil {
				return nil, "", fmt.Errorf("%w: %s %q: %w", ErrConfig, k, v, err)
			}
			rewrite = append(rewrite, DSNFile{Key: k, Path: p})
		}
		files = append(files, DSNFile{Key: k, Path: p})
	}
	if len(rewrite) == 0 {
		return files, dsn, nil
	}
	if isURL {
		// A later parameter wins, as in pgx: append the absolute paths.
		var b strings.Builder
		b.WriteString(dsn)
		head, _ := urlQuery(dsn)
		sep := "&"
		switch {
		case len(head) == len(dsn): // no query
			sep = "?"
		case strings.HasSuffix(dsn, "?") || strings.HasSuffix(dsn, "&"):
			sep = ""
		}
		for _, f := range rewrite {
			b.WriteString(sep + f.Key + "=" + url.PathEscape(f.Path))
			sep = "&"
		}
		return files, b.String(), nil
	}
	// Keyword/value: a later setting of a key wins, as in libpq.
	var b strings.Builder
	b.WriteString(dsn)
	for _, f := range rewrite {
		fmt.Fprintf(&b, " %s='%s'", f.Key, strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(f.Path))
	}
	return files, b.String(), nil
}

func isFileKey(k string) bool {
	for _, f := range PostgresFileKeys {
		if k == f {
			return true
		}
	}
	return false
}

// urlQuery splits a postgres:// URL at its query as pgx does: a user part
// (up to an '@' met before any '/') comes first and may hold a '?'.
func urlQuery(dsn string) (head, query string) {
	p, ok := strings.CutPrefix(dsn, "postgresql://")
	if !ok {
		p, _ = strings.CutPrefix(dsn, "postgres://")
	}
	skip := len(dsn) - len(p)
	if i := strings.IndexAny(p, "@/"); i >= 0 && p[i] == '@' {
		skip += i + 1
	}
	if i := strings.IndexByte(dsn[skip:], '?'); i >= 0 {
		return dsn[:skip+i], dsn[skip+i+1:]
	}
	return dsn, ""
}

// urlSettings returns the query parameters of a postgres:// URL, in order,
// decoded as pgx decodes them (percent escapes only; surrounding spaces
// trimmed).
func urlSettings(dsn string) ([][2]string, error) {
	if strings.IndexByte(dsn, 0) >= 0 {
		return nil, fmt.Errorf("forbidden NUL byte in connection string")
	}
	_, query := urlQuery(dsn)
	var out [][2]string
	for _, part := range strings.Split(query, "&") {
		if part == "" {
			continue
		}
		k, v, found := strings.Cut(part, "=")
		if !found || strings.Contains(v, "=") {
			return nil, fmt.Errorf("URI query parameter %q: want one key=value", k)
		}
		ku, err := url.PathUnescape(strings.Trim(k, " "))
		if err != nil {
			return nil, err
		}
		vu, err := url.PathUnescape(strings.Trim(v, " "))
		if err != nil {
			return nil, err
		}
		out = append(out, [2]string{ku, vu})
	}
	return out, nil
}

// keywordValueSettings splits a libpq keyword/value connection string
// (host=h sslrootcert='/a b/ca.pem' ...), in order, as libpq does: values
// quoted with ' or bare, backslash escaping the next character.
func keywordValueSettings(s string) ([][2]string, error) {
	const space = " \t\n\r\v\f"
	if strings.IndexByte(s, 0) >= 0 {
		return nil, fmt.Errorf("forbidden NUL byte in connection string")
	}
	var out [][2]string
	s = strings.TrimLeft(s, space)
	for len(s) > 0 {
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return nil, fmt.Errorf("invalid keyword/value")
		}
		key := strings.Trim(s[:eq], space)
		if key == "" || strings.ContainsAny(key, space) {
			return nil, fmt.Errorf("missing \"=\" after %q in connection info string", key)
		}
		s = strings.TrimLeft(s[eq+1:], space)
		var val strings.Builder
		if strings.HasPrefix(s, "'") {
			s = s[1:]
			closed := false
			for len(s) > 0 {
				c := s[0]
				s = s[1:]
				if c == '\\' && len(s) > 0 {
					val.WriteByte(s[0])
					s = s[1:]
					continue
				}
				if c == '\'' {
					closed = true
					break
				}
				val.WriteByte(c)
			}
			if !closed {
				return nil, fmt.Errorf("unterminated quoted string in connection info string")
			}
		} else {
			for len(s) > 0 && !strings.ContainsRune(space, rune(s[0])) {
				c := s[0]
				s = s[1:]
				if c == '\\' {
					if len(s) == 0 {
						break
					}
					c, s = s[0], s[1:]
				}
				val.WriteByte(c)
			}
		}
		out = append(out, [2]string{key, val.String()})
		s = strings.TrimLeft(s, space)
	}
	return out, nil
}
