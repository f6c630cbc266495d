package python

import (
	"sort"
	"strings"
)

// pyGeneratorArgs rewrites Python's generator expressions, which Starlark
// lacks, into list comprehensions of the same elements: any(f(x) for x in
// xs) becomes any([f(x) for x in xs]), (x for x in xs) a list. Beam's
// callables use them with any, all, sum, min, max, sorted, list, tuple,
// set and str.join, whose results are the same for a list. A parenthesized
// group is rewritten when a for sits directly in it and no comma does
// (Python requires a generator argument to be the only one); strings and
// comments are left alone. The rewrite inserts one character on each side,
// so columns after it on its lines shift by one.
func pyGeneratorArgs(src string) string {
	type frame struct {
		open          byte
		at            int
		comma, hasFor bool
	}
	var stack []frame
	type insert struct {
		at int
		ch byte
	}
	var ins []insert // '[' after a '(', ']' before its ')'
	isWord := func(c byte) bool {
		return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '\'' || c == '"':
			q := src[i : i+1]
			if i+2 < len(src) && src[i+1] == c && src[i+2] == c {
				q = src[i : i+3]
			}
			j := i + len(q)
			for j < len(src) {
				if src[j] == '\\' {
					j += 2
					continue
				}
				if len(q) == 1 && src[j] == '\n' {
					break
				}
				if j+len(q) <= len(src) && src[j:j+len(q)] == q {
					j += len(q) - 1
					break
				}
				j++
			}
			i = j
		case c == '(' || c == '[' || c == '{':
			stack = append(stack, frame{open: c, at: i})
		case c == ')' || c == ']' || c == '}':
			if len(stack) == 0 {
				continue
			}
			f := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if f.open == '(' && c == ')' && f.hasFor && !f.comma {
				ins = append(ins, insert{f.at + 1, '['}, insert{i, ']'})
			}
		case c == ',':
			if len(stack) > 0 {
				stack[len(stack)-1].comma = true
			}
		case isWord(c):
			j := i
			for j < len(src) && isWord(src[j]) {
				j++
			}
			if src[i:j] == "for" && len(stack) > 0 && (i == 0 || !isWord(src[i-1])) {
				stack[len(stack)-1].hasFor = true
			}
			i = j - 1
		}
	}
	if len(ins) == 0 {
		return src
	}
	sort.Slice(ins, func(a, b int) bool { return ins[a].at < ins[b].at })
	out := make([]byte, 0, len(src)+len(ins))
	prev := 0
	for _, x := range ins {
		out = append(append(out, src[prev:x.at]...), x.ch)
		prev = x.at
	}
	return string(append(out, src[prev:]...))
}

// pyKeepUnknownEscapes doubles the backslash of escapes Python keeps as
// they are in a non-raw string ("\s" is a backslash and an s, as regular
// expressions rely on) and Starlark refuses. Raw strings are left alone;
// the rewrite inserts a character per such escape.
func pyKeepUnknownEscapes(src string) string {
	var out []byte
	last := 0
	for i := 0; i < len(src); i++ {
		c := src[i]
		if c == '#' {
			for i < len(src) && src[i] != '\n' {
				i++
			}
			continue
		}
		if c != '\'' && c != '"' {
			continue
		}
		raw := false
		for j := i - 1; j >= 0 && j >= i-2; j-- {
			p := src[j] | 0x20
			if p == 'r' {
				raw = true
			} else if p != 'b' {
				break
			}
		}
		q := src[i : i+1]
		if i+2 < len(src) && src[i+1] == c && src[i+2] == c {
			q = src[i : i+3]
		}
		j := i + len(q)
		for j < len(src) {
			if src[j] == '\\' && j+1 < len(src) {
				if !raw && !strings.ContainsRune("\n\\'\"abfnrtv01234567xuU", rune(src[j+1])) {
					out = append(append(out, src[last:j]...), '\\')
					last = j
				}
				j += 2
				continue
			}
			if len(q) == 1 && src[j] == '\n' {
				break
			}
			if strings.HasPrefix(src[j:], q) {
				j += len(q) - 1
				break
			}
			j++
		}
		i = j
	}
	if out == nil {
		return src
	}
	return string(append(out, src[last:]...))
}

// Prepare rewrites Python source into weir's dialect before it is
// parsed: imports of the predeclared modules blanked, f-strings made
// str.format calls, unknown string escapes kept, generator expressions
// made lists.
func Prepare(src string) string {
	return pyGeneratorArgs(pyKeepUnknownEscapes(pyFStrings(pyBlankImports(src))))
}
