package jinja

import (
	"fmt"
	"strings"
)

// Beam renders pipeline templates with Jinja's StrictUndefined: a variable
// that is neither passed with --jinja_variables nor bound in the template
// ({% set %}, {% for %}, macro parameters, imports) fails the render when
// the template uses it; `x is defined` and `x | default(...)` still work,
// and a branch that is not rendered may name anything. The Go engine renders
// an undefined variable as empty, so weir checks in two steps: a scan of
// every tag of every file (the pipeline and what it includes or imports)
// finds the names no one defines, with their positions; a name is then an
// error if binding it to a value changes the render, that is, if the
// render used it.

// jinjaRef is one use of a name in a tag.
type jinjaRef struct {
	name      string
	attr      string // the attribute read from it (x.attr), if any
	file      string
	line, col int
}

// jinjaNames collects, over all files of a template, the names its tags
// bind and the uses of names it does not bind.
type jinjaNames struct {
	bound map[string]bool
	// guarded are the names tested with `is` or given a default somewhere:
	// the template handles their absence itself.
	guarded map[string]bool
	refs    []jinjaRef
}

func newJinjaNames() *jinjaNames {
	return &jinjaNames{bound: map[string]bool{}, guarded: map[string]bool{}}
}

// jinjaReserved are Jinja's keywords and the engine's global names.
var jinjaReserved = map[string]bool{
	"and": true, "or": true, "not": true, "in": true, "is": true, "if": true, "else": true, "elif": true,
	"endif": true, "for": true, "endfor": true, "set": true, "endset": true, "macro": true, "endmacro": true,
	"call": true, "endcall": true, "filter": true, "endfilter": true, "include": true, "import": true,
	"from": true, "as": true, "with": true, "endwith": true, "without": true, "context": true, "recursive": true,
	"true": true, "false": true, "none": true, "True": true, "False": true, "None": true, "loop": true,
	"raw": true, "endraw": true, "block": true, "endblock": true, "extends": true, "ignore": true,
	"missing": true, "do": true, "break": true, "continue": true, "super": true, "varargs": true,
	"kwargs": true, "caller": true, "self": true, "namespace": true, "raise_exception": true, "range": true,
	"joiner": true, "dict": true, "cycler": true, "strftime_now": true, "lipsum": true,
}

// jinjaTok is a token of a tag's contents.
type jinjaTok struct {
	text      string
	ident     bool
	line, col int
}

// tokens splits the contents of a tag (starting at line, col) into tokens;
// strings and numbers are single tokens, identifiers are marked.
func jinjaTokens(s string, line, col int) []jinjaTok {
	var out []jinjaTok
	i := 0
	adv := func(n int) {
		for k := 0; k < n && i < len(s); k++ {
			if s[i] == '\n' {
				line, col = line+1, 1
			} else {
				col++
			}
			i++
		}
	}
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			adv(1)
		case c == '\'' || c == '"':
			l, cl, j := line, col, i+1
			for j < len(s) && s[j] != c {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j < len(s) {
				j++
			}
			out = append(out, jinjaTok{text: "str", line: l, col: cl})
			adv(j - i)
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i
			for j < len(s) && (s[j] == '_' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			out = append(out, jinjaTok{text: s[i:j], ident: true, line: line, col: col})
			adv(j - i)
		case c >= '0' && c <= '9':
			j := i
			for j < len(s) && (s[j] == '.' || s[j] == '_' || s[j] >= '0' && s[j] <= '9' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z') {
				j++
			}
			out = append(out, jinjaTok{text: "num", line: line, col: col})
			adv(j - i)
		default:
			n := 1
			if i+1 < len(s) {
				switch s[i : i+2] {
				case "==", "!=", "<=", ">=", "//", "**":
					n = 2
				}
			}
			out = append(out, jinjaTok{text: s[i : i+n], line: line, col: col})
			adv(n)
		}
	}
	return out
}

// scan records the bindings and uses of every tag of text, the contents of
// file.
func (jn *jinjaNames) scan(file, text string) {
	for _, loc := range jinjaTag.FindAllStringIndex(text, -1) {
		tag := text[loc[0]:loc[1]]
		body := tag[2 : len(tag)-2]
		start := loc[0] + 2
		// Whitespace control: {%- -%} {{- -}}.
		if strings.HasPrefix(body, "-") || strings.HasPrefix(body, "+") {
			body, start = body[1:], start+1
		}
		line := lineAt(text, start)
		col := start - strings.LastIndex(text[:start], "\n")
		jn.scanTag(file, jinjaTokens(body, line, col), tag[1] == '%')
	}
}

// scanTag records one tag's tokens.
func (jn *jinjaNames) scanTag(file string, toks []jinjaTok, statement bool) {
	if len(toks) == 0 {
		return
	}
	at := func(i int) string {
		if i >= 0 && i < len(toks) {
			return toks[i].text
		}
		return ""
	}
	bind := func(from int, stop ...string) {
		for i := from; i < len(toks); i++ {
			for _, s := range stop {
				if toks[i].text == s {
					return
				}
			}
			if toks[i].ident && !jinjaReserved[toks[i].text] {
				jn.bound[toks[i].text] = true
			}
		}
	}
	first := 0
	if statement {
		switch toks[0].text {
		case "set":
			bind(1, "=")
		case "for":
			bind(1, "in")
		case "with":
			for i := 1; i+1 < len(toks); i++ {
				if toks[i].ident && toks[i+1].text == "=" {
					jn.bound[toks[i].text] = true
				}
			}
		case "macro", "call":
			// macro name(a, b=1): the name and the parameters are bound;
			// call(a) name(...): the caller's parameters are bound.
			if toks[0].text == "macro" && len(toks) > 1 {
				jn.bound[toks[1].text] = true
			}
			depth := 0
			for i := 1; i < len(toks); i++ {
				switch toks[i].text {
				case "(":
					depth++
				case ")":
					depth--
				}
				if depth == 1 && toks[i].ident && (at(i-1) == "(" || at(i-1) == ",") && (at(i+1) == "," || at(i+1) == ")" || at(i+1) == "=") {
					jn.bound[toks[i].text] = true
				}
				if toks[0].text == "call" && depth == 0 && toks[i].text == ")" {
					first = i + 1
					break
				}
			}
			if toks[0].text == "macro" {
				// Defaults may use names; parameters are not uses.
				return
			}
		case "import", "from":
			for i := range toks {
				if toks[i].text == "as" || toks[i].text == "import" && toks[0].text == "from" {
					bind(i+1, "with", "without")
					return
				}
			}
			return
		case "include", "filter", "endfilter":
			return
		}
	}
	for i := first; i < len(toks); i++ {
		t := toks[i]
		if !t.ident || jinjaReserved[t.text] {
			continue
		}
		prev := at(i - 1)
		if prev == "." || prev == "|" || prev == "is" || prev == "not" && at(i-2) == "is" {
			continue // attribute, filter or test name
		}
		next := at(i + 1)
		if next == "=" && statement && toks[0].text == "set" {
			continue
		}
		if next == "=" {
			continue // keyword argument
		}
		if next == "is" || next == "|" && (at(i+2) == "default" || at(i+2) == "d") {
			jn.guarded[t.text] = true // `x is defined`, `x | default(...)`
			continue
		}
		ref := jinjaRef{name: t.text, file: file, line: t.line, col: t.col}
		if next == "." && i+2 < len(toks) && toks[i+2].ident {
			ref.attr = toks[i+2].text
		}
		jn.refs = append(jn.refs, ref)
	}
}

// strictCheck returns an error for the first name the template uses but
// neither vars nor the template define. render renders the template with
// the given variables.
func (jn *jinjaNames) strictCheck(vars map[string]any, render func(map[string]any) (string, error)) error {
	seen := map[string]bool{}
	var base string
	var baseErr error
	haveBase := false
	for _, r := range jn.refs {
		if seen[r.name] || jn.bound[r.name] || jn.guarded[r.name] {
			continue
		}
		seen[r.name] = true
		if _, ok := vars[r.name]; ok {
			continue
		}
		if !haveBase {
			base, baseErr = render(vars)
			haveBase = true
		}
		const marker = "\x02weir-undefined\x02"
		attrs := map[string]any{}
		for _, o := range jn.refs {
			if o.name == r.name && o.attr != "" {
				attrs[o.attr] = marker
			}
		}
		used := false
		for _, probe := range []any{marker, 7, []any{1, 2}, attrs} {
			with := make(map[string]any, len(vars)+1)
			for k, v := range vars {
				with[k] = v
			}
			with[r.name] = probe
			out, err := render(with)
			if out != base || (err == nil) != (baseErr == nil) {
				used = true
				break
			}
		}
		if used {
			return &Error{File: r.file, Line: r.line, Col: r.col, Msg: fmt.Sprintf(
				"Jinja: %q is undefined: pass it with --jinja-variables '{\"%s\": ...}', or test it with {%% if %s is defined %%} (Beam renders templates strictly)",
				r.name, r.name, r.name)}
		}
	}
	return nil
}
