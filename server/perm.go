package server

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
)

// tightenDataDir takes the group's and others' permissions off the data
// directory and everything in it (nothing there is for other users: the
// state holds every job's data, process.json the API's address,
// auth-token the token) (directories and regular files; links
// are left alone), which older versions created 0755 and 0644. A file it
// cannot change is logged, not fatal: the directory itself is 0700.
func tightenDataDir(dir string, log *slog.Logger) error {
	if err := chmodPrivate(dir); err != nil {
		return fmt.Errorf("making the data directory private: %w", err)
	}
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking (a compaction, a tmp file)
			}
			log.Warn("checking the data directory's permissions", "path", path, "error", err)
			return nil
		}
		if path == dir || !(d.IsDir() || d.Type().IsRegular()) {
			return nil
		}
		info, err := d.Info()
		if err != nil || info.Mode().Perm()&0o077 == 0 {
			return nil
		}
		if err := chmodPrivate(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.Warn("tightening a data directory file's permissions", "path", path, "error", err)
			return nil
		}
		n++
		return nil
	})
	if n > 0 {
		log.Info("tightened the permissions of the data directory's files (to 0700 directories, 0600 files)", "data_dir", dir, "changed", n)
	}
	return err
}

// chmodPrivate removes the group's and others' permissions of path.
func chmodPrivate(path string) error {
	info, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if info.Mode().Perm()&0o077 == 0 {
		return nil
	}
	return os.Chmod(path, info.Mode().Perm()&^0o077)
}
