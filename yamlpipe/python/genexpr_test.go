package python

import "testing"

func TestPyGeneratorArgs(t *testing.T) {
	tests := []struct{ in, want string }{
		{"any(f[0] in 'AEIOU' for f in xs)", "any([f[0] in 'AEIOU' for f in xs])"},
		{"sum(x * 2 for x in xs) + 1", "sum([x * 2 for x in xs]) + 1"},
		{"(x for x in xs)", "([x for x in xs])"},
		{"any(all(y for y in x) for x in xs)", "any([all([y for y in x]) for x in xs])"},
		{"[x for x in xs]", "[x for x in xs]"},
		{"f(a, [x for x in xs])", "f(a, [x for x in xs])"},
		{"f('(for x in y)')", "f('(for x in y)')"},
		{"f(x) # (x for x in y)", "f(x) # (x for x in y)"},
		{"f(before, x)", "f(before, x)"},
		{"def p(row):\n  for x in row.xs:\n    return max(len(s) for s in x)", "def p(row):\n  for x in row.xs:\n    return max([len(s) for s in x])"},
	}
	for _, tc := range tests {
		if got := pyGeneratorArgs(tc.in); got != tc.want {
			t.Errorf("pyGeneratorArgs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestPyKeepUnknownEscapes(t *testing.T) {
	tests := []struct{ in, want string }{
		{`re.match("[^\s,]+ (\w+)", x)`, `re.match("[^\\s,]+ (\\w+)", x)`},
		{`r"\s" + '\n\t\\' + "\d"`, `r"\s" + '\n\t\\' + "\\d"`},
		{`"\x41\u00e9\101"`, `"\x41\u00e9\101"`},
		{"'''a\\sb''' # \\s", "'''a\\\\sb''' # \\s"},
	}
	for _, tc := range tests {
		if got := pyKeepUnknownEscapes(tc.in); got != tc.want {
			t.Errorf("pyKeepUnknownEscapes(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
