package files

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Rolling parts (SinkConfig.Rolling): a worker's part stays open across
// checkpoints, as Flink's file sink keeps its in-progress files, and rolls
// at a barrier once it is big or old enough, or at the worker's final
// share. Exactly once, the checkpoint still decides what is visible:
//
//	DIR/.NAME-gGGGG-wWW-sEEEEEEEE.EXT.inprogress   the part worker W opened
//	                                               after the barrier of epoch E-1
//
// At a barrier the part is synced; PreCommit hands the checkpoint a
// descriptor (rollingDesc) naming the in-progress file, the bytes it holds
// and the final name it gets (PartName of the barrier's epoch):
//
//   - "open": the part goes on. Committing it makes nothing visible; the
//     sink that wrote it notes how many of its bytes a commit covered.
//   - "roll": the part is closed; committing it truncates the file to the
//     recorded length (it holds exactly that) and renames it to its final
//     name.
//
// A sink that commits an "open" descriptor of a part it did not write —
// the next execution replaying the checkpoint it restores from after a
// crash — rolls that part there: truncated to the recorded length (bytes
// written after the checkpoint are dropped, the replay writes them again)
// and renamed to the final name. An execution that stops without a final
// share (cancelled, failed, handed over by an update or a rescale) is
// released (Release): each part it wrote becomes visible up to what its
// commits covered, the rest is dropped. Rows are visible once their part
// rolls.

// rollingPart is what a sink's commits covered of a part it created.
type rollingPart struct {
	worker int
	// committed is the length a commit of an "open" descriptor covered, at
	// epoch; done once the part was renamed to its final name or removed.
	committed int64
	epoch     uint64
	done      bool
}

// rollingDesc is a rolling part's descriptor in a checkpoint.
type rollingDesc struct {
	Kind   string `json:"k"` // "open" or "roll"
	File   string `json:"f"` // the in-progress file's base name
	Len    int64  `json:"n"`
	Final  string `json:"final"`
	Worker int    `json:"w"`
}

// rollingMark starts an encoded descriptor (no part name holds a NUL).
const rollingMark = 0

func isRollingDesc(p []byte) bool { return len(p) > 0 && p[0] == rollingMark }

func encodeRollingDesc(d rollingDesc) ([]byte, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	return append([]byte{rollingMark}, b...), nil
}

func decodeRollingDesc(p []byte) (rollingDesc, error) {
	var d rollingDesc
	dec := json.NewDecoder(bytes.NewReader(p[1:]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return d, fmt.Errorf("a rolling part's descriptor: %w", err)
	}
	for _, name := range []string{d.File, d.Final} {
		if name == "" || strings.ContainsRune(name, filepath.Separator) || name != filepath.Base(name) {
			return d, fmt.Errorf("a rolling part's descriptor names %q", name)
		}
	}
	if (d.Kind != "open" && d.Kind != "roll") || d.Len < 0 {
		return d, fmt.Errorf("a rolling part's descriptor is %q of %d bytes", d.Kind, d.Len)
	}
	return d, nil
}

// rollingInProgress is the in-progress path of worker's rolling part whose
// first epoch is first.
func (s *EpochSink) rollingInProgress(worker int, first uint64) string {
	return filepath.Join(s.dir, fmt.Sprintf(".%s-w%02d-s%08d%s.inprogress", s.generationPrefix, worker, first, s.ext))
}

// checkpointed reports whether the sink has seen a barrier or a commit.
func (s *EpochSink) checkpointed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.maxEpoch > 0
}

// preCommitRolling syncs worker's part at the barrier of epoch and
// describes it: rolled when it is big or old enough (or final), else open.
// A worker without an open part has no share (nil).
func (s *EpochSink) preCommitRolling(worker int, epoch uint64, final bool) ([]byte, error) {
	pw, err := s.worker(worker)
	if err != nil {
		return nil, err
	}
	pw.mu.Lock()
	defer pw.mu.Unlock()
	if pw.f == nil {
		pw.first = epoch + 1
		return nil, nil
	}
	if err := pw.enc.sync(); err != nil {
		return nil, fmt.Errorf("writing %s: %w", pw.path, err)
	}
	if err := pw.f.Sync(); err != nil {
		return nil, fmt.Errorf("syncing %s: %w", pw.path, err)
	}
	fi, err := pw.f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading the size of %s: %w", pw.path, err)
	}
	pw.size = fi.Size()
	r := s.cfg.Rolling
	roll := final || (r.Size > 0 && pw.size >= r.Size) || (r.Interval > 0 && s.cfg.now().Sub(pw.opened) >= r.Interval)
	d := rollingDesc{Kind: "open", File: filepath.Base(pw.path), Len: pw.size, Worker: worker,
		Final: PartName(s.cfg.Path, s.cfg.Owner.Generation, epoch, worker)}
	if roll {
		d.Kind = "roll"
		if err := pw.f.Close(); err != nil {
			return nil, fmt.Errorf("closing %s: %w", pw.path, err)
		}
		pw.f = nil
		pw.first = epoch + 1
		if err := syncDir(s.dir); err != nil {
			return nil, err
		}
	}
	return encodeRollingDesc(d)
}

// commitRolling applies descriptor p of epoch; it reports whether a file
// was renamed (the directory then needs a sync).
func (s *EpochSink) commitRolling(epoch uint64, p []byte) (bool, error) {
	d, err := decodeRollingDesc(p)
	if err != nil {
		return false, fmt.Errorf("committing epoch %d of %s: %w", epoch, s.cfg.Path, err)
	}
	from := filepath.Join(s.dir, d.File)
	s.mu.Lock()
	mine := s.mu.parts[from]
	if mine != nil && d.Kind == "open" {
		// Still being written by this sink: the commit covers d.Len bytes.
		if epoch >= mine.epoch {
			mine.committed, mine.epoch = d.Len, epoch
		}
		s.mu.Unlock()
		return false, nil
	}
	s.mu.Unlock()
	to := filepath.Join(s.dir, d.Final)
	if fileExists(to) {
		return false, nil // committed before (a replay)
	}
	if err := rollFile(from, to, d.Len); err != nil {
		return false, fmt.Errorf("committing epoch %d of %s: %w", epoch, s.cfg.Path, err)
	}
	if mine != nil {
		s.mu.Lock()
		mine.done = true
		s.mu.Unlock()
	}
	return true, nil
}

// rollFile makes in-progress file from, cut to its first n bytes, visible
// as to.
func rollFile(from, to string, n int64) error {
	f, err := os.OpenFile(from, os.O_WRONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("part %s is missing (neither it nor %s exists)", to, from)
	}
	if err != nil {
		return fmt.Errorf("opening %s: %w", from, err)
	}
	fi, err := f.Stat()
	if err == nil && fi.Size() < n {
		err = fmt.Errorf("%s holds %d bytes, fewer than the %d its checkpoint recorded", from, fi.Size(), n)
	}
	if err == nil && fi.Size() > n {
		// Written after the checkpoint: the replay writes it again.
		err = f.Truncate(n)
	}
	if err == nil {
		err = f.Sync()
	}
	if err := errors.Join(err, f.Close()); err != nil {
		return fmt.Errorf("rolling %s: %w", from, err)
	}
	if err := os.Rename(from, to); err != nil {
		return fmt.Errorf("rolling %s to %s: %w", from, to, err)
	}
	return nil
}

// Release ends the sink of an execution that stopped without a final
// share (contract.ReleasingSink): each rolling part it wrote becomes
// visible up to what its commits covered (truncated there, under the
// final name of the epoch that covered it) and a part no commit covered is
// removed; a part-per-epoch sink's in-progress files, which no commit
// covers, are removed. Then the sink is closed.
func (s *EpochSink) Release(context.Context) error {
	s.mu.Lock()
	workers, open := s.mu.files.close()
	s.mu.Unlock()
	if !open {
		return nil
	}
	var errs []error
	for _, pw := range workers {
		pw.mu.Lock()
		errs = append(errs, s.dropLocked(pw))
		pw.mu.Unlock()
	}
	renamed := false
	s.mu.Lock()
	parts := make(map[string]*rollingPart, len(s.mu.parts))
	for path, rp := range s.mu.parts {
		parts[path] = rp
	}
	s.mu.Unlock()
	for path, rp := range parts {
		if rp.done {
			continue
		}
		if rp.committed == 0 {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("removing %s, which no checkpoint covered: %w", path, err))
			}
			rp.done = true
			continue
		}
		to := filepath.Join(s.dir, PartName(s.cfg.Path, s.cfg.Owner.Generation, rp.epoch, rp.worker))
		if !fileExists(to) {
			if err := rollFile(path, to, rp.committed); err != nil {
				errs = append(errs, err)
				continue
			}
			renamed = true
		}
		rp.done = true
	}
	if renamed {
		errs = append(errs, syncDir(s.dir))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("releasing %s: %w", s.cfg.Path, err)
	}
	return nil
}

// dropLocked closes pw's open file, if any. A part-per-epoch in-progress
// file (rows no barrier staged) is removed; a rolling part is left for
// Release to cut to what was committed. pw.mu is held.
func (s *EpochSink) dropLocked(pw *partWriter) error {
	if pw.f == nil {
		return nil
	}
	f := pw.f
	pw.f = nil
	if err := f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", pw.path, err)
	}
	if s.cfg.Rolling.On() {
		return nil
	}
	if err := os.Remove(pw.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing %s, which no checkpoint covered: %w", pw.path, err)
	}
	return nil
}
