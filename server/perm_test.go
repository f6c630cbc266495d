package server

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func modeOf(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// TestDataDirPermissions: a new data directory and what weir creates in it
// are private (0700 directories, 0600 files), and a start tightens what an
// older version created 0755 and 0644.
func TestDataDirPermissions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := openServing(t, Config{DataDir: dir, Listen: "127.0.0.1:0", GenerateAuthToken: true})
	for path, want := range map[string]fs.FileMode{
		dir: 0o700, filepath.Join(dir, "state"): 0o700, filepath.Join(dir, "broker"): 0o700,
		filepath.Join(dir, LockFile): 0o600, filepath.Join(dir, ControlFileName): 0o600, filepath.Join(dir, AuthTokenFileName): 0o600,
	} {
		if got := modeOf(t, path); got != want {
			t.Errorf("new %s: %v, want %v", path, got, want)
		}
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	// What an older version left: 0755 directories, 0644 files.
	old := []string{dir, filepath.Join(dir, "state"), filepath.Join(dir, "legacy")}
	for _, d := range old {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := []string{filepath.Join(dir, ControlFileName), filepath.Join(dir, "legacy", "notes.txt")}
	for _, f := range files {
		if err := os.WriteFile(f, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, LockFile), 0o644); err != nil {
		t.Fatal(err)
	}
	var stateFiles []string
	if err := filepath.WalkDir(filepath.Join(dir, "state"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			stateFiles = append(stateFiles, path)
			err = os.Chmod(path, 0o644)
		}
		return err
	}); err != nil || len(stateFiles) == 0 {
		t.Fatalf("no file in state/ (%v)", err)
	}
	// A link to a file outside is not followed.
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "legacy", "link")); err != nil {
		t.Fatal(err)
	}

	openServing(t, Config{DataDir: dir, Listen: "127.0.0.1:0"})
	for _, d := range old {
		if got := modeOf(t, d); got != 0o700 {
			t.Errorf("old %s: %v after the start, want 0700", d, got)
		}
	}
	for _, f := range append(files, filepath.Join(dir, LockFile)) {
		if got := modeOf(t, f); got != 0o600 {
			t.Errorf("old %s: %v after the start, want 0600", f, got)
		}
	}
	kept := 0 // the store may have replaced some of its files since
	for _, f := range stateFiles {
		if fi, err := os.Lstat(f); err == nil {
			kept++
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("old %s: %v after the start, want 0600", f, fi.Mode().Perm())
			}
		}
	}
	if kept == 0 {
		t.Error("no file of state/ outlived the start: nothing checked in state/")
	}
	if got := modeOf(t, outside); got != 0o644 {
		t.Errorf("the link's target outside the data directory changed to %v", got)
	}
}
