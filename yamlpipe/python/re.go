package python

import (
	"fmt"
	"regexp"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// Python's re module for weir's Python dialect, on Go's regexp (RE2): the
// functions Beam's examples call — match, search, fullmatch, findall,
// finditer, sub, split, compile, escape — with match objects (group,
// groups, groupdict, start, end) and the flags I, M, S. RE2 has no
// backreferences or lookaround: a pattern that uses them is an element
// error naming the pattern. \w, \d and \s are ASCII, as with Python's
// re.ASCII; string positions (start, end) are byte offsets.

// Python's flag values.
const (
	reIgnoreCase = 2
	reMultiline  = 8
	reDotAll     = 16
)

var reModule = &starlarkstruct.Module{Name: "re", Members: starlark.StringDict{
	"match":      starlark.NewBuiltin("re.match", reMatchFn("match")),
	"search":     starlark.NewBuiltin("re.search", reMatchFn("search")),
	"fullmatch":  starlark.NewBuiltin("re.fullmatch", reMatchFn("fullmatch")),
	"findall":    starlark.NewBuiltin("re.findall", reFindall),
	"finditer":   starlark.NewBuiltin("re.finditer", reFinditer),
	"sub":        starlark.NewBuiltin("re.sub", reSub),
	"split":      starlark.NewBuiltin("re.split", reSplit),
	"compile":    starlark.NewBuiltin("re.compile", reCompileFn),
	"escape":     starlark.NewBuiltin("re.escape", reEscape),
	"I":          starlark.MakeInt(reIgnoreCase),
	"IGNORECASE": starlark.MakeInt(reIgnoreCase),
	"M":          starlark.MakeInt(reMultiline),
	"MULTILINE":  starlark.MakeInt(reMultiline),
	"S":          starlark.MakeInt(reDotAll),
	"DOTALL":     starlark.MakeInt(reDotAll),
}}

// pyImportLine is an import of a module the dialect provides: it is blanked
// before parsing, as the module is predeclared.
var pyImportLine = regexp.MustCompile(`(?m)^[ \t]*import[ \t]+(?:re|math|json)[ \t]*$`)

// pyBlankImports blanks the lines that import re, math or json, keeping
// every position.
func pyBlankImports(src string) string {
	return pyImportLine.ReplaceAllStringFunc(src, func(s string) string { return strings.Repeat(" ", len(s)) })
}

// reCompile compiles a Python pattern with Python flags, caching per thread.
func reCompile(th *starlark.Thread, pattern string, flags int) (*regexp.Regexp, error) {
	type key struct {
		p string
		f int
	}
	cache, _ := th.Local("weir.re").(map[key]*regexp.Regexp)
	if cache == nil {
		cache = map[key]*regexp.Regexp{}
		th.SetLocal("weir.re", cache)
	}
	if re, ok := cache[key{pattern, flags}]; ok {
		return re, nil
	}
	prefix := ""
	if flags&reIgnoreCase != 0 {
		prefix += "i"
	}
	if flags&reMultiline != 0 {
		prefix += "m"
	}
	if flags&reDotAll != 0 {
		prefix += "s"
	}
	src := pattern
	if prefix != "" {
		src = "(?" + prefix + ")" + src
	}
	re, err := regexp.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("re: pattern %q is not supported by Go's RE2 engine (no backreferences or lookaround): %w", pattern, err)
	}
	if len(cache) < 256 {
		cache[key{pattern, flags}] = re
	}
	return re, nil
}

// rePattern reads a pattern argument: a string or a compiled pattern.
func rePattern(th *starlark.Thread, v starlark.Value, flags int) (*regexp.Regexp, error) {
	switch x := v.(type) {
	case *rePatternValue:
		return x.re, nil
	case starlark.String:
		return reCompile(th, string(x), flags)
	}
	return nil, fmt.Errorf("re: pattern must be a string, not %s", v.Type())
}

func reMatchFn(mode string) func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	return func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var pat starlark.Value
		var s string
		flags := 0
		if err := starlark.UnpackArgs(b.Name(), args, kwargs, "pattern", &pat, "string", &s, "flags?", &flags); err != nil {
			return nil, err
		}
		re, err := rePattern(th, pat, flags)
		if err != nil {
			return nil, err
		}
		return reDoMatch(re, mode, s), nil
	}
}

func reDoMatch(re *regexp.Regexp, mode, s string) starlark.Value {
	loc := re.FindStringSubmatchIndex(s)
	if loc == nil {
		return starlark.None
	}
	switch mode {
	case "match":
		// The leftmost match: when it starts later, none starts at 0.
		if loc[0] != 0 {
			return starlark.None
		}
	case "fullmatch":
		full, err := regexp.Compile(`^(?:` + re.String() + `)\z`)
		if err != nil {
			return starlark.None
		}
		if loc = full.FindStringSubmatchIndex(s); loc == nil {
			return starlark.None
		}
	}
	return &reMatch{re: re, s: s, loc: loc}
}

func reFindall(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	ms, re, err := reAll(th, b, args, kwargs)
	if err != nil {
		return nil, err
	}
	out := make([]starlark.Value, 0, len(ms))
	for _, loc := range ms {
		switch n := re.NumSubexp(); {
		case n == 0:
			out = append(out, starlark.String(ms0(loc, 0)))
		case n == 1:
			out = append(out, starlark.String(ms0(loc, 1)))
		default:
			t := make(starlark.Tuple, n)
			for i := range t {
				t[i] = starlark.String(ms0(loc, i+1))
			}
			out = append(out, t)
		}
	}
	return starlark.NewList(out), nil
}

func reFinditer(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var pat starlark.Value
	var s string
	flags := 0
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "pattern", &pat, "string", &s, "flags?", &flags); err != nil {
		return nil, err
	}
	re, err := rePattern(th, pat, flags)
	if err != nil {
		return nil, err
	}
	var out []starlark.Value
	for _, loc := range re.FindAllStringSubmatchIndex(s, -1) {
		out = append(out, &reMatch{re: re, s: s, loc: loc})
	}
	return starlark.NewList(out), nil
}

// reAll returns the submatches of every match, as findall reports them.
func reAll(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) ([][]string, *regexp.Regexp, error) {
	var pat starlark.Value
	var s string
	flags := 0
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "pattern", &pat, "string", &s, "flags?", &flags); err != nil {
		return nil, nil, err
	}
	re, err := rePattern(th, pat, flags)
	if err != nil {
		return nil, nil, err
	}
	return re.FindAllStringSubmatch(s, -1), re, nil
}

func ms0(m []string, i int) string {
	if i < len(m) {
		return m[i]
	}
	return ""
}

// rePythonRepl converts a Python replacement (\1, \g<1>, \g<name>) to Go's.
var rePythonRepl = regexp.MustCompile(`\\(\d+)|\\g<(\w+)>|\$`)

func reSub(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var pat starlark.Value
	var repl, s string
	count, flags := 0, 0
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "pattern", &pat, "repl", &repl, "string", &s, "count?", &count, "flags?", &flags); err != nil {
		return nil, err
	}
	re, err := rePattern(th, pat, flags)
	if err != nil {
		return nil, err
	}
	goRepl := rePythonRepl.ReplaceAllStringFunc(repl, func(m string) string {
		if m == "$" {
			return "$$"
		}
		sm := rePythonRepl.FindStringSubmatch(m)
		return "${" + sm[1] + sm[2] + "}"
	})
	goRepl = strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\\`, `\`).Replace(goRepl)
	if count <= 0 {
		return starlark.String(re.ReplaceAllString(s, goRepl)), nil
	}
	var out strings.Builder
	last := 0
	for i, loc := range re.FindAllStringSubmatchIndex(s, -1) {
		if i == count {
			break
		}
		out.WriteString(s[last:loc[0]])
		out.Write(re.ExpandString(nil, goRepl, s, loc))
		last = loc[1]
	}
	out.WriteString(s[last:])
	return starlark.String(out.String()), nil
}

func reSplit(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var pat starlark.Value
	var s string
	maxsplit, flags := 0, 0
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "pattern", &pat, "string", &s, "maxsplit?", &maxsplit, "flags?", &flags); err != nil {
		return nil, err
	}
	re, err := rePattern(th, pat, flags)
	if err != nil {
		return nil, err
	}
	n := -1
	if maxsplit > 0 {
		n = maxsplit + 1
	}
	parts := re.Split(s, n)
	out := make([]starlark.Value, len(parts))
	for i, p := range parts {
		out[i] = starlark.String(p)
	}
	return starlark.NewList(out), nil
}

func reCompileFn(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var pattern string
	flags := 0
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "pattern", &pattern, "flags?", &flags); err != nil {
		return nil, err
	}
	re, err := reCompile(th, pattern, flags)
	if err != nil {
		return nil, err
	}
	return &rePatternValue{re: re, src: pattern}, nil
}

func reEscape(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var s string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "pattern", &s); err != nil {
		return nil, err
	}
	return starlark.String(regexp.QuoteMeta(s)), nil
}

// rePatternValue is a compiled pattern (re.compile): its methods are the
// module's functions without the pattern argument.
type rePatternValue struct {
	re  *regexp.Regexp
	src string
}

func (p *rePatternValue) String() string        { return fmt.Sprintf("re.compile(%q)", p.src) }
func (p *rePatternValue) Type() string          { return "re.Pattern" }
func (p *rePatternValue) Freeze()               {}
func (p *rePatternValue) Truth() starlark.Bool  { return true }
func (p *rePatternValue) Hash() (uint32, error) { return starlark.String(p.src).Hash() }
func (p *rePatternValue) AttrNames() []string {
	return []string{"findall", "finditer", "fullmatch", "match", "search", "split", "sub"}
}

func (p *rePatternValue) Attr(name string) (starlark.Value, error) {
	fn, ok := reModule.Members[name].(*starlark.Builtin)
	if !ok {
		return nil, nil
	}
	return starlark.NewBuiltin("re.Pattern."+name, func(th *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		return starlark.Call(th, fn, append(starlark.Tuple{p}, args...), kwargs)
	}), nil
}

// reMatch is a match object.
type reMatch struct {
	re  *regexp.Regexp
	s   string
	loc []int
}

func (m *reMatch) String() string        { return fmt.Sprintf("<re.Match object; match=%q>", m.group(0)) }
func (m *reMatch) Type() string          { return "re.Match" }
func (m *reMatch) Freeze()               {}
func (m *reMatch) Truth() starlark.Bool  { return true }
func (m *reMatch) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable: re.Match") }
func (m *reMatch) AttrNames() []string {
	return []string{"end", "group", "groupdict", "groups", "start"}
}

func (m *reMatch) group(i int) starlark.Value {
	if i < 0 || 2*i+1 >= len(m.loc) || m.loc[2*i] < 0 {
		return starlark.None
	}
	return starlark.String(m.s[m.loc[2*i]:m.loc[2*i+1]])
}

// index resolves a group number or name.
func (m *reMatch) index(v starlark.Value) (int, error) {
	switch x := v.(type) {
	case starlark.Int:
		i, ok := x.Int64()
		if !ok || i < 0 || int(i) > m.re.NumSubexp() {
			return 0, fmt.Errorf("re.Match: no such group %s", x)
		}
		return int(i), nil
	case starlark.String:
		if i := m.re.SubexpIndex(string(x)); i >= 0 {
			return i, nil
		}
		return 0, fmt.Errorf("re.Match: no such group %q", string(x))
	}
	return 0, fmt.Errorf("re.Match: a group is a number or a name, not %s", v.Type())
}

func (m *reMatch) Attr(name string) (starlark.Value, error) {
	switch name {
	case "group":
		return starlark.NewBuiltin("group", func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
			if len(args) == 0 {
				return m.group(0), nil
			}
			out := make(starlark.Tuple, len(args))
			for j, a := range args {
				i, err := m.index(a)
				if err != nil {
					return nil, err
				}
				out[j] = m.group(i)
			}
			if len(out) == 1 {
				return out[0], nil
			}
			return out, nil
		}), nil
	case "groups":
		return starlark.NewBuiltin("groups", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
			out := make(starlark.Tuple, m.re.NumSubexp())
			for i := range out {
				out[i] = m.group(i + 1)
			}
			return out, nil
		}), nil
	case "groupdict":
		return starlark.NewBuiltin("groupdict", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
			d := starlark.NewDict(m.re.NumSubexp())
			for i, n := range m.re.SubexpNames() {
				if n != "" {
					if err := d.SetKey(starlark.String(n), m.group(i)); err != nil {
						return nil, err
					}
				}
			}
			return d, nil
		}), nil
	case "start", "end":
		end := name == "end"
		return starlark.NewBuiltin(name, func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
			i := 0
			if len(args) > 0 {
				var err error
				if i, err = m.index(args[0]); err != nil {
					return nil, err
				}
			}
			at := m.loc[2*i]
			if end {
				at = m.loc[2*i+1]
			}
			return starlark.MakeInt(at), nil
		}), nil
	}
	return nil, nil
}
