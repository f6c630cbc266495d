package yamlpipe

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir"
)

// TestMatchAll: Beam YAML's MatchAll emits a row per file each input
// row's pattern matches (path, size_in_bytes, last_updated_in_seconds);
// a pattern outside the server's roots, a malformed one, and an empty
// match its treatment refuses are rejects on the error output, naming the
// pattern, and the other rows go on.
func TestMatchAll(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	data := filepath.Join(dir, "data")
	must(t, os.MkdirAll(filepath.Join(data, "sub.csv"), 0o755)) // a directory: never a match
	mtime := time.Date(2026, 12, 4, 7, 21, 0, 500_000_000, time.UTC)
	for name, body := range map[string]string{"a.csv": "abc", "b.csv": "hello", "c.txt": "x"} {
		p := filepath.Join(data, name)
		must(t, os.WriteFile(p, []byte(body), 0o644))
		must(t, os.Chtimes(p, mtime, mtime))
	}
	must(t, os.MkdirAll(filepath.Join(data, "deep", "x"), 0o755))
	must(t, os.WriteFile(filepath.Join(data, "deep", "x", "d.csv"), []byte("dddd"), 0o644))
	must(t, os.Chtimes(filepath.Join(data, "deep", "x", "d.csv"), mtime, mtime))
	must(t, os.WriteFile(filepath.Join(outside, "secret.csv"), []byte("s"), 0o644))
	// A link inside the roots leading out of them.
	must(t, os.MkdirAll(filepath.Join(dir, "links"), 0o755))
	must(t, os.Symlink(filepath.Join(outside, "secret.csv"), filepath.Join(dir, "links", "z.csv")))

	const head = "pipeline:\n  transforms:\n" +
		"    - type: Create\n      config:\n        elements:\n%s" +
		"    - type: MatchAll\n      input: Create\n      config:\n%s        error_handling: {output: bad}\n" +
		"    - type: LogForTesting\n      name: Files\n      input: MatchAll\n" +
		"    - type: MapToFields\n      input: MatchAll.bad\n" +
		"      config: {language: python, fields: {reason: error.reason, message: error.message}}\n" +
		"    - type: LogForTesting\n      name: Bad\n      input: MapToFields\n"
	file := func(name string, size int) string {
		return `{"path": "DIR/data/` + name + `", "size_in_bytes": ` + strconv.Itoa(size) + `, "last_updated_in_seconds": 1796368860.5}`
	}
	tests := []struct {
		name, elements, config string
		want                   []string
		wantIn                 []string // substrings of the lines that are rejects
	}{
		{name: "a glob, a plain path, one that names nothing",
			elements: "          - {pattern: 'data/*.csv', id: 1}\n          - {pattern: 'data/c.txt', id: 2}\n          - {pattern: 'data/none*', id: 3}\n          - {pattern: 'data/gone.txt', id: 4}\n",
			config:   "        file_pattern: pattern\n",
			want:     []string{file("a.csv", 3), file("b.csv", 5), file("c.txt", 1)}},
		{name: "the only field is the pattern; DISALLOW refuses an empty match",
			elements: "          - {p: 'data/b.csv'}\n          - {p: 'data/none*'}\n",
			config:   "        empty_match_treatment: DISALLOW\n",
			want:     []string{file("b.csv", 5)},
			wantIn:   []string{`"reason": "empty_match", "message": "MatchAll: pattern \"data/none*\" matches no file (empty_match_treatment DISALLOW)"`}},
		{name: "ALLOW_IF_WILDCARD refuses only a plain path",
			elements: "          - {p: 'data/none*'}\n          - {p: 'data/gone.txt'}\n",
			config:   "        empty_match_treatment: ALLOW_IF_WILDCARD\n",
			wantIn:   []string{`"reason": "empty_match", "message": "MatchAll: pattern \"data/gone.txt\" matches no file`}},
		{name: "outside the roots, a malformed pattern",
			elements: "          - {p: 'OUTSIDE/*.csv'}\n          - {p: 'data/[.csv'}\n          - {p: 'data/a.csv'}\n          - {p: 'links/*'}\n",
			want:     []string{file("a.csv", 3)},
			wantIn: []string{`"reason": "path_not_allowed", "message": "MatchAll: path OUTSIDE is outside the directories`,
				`"reason": "path_not_allowed", "message": "MatchAll: path DIR/links/z.csv (it leads to OUTSIDE/secret.csv) is outside`,
				`"reason": "bad_pattern", "message": "MatchAll: file pattern \"DIR/data/[.csv\": syntax error in pattern"`}},
		{name: "** crosses directories, and links out are still refused",
			elements: "          - {p: 'data/**.csv'}\n          - {p: '**/z.csv'}\n",
			want:     []string{file("a.csv", 3), file("b.csv", 5), file("deep/x/d.csv", 4)},
			wantIn:   []string{`"reason": "path_not_allowed", "message": "MatchAll: path DIR/links/z.csv (it leads to OUTSIDE/secret.csv) is outside`}},
	}
	access, err := NewAccess([]string{dir}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.ReplaceAll(fmt.Sprintf(head, tc.elements, tc.config), "OUTSIDE", outside)
			var buf bytes.Buffer
			p, err := Load("p.yaml", []byte(src), Options{BaseDir: dir, LogOutput: &buf, Access: access})
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			if _, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: 2}); err != nil {
				t.Fatalf("run: %v", err)
			}
			var files, bad []string
			for _, ln := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				ln = strings.ReplaceAll(strings.ReplaceAll(ln, outside, "OUTSIDE"), dir, "DIR")
				switch {
				case strings.Contains(ln, `"reason"`):
					bad = append(bad, ln)
				case ln != "":
					files = append(files, ln)
				}
			}
			sort.Strings(files)
			if strings.Join(files, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("files:\n  %s\nwant:\n  %s", strings.Join(files, "\n  "), strings.Join(tc.want, "\n  "))
			}
			if len(bad) != len(tc.wantIn) {
				t.Fatalf("rejects:\n  %s\nwant %d", strings.Join(bad, "\n  "), len(tc.wantIn))
			}
			sort.Strings(bad)
			for _, w := range tc.wantIn {
				found := false
				for _, b := range bad {
					found = found || strings.Contains(b, w)
				}
				if !found {
					t.Errorf("no reject contains %s; rejects:\n  %s", w, strings.Join(bad, "\n  "))
				}
			}
		})
	}
}

// TestMatchAllConfig: MatchAll's configuration errors are load errors at
// their position.
func TestMatchAllConfig(t *testing.T) {
	const two = "pipeline:\n  transforms:\n    - type: Create\n      config: {elements: [{a: x, b: 1}]}\n" +
		"    - type: MatchAll\n      input: Create\n"
	loadErr(t, two, "MatchAll needs config.file_pattern, the field that holds the file pattern: its input has 2 fields")
	loadErr(t, two+"      config: {file_pattern: c}\n", `MatchAll file_pattern "c" is not a field of its input`)
	loadErr(t, two+"      config: {file_pattern: b}\n", `MatchAll file_pattern "b" is a int field`)
	loadErr(t, two+"      config: {file_pattern: a, empty_match_treatment: NEVER}\n", `empty_match_treatment "NEVER": want ALLOW, DISALLOW or ALLOW_IF_WILDCARD`)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
