package files

import (
	"bufio"
	"context"
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
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/weir-dev/weir/internal/setdigest"
	"github.com/weir-dev/weir/runner/contract"
)

// This file holds the staged file sink of a partition run (a bounded job
// run with `--partition P`). For a configured path DIR/NAME.EXT:
//
//	DIR/NAME.EXT.versions/P/JOB/NAME-wWW.EXT   the run's output, a file per
//	                                           worker: one version of the
//	                                           partition, a directory per run
//	DIR/NAME.EXT.versions/P/JOB/.NAME-wWW.EXT.inprogress / .pending
//	                                           what a worker writes, and its
//	                                           final share awaiting the
//	                                           final checkpoint
//	DIR/NAME.EXT.manifest.json                 the publication manifest: the
//	                                           version each partition reads
//	                                           and the publication log
//	DIR/NAME.EXT                               the published view: every
//	                                           partition's published rows
//	                                           (JSON lines, CSV; writeView)
//	DIR/.NAME.EXT.weir                         the owner file
//	DIR/.NAME.EXT.publish.lock                 flock-ed while a publication
//	                                           reads and rewrites the
//	                                           manifest (publish_lock.go)
//
// A worker's rows stay in its hidden in-progress file until its final
// share (the end of the bounded input); the final checkpoint commits the
// shares (pending renamed to final, the directory synced). When the run
// ends DONE (Close after the final commit) the sink publishes: it reads
// the manifest, and when the publication log holds (job name, partition,
// manifest digest) it publishes nothing; otherwise it writes a new manifest
// whose entry for P names this run's version (its files with sizes,
// SHA-256 digests and row counts, the output digest, the rows of the
// version it replaces) and whose log gains the entry, through a temporary
// file renamed over the manifest: readers see the old manifest or the new,
// never half. A crash before the rename leaves the manifest as it was and
// the version complete (a restart re-commits the final checkpoint and
// publishes); after it, the log entry makes the restart publish nothing. A
// run that fails or is cancelled publishes nothing: its version stays,
// staged. A partition run reads files, which restart from their beginning
// after a crash mid-run (the job then runs again without checkpoints, into
// fresh in-progress files), so nothing a dead attempt wrote is published.

// LayoutPartitions is the layout of a partition run's staged file sink
// (the owner file's layout): versions per partition and a publication
// manifest next to the configured path.
const LayoutPartitions = "partitions"

// ManifestFormat is the format tag of a publication manifest.
const ManifestFormat = "weir.file-publications/1"

// publishCrashEnv, set to "before-publish" or "after-publish" in a test's
// server, kills the process (SIGKILL) at that point of a publication:
// the crash tests' seeded points (the SQL sink's are the same); "mid-run"
// kills it at a barrier in the middle of a run.
const publishCrashEnv = "WEIR_TEST_PUBLISH_CRASH"

// Stage identifies a partition run for its staged file sink.
type Stage struct {
	// JobName, JobID, Partition and ManifestDigest identify the run in the
	// publication log; (JobName, Partition, ManifestDigest) is published at
	// most once.
	JobName, JobID, Partition, ManifestDigest string
	// Shadow makes the run stage only: its version is kept, the manifest
	// is not touched.
	Shadow bool
}

// PublicationManifest is the content of DIR/NAME.EXT.manifest.json.
type PublicationManifest struct {
	Format string `json:"format"`
	// Target is the configured sink path's base name.
	Target string `json:"target"`
	// Partitions maps each published partition to the version readers
	// read.
	Partitions map[string]*Publication `json:"partitions"`
	// Log is the publication log, oldest first: every publication ever
	// made to the target.
	Log []*Publication `json:"publications"`
}

// Publication is one published version of a partition.
type Publication struct {
	JobName        string `json:"job_name"`
	Partition      string `json:"partition_id"`
	ManifestDigest string `json:"manifest_digest"`
	JobID          string `json:"job_id"`
	// Version is the version directory, relative to the manifest's
	// directory.
	Version string `json:"version"`
	// Files are the version's files, paths relative to the manifest's
	// directory.
	Files        []PublishedFile `json:"files"`
	OutputDigest string          `json:"output_digest"`
	RowCount     int64           `json:"row_count"`
	ReplacedRows int64           `json:"replaced_rows"`
	PublishedAt  time.Time       `json:"published_at"`
	// PrunedAt is when weir partitions prune removed the version's
	// directory, after a later publication of the partition replaced it
	// (RemoveReplacedVersion); nil while the directory is kept.
	PrunedAt *time.Time `json:"pruned_at,omitempty"`
}

// PublishedFile is one file of a published version.
type PublishedFile struct {
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
	Rows   int64  `json:"rows"`
}

// ManifestPath returns the publication manifest of sink path p.
func ManifestPath(p string) string { return p + ".manifest.json" }

// VersionsDir returns the directory holding the versions of sink path p.
func VersionsDir(p string) string { return p + ".versions" }

var componentSafe = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// pathComponent makes s one safe path component: characters other than
// letters, digits, '.', '_' and '-' become '_', and a leading '.' too (no
// hidden name, no "..").
func pathComponent(s string) string {
	s = componentSafe.ReplaceAllString(s, "_")
	if s == "" || s[0] == '.' {
		s = "_" + s
	}
	return s
}

// VersionDir returns the version directory of the run job of partition
// for sink path p.
func VersionDir(p, partition, job string) string {
	return filepath.Join(VersionsDir(p), pathComponent(partition), pathComponent(job))
}

// ReadPublicationManifest reads the publication manifest of sink path p;
// found is false when there is none yet.
func ReadPublicationManifest(p string) (m *PublicationManifest, found bool, err error) {
	b, err := os.ReadFile(ManifestPath(p))
	if errors.Is(err, fs.ErrNotExist) {
		return &PublicationManifest{Format: ManifestFormat, Target: filepath.Base(p), Partitions: map[string]*Publication{}}, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading the publication manifest of %s: %w", p, err)
	}
	m = &PublicationManifest{}
	if err := json.Unmarshal(b, m); err != nil {
		return nil, false, fmt.Errorf("reading the publication manifest %s: %w", ManifestPath(p), err)
	}
	if m.Format != ManifestFormat {
		return nil, false, fmt.Errorf("the publication manifest %s has format %q; this weir reads %q", ManifestPath(p), m.Format, ManifestFormat)
	}
	if m.Partitions == nil {
		m.Partitions = map[string]*Publication{}
	}
	return m, true, nil
}

// Published returns the log entry of (jobName, partition, digest), or nil.
func (m *PublicationManifest) Published(jobName, partition, digest string) *Publication {
	for _, p := range m.Log {
		if p.JobName == jobName && p.Partition == partition && p.ManifestDigest == digest {
			return p
		}
	}
	return nil
}

// CheckPartitionOutput says whether a partition run of owner may stage
// and publish at sink path p; an *OutputError when it may not: another job
// name owns p, p holds a file weir did not create, or p holds the plain
// output of a batch job of the name. A shadow run never publishes or
// claims p: it only needs p not to hold another kind of output.
func CheckPartitionOutput(p string, owner Owner, shadow bool) error {
	o, found, exists, err := readOutput(p)
	if err != nil {
		return err
	}
	switch {
	case !found && exists:
		return &OutputError{Path: p}
	case found && o.Layout != LayoutPartitions && exists:
		return &OutputError{Path: p, Owner: &o, Earlier: o.JobName == owner.JobName}
	case found && o.JobName != owner.JobName && !shadow:
		return &OutputError{Path: p, Owner: &o}
	}
	return nil
}

// StagedSink is a partition run's staged file sink (see the layout
// above). It is a contract.TransactionalSink whose parts are committed at
// the run's final checkpoint only, and a contract.AbortingSink. Lock
// order: a worker's partWriter.mu before the sink's mu (openLocked takes
// mu under the writer's lock); mu is never held while a writer's is
// taken. The publication lock (a flock, publish_lock.go) is taken with
// neither held.
type StagedSink struct {
	cfg   SinkConfig
	stage Stage
	dir   string // the version directory
	stem  string
	ext   string

	claim    sync.Once
	claimErr error
	// digestMemory bounds the rows describeVersion holds in memory (0:
	// setdigest.DefaultMemory); tests lower it.
	digestMemory int

	mu struct {
		sync.Mutex
		files workerFiles
		// final marks the workers whose final share was pre-committed.
		final map[int]bool
		// committed: a final share was committed (the run's end, or the
		// replay of a checkpoint before this execution started).
		committed bool
		// own: this execution wrote or staged rows.
		own bool
		// barriers counts the barriers after rows arrived (the mid-run
		// crash point of the crash tests only).
		barriers int
	}
}

// NewStagedSink returns the staged sink of a partition run writing cfg's
// format for cfg.Path. cfg.Owner must be set.
func NewStagedSink(cfg SinkConfig, st Stage) (*StagedSink, error) {
	if cfg.Owner == nil {
		return nil, errors.New("a staged file sink needs the job it writes for")
	}
	if st.Partition == "" {
		return nil, errors.New("a staged file sink needs the partition it stages")
	}
	base := filepath.Base(cfg.Path)
	s := &StagedSink{cfg: cfg, stage: st, dir: VersionDir(cfg.Path, st.Partition, st.JobID)}
	s.ext = filepath.Ext(base)
	s.stem = strings.TrimSuffix(base, s.ext)
	s.mu.final = map[int]bool{}
	return s, nil
}

// Path returns the configured path.
func (s *StagedSink) Path() string { return s.cfg.Path }

// Dir returns the version directory the run stages in.
func (s *StagedSink) Dir() string { return s.dir }

func (s *StagedSink) finalName(worker int) string {
	return fmt.Sprintf("%s-w%02d%s", s.stem, worker, s.ext)
}

func (s *StagedSink) inProgress(worker int) string {
	return filepath.Join(s.dir, "."+s.finalName(worker)+".inprogress")
}

func (s *StagedSink) pending(final string) string {
	return filepath.Join(s.dir, "."+final+".pending")
}

// prepare records the owner (unless a shadow run) and creates the
// version directory, once.
func (s *StagedSink) prepare() error {
	s.claim.Do(func() {
		if err := s.cfg.Roots.Check(s.dir); err != nil {
			s.claimErr = err
			return
		}
		if err := os.MkdirAll(s.dir, dirMode(s.cfg.mode())); err != nil {
			s.claimErr = fmt.Errorf("creating the version directory %s: %w", s.dir, err)
			return
		}
		if !s.stage.Shadow {
			s.claimErr = claimOutput(s.cfg.Path, *s.cfg.Owner, LayoutPartitions, s.cfg.mode())
		}
	})
	return s.claimErr
}

func (s *StagedSink) worker(w int) (*partWriter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.files.get(w, s.cfg.Path, s.inProgress)
}

func (s *StagedSink) openLocked(pw *partWriter) error {
	if pw.f != nil {
		return nil
	}
	if err := s.prepare(); err != nil {
		return err
	}
	if err := s.startOwn(); err != nil {
		return err
	}
	// Truncated: what an earlier attempt left there was never committed.
	f, err := os.OpenFile(pw.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, s.cfg.mode())
	if err != nil {
		return fmt.Errorf("creating %s: %w", pw.path, err)
	}
	pw.f = f
	return pw.enc.init(f, &s.cfg)
}

// startOwn notes that this execution writes. When a checkpoint of an
// earlier attempt was replayed into this sink first (Commit before any
// write), this execution runs again from the beginning of its input
// (files cannot resume): the earlier attempt's committed files are
// removed so that its rows are not published twice.
func (s *StagedSink) startOwn() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.own {
		return nil
	}
	s.mu.own = true
	if !s.mu.committed {
		return nil
	}
	s.mu.committed = false
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("listing the version %s: %w", s.dir, err)
	}
	for _, e := range entries {
		if n := e.Name(); !strings.HasPrefix(n, ".") && e.Type().IsRegular() {
			if err := os.Remove(filepath.Join(s.dir, n)); err != nil {
				return fmt.Errorf("removing what an earlier attempt staged: %w", err)
			}
		}
	}
	return syncDir(s.dir)
}

// Write appends the rows of elems to worker's in-progress file.
func (s *StagedSink) Write(_ context.Context, worker int, elems []contract.Element) error {
	_, err := s.write(worker, elems, nil, false)
	return err
}

// WriteRejecting is Write, except that a value the format cannot hold is
// a reject instead of an error (contract.RejectingSink).
func (s *StagedSink) WriteRejecting(_ context.Context, worker int, elems []contract.Element, rejects []contract.SinkReject) ([]contract.SinkReject, error) {
	return s.write(worker, elems, rejects, true)
}

func (s *StagedSink) write(worker int, elems []contract.Element, rejects []contract.SinkReject, reject bool) ([]contract.SinkReject, error) {
	return writeTo(s.worker, s.openLocked, s.cfg.Path, worker, elems, rejects, reject)
}

// PreCommit is a barrier before the input's end: the rows stay in the
// worker's in-progress file, published only with the whole run (a
// partition run's sources restart from their beginning after a crash).
func (s *StagedSink) PreCommit(_ context.Context, worker int, _ uint64) ([]byte, error) {
	if os.Getenv(publishCrashEnv) == "mid-run" {
		// The crash test's point in the middle of a run: the second
		// barrier after rows arrived, once a checkpoint is durable.
		s.mu.Lock()
		pw := s.mu.files.writers[worker]
		s.mu.Unlock()
		wrote := false
		if pw != nil {
			pw.mu.Lock() // before mu (the lock order)
			wrote = pw.f != nil
			pw.mu.Unlock()
		}
		s.mu.Lock()
		if wrote {
			s.mu.barriers++
		}
		n := s.mu.barriers
		s.mu.Unlock()
		if n == 2 {
			crashAt("mid-run")
		}
	}
	return nil, nil
}

// PreCommitFinal stages worker's rows (its whole share) as its pending
// file, which the returned part names (contract.FinalPreCommitter).
func (s *StagedSink) PreCommitFinal(_ context.Context, worker int, _ uint64) ([]byte, error) {
	pw, err := s.worker(worker)
	if err != nil {
		return nil, err
	}
	pw.mu.Lock()
	defer pw.mu.Unlock()
	s.mu.Lock()
	s.mu.final[worker] = true
	s.mu.Unlock()
	if pw.f == nil {
		return nil, nil // the worker received nothing: no file
	}
	final := s.finalName(worker)
	if err := s.finishLocked(pw, s.pending(final)); err != nil {
		return nil, err
	}
	if err := syncDir(s.dir); err != nil {
		return nil, err
	}
	return []byte(final), nil
}

// finishLocked flushes, syncs and closes pw's file and renames it to to;
// a worker that wrote nothing has no file.
func (s *StagedSink) finishLocked(pw *partWriter, to string) error {
	if pw.f == nil {
		return nil
	}
	f := pw.f
	pw.f = nil
	err := pw.enc.flush()
	if err == nil {
		err = f.Sync()
	}
	if err := errors.Join(err, f.Close()); err != nil {
		return fmt.Errorf("writing %s: %w", pw.path, err)
	}
	if err := os.Rename(pw.path, to); err != nil {
		return fmt.Errorf("staging a part of %s: %w", s.cfg.Path, err)
	}
	return nil
}

// Commit renames the final shares' pending files to their final names in
// the version directory (a replay finds them there and does nothing).
func (s *StagedSink) Commit(_ context.Context, epoch uint64, parts [][]byte) error {
	renamed := false
	for _, p := range parts {
		if len(p) == 0 {
			continue
		}
		final := string(p)
		if final != filepath.Base(final) || strings.HasPrefix(final, ".") {
			return fmt.Errorf("committing epoch %d of %s: bad part name %q", epoch, s.cfg.Path, final)
		}
		s.mu.Lock()
		s.mu.committed = true
		s.mu.Unlock()
		r, err := commitPending(epoch, s.cfg.Path, s.pending(final), filepath.Join(s.dir, final))
		if err != nil {
			return err
		}
		renamed = renamed || r
	}
	if renamed {
		return syncDir(s.dir)
	}
	return nil
}

// Close ends a run whose whole input arrived: an execution without
// checkpoints first makes every worker's rows its final file; then the
// version is published (unless the run is a shadow run).
func (s *StagedSink) Close(ctx context.Context) error {
	s.mu.Lock()
	workers, open := s.mu.files.close()
	final, committed := s.mu.final, s.mu.committed
	s.mu.Unlock()
	if !open {
		return nil
	}
	if !committed {
		// Without checkpoints (or a run that staged nothing): this
		// execution's rows are the whole output.
		if err := s.prepare(); err != nil {
			return err
		}
		for w, pw := range workers {
			if final[w] {
				continue
			}
			pw.mu.Lock()
			err := s.finishLocked(pw, filepath.Join(s.dir, s.finalName(w)))
			pw.mu.Unlock()
			if err != nil {
				return err
			}
		}
		if err := syncDir(s.dir); err != nil {
			return err
		}
	}
	if s.stage.Shadow {
		return nil
	}
	if err := s.publish(ctx); err != nil {
		return fmt.Errorf("publishing partition %s of %s: %w", s.stage.Partition, s.cfg.Path, err)
	}
	return nil
}

// Abort closes the files of a run that stopped short; nothing is
// published and the version stays staged (contract.AbortingSink).
func (s *StagedSink) Abort(context.Context) error {
	s.mu.Lock()
	workers, open := s.mu.files.close()
	s.mu.Unlock()
	if !open {
		return nil
	}
	var errs []error
	for _, pw := range workers {
		pw.mu.Lock()
		if pw.f != nil {
			errs = append(errs, pw.f.Close())
			pw.f = nil
		}
		pw.mu.Unlock()
	}
	return errors.Join(errs...)
}

// publish publishes the version directory (see the layout above).
func (s *StagedSink) publish(ctx context.Context) error {
	m, unlock, err := s.lockedManifest(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	st := s.stage
	if done := m.Published(st.JobName, st.Partition, st.ManifestDigest); done != nil {
		if done.JobID != st.JobID {
			// A rerun of a published manifest: nothing new; its own
			// version is dropped, as the SQL sink drops its staging table.
			if err := os.RemoveAll(s.dir); err != nil {
				return fmt.Errorf("removing the unpublished version %s: %w", s.dir, err)
			}
		}
		// A crash may have come between the manifest and the view.
		return s.writeView(m)
	}
	base := filepath.Dir(s.cfg.Path)
	rel := func(p string) string {
		r, err := filepath.Rel(base, p)
		if err != nil {
			return p
		}
		return filepath.ToSlash(r)
	}
	files, digest, rows, err := s.describeVersion(ctx, rel)
	if err != nil {
		return err
	}
	pub := &Publication{JobName: st.JobName, Partition: st.Partition, ManifestDigest: st.ManifestDigest, JobID: st.JobID,
		Version: rel(s.dir), Files: files, OutputDigest: digest, RowCount: rows, PublishedAt: s.cfg.now().UTC()}
	if prev := m.Partitions[st.Partition]; prev != nil {
		pub.ReplacedRows = prev.RowCount
	}
	m.Partitions[st.Partition] = pub
	m.Log = append(m.Log, pub)
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	crashAt("before-publish")
	if err := writeFileAtomic(ManifestPath(s.cfg.Path), append(b, '\n'), s.cfg.mode()); err != nil {
		return err
	}
	crashAt("after-publish")
	return s.writeView(m)
}

// writeView makes the configured path the published view: the rows of
// every partition's published version, partitions in order, written to a
// temporary file renamed over the path (a reader sees the old view or the
// new). JSON lines are concatenated; CSV keeps the first file's header
// and every file's rows, and is not written when the versions' headers
// differ (the path is then removed: the manifest names the versions).
// Parquet and Avro files are complete only as themselves: no view, the
// manifest names the files. It is derived from the manifest, so writing
// it again is harmless.
func (s *StagedSink) writeView(m *PublicationManifest) error {
	if s.cfg.Format != JSONLines && s.cfg.Format != CSV && s.cfg.Format != Text {
		return nil
	}
	parts := make([]string, 0, len(m.Partitions))
	for p := range m.Partitions {
		parts = append(parts, p)
	}
	sort.Strings(parts)
	base := filepath.Dir(s.cfg.Path)
	var paths []string
	for _, p := range parts {
		for _, f := range m.Partitions[p].Files {
			paths = append(paths, filepath.Join(base, filepath.FromSlash(f.Path)))
		}
	}
	// Streamed file by file into the temporary view: a view of many
	// partitions is never held in memory (and JSON lines are copied by the
	// kernel where it can).
	written, err := writeFileAtomicWith(s.cfg.Path, s.cfg.mode(), func(out *os.File) (bool, error) {
		header := ""
		for _, p := range paths {
			ok, err := s.appendToView(out, p, &header)
			if err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("the published view: %w", err)
	}
	if !written {
		// The versions' CSV headers differ: no view (the manifest names
		// the versions).
		if err := os.Remove(s.cfg.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing the published view %s: %w", s.cfg.Path, err)
		}
	}
	return nil
}

// appendToView appends the published file p to the view being written to
// out. A CSV file that holds anything starts with its header: the first
// one is kept (in *header), later ones must be the same and are dropped;
// false when one differs.
func (s *StagedSink) appendToView(out *os.File, p string, header *string) (bool, error) {
	in, err := os.Open(p)
	if err != nil {
		return false, err
	}
	defer in.Close()
	if s.cfg.Format != CSV {
		_, err := io.Copy(out, in)
		return err == nil, err
	}
	r := bufio.NewReader(in)
	h, err := r.ReadString('\n')
	switch {
	case errors.Is(err, io.EOF) && h == "":
		return true, nil // an empty file: no header, nothing
	case err != nil && !errors.Is(err, io.EOF):
		return false, err
	}
	h = strings.TrimSuffix(h, "\n")
	switch {
	case *header == "":
		*header = h
		if _, err := io.WriteString(out, h+"\n"); err != nil {
			return false, err
		}
	case h != *header:
		return false, nil
	}
	_, err = io.Copy(out, r)
	return err == nil, err
}

// describeVersion lists the version's files (sorted) with their sizes,
// digests and rows, and the output digest: the SHA-256 of the rows as a
// set (each row as JSON with sorted fields, the lines sorted), so two
// versions holding the same rows in other files or orders agree. The rows
// are sorted in bounded memory (package setdigest): a partition of any size is
// described without holding it.
func (s *StagedSink) describeVersion(ctx context.Context, rel func(string) string) ([]PublishedFile, string, int64, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, "", 0, fmt.Errorf("listing the version %s: %w", s.dir, err)
	}
	var out []PublishedFile
	d := setdigest.New(s.digestMemory)
	defer d.Close()
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") || !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(s.dir, n)
		pf := PublishedFile{Path: rel(p)}
		if pf.Bytes, pf.SHA256, err = fileDigest(p); err != nil {
			return nil, "", 0, err
		}
		err := Records(ctx, p, s.cfg.Format, func(r map[string]any) error {
			b, err := json.Marshal(r)
			if err != nil {
				return err
			}
			pf.Rows++
			return d.Add(string(b))
		})
		if err != nil {
			return nil, "", 0, fmt.Errorf("reading the staged %s: %w", p, err)
		}
		out = append(out, pf)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	sum, err := d.Sum()
	if err != nil {
		return nil, "", 0, err
	}
	return out, sum, d.Len(), nil
}

// fileDigest returns p's size and "sha256:" hex digest.
func fileDigest(p string) (int64, string, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, "", fmt.Errorf("reading %s: %w", p, err)
	}
	return n, "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// crashAt kills the process when the crash tests ask for point.
func crashAt(point string) {
	if os.Getenv(publishCrashEnv) == point {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}

// StagedVersion returns the sink's path and its version directory, and
// whether that exists (contract.PublishingFileSink).
func (s *StagedSink) StagedVersion() (target, version string, staged bool) {
	fi, err := os.Stat(s.dir)
	return s.cfg.Path, s.dir, err == nil && fi.IsDir()
}

// FilePublications reads the sink's publication manifest
// (contract.PublishingFileSink).
func (s *StagedSink) FilePublications() (contract.FilePublications, error) {
	out := contract.FilePublications{Manifest: ManifestPath(s.cfg.Path)}
	m, _, err := ReadPublicationManifest(s.cfg.Path)
	if err != nil {
		return out, err
	}
	base := filepath.Dir(s.cfg.Path)
	for _, p := range m.Log {
		out.Published = append(out.Published, contract.FilePublication{Partition: p.Partition, JobID: p.JobID, ManifestDigest: p.ManifestDigest,
			Version: filepath.Join(base, filepath.FromSlash(p.Version)), OutputDigest: p.OutputDigest, Rows: p.RowCount, Replaced: p.ReplacedRows,
			PublishedAt: p.PublishedAt.Format(time.RFC3339Nano), Pruned: p.PrunedAt != nil})
	}
	return out, nil
}
