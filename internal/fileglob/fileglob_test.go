package fileglob

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestGlob: "**" crosses directories (also none, as a whole element);
// "*", "?" and classes stay within one element; directories are not
// matches of a "**" pattern; a pattern without "**" is filepath.Glob's.
func TestGlob(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"a.csv", "b.txt", "logs/x.csv", "logs/2026/12/y.csv", "logs/2026/12/y.txt", "logs/2026/a.csv", "other/a.csv"} {
		p = filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		pattern string
		want    []string
	}{
		{"*.csv", []string{"a.csv"}},
		{"logs/*", []string{"logs/2026", "logs/x.csv"}}, // filepath.Glob: directories too
		{"logs/**", []string{"logs/2026/12/y.csv", "logs/2026/12/y.txt", "logs/2026/a.csv", "logs/x.csv"}},
		{"logs/**.csv", []string{"logs/2026/12/y.csv", "logs/2026/a.csv", "logs/x.csv"}},
		{"**/a.csv", []string{"a.csv", "logs/2026/a.csv", "other/a.csv"}},
		{"logs/**/?.csv", []string{"logs/2026/12/y.csv", "logs/2026/a.csv", "logs/x.csv"}},
		{"logs/**/12/*.txt", []string{"logs/2026/12/y.txt"}},
		{"logs/20*/**/[!y].csv", []string{"logs/2026/a.csv"}},
		{"logs/20*/**/[^y].csv", []string{"logs/2026/a.csv"}},
		{"none/**", nil},
		{"**.md", nil},
	}
	for _, tc := range tests {
		t.Run(tc.pattern, func(t *testing.T) {
			got, err := Glob(filepath.Join(dir, filepath.FromSlash(tc.pattern)))
			if err != nil {
				t.Fatal(err)
			}
			for i, g := range got {
				got[i] = filepath.ToSlash(strings.TrimPrefix(g, dir+string(filepath.Separator)))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Glob(%s) = %q, want %q", tc.pattern, got, tc.want)
			}
		})
	}
	for _, bad := range []string{"logs/**/[.csv", "logs/[.csv"} {
		if _, err := Glob(filepath.Join(dir, bad)); !errors.Is(err, filepath.ErrBadPattern) || !strings.Contains(err.Error(), "file pattern") {
			t.Errorf("Glob(%s): %v, want a bad pattern naming it", bad, err)
		}
	}
}
