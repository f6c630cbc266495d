package files

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The removals of weir partitions prune (a staged version a run left
// without publishing, a published version a later publication replaced)
// and what they share with publish: the manifest read under the
// publication lock, and the check that a path is a version directory.

// RemoveStagedVersion removes the sink's version directory, the leftover
// of a partition run that did not publish (weir partitions prune), and
// returns it. It removes only a directory under the sink's versions tree
// (VersionsDir) that the publication manifest does not name (as the
// version a partition reads, or in its log); it does nothing when the
// directory is gone already.
func (s *StagedSink) RemoveStagedVersion(ctx context.Context) (string, error) {
	if err := ctx.Err(); err != nil {
		return s.dir, err
	}
	dir, err := s.versionDir(s.dir)
	if err != nil {
		return s.dir, err
	}
	// Under the publication lock: no publication names the version between
	// the check below and the removal.
	m, unlock, err := s.lockedManifest(ctx)
	if err != nil {
		return s.dir, err
	}
	defer unlock()
	base := filepath.Dir(s.cfg.Path)
	named := func(p *Publication) bool {
		if p == nil {
			return false
		}
		v, err := filepath.Abs(filepath.Join(base, filepath.FromSlash(p.Version)))
		return err == nil && v == dir
	}
	for _, p := range m.Partitions {
		if named(p) {
			return s.dir, fmt.Errorf("%s is a published version: left as it is", s.dir)
		}
	}
	for _, p := range m.Log {
		if named(p) {
			return s.dir, fmt.Errorf("%s is a published version: left as it is", s.dir)
		}
	}
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return s.dir, nil
	}
	if err != nil {
		return s.dir, fmt.Errorf("removing the version %s: %w", s.dir, err)
	}
	if !fi.IsDir() {
		return s.dir, fmt.Errorf("%s is not a version directory: left as it is", s.dir)
	}
	if err := os.RemoveAll(dir); err != nil {
		return s.dir, fmt.Errorf("removing the version %s: %w", s.dir, err)
	}
	return s.dir, nil
}

// RemoveReplacedVersion removes the directory of version (a path as
// FilePublications gives it), a published version of the sink's target
// that a later publication of its partition replaced, and records in the
// publication log when it did (the log keeps the entry: what was
// published, when and from which input). It refuses a version the
// manifest does not name in its log, one a partition reads now, and one
// outside the target's versions directory. The directory goes first, then
// the manifest is rewritten (atomically, under the publication lock): a
// crash between the two leaves an entry a second prune completes.
func (s *StagedSink) RemoveReplacedVersion(ctx context.Context, version string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	dir, err := s.versionDir(version)
	if err != nil {
		return err
	}
	m, unlock, err := s.lockedManifest(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	base := filepath.Dir(s.cfg.Path)
	names := func(p *Publication) bool {
		v, err := filepath.Abs(filepath.Join(base, filepath.FromSlash(p.Version)))
		return err == nil && v == dir
	}
	for part, p := range m.Partitions {
		if p != nil && names(p) {
			return fmt.Errorf("%s is the version partition %s reads: left as it is", version, part)
		}
	}
	var entries []*Publication
	for _, p := range m.Log {
		if names(p) {
			entries = append(entries, p)
		}
	}
	if len(entries) == 0 {
		return fmt.Errorf("%s is not a published version of %s: left as it is", version, s.cfg.Path)
	}
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("removing the replaced version %s: %w", version, err)
	case !fi.IsDir():
		return fmt.Errorf("%s is not a version directory: left as it is", version)
	default:
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("removing the replaced version %s: %w", version, err)
		}
		if err := syncDir(filepath.Dir(dir)); err != nil {
			return err
		}
	}
	now := s.cfg.now().UTC()
	for _, p := range entries {
		if p.PrunedAt == nil {
			p.PrunedAt = &now
		}
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(ManifestPath(s.cfg.Path), append(b, '\n'), s.cfg.mode())
}

// lockedManifest takes the publication lock and reads the manifest under
// it; the caller releases the lock with the function returned.
func (s *StagedSink) lockedManifest(ctx context.Context) (*PublicationManifest, func(), error) {
	unlock, err := lockPublications(ctx, s.cfg.Path, s.cfg.mode())
	if err != nil {
		return nil, nil, err
	}
	m, _, err := ReadPublicationManifest(s.cfg.Path)
	if err != nil {
		unlock()
		return nil, nil, err
	}
	return m, unlock, nil
}

// versionDir returns version as an absolute path, or an error when it is
// not a directory under the sink's versions tree (VersionsDir): nothing
// else is ever removed.
func (s *StagedSink) versionDir(version string) (string, error) {
	root, err := filepath.Abs(VersionsDir(s.cfg.Path))
	if err != nil {
		return "", fmt.Errorf("locating the versions of %s: %w", s.cfg.Path, err)
	}
	dir, err := filepath.Abs(version)
	if err != nil {
		return "", fmt.Errorf("locating the version %s: %w", version, err)
	}
	if rel, err := filepath.Rel(root, dir); err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("%s is not under the versions directory %s: left as it is", version, root)
	}
	return dir, nil
}
