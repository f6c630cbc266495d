package snapshots

// This file imports a snapshot file: the upload of its chunks, the
// verified read into the store in bounded batches, and the recovery of an
// import a stop cut short. snapshot_file.go holds the file's format
// (its writing and its verified reading).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/duration"
	"github.com/weir-dev/weir/state"
)

var snapshotIDRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// importBatchBytes bounds the snapshot data an import holds in memory
// before it writes them: an import streams the file in batches of about
// this size, so its memory does not grow with the snapshot.
const importBatchBytes = 4 << 20

// importKey marks snapshot id as being imported: it is written with the
// PENDING record before the first batch of data and deleted with the READY
// record after the last. A mark found at Open is an import cut short by a
// stop: its record and data are removed (recoverImports).
func importKey(id string) string { return "snapimport/" + id }

// ImportSnapshot reads a snapshot file from r, verifies it completely,
// and records it as a READY snapshot with the file's snapshot ID (refused
// with SNAPSHOT_EXISTS when a snapshot of that ID exists and is not
// DELETED), expiring ttl after now (0: DefaultSnapshotTTL).
//
// The data is written in bounded batches as the file is read (memory does
// not grow with the snapshot): the snapshot is PENDING (marked as an
// import) from the manifest until the last batch, which lands with the
// READY record in one write. A damaged or truncated file, a failed write
// or a cancelled ctx removes the record and what was written (the
// snapshot is absent again; an earlier DELETED tombstone of the ID goes
// too); a stop in between leaves the mark, and Open removes it all. The
// snapshot is never READY with part of its data. A PENDING import deleted
// meanwhile stops at its next batch. Subscription snapshots
// (pubsub_metadata) do not travel: the list is emptied. It takes
// the registry lock for each write only.
func (s *Snapshots) ImportSnapshot(ctx context.Context, r io.Reader, ttl time.Duration) (*record.Snapshot, error) {
	if err := s.RefuseIfStoreFailed(); err != nil {
		return nil, err
	}
	if ttl == 0 {
		ttl = DefaultSnapshotTTL
	}
	if err := validateSnapshotTTL(ttl); err != nil {
		return nil, err
	}
	limit := int64(importBatchBytes)
	if s.Hooks.ImportBatchBytes > 0 {
		limit = s.Hooks.ImportBatchBytes
	}
	var sb *state.SnapshotBatch
	var snap *record.Snapshot
	started := false // the PENDING record and mark are written
	var size int64
	batches := 0
	defer func() {
		if sb != nil {
			sb.Close()
		}
	}()
	flush := func() error {
		return s.Update(func(tx *core.Tx) error {
			if err := s.stillImporting(tx, snap.ID); err != nil {
				return err
			}
			size += sb.Size
			err := tx.WriteSnapshot(sb, &state.Write{})
			sb = s.Store.NewSnapshotBatch(snap.ID)
			if err != nil {
				return errcode.Internalf("importing snapshot %s: %w", snap.ID, err)
			}
			return nil
		})
	}
	n := 0
	_, err := readSnapshotFile(r, func(m *snapshotManifest) error {
		if !snapshotIDRE.MatchString(m.Snapshot.ID) {
			return corruptf("its snapshot ID %q is not a snapshot ID", m.Snapshot.ID)
		}
		if _, err := graphOf(m.Snapshot); err != nil {
			return err
		}
		snap = m.Snapshot
		if err := s.beginImport(snap); err != nil {
			return err
		}
		started = true
		sb = s.Store.NewSnapshotBatch(snap.ID)
		return nil
	}, func(rel, value []byte) error {
		if n++; n%4096 == 0 && ctx.Err() != nil {
			return fmt.Errorf("importing a snapshot: %w", ctx.Err())
		}
		if err := sb.Put(rel, value); err != nil {
			return err
		}
		if sb.Size < limit {
			return nil
		}
		if err := flush(); err != nil {
			return err
		}
		batches++
		if s.Hooks.ImportBatch != nil {
			return s.Hooks.ImportBatch(snap.ID, batches)
		}
		return nil
	})
	if err == nil {
		err = s.finishImport(snap, sb, size, ttl)
		sb = nil // committed (or closed) by the write
	}
	if err != nil {
		if started {
			s.abandonImport(snap.ID, err)
		}
		return nil, err
	}
	s.Opts.Logger.Info("snapshot imported", "snapshot_id", snap.ID, "job_name", snap.JobName, "disk_size_bytes", snap.DiskSizeBytes,
		"batches", batches+1)
	return snap, nil
}

// beginImport records snap as PENDING and marked as an import, refusing
// an ID in use (SNAPSHOT_EXISTS unless DELETED). It writes in a core.Tx of its own.
func (s *Snapshots) beginImport(snap *record.Snapshot) error {
	return s.Update(func(tx *core.Tx) error {
		cur, err := s.ReadSnapshot(snap.ID)
		switch {
		case err == nil && cur.State != record.SnapshotDeleted:
			return errcode.Errorf(errcode.SnapshotExists, "snapshot %s exists already (%s, of job %s): delete it first to import it again", snap.ID, cur.State, cur.JobName)
		case err != nil && errcode.Of(err) != errcode.SnapshotNotFound:
			return err
		}
		now := s.Now()
		pending := *snap
		pending.State, pending.StateTime, pending.DiskSizeBytes, pending.FailureReason = record.SnapshotPending, now, 0, ""
		pending.PubsubMetadata = []record.PubsubSnapshotMetadata{}
		w := &state.Write{}
		if err := core.PutJSON(w, record.SnapshotKey(snap.ID), &pending); err != nil {
			return err
		}
		w.Put(importKey(snap.ID), []byte(now.Format(time.RFC3339Nano)))
		if err := tx.Apply(w); err != nil {
			return errcode.Internalf("importing snapshot %s: %w", snap.ID, err)
		}
		return nil
	})
}

// stillImporting says whether snapshot id is still the PENDING import
// this service is writing, as the registry reads in tx.
func (s *Snapshots) stillImporting(_ *core.Tx, id string) error {
	cur, err := s.ReadSnapshot(id)
	if err != nil {
		return err
	}
	if cur.State != record.SnapshotPending {
		return errcode.Errorf(errcode.SnapshotNotFound, "snapshot %s was %s while it was imported: the import stopped", id, cur.State)
	}
	return nil
}

// finishImport writes the last batch sb with snap's READY record and the
// end of its import mark, in one write. It writes in a core.Tx of its own.
func (s *Snapshots) finishImport(snap *record.Snapshot, sb *state.SnapshotBatch, size int64, ttl time.Duration) error {
	return s.Update(func(tx *core.Tx) error {
		if err := s.stillImporting(tx, snap.ID); err != nil {
			sb.Close()
			return err
		}
		now := s.Now()
		snap.State, snap.StateTime, snap.TTL, snap.ExpireTime = record.SnapshotReady, now, duration.Format(ttl), now.Add(ttl)
		snap.DiskSizeBytes, snap.FailureReason, snap.PubsubMetadata = size+sb.Size, "", []record.PubsubSnapshotMetadata{}
		w := &state.Write{}
		if err := core.PutJSON(w, record.SnapshotKey(snap.ID), snap); err != nil {
			sb.Close()
			return err
		}
		w.Delete(importKey(snap.ID))
		if err := tx.WriteSnapshot(sb, w); err != nil {
			return errcode.Internalf("importing snapshot %s: %w", snap.ID, err)
		}
		return nil
	})
}

// abandonImport removes what the failed import of snapshot id wrote: its
// data, its PENDING record and its mark (unless the record is no longer
// that import's: deleted meanwhile, the data went with it). It takes
// the registry lock.
func (s *Snapshots) abandonImport(id string, why error) {
	_ = s.Update(func(tx *core.Tx) error {
		w := &state.Write{}
		w.Delete(importKey(id))
		if s.stillImporting(tx, id) == nil {
			w.Delete(record.SnapshotKey(id))
		}
		if err := tx.DeleteSnapshot(id, w); err != nil {
			s.Opts.Logger.Error("removing a failed import; the next start removes it", "snapshot_id", id, "error", err)
			return nil
		}
		s.Opts.Logger.Warn("snapshot import failed; nothing of it is kept", "snapshot_id", id, "error", why)
		return nil
	})
}

// recoverImports, at Open, removes every import cut short by a stop: its
// data, its record (if still PENDING) and its mark.
func (s *Snapshots) recoverImports() error {
	var ids []string
	err := s.Store.Scan("snapimport/", func(k string, _ []byte) error {
		ids = append(ids, k[len("snapimport/"):])
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading the unfinished snapshot imports: %w", err)
	}
	for _, id := range ids {
		s.abandonImport(id, errors.New("the server stopped while the snapshot was imported"))
	}
	return nil
}

// graphOf checks that a manifest's snapshot has a graph that parses.
func graphOf(snap *record.Snapshot) (any, error) {
	if len(snap.Graph) == 0 {
		return nil, corruptf("its snapshot %s has no graph", snap.ID)
	}
	g, err := SnapshotGraph(snap)
	if err != nil {
		return nil, corruptf("%v", err)
	}
	return g, nil
}

// Uploads of snapshot files through the API come in chunks (a request
// body is at most a few MiB), staged under DATA-DIR/imports until the last
// one, then imported from the staged file and removed. The staging
// directory is emptied at start (uploads cut short by a stop).

var uploadIDRE = regexp.MustCompile(`^[0-9a-f]{32}$`)

func (s *Snapshots) importsDir() string { return filepath.Join(s.Opts.DataDir, "imports") }

// clearImports removes the staged uploads of an earlier run.
func (s *Snapshots) clearImports() error {
	if err := os.RemoveAll(s.importsDir()); err != nil {
		return fmt.Errorf("removing unfinished snapshot uploads: %w", err)
	}
	return nil
}

// UploadChunk is one chunk of a snapshot file upload.
type UploadChunk struct {
	// UploadID is "" for the first chunk (the reply names the upload).
	UploadID string
	// Offset is where Data goes in the file: the bytes received so far.
	Offset int64
	Data   []byte
	// Final makes this the last chunk: the file is verified and imported.
	Final bool
	// TTL of the imported snapshot (Final only); 0: DefaultSnapshotTTL.
	TTL time.Duration
}

// UploadProgress is the state of an upload after a chunk.
type UploadProgress struct {
	UploadID string `json:"upload_id"`
	Received int64  `json:"received_bytes"`
}

// UploadSnapshotChunk stages chunk c of a snapshot file upload; with
// c.Final it imports the staged file (ImportSnapshot) and removes it,
// whatever the outcome. A chunk at another offset than the bytes received
// is INVALID_REQUEST (the message gives the offset expected).
func (s *Snapshots) UploadSnapshotChunk(ctx context.Context, c UploadChunk) (UploadProgress, *record.Snapshot, error) {
	if err := s.RefuseIfStoreFailed(); err != nil {
		return UploadProgress{}, nil, err
	}
	if c.UploadID == "" {
		if c.Offset != 0 {
			return UploadProgress{}, nil, errcode.Errorf(errcode.InvalidRequest, "the first chunk of an upload starts at offset 0, not %d", c.Offset)
		}
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return UploadProgress{}, nil, errcode.Internalf("naming an upload: %w", err)
		}
		c.UploadID = hex.EncodeToString(b[:])
		if err := os.MkdirAll(s.importsDir(), 0o700); err != nil {
			return UploadProgress{}, nil, errcode.Internalf("staging an upload: %w", err)
		}
	} else if !uploadIDRE.MatchString(c.UploadID) {
		return UploadProgress{}, nil, errcode.Errorf(errcode.InvalidRequest, "upload_id %q is not an upload ID", c.UploadID)
	}
	path := filepath.Join(s.importsDir(), c.UploadID+".part")
	flags := os.O_WRONLY | os.O_APPEND
	if c.Offset == 0 {
		flags |= os.O_CREATE | os.O_EXCL
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrExist) {
		return UploadProgress{}, nil, errcode.Errorf(errcode.InvalidRequest, "upload %s is unknown, finished or already started (start a new one without upload_id)", c.UploadID)
	}
	if err != nil {
		return UploadProgress{}, nil, errcode.Internalf("staging upload %s: %w", c.UploadID, err)
	}
	st, err := f.Stat()
	if err == nil && st.Size() != c.Offset {
		f.Close()
		return UploadProgress{}, nil, errcode.Errorf(errcode.InvalidRequest, "upload %s has %d bytes, the chunk is for offset %d: send the chunk at offset %d", c.UploadID, st.Size(), c.Offset, st.Size())
	}
	if err == nil {
		_, err = f.Write(c.Data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return UploadProgress{}, nil, errcode.Internalf("staging upload %s: %w", c.UploadID, err)
	}
	prog := UploadProgress{UploadID: c.UploadID, Received: c.Offset + int64(len(c.Data))}
	if !c.Final {
		return prog, nil, nil
	}
	defer os.Remove(path)
	in, err := os.Open(path)
	if err != nil {
		return prog, nil, errcode.Internalf("reading upload %s: %w", c.UploadID, err)
	}
	defer in.Close()
	snap, err := s.ImportSnapshot(ctx, in, c.TTL)
	return prog, snap, err
}
