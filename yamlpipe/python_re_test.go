package yamlpipe

import "testing"

// Python's re module in the dialect gives Python's results.
func TestPythonRe(t *testing.T) {
	const input = `pipeline:
  type: chain
  transforms:
    - type: Create
      config:
        elements:
          - {line: "King Lear, act 1: Lear's daughters"}
`
	field := func(expr string) string {
		return "    - type: MapToFields\n      config:\n        language: python\n        fields:\n          r:\n            callable: |\n              import re\n" +
			"              def f(row):\n                return " + expr + "\n    - type: LogForTesting\n"
	}
	tests := []struct{ name, expr, want string }{
		{"findall no group", `re.findall(r"[A-Za-z\']+", row.line.lower())`, `{"r": ["king", "lear", "act", "lear's", "daughters"]}`},
		{"findall one group", `re.findall("(\w+),", row.line)`, `{"r": ["Lear"]}`},
		{"findall groups", `[list(t) for t in re.findall("(\w)(\d)", "a1 b2")]`, `{"r": [["a", "1"], ["b", "2"]]}`},
		{"match anchors", `re.match("Lear", row.line)`, `{"r": null}`},
		{"match group", `re.match("(?P<who>\w+) (\w+)", row.line).group(0, "who", 2)`, `{"r": ["King Lear", "King", "Lear"]}`},
		{"search", `re.search("act (\d)", row.line).group(1)`, `{"r": "1"}`},
		{"fullmatch", `[re.fullmatch("\w+", "abc") != None, re.fullmatch("\w", "abc") == None]`, `{"r": [true, true]}`},
		{"groups and groupdict", `[list(re.search("(?P<n>\d)(x)?", row.line).groups()), re.search("(?P<n>\d)", row.line).groupdict()]`, `{"r": [["1", null], {"n": "1"}]}`},
		{"sub", `re.sub("(\w+) (\w+)", r"\2 \g<1>", "ab cd ef gh", 1)`, `{"r": "cd ab ef gh"}`},
		{"split", `re.split(",? +", "a, b c", 1)`, `{"r": ["a", "b c"]}`},
		{"flags", `re.findall("lear", row.line, re.I)`, `{"r": ["Lear", "Lear"]}`},
		{"compile", `re.compile("\d").sub("#", row.line)`, `{"r": "King Lear, act #: Lear's daughters"}`},
		{"start end", `[re.search("act", row.line).start(), re.search("act", row.line).end()]`, `{"r": [11, 14]}`},
		{"escape", `re.escape("a.b")`, `{"r": "a\\.b"}`},
		{"generator argument", `any(w.startswith("d") for w in row.line.split())`, `{"r": true}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lines, _ := runLogged(t, input+field(tc.expr), 1)
			wantLines(t, lines, tc.want)
		})
	}
}
