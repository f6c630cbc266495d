package python

import "strings"

// pyFStrings rewrites the f-strings of src that Starlark's str.format can
// express — f'text {expr} text', with {expr!r} and {expr!s} conversions
// and {{ }} escapes — as ('text {} text'.format((expr))). An f-string it
// cannot rewrite (a format spec {x:.2f}, a self-documenting {x=}, a quote
// of its own kind or a line break inside a replacement field, a triple
// quote, a raw prefix) is left as it is, for pyUnsupported to name.
func pyFStrings(src string) string {
	matches := pyFString.FindAllStringSubmatchIndex(src, -1)
	if matches == nil {
		return src
	}
	code := pyBlankStrings(src)
	var out strings.Builder
	last := 0
	for _, m := range matches {
		start, quote := m[2], m[3]
		if start < last || code[start:quote] != src[start:quote] {
			continue // inside a string literal, or inside one rewritten
		}
		prefix := strings.ToLower(src[start:quote])
		if strings.Contains(prefix, "r") || strings.HasPrefix(src[quote:], `"""`) || strings.HasPrefix(src[quote:], "'''") {
			continue
		}
		lit, end, ok := rewriteFString(src, quote)
		if !ok {
			continue
		}
		out.WriteString(src[last:start])
		out.WriteString(lit)
		last = end
	}
	if last == 0 {
		return src
	}
	out.WriteString(src[last:])
	return out.String()
}

// rewriteFString rewrites the f-string whose opening quote is at src[q]:
// its replacement and the index just past its closing quote; ok is false
// when it cannot be rewritten.
func rewriteFString(src string, q int) (lit string, end int, ok bool) {
	quote := src[q]
	var text strings.Builder
	var args []string
	for j := q + 1; j < len(src); {
		c := src[j]
		switch {
		case c == '\n':
			return "", 0, false
		case c == '\\' && j+1 < len(src):
			text.WriteString(src[j : j+2])
			j += 2
		case c == quote:
			s := string(quote) + text.String() + string(quote)
			if len(args) == 0 {
				return s, j + 1, true
			}
			return "(" + s + ".format(" + strings.Join(args, ", ") + "))", j + 1, true
		case strings.HasPrefix(src[j:], "{{"), strings.HasPrefix(src[j:], "}}"):
			text.WriteString(src[j : j+2])
			j += 2
		case c == '}':
			return "", 0, false
		case c == '{':
			expr, conv, next, good := fstringField(src, j+1, quote)
			if !good {
				return "", 0, false
			}
			text.WriteString("{" + conv + "}")
			args = append(args, "("+expr+")")
			j = next
		default:
			text.WriteByte(c)
			j++
		}
	}
	return "", 0, false
}

// fstringField reads the replacement field whose expression starts at
// src[i] (just past its '{'): the expression, its conversion ("!r", "!s"
// or ""), and the index just past the field's '}'. good is false for what
// str.format cannot do or the field does not close on its line.
func fstringField(src string, i int, quote byte) (expr, conv string, next int, good bool) {
	depth := 0
	for k := i; k < len(src); k++ {
		c := src[k]
		switch {
		case c == '\n' || c == quote || c == '\\':
			return "", "", 0, false
		case c == '\'' || c == '"':
			// A string of the other quote inside the expression.
			e := strings.IndexByte(src[k+1:], c)
			if e < 0 {
				return "", "", 0, false
			}
			k += e + 1
		case c == '(' || c == '[' || c == '{':
			depth++
		case (c == ')' || c == ']' || c == '}') && depth > 0:
			depth--
		case depth > 0:
		case c == '}':
			expr = strings.TrimSpace(src[i:k])
			return expr, "", k + 1, expr != ""
		case c == '!' && k+1 < len(src) && src[k+1] == '=':
			k++ // the != operator
		case c == '!':
			if k+2 < len(src) && (src[k+1] == 'r' || src[k+1] == 's') && src[k+2] == '}' {
				expr = strings.TrimSpace(src[i:k])
				return expr, "!" + string(src[k+1]), k + 3, expr != ""
			}
			return "", "", 0, false
		case c == ':':
			return "", "", 0, false // a format spec
		case c == '=' && k+1 < len(src) && src[k+1] == '=':
			k++ // the == operator
		case c == '=' && (k == i || !strings.ContainsRune("=!<>", rune(src[k-1]))):
			return "", "", 0, false // {x=}
		}
	}
	return "", "", 0, false
}
