package state

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// A large snapshot's state is not written through the store's write-ahead
// log and memtable: StreamSnapshot writes it as sorted table files next to
// the database, and the batch's commit ingests them. A snapshot's key
// space (snap/<id>/) is new, so Pebble places the files in the LSM's last
// level as they are: nothing is written twice and no compaction follows.
// Copied through batches instead, a 1M-key state (≈45 MB) was written to
// the log, flushed from the memtable and compacted down the levels,
// holding a core for seconds after every update (its rollback snapshot);
// execution traces of weir bench update showed the job's reads stalled
// for 100–800 ms behind that work.

// ingestDirName is the directory, inside the store's, of the table files
// being written for snapshots (removed at open: what a crash left there
// was never ingested, and its snapshot is FAILED at the service's start).
const ingestDirName = "snapshot-ingest"

func (s *Store) vfs() vfs.FS {
	if s.fs == nil {
		return vfs.Default
	}
	return s.fs
}

func (s *Store) ingestDir() string { return filepath.Join(s.dir, ingestDirName) }

// clearIngestDir removes the table files an earlier process left.
func (s *Store) clearIngestDir() error {
	fs, dir := s.vfs(), s.ingestDir()
	names, err := fs.List(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("listing %s: %w", dir, err)
	}
	for _, n := range names {
		if err := fs.Remove(fs.PathJoin(dir, n)); err != nil {
			return fmt.Errorf("removing %s: %w", fs.PathJoin(dir, n), err)
		}
	}
	return nil
}

// StreamSnapshot reads the full keyed state of cut's steps as pin sees it
// (as BuildSnapshot does) into table files of about limit bytes each,
// calling pace with the bytes so far after each file (the caller may wait
// there to spread the copy out; an error from pace stops the stream), and
// returns a batch that holds the files and the cut's checkpoint record.
// Nothing is in the store until the batch is ingested and committed: the
// caller commits it with the snapshot's READY record (Commit ingests the
// files first; Ingest may be called before, without the caller's locks),
// or closes it, which removes the files. The batch's Size is the bytes
// the snapshot takes (keys and values).
func (s *Store) StreamSnapshot(ctx context.Context, id string, pin *Pinned, cut SnapshotCut, limit int64, pace func(bytes int64) error) (_ *SnapshotBatch, err error) {
	if pin.err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", id, pin.err)
	}
	pin.h.refs.Add(1)
	fs := s.vfs()
	sb := &SnapshotBatch{h: pin.h, id: id, b: pin.h.db.NewBatch(), fs: fs}
	var (
		w       *sstable.Writer // the file being written, at path
		path    string
		inFile  int64
		written int
	)
	defer func() {
		if err != nil {
			if w != nil {
				_ = w.Close()
				sb.files = append(sb.files, path) // for Close to remove
			}
			sb.Close()
		}
	}()
	if err := fs.MkdirAll(s.ingestDir(), 0o755); err != nil {
		return nil, fmt.Errorf("snapshot %s: creating %s: %w", id, s.ingestDir(), err)
	}
	wopts := sstable.WriterOptions{TableFormat: pin.h.db.TableFormat()}
	replicated := pin.h.repl.replicated()
	finishFile := func() error {
		if w == nil {
			return nil
		}
		err := w.Close() // syncs the file, as Pebble's ingest requires
		w = nil
		sb.files = append(sb.files, path)
		if err != nil {
			return fmt.Errorf("snapshot %s: writing %s: %w", id, path, err)
		}
		inFile = 0
		if pace != nil {
			return pace(sb.Size)
		}
		return nil
	}
	add := func(k, v []byte) error {
		if replicated {
			// A replicated store's table files would not reach the other
			// replicas: the state goes into the batch, which the log carries.
			if err := sb.b.Set(k, v, nil); err != nil {
				return fmt.Errorf("snapshot %s: %w", id, err)
			}
			n := int64(len(k) + len(v))
			sb.Size += n
			if inFile += n; inFile >= limit && pace != nil {
				inFile = 0
				return pace(sb.Size)
			}
			return nil
		}
		if w == nil {
			path = fs.PathJoin(s.ingestDir(), fmt.Sprintf("%s-%06d.sst", id, written))
			written++
			f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
			if err != nil {
				return fmt.Errorf("snapshot %s: creating %s: %w", id, path, err)
			}
			w = sstable.NewWriter(objstorageprovider.NewFileWritable(f), wopts)
		}
		if err := w.Set(k, v); err != nil {
			return fmt.Errorf("snapshot %s: writing %s: %w", id, path, err)
		}
		n := int64(len(k) + len(v))
		sb.Size += n
		if inFile += n; inFile >= limit {
			return finishFile()
		}
		return nil
	}
	// The files' keys must ascend, as scanCut gives them.
	keys := 0
	if err := scanCut(id, pin, cut, func(k, v []byte) error {
		if keys++; keys%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("snapshot %s: %w", id, err)
			}
		}
		return add(k, v)
	}); err != nil {
		return nil, err
	}
	if err := finishFile(); err != nil {
		return nil, err
	}
	if err := sb.putRecord(cut); err != nil {
		return nil, err
	}
	return sb, nil
}

// Ingest adds the batch's table files (StreamSnapshot) to the store, in one
// atomic step; the rest of the batch waits for Commit. Until Commit, the
// snapshot's state is in the store without its checkpoint record: a caller
// that then cannot commit removes it (DeleteSnapshot), as the job service
// does when it marks the snapshot FAILED. Ingesting a batch without files,
// or twice, does nothing.
func (sb *SnapshotBatch) Ingest(ctx context.Context) error {
	if sb.err != nil {
		return fmt.Errorf("writing snapshot %s: %w", sb.id, sb.err)
	}
	if len(sb.files) == 0 || sb.b == nil {
		return nil
	}
	if err := sb.h.fail.get(); err != nil {
		return fmt.Errorf("writing snapshot %s: %w", sb.id, err)
	}
	err := sb.h.db.Ingest(ctx, sb.files)
	if f := sb.h.fail.get(); f != nil {
		err = errors.Join(f, err)
	}
	if err != nil {
		return fmt.Errorf("writing snapshot %s: adding its state to the store: %w", sb.id, err)
	}
	sb.files = nil // Pebble moved them into the database
	return nil
}

// removeFiles removes the batch's table files that were not ingested.
func (sb *SnapshotBatch) removeFiles() {
	for _, p := range sb.files {
		_ = sb.fs.Remove(p)
	}
	sb.files = nil
}
