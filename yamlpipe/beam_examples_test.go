package yamlpipe

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/yamlpipe/pyrepr"
)

// pyJSON renders a Go string literal as Beam's LogForTesting prints it:
// JSON with non-ASCII characters escaped.
func pyJSON(s string) string { return string(pyrepr.AppendString(nil, s)) }

// Beam's published examples (testdata/beam, see its README) load unchanged
// and print the rows Beam's documentation gives: each file's `# Expected:`
// block, in Beam's Row notation, is read and rendered as LogForTesting's
// JSON lines, so a float Beam prints as 1.0 must be printed as 1.0.
func TestBeamPublishedExamples(t *testing.T) {
	tests := []struct {
		file string
		// loadErr, when set, is the load error the file gets: the example
		// needs something weir does not have (README, "Coming from Beam YAML").
		loadErr string
	}{
		{file: "filter_callable.yaml"},
		{file: "map_to_fields_callable.yaml"},
		{file: "map_to_fields_with_resource_hints.yaml"},
		{file: "combine_sum_windowed.yaml"},
		{file: "join.yaml"},
		{file: "combine_count_minimal.yaml"},
		{file: "combine_max_minimal.yaml"},
		{file: "combine_mean_minimal.yaml"},
		{file: "combine_min_minimal.yaml"},
		{file: "combine_multiple_aggregations.yaml"},
		{file: "combine_sum.yaml"},
		{file: "combine_sum_minimal.yaml"},
		{file: "group_into_batches.yaml"},
		{file: "top_largest_per_key.yaml"},
		{file: "top_smallest_per_key.yaml"},
		{file: "explode.yaml"},
		{file: "regex_matches.yaml"},
		// Reads gs://; weir reads local files.
		{file: "simple_filter.yaml", loadErr: "simple_filter.yaml:17:15: gs:// paths are not supported"},
		{file: "simple_filter_and_combine.yaml", loadErr: "simple_filter_and_combine.yaml:17:15: gs:// paths are not supported"},
		{file: "wordcount_minimal.yaml", loadErr: "wordcount_minimal.yaml:19:15: gs:// paths are not supported"},
		// dependencies: pip packages (roman) or Maven artifacts for a Java
		// UDF; weir installs nothing and runs no Java.
		{file: "map_to_fields_with_deps.yaml", loadErr: `map_to_fields_with_deps.yaml:25:9: unknown key "dependencies" in MapToFields config`},
		{file: "map_to_fields_with_java_deps.yaml", loadErr: `map_to_fields_with_java_deps.yaml:31:9: unknown key "dependencies" in MapToFields config`},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("testdata", "beam", tc.file)
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			want, err := beamExpected(string(src))
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			p, err := LoadFile(path, Options{BaseDir: t.TempDir(), LogOutput: &buf})
			if tc.loadErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.loadErr) {
					t.Fatalf("load error %v, want one containing %q", err, tc.loadErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: 2}); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
			sort.Strings(lines)
			wantLines(t, lines, want...)
		})
	}
}

func TestBeamExpectedParser(t *testing.T) {
	src := "x: 1\n# Expected:\n#  Row(produce='🥕', amount=1.0, l=[3, 2], n=None)\n" +
		"#   {'icon': '🍓', 'ok': True}\n#  {common: \"x\", c: null}\n"
	got, err := beamExpected(src)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"produce": ` + pyJSON("🥕") + `, "amount": 1.0, "l": [3, 2], "n": null}`,
		`{"icon": ` + pyJSON("🍓") + `, "ok": true}`,
		`{"common": "x", "c": null}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// beamExpected reads the `# Expected:` block of a Beam example and renders
// each row as LogForTesting prints it. Rows are written as Beam prints them
// (Row(a='x', b=1.0)), as Python dicts ({'a': 'x'}) or as YAML flow maps
// ({a: "x"}).
func beamExpected(src string) ([]string, error) {
	i := strings.Index(src, "# Expected:")
	if i < 0 {
		return nil, fmt.Errorf("no # Expected: block")
	}
	var out []string
	for _, line := range strings.Split(src[i:], "\n")[1:] {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#"))
		if line == "" {
			continue
		}
		p := &pyLit{s: line}
		b, err := p.value(nil)
		if err != nil {
			return nil, fmt.Errorf("expected row %q: %w", line, err)
		}
		if p.skipSpace(); p.i != len(p.s) {
			return nil, fmt.Errorf("expected row %q: trailing %q", line, p.s[p.i:])
		}
		out = append(out, string(b))
	}
	return out, nil
}

// pyLit parses the Python literals of Beam's printed rows.
type pyLit struct {
	s string
	i int
}

func (p *pyLit) skipSpace() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *pyLit) value(dst []byte) ([]byte, error) {
	p.skipSpace()
	rest := p.s[p.i:]
	switch {
	case strings.HasPrefix(rest, "Row("):
		p.i += len("Row(")
		return p.fields(dst, ')', '=')
	case strings.HasPrefix(rest, "{"):
		p.i++
		return p.fields(dst, '}', ':')
	case strings.HasPrefix(rest, "["):
		p.i++
		dst = append(dst, '[')
		for n := 0; ; n++ {
			p.skipSpace()
			if p.i < len(p.s) && p.s[p.i] == ']' {
				p.i++
				return append(dst, ']'), nil
			}
			if n > 0 {
				if err := p.expect(','); err != nil {
					return nil, err
				}
				dst = append(dst, ", "...)
			}
			var err error
			if dst, err = p.value(dst); err != nil {
				return nil, err
			}
		}
	case strings.HasPrefix(rest, "'"), strings.HasPrefix(rest, `"`):
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return pyrepr.AppendString(dst, s), nil
	}
	tok := p.word()
	switch tok {
	case "None", "null":
		return append(dst, "null"...), nil
	case "True", "true":
		return append(dst, "true"...), nil
	case "False", "false":
		return append(dst, "false"...), nil
	case "":
		return nil, fmt.Errorf("no value at %q", rest)
	}
	return append(dst, tok...), nil // a number, as Python prints it
}

func (p *pyLit) fields(dst []byte, end, sep byte) ([]byte, error) {
	dst = append(dst, '{')
	for n := 0; ; n++ {
		p.skipSpace()
		if p.i < len(p.s) && p.s[p.i] == end {
			p.i++
			return append(dst, '}'), nil
		}
		if n > 0 {
			if err := p.expect(','); err != nil {
				return nil, err
			}
			dst = append(dst, ", "...)
			p.skipSpace()
		}
		var name string
		if p.i < len(p.s) && (p.s[p.i] == '\'' || p.s[p.i] == '"') {
			var err error
			if name, err = p.str(); err != nil {
				return nil, err
			}
		} else {
			name = p.word()
		}
		if err := p.expect(sep); err != nil {
			return nil, err
		}
		dst = append(pyrepr.AppendString(dst, name), ": "...)
		var err error
		if dst, err = p.value(dst); err != nil {
			return nil, err
		}
	}
}

func (p *pyLit) expect(c byte) error {
	p.skipSpace()
	if p.i >= len(p.s) || p.s[p.i] != c {
		return fmt.Errorf("want %q at %q", c, p.s[p.i:])
	}
	p.i++
	return nil
}

func (p *pyLit) word() string {
	start := p.i
	for p.i < len(p.s) && !strings.ContainsRune(" ,)]}=:", rune(p.s[p.i])) {
		p.i++
	}
	return p.s[start:p.i]
}

func (p *pyLit) str() (string, error) {
	q := p.s[p.i]
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 {
		return "", fmt.Errorf("unterminated string at %q", p.s[p.i:])
	}
	s := p.s[p.i+1 : p.i+1+end]
	p.i += end + 2
	return s, nil
}
