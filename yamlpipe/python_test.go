package yamlpipe

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

const pyInput = `pipeline:
  type: chain
  transforms:
    - type: Create
      config:
        elements:
          - {name: apple, price: 3, weight: 1.5, tags: [red, sweet]}
          - {name: kiwi, price: 7, weight: 0.25, tags: []}
`

// language: python runs Beam's Python expressions and callables in the
// Starlark dialect, with the results Beam's Python gives.
func TestPythonMapToFields(t *testing.T) {
	tests := []struct {
		name, step string
		want       []string
	}{
		{"expressions", `    - type: MapToFields
      config:
        language: python
        fields:
          up: name.upper()
          total: price * 2
          ratio: price / 2
          heavy: "weight > 1"
          n: len(tags)
          label: "'cheap' if price < 5 else 'dear'"
          s: "'%s:%d' % (name, price)"
          name: name
`, []string{
			`{"up": "APPLE", "total": 6, "ratio": 1.5, "heavy": true, "n": 2, "label": "cheap", "s": "apple:3", "name": "apple"}`,
			`{"up": "KIWI", "total": 14, "ratio": 3.5, "heavy": false, "n": 0, "label": "dear", "s": "kiwi:7", "name": "kiwi"}`,
		}},
		{"lambda callable and append", `    - type: MapToFields
      config:
        language: python
        append: true
        drop: [tags]
        fields:
          first: {callable: "lambda row: row.tags[0] if row.tags else None"}
          cents: {expression: "int(weight * 100)"}
`, []string{
			`{"name": "apple", "price": 3, "weight": 1.5, "first": "red", "cents": 150}`,
			`{"name": "kiwi", "price": 7, "weight": 0.25, "first": null, "cents": 25}`,
		}},
		{"def callable", `    - type: MapToFields
      config:
        language: python
        fields:
          name: name
          kind:
            callable: |
              def helper(x):
                return x.title()

              def classify(row):
                words = []
                for t in row.tags:
                  words.append(helper(t))
                return "-".join(words) or "plain"
`, []string{
			`{"name": "apple", "kind": "Red-Sweet"}`,
			`{"name": "kiwi", "kind": "plain"}`,
		}},
		{"filter", `    - type: Filter
      config:
        language: python
        keep: "price > 5 and 'i' in name"
`, []string{`{"name": "kiwi", "price": 7, "weight": 0.25, "tags": []}`}},
		{"filter callable truthiness", `    - type: Filter
      config:
        language: python
        keep: {callable: "lambda row: row.tags"}
`, []string{`{"name": "apple", "price": 3, "weight": 1.5, "tags": ["red", "sweet"]}`}},
		{"math module", `    - type: MapToFields
      config:
        language: python
        fields:
          r: "math.floor(weight)"
          name: name
`, []string{`{"r": 1, "name": "apple"}`, `{"r": 0, "name": "kiwi"}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lines, _ := runLogged(t, pyInput+tc.step+"    - type: LogForTesting\n", 2)
			wantLines(t, lines, tc.want...)
		})
	}
}

func TestPythonTimestampsAndPartition(t *testing.T) {
	src := pyInput + `    - type: AssignTimestamps
      config:
        language: python
        timestamp: "price * 60"
    - type: Partition
      config:
        language: python
        by: {callable: "lambda row: 'dear' if row.price > 5 else 'cheap'"}
        outputs: [cheap, dear]
    - type: MapToFields
      input: Partition.dear
      config:
        language: python
        fields: {name: name}
    - type: ExtractWindowingInfo
      config: {fields: [timestamp]}
    - type: LogForTesting
`
	src = strings.Replace(src, "  type: chain\n", "", 1)
	src = strings.Replace(src, "    - type: AssignTimestamps\n", "    - type: AssignTimestamps\n      input: Create\n", 1)
	src = strings.Replace(src, "    - type: Partition\n", "    - type: Partition\n      input: AssignTimestamps\n", 1)
	src = strings.Replace(src, "    - type: ExtractWindowingInfo\n", "    - type: ExtractWindowingInfo\n      input: MapToFields\n", 1)
	src = strings.Replace(src, "    - type: LogForTesting\n", "    - type: LogForTesting\n      input: ExtractWindowingInfo\n", 1)
	lines, _ := runLogged(t, src, 1)
	wantLines(t, lines, `{"name": "kiwi", "timestamp": "1970-01-01T00:07:00.000Z"}`)
}

// Python outside the dialect is a load error at its place, naming the
// construct; runtime failures are element errors.
func TestPythonLoadErrors(t *testing.T) {
	const at = pyInput + "    - type: MapToFields\n      config:\n        language: python\n        fields:\n"
	// The field's value starts at line 13, column 14.
	tests := []struct {
		name, field string
		line, col   int
		msg         string
	}{
		{"import", "          x: {callable: \"import numpy\"}\n", 13, 26, "imports are not supported"},
		{"def with import", "          x:\n            callable: |\n              def f(row):\n                import numpy\n                return 1\n", 16, 17, "imports are not supported"},
		{"class", "          x:\n            callable: |\n              class A:\n                pass\n", 15, 15, "classes are not supported"},
		{"f-string with a format spec", "          x: \"f'{price:.2f}!'\"\n", 13, 15, "this f-string is not supported"},
		{"is", "          x: \"name is None\"\n", 13, 20, "the is operator is not supported"},
		{"try", "          x:\n            callable: |\n              def f(row):\n                try:\n                  return 1\n                except:\n                  return 2\n", 16, 17, "exceptions (try/except/raise) are not supported"},
		{"third-party module", "          x: np.mean(tags)\n", 13, 14, `name "np" is not defined`},
		{"power", "          x: price ** 2\n", 13, 20, "the ** operator is not supported"},
		{"syntax", "          x: \"price +\"\n", 13, 22, "got end of file"},
		{"not a callable", "          x: {callable: \"x = 1\"}\n", 13, 25, "a callable is a lambda or a def"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("p.yaml", []byte(at+tc.field), Options{BaseDir: t.TempDir()})
			var pe *Error
			if err == nil || !errors.As(err, &pe) {
				t.Fatalf("err = %v, want a positioned error", err)
			}
			want := fmt.Sprintf("p.yaml:%d:%d: ", tc.line, tc.col)
			if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error = %q\nwant prefix %q and fragment %q", err, want, tc.msg)
			}
		})
	}
}

// A Python error in one element is that element's error, to the error
// output, never a crash.
func TestPythonElementErrors(t *testing.T) {
	src := `pipeline:
  transforms:
    - type: Create
      config:
        elements: [{a: 1, b: 0}, {a: 4, b: 2}]
    - type: MapToFields
      input: Create
      config:
        language: python
        fields: {q: a // b}
        error_handling: {output: bad}
    - type: LogForTesting
      input: MapToFields
    - type: MapToFields
      name: Why
      input: MapToFields.bad
      config: {fields: {reason: error.reason, a: element.a}}
    - type: LogForTesting
      name: Bad
      input: Why
`
	lines, _ := runLogged(t, src, 1)
	wantLines(t, lines, `{"q": 2}`, `{"reason": "python_error", "a": 1}`)
}
