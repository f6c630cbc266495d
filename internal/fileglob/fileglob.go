// Package fileglob matches file patterns as Beam's file systems do: "*",
// "?" and "[...]" within one path element, and "**" across directories.
// The file sources, MatchAll, the file roots' checks and input manifests
// all match through it, so a pattern means the same everywhere.
//
// It may import only the standard library.
package fileglob

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Glob returns the paths pattern matches, sorted. Without "**" it is
// filepath.Glob. A "**" matches any run of characters, path separators
// included, as in Beam's file systems: "logs/**" is every path under
// logs, "logs/**.json" every .json file at any depth, and "logs/**/a.txt"
// every a.txt under logs, logs/a.txt itself included (a "/**/" may stand
// for no directory at all). Such a pattern matches files, not
// directories. "*", "?" and "[...]" ("[!...]" or "[^...]" negated) match
// within one path element. The walk does not follow links to
// directories; a directory it cannot read is an error naming it.
func Glob(pattern string) ([]string, error) {
	if !strings.Contains(pattern, "**") {
		m, err := filepath.Glob(pattern)
		if err != nil {
			return nil, fmt.Errorf("file pattern %q: %w", pattern, err)
		}
		return m, nil
	}
	re, err := globRegexp(pattern)
	if err != nil {
		return nil, err
	}
	root := pattern
	for HasMeta(root) {
		root = filepath.Dir(root)
	}
	var out []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root && errors.Is(err, fs.ErrNotExist) {
				return filepath.SkipAll // nothing to match, as filepath.Glob
			}
			return err
		}
		if !d.IsDir() && re.MatchString(p) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("file pattern %q: %w", pattern, err)
	}
	sort.Strings(out)
	return out, nil
}

// globRegexp translates a pattern with "**" into a regular expression
// over whole paths.
func globRegexp(pattern string) (*regexp.Regexp, error) {
	sep := regexp.QuoteMeta(string(os.PathSeparator))
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(pattern); {
		c := pattern[i]
		switch {
		case strings.HasPrefix(pattern[i:], "**"):
			i += 2
			if i < len(pattern) && pattern[i] == os.PathSeparator && (i == 2 || pattern[i-3] == os.PathSeparator) {
				// "**/" as a whole element: no directory, or any number.
				b.WriteString("(?:.*" + sep + ")?")
				i++
				continue
			}
			b.WriteString(".*")
		case c == '*':
			b.WriteString("[^" + sep + "]*")
			i++
		case c == '?':
			b.WriteString("[^" + sep + "]")
			i++
		case c == '[':
			end := strings.IndexByte(pattern[i+1:], ']')
			if end < 0 {
				return nil, fmt.Errorf("file pattern %q: %w", pattern, filepath.ErrBadPattern)
			}
			class := pattern[i+1 : i+1+end]
			if strings.HasPrefix(class, "!") || strings.HasPrefix(class, "^") {
				class = "^" + class[1:]
			}
			if class == "" || class == "^" {
				return nil, fmt.Errorf("file pattern %q: %w", pattern, filepath.ErrBadPattern)
			}
			b.WriteString("[" + class + "]")
			i += end + 2
		case c == '\\' && os.PathSeparator != '\\' && i+1 < len(pattern):
			b.WriteString(regexp.QuoteMeta(pattern[i+1 : i+2]))
			i += 2
		default:
			b.WriteString(regexp.QuoteMeta(pattern[i : i+1]))
			i++
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, fmt.Errorf("file pattern %q: %w", pattern, filepath.ErrBadPattern)
	}
	return re, nil
}

// HasMeta reports whether p holds a wildcard.
func HasMeta(p string) bool { return strings.ContainsAny(p, "*?[") }
