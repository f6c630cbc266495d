package jinja

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// {% include %}, {% import %} and {% from %}. Beam renders with Jinja2's
// Environment and a loader that opens the named path with Beam's
// FileSystems (apache_beam/yaml/yaml_transform.py, _BeamFileIOLoader), so
// a relative path is relative to the working directory of the process
// that renders. The Go engine weir uses (github.com/ardanlabs/jinja
// v1.8.0, the newest that builds with weir's Go) has no loader or
// environment: it renders one template. So weir reads the tags itself —
// with a scanner of the template's tags that skips comments, raw blocks
// and strings, not patterns over the text — and expands them before the
// engine compiles the template:
//
//   - a path resolves from the base directory first (Options.BaseDir:
//     `weir run` and `weir check` pass the directory they run in, as
//     Beam's working directory), and only when no file is there from the
//     directory of the file that names it (what weir did before; a file
//     Beam can render means the same);
//   - {% include 'f' %} becomes f's expanded text (its last newline
//     dropped, as Jinja2 does);
//   - {% import 'f' as m %} becomes f's macro definitions, renamed m__name,
//     and m.name(...) in tags calls them; {% from 'f' import a, b as c %}
//     becomes the definitions of a and b (renamed c), and a name f does
//     not define is an error;
//   - the engine drops the newline after a block tag (as Jinja2's
//     trim_blocks would, which Beam does not set), so an import or from
//     keeps the newline that followed it: a tag at the end of a line does
//     not join the next line to it.
//
// Includes and imports nest at most maxJinjaDepth deep.

// tagSpan is one {% ... %} tag of a template: its offsets and its
// contents between the delimiters and whitespace-control marks.
type tagSpan struct {
	start, end int
	body       string
	trimAfter  bool // -%}
}

// blockTags returns the {% %} tags of text, in order, skipping comments
// ({# #}), expressions ({{ }}) and {% raw %} blocks, and quoted strings
// inside tags.
func blockTags(text string) []tagSpan {
	var out []tagSpan
	raw := false
	for i := 0; i+1 < len(text); {
		if text[i] != '{' {
			i++
			continue
		}
		var closeTag string
		switch text[i+1] {
		case '#':
			closeTag = "#}"
		case '{':
			closeTag = "}}"
		case '%':
			closeTag = "%}"
		default:
			i++
			continue
		}
		end := tagEnd(text, i+2, closeTag)
		if end < 0 {
			return out
		}
		if closeTag == "%}" {
			body := text[i+2 : end-2]
			t := tagSpan{start: i, end: end, trimAfter: strings.HasSuffix(body, "-")}
			body = strings.TrimPrefix(strings.TrimPrefix(body, "-"), "+")
			body = strings.TrimSuffix(strings.TrimSuffix(body, "-"), "+")
			t.body = strings.TrimSpace(body)
			switch first, _, _ := strings.Cut(t.body, " "); {
			case raw && first == "endraw":
				raw = false
			case raw:
			case first == "raw":
				raw = true
			default:
				out = append(out, t)
			}
		}
		i = end
	}
	return out
}

// tagEnd returns the offset just past close, the end of a tag whose
// contents start at from, skipping quoted strings (not in comments); -1
// when the tag is not closed.
func tagEnd(text string, from int, close string) int {
	for j := from; j+1 < len(text); j++ {
		c := text[j]
		if close != "#}" && (c == '\'' || c == '"') {
			k := j + 1
			for k < len(text) && text[k] != c {
				if text[k] == '\\' {
					k++
				}
				k++
			}
			j = k
			continue
		}
		if text[j:j+2] == close {
			return j + 2
		}
	}
	return -1
}

// fileTag is an include, import or from tag, parsed.
type fileTag struct {
	kind  string // include, import or from
	name  string // the file, as written
	alias string // import's
	// names are from's imports, as names[i] (imported as as[i]).
	names, as []string
}

// parseFileTag parses the contents of a tag that names a file; ok is false
// for other tags.
func parseFileTag(body string) (ft fileTag, ok bool, err error) {
	toks := jinjaTokens(body, 1, 1)
	if len(toks) == 0 || !toks[0].ident {
		return ft, false, nil
	}
	ft.kind = toks[0].text
	switch ft.kind {
	case "include", "import", "from", "extends":
	default:
		return ft, false, nil
	}
	rest := strings.TrimSpace(body[len(ft.kind):])
	q, after, found := quoted(rest)
	if !found {
		return ft, true, fmt.Errorf("{%% %s %%} takes a quoted file name, as in {%% %s 'file.yaml' %%}", ft.kind, ft.kind)
	}
	ft.name = q
	words := strings.Fields(strings.ReplaceAll(after, ",", " , "))
	switch ft.kind {
	case "extends":
		return ft, true, errors.New("{% extends %} (template inheritance) is not supported; use {% include %} or macros")
	case "include":
		// ignore missing, with context and without context change nothing
		// here: every include sees the whole context.
		for _, w := range words {
			if w != "ignore" && w != "missing" && w != "with" && w != "without" && w != "context" {
				return ft, true, fmt.Errorf("{%% include %%}: unexpected %q", w)
			}
		}
	case "import":
		if len(words) < 2 || words[0] != "as" {
			return ft, true, errors.New("{% import %} takes the form {% import 'file.yaml' as name %}")
		}
		ft.alias = words[1]
	case "from":
		if len(words) < 2 || words[0] != "import" {
			return ft, true, errors.New("{% from %} takes the form {% from 'file.yaml' import a, b as c %}")
		}
		for i := 1; i < len(words); i++ {
			switch w := words[i]; {
			case w == ",", w == "with", w == "without", w == "context":
			case i+2 < len(words) && words[i+1] == "as":
				ft.names, ft.as = append(ft.names, w), append(ft.as, words[i+2])
				i += 2
			default:
				ft.names, ft.as = append(ft.names, w), append(ft.as, w)
			}
		}
		if len(ft.names) == 0 {
			return ft, true, errors.New("{% from %} names no macro to import")
		}
	}
	return ft, true, nil
}

// quoted reads the quoted string at the start of s.
func quoted(s string) (q, rest string, ok bool) {
	if s == "" || s[0] != '\'' && s[0] != '"' {
		return "", s, false
	}
	end := strings.IndexByte(s[1:], s[0])
	if end < 0 {
		return "", s, false
	}
	return s[1 : end+1], s[end+2:], true
}

// expander expands the file tags of a template and of what it loads.
type expander struct {
	base  string // Options.BaseDir
	names *jinjaNames
}

// resolve finds the file name names, named in file: from the base
// directory first, then from file's directory.
func (x *expander) resolve(file, name string) (string, []byte, error) {
	if filepath.IsAbs(name) {
		b, err := os.ReadFile(name)
		return name, b, err
	}
	base := x.base
	if base == "" {
		base = "."
	}
	first := filepath.Join(base, name)
	b, err := os.ReadFile(first)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return first, b, err
	}
	second := filepath.Join(filepath.Dir(file), name)
	if second == first {
		return first, nil, err
	}
	if b, err2 := os.ReadFile(second); err2 == nil || !errors.Is(err2, fs.ErrNotExist) {
		return second, b, err2
	}
	return first, nil, fmt.Errorf("no file %s (from the base directory %s) or %s (beside %s)", first, base, second, file)
}

// expand returns text, the contents of file, with its file tags expanded.
func (x *expander) expand(file, text string, depth int) (string, error) {
	if depth > maxJinjaDepth {
		return "", &Error{File: file, Line: 1, Col: 1, Msg: fmt.Sprintf("Jinja: includes and imports nest more than %d deep (is a file including itself?)", maxJinjaDepth)}
	}
	var b strings.Builder
	var aliases []string
	last := 0
	for _, t := range blockTags(text) {
		ft, ok, err := parseFileTag(t.body)
		at := func(format string, args ...any) *Error {
			col := 1 + t.start - (strings.LastIndex(text[:t.start], "\n") + 1)
			return &Error{File: file, Line: lineAt(text, t.start), Col: col, Msg: "Jinja: " + fmt.Sprintf(format, args...)}
		}
		if !ok {
			continue
		}
		if err != nil {
			return "", at("%v", err)
		}
		path, src, err := x.resolve(file, ft.name)
		if err != nil {
			e := at("cannot read %q: %v", ft.name, err)
			e.Err = err
			return "", e
		}
		x.names.scan(path, string(src))
		sub, err := x.expand(path, string(src), depth+1)
		if err != nil {
			return "", err
		}
		b.WriteString(text[last:t.start])
		last = t.end
		switch ft.kind {
		case "include":
			b.WriteString(strings.TrimSuffix(sub, "\n"))
			continue
		case "import":
			aliases = append(aliases, ft.alias)
			for _, m := range jinjaMacro.FindAllStringSubmatchIndex(sub, -1) {
				b.WriteString(sub[m[0]:m[2]] + ft.alias + "__" + sub[m[2]:m[3]] + sub[m[3]:m[1]])
			}
		case "from":
			// A macro's definition, as the text before and after its name.
			defs := map[string][2]string{}
			for _, m := range jinjaMacro.FindAllStringSubmatchIndex(sub, -1) {
				defs[sub[m[2]:m[3]]] = [2]string{sub[m[0]:m[2]], sub[m[3]:m[1]]}
			}
			for i, n := range ft.names {
				def, found := defs[n]
				if !found {
					return "", at("%q defines no macro %s", ft.name, n)
				}
				b.WriteString(def[0] + ft.as[i] + def[1])
			}
		}
		if !t.trimAfter && strings.HasSuffix(b.String(), "%}") {
			// The engine drops the newline after the last {% endmacro %};
			// the tag's own newline stays, as in Jinja2.
			b.WriteString("\n")
		}
	}
	b.WriteString(text[last:])
	out := b.String()
	// alias.macro(...) calls the renamed macro alias__macro.
	for _, alias := range aliases {
		call := regexp.MustCompile(`\b` + regexp.QuoteMeta(alias) + `\.(\w+)`)
		out = jinjaTag.ReplaceAllStringFunc(out, func(tag string) string {
			return call.ReplaceAllString(tag, alias+"__$1")
		})
	}
	return out, nil
}
