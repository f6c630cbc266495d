package files

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/weir-dev/weir/internal/fileglob"
)

// This file confines the paths of a submitted pipeline to the directories a
// server allows (its --file-roots). A path is resolved the way the
// operating system would open it: relative to the directory given, ".."
// taken physically (after the symbolic link before it is followed), every
// symbolic link followed, dangling ones included, and the part that does
// not exist yet (a sink's file, the directories a sink creates) taken
// lexically. The result must lie inside one of the roots, themselves
// resolved, and outside every reserved path (the server's own files).

// ErrPathNotAllowed marks a path outside the allowed file roots, or inside a
// reserved path (PathError). Callers match it with errors.Is; the job
// service answers it as PATH_NOT_ALLOWED.
var ErrPathNotAllowed = errors.New("path not allowed")

// maxLinks bounds the symbolic links followed while resolving one path, as
// the kernel's ELOOP does.
const maxLinks = 40

// Roots is the set of directories file transforms may touch. A nil *Roots
// allows every path (an in-process run, which has its user's rights).
type Roots struct {
	// dirs are the roots, resolved; shown as the user gave them (absolute).
	dirs, shown []string
	// reserved are resolved paths no pipeline may touch even inside a
	// root: the server's state, broker, token and key files.
	reserved []string
}

// NewRoots returns the roots dirs (each resolved to an absolute path without
// symbolic links; each must exist and be a directory), with reserved paths
// no pipeline may reach even inside a root.
func NewRoots(dirs []string, reserved []string) (*Roots, error) {
	if len(dirs) == 0 {
		return nil, errors.New("no file roots given: name at least one directory")
	}
	r := &Roots{}
	for _, d := range dirs {
		abs, err := absolute(d)
		if err != nil {
			return nil, fmt.Errorf("file root %q: %w", d, err)
		}
		res, err := resolve(abs)
		if err != nil {
			return nil, fmt.Errorf("file root %q: %w", d, err)
		}
		fi, err := os.Stat(res)
		if err != nil {
			return nil, fmt.Errorf("file root %q: %w", d, err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("file root %q is not a directory", d)
		}
		r.dirs = append(r.dirs, res)
		r.shown = append(r.shown, abs)
	}
	for _, p := range reserved {
		if p == "" {
			continue
		}
		abs, err := absolute(p)
		if err != nil {
			return nil, fmt.Errorf("reserved path %q: %w", p, err)
		}
		res, err := resolve(abs)
		if err != nil {
			return nil, fmt.Errorf("reserved path %q: %w", p, err)
		}
		r.reserved = append(r.reserved, res)
	}
	return r, nil
}

// Dirs returns the roots as configured (absolute paths).
func (r *Roots) Dirs() []string {
	if r == nil {
		return nil
	}
	return append([]string(nil), r.shown...)
}

// PathError is a path a pipeline may not touch. It matches
// ErrPathNotAllowed.
type PathError struct {
	// Path is the path as the pipeline gave it, joined to its base
	// directory; Resolved is where it leads.
	Path, Resolved string
	// Roots are the allowed roots.
	Roots []string
	// Reserved is set when the path leads into one of the server's own
	// files rather than outside the roots.
	Reserved bool
}

// Error names the path, where it leads, the roots and the flag that sets
// them.
func (e *PathError) Error() string {
	via := ""
	if e.Resolved != e.Path {
		via = fmt.Sprintf(" (it leads to %s)", e.Resolved)
	}
	if e.Reserved {
		return fmt.Sprintf("path %s%s is inside the server's own files (its state, broker or credentials), which no pipeline may touch", e.Path, via)
	}
	return fmt.Sprintf("path %s%s is outside the directories this server lets pipelines touch (%s); the server's --file-roots flag sets them, and relative paths resolve against the submitting client's working directory",
		e.Path, via, strings.Join(e.Roots, ", "))
}

// Is makes errors.Is(err, ErrPathNotAllowed) hold.
func (e *PathError) Is(target error) bool { return target == ErrPathNotAllowed }

// Check resolves path (absolute, or relative to the current directory) and
// returns a *PathError when it leads outside the roots or into a reserved
// path; other errors are failures to resolve it (a permission denied on
// the way, a loop of links). A nil *Roots allows every path.
func (r *Roots) Check(path string) error {
	if r == nil {
		return nil
	}
	abs, err := absolute(path)
	if err != nil {
		return fmt.Errorf("resolving %s: %w", path, err)
	}
	res, err := resolve(abs)
	if err != nil {
		return fmt.Errorf("resolving %s: %w", path, err)
	}
	for _, p := range r.reserved {
		if within(res, p) {
			return &PathError{Path: abs, Resolved: res, Roots: r.Dirs(), Reserved: true}
		}
	}
	for _, d := range r.dirs {
		if within(res, d) {
			return nil
		}
	}
	return &PathError{Path: abs, Resolved: res, Roots: r.Dirs()}
}

// CheckPattern checks a source's path, which may be a glob: the directory
// before its first wildcard, and every file the pattern matches now (a
// match may be a link leading out). Files matched later are checked when
// the source opens them.
func (r *Roots) CheckPattern(pattern string) error {
	if r == nil {
		return nil
	}
	if !fileglob.HasMeta(pattern) {
		return r.Check(pattern)
	}
	static := pattern
	for fileglob.HasMeta(static) {
		static = filepath.Dir(static)
	}
	if err := r.Check(static); err != nil {
		return err
	}
	matches, err := fileglob.Glob(pattern)
	if err != nil {
		return err
	}
	for _, m := range matches {
		if err := r.Check(m); err != nil {
			return err
		}
	}
	return nil
}

// absolute makes p absolute without cleaning it: "link/.." must be taken
// physically, as the system will, not lexically as filepath.Abs does.
func absolute(p string) (string, error) {
	if filepath.IsAbs(p) {
		return p, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return wd + string(filepath.Separator) + p, nil
}

// within says whether path p is dir or below it (both clean and absolute).
func within(p, dir string) bool {
	if p == dir || dir == string(filepath.Separator) {
		return true
	}
	return strings.HasPrefix(p, dir+string(filepath.Separator))
}

// resolve returns where absolute path p leads: each existing component is
// looked at with Lstat, symbolic links are followed (relative targets
// against the link's directory), ".." goes to the parent of what is
// resolved so far; once a component does not exist the rest is taken
// lexically, since nothing below it exists to be a link.
func resolve(p string) (string, error) {
	sep := string(filepath.Separator)
	todo := splitPath(p)
	cur := sep
	links := 0
	exists := true
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			// Look again: below a parent, what follows may exist (a
			// sink's MkdirAll creates the missing part first).
			cur, exists = filepath.Dir(cur), true
			continue
		}
		next := filepath.Join(cur, c)
		if !exists {
			cur = next
			continue
		}
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			exists = false
			cur = next
			continue
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("more than %d symbolic links on the way to %s", maxLinks, p)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			cur = sep
		}
		todo = append(splitPath(target), todo...)
	}
	return cur, nil
}

func splitPath(p string) []string {
	return strings.Split(p, string(filepath.Separator))
}
