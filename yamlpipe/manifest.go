package yamlpipe

import (
	"fmt"

	"github.com/weir-dev/weir/manifest"
)

// ManifestStore gives the job service's input manifests (package
// manifest) to the loader.
type ManifestStore interface {
	// Manifest returns manifest (name, partition); an error wrapping
	// manifest.ErrNotFound when there is none.
	Manifest(name, partition string) (*manifest.Manifest, error)
}

// fileInput is what a file source reads: a path (a file or a glob), or the
// files of an input manifest.
type fileInput struct {
	// path is the path or glob; for a manifest, its first file (what a
	// schema is read from at load time).
	path string
	// m and files are the manifest and the files of it the source reads
	// (its main files, or one side input's); nil for a path.
	m     *manifest.Manifest
	files []manifest.File
	// identity is the source's identity in the graph (a path, or
	// "manifest NAME[/SIDE]").
	identity string
}

// fileInput reads a file source's input: `path`, or `manifest: NAME` (with
// `side_input: S` for one of the manifest's side inputs) read at the job's
// partition. A job bound to a manifest (JobEnv.Manifest, `weir run
// --manifest M --partition P`) reads M in every file source, whatever its
// `path` or `manifest` says; `side_input` still picks one of M's side
// inputs. The manifest's files are checked (size and digest) before the
// pipeline is built: a changed file is an error wrapping
// manifest.ErrChanged.
func (l *loader) fileInput(t *transformSpec) (fileInput, error) {
	name, mn, err := l.optStr(t.config, "manifest")
	if err != nil {
		return fileInput{}, err
	}
	side, sn, err := l.optStr(t.config, "side_input")
	if err != nil {
		return fileInput{}, err
	}
	job := l.opts.Job
	if job != nil && job.Manifest != "" {
		name = job.Manifest
	}
	if name == "" {
		if sn != nil {
			return fileInput{}, l.errf(sn, "%s side_input needs manifest: NAME (the manifest whose side input it reads)", t.typ)
		}
		path, pn, err := l.requireStr(t.config, "path", t.typ+" config")
		if err != nil {
			return fileInput{}, l.errf(t.config, "%s config needs \"path\" (a file or glob) or \"manifest\" (an input manifest, weir manifests create)", t.typ)
		}
		path = l.path(path)
		if err := l.checkPath(t, pn, path, true); err != nil {
			return fileInput{}, err
		}
		return fileInput{path: path, identity: path}, nil
	}
	at := mn
	if at == nil {
		at = t.typNode
	}
	if t.config.Get("path") != nil && (job == nil || job.Manifest == "") {
		return fileInput{}, l.errf(mn, "%s reads either a path or a manifest, not both: remove one", t.typ)
	}
	if job == nil || job.Manifests == nil {
		e := l.errf(at, "%s reads manifest %s: input manifests live in a weir server; run it with 'weir run FILE --job-name NAME --partition P'", t.typ, name)
		e.(*Error).Err = ErrNeedsServer
		return fileInput{}, e
	}
	if job.Partition == "" {
		return fileInput{}, l.errf(at, "%s reads manifest %s: give the partition to read with 'weir run --partition P'", t.typ, name)
	}
	m, err := job.Manifests.Manifest(name, job.Partition)
	if err != nil {
		return fileInput{}, l.wrapf(at, err, "%s manifest", t.typ)
	}
	in := fileInput{m: m, files: m.Files, identity: "manifest " + name}
	if l.manifestDigest == "" {
		l.manifestDigest = m.Digest
	}
	if side != "" {
		f, ok := m.Side(side)
		if !ok {
			return fileInput{}, l.errf(sn, "manifest %s partition %s has no side input %q", name, job.Partition, side)
		}
		in.files, in.identity = []manifest.File{f}, in.identity+"/"+side
	}
	if len(in.files) == 0 {
		return fileInput{}, l.errf(at, "manifest %s partition %s has no files", name, job.Partition)
	}
	for _, f := range in.files {
		if err := l.checkPath(t, nil, f.Path, false); err != nil {
			return fileInput{}, err
		}
	}
	if !l.opts.GraphOnly {
		if err := m.Verify(in.files); err != nil {
			return fileInput{}, l.wrapf(at, err, "%s", t.typ)
		}
	}
	in.path = in.files[0].Path
	return in, nil
}

// String describes the input in messages.
func (in fileInput) String() string {
	if in.m == nil {
		return in.path
	}
	return fmt.Sprintf("manifest %s partition %s", in.m.Name, in.m.Partition)
}
