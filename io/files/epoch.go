package files

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/weir-dev/weir/runner/contract"
)

// This file holds the sink of streaming jobs: it commits per checkpoint
// epoch (contract.TransactionalSink), so what it wrote becomes visible once
// a checkpoint covers it, exactly once, and a crash between checkpoints
// leaves nothing half-written in sight.
//
// Layout, for a configured path DIR/NAME.EXT, job generation G, epoch E and
// worker W:
//
//	DIR/NAME-gGGGG-eEEEEEEEE-wWW.EXT   a finalised part: the rows worker W
//	                                   received in epoch E (a complete JSON
//	                                   lines or CSV file, with its header)
//	DIR/.NAME-gGGGG-wWW.EXT.inprogress what worker W is writing now
//	DIR/.NAME-...-wWW.EXT.pending      a part pre-committed at a barrier,
//	                                   waiting for its checkpoint
//	DIR/.NAME.EXT.weir                 the owner file (OwnerFile)
//
// At a barrier the worker's in-progress file is flushed, synced and renamed
// to its pending name, which the checkpoint records; once the checkpoint is
// durable Commit renames each pending part to its final name (atomic, then
// the directory is synced). A replay of the commit finds the final name and
// does nothing; a crash before the checkpoint was durable leaves a pending
// or in-progress file that the replayed epoch overwrites. Epochs in which a
// worker received nothing produce no file. Part names sort by generation,
// then epoch, then worker, so `cat DIR/NAME-g*.EXT` reads a job name's
// output in commit order.

// EpochSink writes part files per checkpoint epoch (see the layout above).
// Write may be called concurrently from several workers; each worker has
// its own file. Without checkpoints (an execution that cannot take them)
// Close finalises every worker's rows as the parts of the epoch after the
// last one seen.
type EpochSink struct {
	cfg              SinkConfig
	dir, stem, ext   string
	generationPrefix string

	// claim records the owner once for all workers (claimErr its outcome).
	claim    sync.Once
	claimErr error

	mu struct {
		sync.Mutex
		files    workerFiles
		maxEpoch uint64
		// parts are the rolling parts this sink created, by in-progress
		// path: what its commits covered of each (rolling.go).
		parts map[string]*rollingPart
	}
}

// partWriter is one worker's in-progress file.
type partWriter struct {
	mu   sync.Mutex
	f    *os.File
	path string
	enc  encoder
	// A rolling part's: when it was opened, the first epoch it holds, and
	// the bytes written to its file by the last sync.
	opened time.Time
	first  uint64
	size   int64
}

// NewEpochSink returns a sink writing part files next to cfg.Path.
// cfg.Owner must be set: the generation names the parts.
func NewEpochSink(cfg SinkConfig) (*EpochSink, error) {
	if cfg.Owner == nil {
		return nil, errors.New("a part-file sink needs the job it writes for")
	}
	s := &EpochSink{cfg: cfg, dir: filepath.Dir(cfg.Path)}
	base := filepath.Base(cfg.Path)
	s.ext = filepath.Ext(base)
	s.stem = strings.TrimSuffix(base, s.ext)
	s.generationPrefix = fmt.Sprintf("%s-g%04d", s.stem, cfg.Owner.Generation)
	s.mu.parts = map[string]*rollingPart{}
	if cfg.Rolling.On() && cfg.Format != JSONLines && cfg.Format != CSV && cfg.Format != Text {
		return nil, errors.New("rolling parts need an appendable format (JSON lines, CSV or text): a Parquet or Avro part is complete only when closed")
	}
	return s, nil
}

// Path returns the configured path the parts are named after.
func (s *EpochSink) Path() string { return s.cfg.Path }

// PartName returns the base name of the part of worker in epoch for a sink
// configured with path and generation.
func PartName(path string, generation int64, epoch uint64, worker int) string {
	base := filepath.Base(path)
	ext := filepath.Ext(base)
	return fmt.Sprintf("%s-g%04d-e%08d-w%02d%s", strings.TrimSuffix(base, ext), generation, epoch, worker, ext)
}

// GenerationGlob matches the committed part files of path written by
// generation (a streaming job of the name): its output.
func GenerationGlob(path string, generation int64) string {
	base := filepath.Base(path)
	ext := filepath.Ext(base)
	return filepath.Join(filepath.Dir(path), escapeGlob(fmt.Sprintf("%s-g%04d", strings.TrimSuffix(base, ext), generation))+"-e*-w*"+escapeGlob(ext))
}

// partGlob matches every part file of path, of any generation.
func partGlob(path string) string {
	base := filepath.Base(path)
	ext := filepath.Ext(base)
	return filepath.Join(filepath.Dir(path), escapeGlob(strings.TrimSuffix(base, ext))+"-g*-e*-w*"+escapeGlob(ext))
}

func escapeGlob(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func (s *EpochSink) inProgress(worker int) string {
	return filepath.Join(s.dir, fmt.Sprintf(".%s-w%02d%s.inprogress", s.generationPrefix, worker, s.ext))
}

func (s *EpochSink) pending(final string) string {
	return filepath.Join(s.dir, "."+final+".pending")
}

func (s *EpochSink) worker(w int) (*partWriter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.files.get(w, s.cfg.Path, s.inProgress)
}

// workerFiles are a file sink's writers, one per worker, and whether the
// sink is closed. The sink's own mutex guards them: its callers hold it.
type workerFiles struct {
	writers map[int]*partWriter
	closed  bool
}

// get returns worker's writer, made on first use with its in-progress
// file inProgress(worker); an error once the sink at path is closed.
func (f *workerFiles) get(worker int, path string, inProgress func(int) string) (*partWriter, error) {
	if f.closed {
		return nil, fmt.Errorf("sink %s is closed", path)
	}
	pw := f.writers[worker]
	if pw == nil {
		if f.writers == nil {
			f.writers = map[int]*partWriter{}
		}
		pw = &partWriter{path: inProgress(worker)}
		f.writers[worker] = pw
	}
	return pw, nil
}

// close marks the sink closed and returns its writers; open is false when
// it was closed already.
func (f *workerFiles) close() (writers map[int]*partWriter, open bool) {
	if f.closed {
		return nil, false
	}
	f.closed = true
	return f.writers, true
}

func (s *EpochSink) openLocked(pw *partWriter, worker int) error {
	if pw.f != nil {
		return nil
	}
	if s.cfg.Rolling.On() {
		s.mu.Lock()
		pw.first = max(pw.first, s.mu.maxEpoch+1)
		s.mu.Unlock()
		pw.path = s.rollingInProgress(worker, pw.first)
		pw.opened, pw.size = s.cfg.now(), 0
	}
	if err := s.cfg.Roots.Check(pw.path); err != nil {
		return err
	}
	s.claim.Do(func() { s.claimErr = prepareOutput(&s.cfg, pw.path, LayoutParts) })
	if s.claimErr != nil {
		return s.claimErr
	}
	// Truncated: what an earlier attempt left there no checkpoint covers.
	f, err := os.OpenFile(pw.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, s.cfg.mode())
	if err != nil {
		return fmt.Errorf("creating %s: %w", pw.path, err)
	}
	pw.f = f
	if s.cfg.Rolling.On() {
		s.mu.Lock()
		s.mu.parts[pw.path] = &rollingPart{worker: worker}
		s.mu.Unlock()
	}
	return pw.enc.init(f, &s.cfg)
}

// Write appends the rows of elems to worker's in-progress file.
func (s *EpochSink) Write(ctx context.Context, worker int, elems []contract.Element) error {
	_, err := s.write(worker, elems, nil, false)
	return err
}

// WriteRejecting is Write, except that a value CSV cannot hold is a reject
// (ReasonNotARow) instead of an error (contract.RejectingSink).
func (s *EpochSink) WriteRejecting(_ context.Context, worker int, elems []contract.Element, rejects []contract.SinkReject) ([]contract.SinkReject, error) {
	return s.write(worker, elems, rejects, true)
}

func (s *EpochSink) write(worker int, elems []contract.Element, rejects []contract.SinkReject, reject bool) ([]contract.SinkReject, error) {
	return writeTo(s.worker, func(pw *partWriter) error { return s.openLocked(pw, worker) }, s.cfg.Path, worker, elems, rejects, reject)
}

// writeTo encodes elems into worker's file of a sink with a file per
// worker: get returns the worker's writer, open opens its file (called
// under the writer's lock); with reject set, a value the format cannot
// hold is appended to rejects instead of failing.
func writeTo(get func(int) (*partWriter, error), open func(*partWriter) error, path string, worker int,
	elems []contract.Element, rejects []contract.SinkReject, reject bool) ([]contract.SinkReject, error) {
	pw, err := get(worker)
	if err != nil {
		return rejects, err
	}
	pw.mu.Lock()
	defer pw.mu.Unlock()
	if err := open(pw); err != nil {
		return rejects, err
	}
	return pw.enc.write(path, elems, rejects, reject)
}

// finishLocked flushes, syncs and closes pw's file and renames it to to;
// it returns false (and removes the file) when it holds no row.
func (s *EpochSink) finishLocked(pw *partWriter, to string) (bool, error) {
	if pw.f == nil {
		return false, nil
	}
	f := pw.f
	pw.f = nil
	rows := pw.enc.rows
	err := pw.enc.flush()
	if err == nil {
		err = f.Sync()
	}
	if err := errors.Join(err, f.Close()); err != nil {
		return false, fmt.Errorf("writing %s: %w", pw.path, err)
	}
	if rows == 0 {
		if err := os.Remove(pw.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("removing the empty %s: %w", pw.path, err)
		}
		return false, nil
	}
	if err := os.Rename(pw.path, to); err != nil {
		return false, fmt.Errorf("staging a part of %s: %w", s.cfg.Path, err)
	}
	return true, nil
}

func (s *EpochSink) noteEpoch(e uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.maxEpoch = max(s.mu.maxEpoch, e)
}

// PreCommit stages what worker wrote since its last barrier as its part
// of epoch: the in-progress file becomes the pending part, which the
// returned part (its final name) designates. A worker that wrote nothing
// has no part (nil).
func (s *EpochSink) PreCommit(_ context.Context, worker int, epoch uint64) ([]byte, error) {
	return s.preCommit(worker, epoch, false)
}

// PreCommitFinal is PreCommit for a worker's final share: a rolling part
// rolls whatever its size and age (contract.FinalPreCommitter).
func (s *EpochSink) PreCommitFinal(_ context.Context, worker int, epoch uint64) ([]byte, error) {
	return s.preCommit(worker, epoch, true)
}

func (s *EpochSink) preCommit(worker int, epoch uint64, last bool) ([]byte, error) {
	s.noteEpoch(epoch)
	if s.cfg.Rolling.On() {
		return s.preCommitRolling(worker, epoch, last)
	}
	pw, err := s.worker(worker)
	if err != nil {
		return nil, err
	}
	pw.mu.Lock()
	defer pw.mu.Unlock()
	final := PartName(s.cfg.Path, s.cfg.Owner.Generation, epoch, worker)
	staged, err := s.finishLocked(pw, s.pending(final))
	if err != nil || !staged {
		return nil, err
	}
	if err := syncDir(s.dir); err != nil {
		return nil, err
	}
	return []byte(final), nil
}

// Commit makes the parts of epoch visible: each pending part is renamed to
// its final name, then the directory is synced. A part already at its
// final name was committed before (a replay) and is left alone; a part
// found under neither name is an error, since its rows would be lost.
func (s *EpochSink) Commit(_ context.Context, epoch uint64, parts [][]byte) error {
	s.noteEpoch(epoch)
	renamed := false
	for _, p := range parts {
		if len(p) == 0 {
			continue
		}
		if isRollingDesc(p) {
			r, err := s.commitRolling(epoch, p)
			if err != nil {
				return err
			}
			renamed = renamed || r
			continue
		}
		final := string(p)
		if strings.ContainsRune(final, filepath.Separator) || final != filepath.Base(final) {
			return fmt.Errorf("committing epoch %d of %s: bad part name %q", epoch, s.cfg.Path, final)
		}
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

// commitPending renames the pending part from to its final name to (a
// part of sink path's epoch); false when to exists already (a replayed
// commit). A part found under neither name is an error: its rows would
// be lost.
func commitPending(epoch uint64, path, from, to string) (bool, error) {
	if fileExists(to) {
		return false, nil
	}
	if err := os.Rename(from, to); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("committing epoch %d of %s: part %s is missing (neither it nor %s exists)", epoch, path, to, from)
		}
		return false, fmt.Errorf("committing epoch %d of %s: %w", epoch, path, err)
	}
	return true, nil
}

// Close finalises the rows no barrier staged (only an execution without
// checkpoints leaves any: a checkpointed one pre-commits everything before
// its final commit) as parts of the epoch after the last one seen, and
// closes every file.
func (s *EpochSink) Close(ctx context.Context) error {
	if s.cfg.Rolling.On() && s.checkpointed() {
		// The final share rolled every part; what is left open no final
		// share covered: released (visible up to what was committed).
		return s.Release(ctx)
	}
	s.mu.Lock()
	workers, open := s.mu.files.close()
	epoch := s.mu.maxEpoch + 1
	s.mu.Unlock()
	if !open {
		return nil
	}
	var errs []error
	renamed := false
	for w, pw := range workers {
		pw.mu.Lock()
		ok, err := s.finishLocked(pw, filepath.Join(s.dir, PartName(s.cfg.Path, s.cfg.Owner.Generation, epoch, w)))
		pw.mu.Unlock()
		errs = append(errs, err)
		renamed = renamed || ok
	}
	if renamed {
		errs = append(errs, syncDir(s.dir))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("closing %s: %w", s.cfg.Path, err)
	}
	return nil
}
