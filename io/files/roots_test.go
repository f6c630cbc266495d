package files

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRoots: every way a path can lead out of the roots (issue 11 item 4)
// is refused with a PathError naming the path and the roots; paths inside
// are allowed, however they are spelled.
func TestRoots(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "weir-data")
	outside := t.TempDir()
	for _, d := range []string{filepath.Join(root, "in"), filepath.Join(data, "state"), filepath.Join(root, "sub", "deep")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(outside, "secret"), []byte("x"), 0o600))
	must(os.WriteFile(filepath.Join(root, "in", "a.jsonl"), []byte("{}\n"), 0o600))
	must(os.Symlink(outside, filepath.Join(root, "escape")))                               // a directory link out
	must(os.Symlink(filepath.Join(outside, "new.jsonl"), filepath.Join(root, "dangling"))) // a dangling link out
	must(os.Symlink("../in", filepath.Join(root, "sub", "rel")))                           // a relative link inside
	must(os.Symlink("/etc/passwd", filepath.Join(root, "in", "passwd.jsonl")))             // a glob match out
	must(os.Symlink(filepath.Join(outside), filepath.Join(root, "sub", "deep", "up")))     // ".." after a link is physical

	r, err := NewRoots([]string{root}, []string{filepath.Join(data, "state"), filepath.Join(data, "auth-token")})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		path     string
		glob     bool
		wantErr  bool
		reserved bool
	}{
		{name: "a file inside", path: filepath.Join(root, "in", "a.jsonl")},
		{name: "a new file inside", path: filepath.Join(root, "out", "new", "b.jsonl")},
		{name: "a relative link that stays inside", path: filepath.Join(root, "sub", "rel", "a.jsonl")},
		{name: "the root itself", path: root},
		{name: "dot dot that stays inside", path: filepath.Join(root, "in") + "/../out.jsonl"},
		{name: "relative path climbing out", path: root + "/in/../../../../etc/passwd", wantErr: true},
		{name: "absolute path elsewhere", path: "/etc/passwd", wantErr: true},
		{name: "proc", path: "/proc/self/environ", wantErr: true},
		{name: "absolute path with dot dot", path: root + "/../" + filepath.Base(outside) + "/secret", wantErr: true},
		{name: "a directory link out", path: filepath.Join(root, "escape", "secret"), wantErr: true},
		{name: "a dangling link out", path: filepath.Join(root, "dangling"), wantErr: true},
		{name: "dot dot after a link is physical", path: filepath.Join(root, "sub", "deep", "up") + "/../" + filepath.Base(outside) + "/secret", wantErr: true},
		{name: "a missing directory then dot dot", path: root + "/nope/../../etc/passwd", wantErr: true},
		{name: "the server's state", path: filepath.Join(data, "state", "MANIFEST"), wantErr: true, reserved: true},
		{name: "the token", path: filepath.Join(data, "auth-token"), wantErr: true, reserved: true},
		{name: "a glob inside", path: filepath.Join(root, "in", "a*.jsonl"), glob: true},
		{name: "a glob with a match leading out", path: filepath.Join(root, "in", "*.jsonl"), glob: true, wantErr: true},
		{name: "a glob of another directory", path: "/etc/*.conf", glob: true, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			check := r.Check
			if tc.glob {
				check = r.CheckPattern
			}
			err := check(tc.path)
			if !tc.wantErr {
				if err != nil {
					t.Fatalf("Check(%s) = %v, want nil", tc.path, err)
				}
				return
			}
			var pe *PathError
			if !errors.As(err, &pe) || !errors.Is(err, ErrPathNotAllowed) {
				t.Fatalf("Check(%s) = %v, want a PathError", tc.path, err)
			}
			if pe.Reserved != tc.reserved {
				t.Errorf("reserved = %v, want %v (%v)", pe.Reserved, tc.reserved, err)
			}
			msg := err.Error()
			if !tc.reserved && (!strings.Contains(msg, root) || !strings.Contains(msg, "--file-roots")) {
				t.Errorf("message %q does not name the roots and --file-roots", msg)
			}
		})
	}
	var nilRoots *Roots
	if err := nilRoots.Check("/etc/passwd"); err != nil {
		t.Errorf("nil roots refused a path: %v", err)
	}
	if _, err := NewRoots([]string{filepath.Join(root, "in", "a.jsonl")}, nil); err == nil {
		t.Error("a file accepted as a root")
	}
	if _, err := NewRoots([]string{filepath.Join(root, "missing")}, nil); err == nil {
		t.Error("a missing directory accepted as a root")
	}
}

// TestSourceChecksRootsWhenSplitting: a link created after the submission
// check is refused when the source opens its files.
func TestSourceChecksRootsWhenSplitting(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "x.jsonl"), []byte(`{"a":1}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := NewRoots([]string{root}, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "in.jsonl")
	if err := r.Check(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "x.jsonl"), path); err != nil {
		t.Fatal(err)
	}
	src := NewSource(SourceConfig{Path: path, Format: JSONLines, TimestampField: -1, Roots: r})
	if _, err := src.Split(t.Context(), 1); !errors.Is(err, ErrPathNotAllowed) {
		t.Fatalf("Split = %v, want ErrPathNotAllowed", err)
	}
}
