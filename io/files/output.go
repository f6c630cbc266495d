package files

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// This file decides who may write a sink's path. A sink of a job records
// the job in an owner file next to its path (OwnerFile) before it creates
// any output; the job service checks it at submission (CheckOutput), so
// that no job overwrites a file weir did not create, another job name's
// output, or what an earlier job of its own name wrote.

// ErrOutputExists marks a sink path that holds output the job may not
// touch (OutputError). Callers match it with errors.Is; the job service
// answers it as OUTPUT_EXISTS.
var ErrOutputExists = errors.New("output exists")

// Layouts of a sink's output, recorded in its owner file.
const (
	// LayoutFile: one file at the configured path (a bounded run).
	LayoutFile = "file"
	// LayoutParts: part files next to the configured path, one per worker
	// and checkpoint epoch (a streaming job, EpochSink).
	LayoutParts = "parts"
)

// Owner is the job a sink writes for.
type Owner struct {
	JobName    string `json:"job_name"`
	JobID      string `json:"job_id"`
	Generation int64  `json:"generation"`
	// Layout is LayoutFile or LayoutParts (set by the sink).
	Layout string `json:"layout,omitempty"`
}

// OwnerFile returns the owner file of sink path p: ".NAME.weir" in p's
// directory.
func OwnerFile(p string) string {
	return filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".weir")
}

// ReadOwner returns the owner recorded for sink path p; found is false
// when there is no owner file.
func ReadOwner(p string) (o Owner, found bool, err error) {
	b, err := os.ReadFile(OwnerFile(p))
	if errors.Is(err, fs.ErrNotExist) {
		return Owner{}, false, nil
	}
	if err != nil {
		return Owner{}, false, fmt.Errorf("reading the owner of %s: %w", p, err)
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return Owner{}, false, fmt.Errorf("reading the owner of %s (%s): %w", p, OwnerFile(p), err)
	}
	return o, true, nil
}

// OutputError says why a job may not write a sink's path. It matches
// ErrOutputExists.
type OutputError struct {
	Path string
	// Owner is the job that wrote the path; nil for a file weir did not
	// create.
	Owner *Owner
	// Earlier is set when Owner is an earlier job of the same name.
	Earlier bool
}

// Error says what holds the path and what to do.
func (e *OutputError) Error() string {
	switch {
	case e.Owner == nil:
		return fmt.Sprintf("sink path %s holds a file weir did not create; weir never overwrites it: remove it or choose another path", e.Path)
	case e.Earlier:
		return fmt.Sprintf("sink path %s holds the output of an earlier job of %s (job %s); a new job never overwrites it: remove it (and %s) or choose another path",
			e.Path, e.Owner.JobName, e.Owner.JobID, filepath.Base(OwnerFile(e.Path)))
	default:
		return fmt.Sprintf("sink path %s holds the output of job %s (job %s); choose another path, or remove it and %s",
			e.Path, e.Owner.JobName, e.Owner.JobID, filepath.Base(OwnerFile(e.Path)))
	}
}

// Is makes errors.Is(err, ErrOutputExists) hold.
func (e *OutputError) Is(target error) bool { return target == ErrOutputExists }

// CheckOutput says whether the job owner may write sink path p with layout
// (LayoutFile or LayoutParts); an *OutputError when it may not:
//   - another job name owns p (its owner file says so);
//   - p (or, for parts, a part file) exists and no owner file says weir
//     wrote it;
//   - with LayoutFile, p holds data an earlier job of owner's name wrote:
//     a new job never truncates it. The same job (resumed after a restart)
//     may, and so may a new job when the file is empty (its earlier job
//     failed before it wrote anything: there is nothing to lose).
//
// A streaming job of the name writes new part files (named with its
// generation) and may therefore share a path with its name's earlier jobs.
func CheckOutput(p string, owner Owner, layout string) error {
	o, found, exists, err := readOutput(p)
	if err != nil {
		return err
	}
	switch {
	case found && o.JobName != owner.JobName:
		return &OutputError{Path: p, Owner: &o}
	case !found && exists:
		return &OutputError{Path: p}
	case found && layout == LayoutFile && o.JobID != owner.JobID && holdsData(p):
		return &OutputError{Path: p, Owner: &o, Earlier: true}
	}
	return nil
}

// readOutput returns the owner recorded for sink path p (found: there is
// an owner file) and whether p or a part file of it exists.
func readOutput(p string) (o Owner, found, exists bool, err error) {
	if o, found, err = ReadOwner(p); err != nil {
		return o, found, false, err
	}
	exists, err = outputExists(p)
	return o, found, exists, err
}

// outputExists says whether p or a part file derived from it exists.
func outputExists(p string) (bool, error) {
	if fileExists(p) {
		return true, nil
	}
	m, err := filepath.Glob(partGlob(p))
	if err != nil {
		return false, fmt.Errorf("looking for the part files of %s: %w", p, err)
	}
	return len(m) > 0, nil
}

// holdsData says whether p exists and is anything but an empty regular
// file.
func holdsData(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && !(fi.Mode().IsRegular() && fi.Size() == 0)
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// claimOutput records owner (with layout) as the writer of p, unless its
// owner file already names owner's job; it refuses, with an *OutputError,
// a path another job name owns (claimed since the submission).
func claimOutput(p string, owner Owner, layout string, mode fs.FileMode) error {
	o, found, err := ReadOwner(p)
	if err != nil {
		return err
	}
	if found && o.JobName != owner.JobName {
		return &OutputError{Path: p, Owner: &o}
	}
	if found && o.JobID == owner.JobID && o.Layout == layout {
		return nil
	}
	owner.Layout = layout
	b, err := json.Marshal(owner)
	if err != nil {
		return err
	}
	return writeFileAtomic(OwnerFile(p), append(b, '\n'), mode)
}

// writeFileAtomic writes b to path through a temporary file renamed over
// it, synced, so a reader sees the old content or the new, never half.
func writeFileAtomic(path string, b []byte, mode fs.FileMode) error {
	_, err := writeFileAtomicWith(path, mode, func(f *os.File) (bool, error) {
		_, err := f.Write(b)
		return true, err
	})
	return err
}

// writeFileAtomicWith is writeFileAtomic for content that write streams
// into the temporary file (never all in memory). When write returns false
// the temporary file is removed and path left as it is; the result says
// whether path was replaced.
func writeFileAtomicWith(path string, mode fs.FileMode, write func(*os.File) (bool, error)) (bool, error) {
	// A temporary file of its own: several sinks (or workers) may claim
	// the same path at once.
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return false, fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	if err := f.Chmod(mode); err != nil {
		f.Close()
		os.Remove(tmp)
		return false, fmt.Errorf("writing %s: %w", path, err)
	}
	keep, werr := write(f)
	if werr == nil && keep {
		werr = f.Sync()
	}
	if err := errors.Join(werr, f.Close()); err != nil || !keep {
		os.Remove(tmp)
		if err != nil {
			return false, fmt.Errorf("writing %s: %w", path, err)
		}
		return false, nil
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return false, fmt.Errorf("writing %s: %w", path, err)
	}
	return true, syncDir(filepath.Dir(path))
}

// syncDir makes the renames and creations in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}
