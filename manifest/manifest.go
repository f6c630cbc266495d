// Package manifest holds the immutable input manifests of bounded jobs: a
// manifest (NAME, partition) records the exact files a partition run reads
// — absolute paths, sizes and SHA-256 content digests — and its side
// inputs' files, with a digest of the whole content. A run reads exactly
// those files and refuses to start when one of them changed (Verify,
// ErrChanged).
//
// It may import internal/fileglob (globs, "**" across directories) and
// the standard library.
package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"time"

	"github.com/weir-dev/weir/internal/fileglob"
)

// ErrChanged marks a manifest file whose size or content digest is no
// longer the one the manifest recorded (*ChangedError). The job service
// answers it as MANIFEST_CHANGED.
var ErrChanged = errors.New("manifest input changed")

// ErrNotFound marks a manifest (name, partition) that does not exist. The
// job service answers it as MANIFEST_NOT_FOUND.
var ErrNotFound = errors.New("manifest not found")

// ErrNoFiles is wrapped by Build's error when a pattern matches no file or
// a named input file does not exist: the input is not there (yet).
var ErrNoFiles = errors.New("the input is not there")

// File is one input file of a manifest.
type File struct {
	// Path is the file's absolute path.
	Path string `json:"path"`
	// Size is its size in bytes when the manifest was created.
	Size int64 `json:"size"`
	// SHA256 is the hex SHA-256 digest of its content then.
	SHA256 string `json:"sha256"`
}

// SideInput is a named side-input file of a manifest (a lookup table, a
// reference snapshot the pipeline reads beside its main input).
type SideInput struct {
	// Name is the side input's name (--side-input NAME=FILE).
	Name string `json:"name"`
	File
}

// Manifest is the record of a partition's exact inputs. Its content (name,
// partition, files, side inputs) never changes once created; Digest is the
// SHA-256 of that content (ContentDigest).
type Manifest struct {
	Name       string      `json:"name"`
	Partition  string      `json:"partition"`
	Files      []File      `json:"files"`
	SideInputs []SideInput `json:"side_inputs,omitempty"`
	// CreateTime is when the manifest was created.
	CreateTime time.Time `json:"create_time"`
	// Digest is "sha256:" and the hex digest of the manifest's content.
	Digest string `json:"digest"`
}

// Key returns the manifest's registry key, manifest/NAME/PARTITION.
func Key(name, partition string) string { return "manifest/" + name + "/" + partition }

// nameRE is the form of a manifest name and of a partition: a letter or a
// digit, then letters, digits, '-', '_', '.', '=' (a partition is often a
// date, "2026-12-01", or a key, "day=2026-12-01").
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._=-]{0,127}$`)

// ValidateName checks a manifest name or a partition (what names which).
func ValidateName(what, s string) error {
	if !nameRE.MatchString(s) {
		return fmt.Errorf("%s %q is not valid: use 1 to 128 letters, digits, '-', '_', '.' or '=', starting with a letter or digit", what, s)
	}
	return nil
}

// Request is what a manifest is created from: file patterns (absolute
// paths or globs) and side inputs NAME → absolute path.
type Request struct {
	Name       string
	Partition  string
	Files      []string
	SideInputs map[string]string
}

// Build reads the files req names and returns its manifest, created at
// now. check, when not nil, is called on every pattern and every file
// before it is read (a server's --file-roots); its error is returned
// wrapped.
func Build(req Request, check func(path string) error, now time.Time) (*Manifest, error) {
	if err := ValidateName("manifest name", req.Name); err != nil {
		return nil, err
	}
	if err := ValidateName("partition", req.Partition); err != nil {
		return nil, err
	}
	if len(req.Files) == 0 {
		return nil, errors.New("a manifest needs at least one input file: give --files PATH_OR_GLOB")
	}
	m := &Manifest{Name: req.Name, Partition: req.Partition, CreateTime: now.UTC(), Files: []File{}}
	seen := map[string]bool{}
	for _, pat := range req.Files {
		paths, err := expand(pat, check)
		if err != nil {
			return nil, err
		}
		for _, p := range paths {
			if seen[p] {
				continue
			}
			seen[p] = true
			f, err := Stat(p)
			if err != nil {
				return nil, err
			}
			m.Files = append(m.Files, f)
		}
	}
	sort.Slice(m.Files, func(i, j int) bool { return m.Files[i].Path < m.Files[j].Path })
	names := make([]string, 0, len(req.SideInputs))
	for n := range req.SideInputs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := ValidateName("side input name", n); err != nil {
			return nil, err
		}
		p := req.SideInputs[n]
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("side input %s: path %q is not absolute", n, p)
		}
		p = filepath.Clean(p)
		if check != nil {
			if err := check(p); err != nil {
				return nil, fmt.Errorf("side input %s: %w", n, err)
			}
		}
		f, err := Stat(p)
		if err != nil {
			return nil, fmt.Errorf("side input %s: %w", n, err)
		}
		m.SideInputs = append(m.SideInputs, SideInput{Name: n, File: f})
	}
	m.Digest = m.ContentDigest()
	return m, nil
}

// expand returns the regular files pattern names (a glob, or one path),
// sorted; a glob that matches nothing is an error.
func expand(pattern string, check func(string) error) ([]string, error) {
	if !filepath.IsAbs(pattern) {
		return nil, fmt.Errorf("input %q is not an absolute path", pattern)
	}
	pattern = filepath.Clean(pattern)
	if check != nil {
		if err := check(pattern); err != nil {
			return nil, err
		}
	}
	if !fileglob.HasMeta(pattern) {
		return []string{pattern}, nil
	}
	ms, err := fileglob.Glob(pattern)
	if err != nil {
		return nil, err // it names the pattern
	}
	var out []string
	for _, p := range ms {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("input %s: %w", p, err)
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		if check != nil {
			if err := check(p); err != nil {
				return nil, err
			}
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("file pattern %q matches no file (%w)", pattern, ErrNoFiles)
	}
	sort.Strings(out)
	return out, nil
}

// Stat returns the size and content digest of the regular file at path.
func Stat(path string) (File, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return File{}, fmt.Errorf("reading input: %w (%w)", err, ErrNoFiles)
	}
	if err != nil {
		return File{}, fmt.Errorf("reading input: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return File{}, fmt.Errorf("reading input: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return File{}, fmt.Errorf("input %s is not a regular file", path)
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return File{}, fmt.Errorf("reading input %s: %w", path, err)
	}
	return File{Path: path, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// content is what ContentDigest hashes: everything but the times and the
// digest itself.
type content struct {
	Name       string      `json:"name"`
	Partition  string      `json:"partition"`
	Files      []File      `json:"files"`
	SideInputs []SideInput `json:"side_inputs"`
}

// ContentDigest returns "sha256:" and the hex SHA-256 of the manifest's
// content in a canonical JSON form (files and side inputs in order).
func (m *Manifest) ContentDigest() string {
	b, err := json.Marshal(content{Name: m.Name, Partition: m.Partition, Files: m.Files, SideInputs: m.SideInputs})
	if err != nil {
		// Strings and integers always marshal.
		panic(fmt.Sprintf("manifest: marshalling its content: %v", err))
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Side returns the side input named name.
func (m *Manifest) Side(name string) (File, bool) {
	for _, s := range m.SideInputs {
		if s.Name == name {
			return s.File, true
		}
	}
	return File{}, false
}

// ChangedError says which file of a manifest changed and how.
type ChangedError struct {
	Manifest, Partition string
	Path                string
	// Why is what differs: "it is gone", "size 12 bytes, recorded 10",
	// "content sha256 ..., recorded ...".
	Why string
}

// Error implements error.
func (e *ChangedError) Error() string {
	return fmt.Sprintf("input %s of manifest %s partition %s changed since the manifest was created (%s): a manifest is immutable; restore the file, or create a manifest of the new input under a new partition or name", e.Path, e.Manifest, e.Partition, e.Why)
}

// Is makes errors.Is(err, ErrChanged) hold.
func (e *ChangedError) Is(target error) bool { return target == ErrChanged }

// Verify checks that every file of fs (files of m) still has its recorded
// size and digest; the first that does not is a *ChangedError.
func (m *Manifest) Verify(fs []File) error {
	for _, f := range fs {
		if err := m.VerifyFile(f); err != nil {
			return err
		}
	}
	return nil
}

// VerifyFile checks one file of m.
func (m *Manifest) VerifyFile(f File) error {
	changed := func(why string) error {
		return &ChangedError{Manifest: m.Name, Partition: m.Partition, Path: f.Path, Why: why}
	}
	fi, err := os.Stat(f.Path)
	if errors.Is(err, os.ErrNotExist) {
		return changed("it is gone")
	}
	if err != nil {
		return fmt.Errorf("checking input %s of manifest %s: %w", f.Path, m.Name, err)
	}
	if fi.Size() != f.Size {
		return changed(fmt.Sprintf("size %d bytes, recorded %d", fi.Size(), f.Size))
	}
	now, err := Stat(f.Path)
	if err != nil {
		return fmt.Errorf("checking input %s of manifest %s: %w", f.Path, m.Name, err)
	}
	if now.SHA256 != f.SHA256 || now.Size != f.Size {
		return changed(fmt.Sprintf("content sha256 %s, recorded %s", short(now.SHA256), short(f.SHA256)))
	}
	return nil
}

// All returns every file of m: its inputs, then its side inputs.
func (m *Manifest) All() []File {
	out := append([]File(nil), m.Files...)
	for _, s := range m.SideInputs {
		out = append(out, s.File)
	}
	return out
}

func short(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}
