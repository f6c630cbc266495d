package yamlpipe

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// allocated returns the bytes f allocates (runtime.MemStats.TotalAlloc,
// which counts every allocation, freed or not).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// nestedBlock is n levels of block mappings, one more space each.
func nestedBlock(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(strings.Repeat(" ", i) + "a:\n")
	}
	return b.String()
}

// TestPrescanRefusesBeforeParsing: what drove the parser past 5 GiB (a
// 100 KB text nested 50,000 levels) and its block, flow, complex-key and
// anchored variants, and a text with too many nodes, are refused with a
// position before the parser runs, allocating next to nothing.
func TestPrescanRefusesBeforeParsing(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"flow sequences", strings.Repeat("[", 50_000) + strings.Repeat("]", 50_000), "nested more than 256"},
		{"flow mappings", "pipeline: " + strings.Repeat("{a: ", 25_000) + "1" + strings.Repeat("}", 25_000), "nested more than 256"},
		{"compact sequences", strings.Repeat("- ", 50_000) + "x\n", "nested more than 256"},
		{"complex keys", strings.Repeat("? ", 50_000) + "x\n", "nested more than 256"},
		{"anchored flow", "a: &x " + strings.Repeat("[", 50_000), "nested more than 256"},
		{"tagged flow", "a: !!seq " + strings.Repeat("[", 50_000), "nested more than 256"},
		{"after a document marker", "--- " + strings.Repeat("[", 50_000), "nested more than 256"},
		{"under a sequence entry", "- " + strings.Repeat("[", 50_000), "nested more than 256"},
		{"after a block scalar", "a: |\n  [[[[\nb: " + strings.Repeat("[", 50_000), "nested more than 256"},
		{"indentation", nestedBlock(300), "nested more than 256"},
		{"too many nodes", "a: [" + strings.Repeat("1,", 150_000) + "1]\n", "more than 100000 nodes"},
		{"too large", "a: '" + strings.Repeat("x", MaxSourceBytes) + "'\n", "more than the 8388608"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := []byte(tc.src)
			var err error
			n := allocated(func() { _, err = parseYAML("f.yaml", src) })
			var pe *Error
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), tc.want) || pe.Line < 1 || pe.Col < 1 {
				t.Fatalf("parseYAML: %v, want a positioned error with %q", err, tc.want)
			}
			if n > 64<<10 {
				t.Errorf("refusing %d bytes allocated %d bytes, want at most 64 KiB (the parser ran?)", len(src), n)
			}
		})
	}
}

// TestPrescanKeepsValidFiles: quoted, commented and block-scalar text that
// looks like nesting opens nothing; every YAML file of the repository
// passes; nesting the prescan allows is left to the converter's exact
// check.
func TestPrescanKeepsValidFiles(t *testing.T) {
	deep := strings.Repeat("[", 200)
	for _, src := range []string{
		"a: '" + deep + "'\n",
		"a: \"" + deep + "\\\"\"\n",
		"a: 1 # " + deep + "\n",
		"a: |\n  " + deep + "\n  - - - - \nb: 2\n",
		"a: x" + deep + "\n",
		"a: 'it''s " + deep + "'\n",
		"- >-\n    " + deep + "\n- 2\n",
		nestedBlock(200),
		"a: [" + strings.Repeat("1,", 90_000) + "1]\n",
	} {
		if err := prescan("f.yaml", []byte(src)); err != nil {
			t.Errorf("prescan(%.40q...): %v", src, err)
		}
	}
	var files []string
	for _, dir := range []string{"testdata", "../examples", "../cmd/weir/testdata"} {
		m, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Fatal("no YAML files found")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := prescan(f, b); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	// 100 levels pass the prescan; the converter refuses them exactly.
	_, err := parseYAML("f.yaml", []byte(strings.Repeat("[", 100)+strings.Repeat("]", 100)))
	if err == nil || !strings.Contains(err.Error(), "nested more than 64") {
		t.Errorf("100 levels: %v, want the converter's refusal", err)
	}
}

// FuzzPrescan: whatever the text, parsing it (prescan, parser, converter)
// allocates memory linear in its size (the parser's constant is about 700
// bytes a byte for flow collections), never the quadratic or worse growth
// that deep nesting caused; and it never panics. Refusals carry a position.
func FuzzPrescan(f *testing.F) {
	for _, seed := range []string{
		createT, "[[[]]]", "- - - x", "? ? x", "a: &x [*x, *x]", "a: |\n  [[[\n", "'[[[' # [[[",
		strings.Repeat("[", 300), strings.Repeat("- ", 300), strings.Repeat("{a: ", 300), nestedBlock(260),
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		var err error
		n := allocated(func() { _, err = parseYAML("f.yaml", src) })
		if limit := uint64(1<<20 + 2048*len(src)); n > limit {
			t.Fatalf("parsing %d bytes allocated %d, more than %d", len(src), n, limit)
		}
		var pe *Error
		if err != nil && (!errors.As(err, &pe) || pe.Line < 1 || pe.Col < 1) {
			t.Fatalf("error without a position: %v", err)
		}
	})
}
