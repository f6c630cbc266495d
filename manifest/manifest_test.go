package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBuildAndVerify: a manifest holds exactly the files its patterns
// match, its digest depends on their content only, and Verify names a
// file whose size or content changed, or that is gone.
func TestBuildAndVerify(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := write("a.jsonl", "one\n"), write("b.jsonl", "two\n")
	side := write("ref.csv", "x\n")
	req := Request{Name: "sales", Partition: "2026-12-01", Files: []string{filepath.Join(dir, "*.jsonl")}, SideInputs: map[string]string{"ref": side}}
	m, err := Build(req, nil, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Files) != 2 || m.Files[0].Path != a || m.Files[1].Path != b || m.Files[0].Size != 4 || len(m.SideInputs) != 1 {
		t.Fatalf("manifest %+v", m)
	}
	later, err := Build(req, nil, time.Unix(100, 0))
	if err != nil || later.Digest != m.Digest {
		t.Fatalf("same files, another time: digest %s, want %s (%v)", later.Digest, m.Digest, err)
	}
	if err := m.Verify(m.All()); err != nil {
		t.Fatalf("unchanged files: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func()
		path   string
		why    string
	}{
		{"same size, other content", func() { write("a.jsonl", "ONE\n") }, a, "content sha256"},
		{"other size", func() { write("b.jsonl", "three\n") }, b, "size 6 bytes, recorded 4"},
		{"side input gone", func() { os.Remove(side) }, side, "it is gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.change()
			err := m.VerifyFile(fileOf(m, tc.path))
			var ce *ChangedError
			if !errors.Is(err, ErrChanged) || !errors.As(err, &ce) || ce.Path != tc.path || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("Verify: %v; want a change of %s (%s)", err, tc.path, tc.why)
			}
		})
	}
}

// TestBuildRecursiveGlob: "**" in a manifest's pattern crosses
// directories, as in the file sources' paths.
func TestBuildRecursiveGlob(t *testing.T) {
	dir := t.TempDir()
	var want []string
	for _, name := range []string{"2026/12/01/a.jsonl", "2026/12/01/b.csv", "2026/12/02/c.jsonl", "top.jsonl"} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, ".jsonl") && strings.HasPrefix(name, "2026") {
			want = append(want, p)
		}
	}
	m, err := Build(Request{Name: "days", Partition: "p", Files: []string{filepath.Join(dir, "2026", "**.jsonl")}}, nil, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range m.Files {
		got = append(got, f.Path)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("files %v, want %v", got, want)
	}
}

func fileOf(m *Manifest, path string) File {
	for _, f := range m.All() {
		if f.Path == path {
			return f
		}
	}
	return File{Path: path}
}

// TestBuildRefuses: what a manifest cannot be made of.
func TestBuildRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		req  Request
		want string
	}{
		{"bad name", Request{Name: "-x", Partition: "p", Files: []string{dir}}, "manifest name"},
		{"bad partition", Request{Name: "x", Partition: "a/b", Files: []string{dir}}, "partition"},
		{"no files", Request{Name: "x", Partition: "p"}, "at least one input file"},
		{"relative", Request{Name: "x", Partition: "p", Files: []string{"a.jsonl"}}, "not an absolute path"},
		{"no match", Request{Name: "x", Partition: "p", Files: []string{filepath.Join(dir, "*.csv")}}, "matches no file"},
		{"missing", Request{Name: "x", Partition: "p", Files: []string{filepath.Join(dir, "nope")}}, "no such file"},
		{"a directory", Request{Name: "x", Partition: "p", Files: []string{dir}}, "not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Build(tc.req, nil, time.Now())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Build: %v, want an error with %q", err, tc.want)
			}
		})
	}
}
