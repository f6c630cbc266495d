package snapshots

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"time"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/service/record"
)

// Portable snapshot files: a READY job snapshot exported as one
// self-describing file, to back a job up or move it to another machine,
// and imported from it (the same snapshot ID, a TTL counted from the
// import). The layout is documented in docs/JOBS.md ("Snapshot files"):
//
//	"WEIRSNAP" (8 bytes) | format version (uint16, big endian)
//	frame*: kind (1 byte) | length (uint32) | payload | CRC-32C of kind, length and payload (uint32)
//	  'M' once, first: the manifest, JSON {format_version, snapshot (the
//	      record: job, generation, sdk, graph, positions, sink epoch, ...),
//	      checkpoint (the cut's checkpoint record), export_time}
//	  'P' one per (step, key group), in key order: uvarint len(step) |
//	      step | key group (uint16) | uvarint n | n × (uvarint len(key) |
//	      key | uvarint len(value) | value)
//	  'E' once, last: JSON {parts: [{step, key_group, entries, bytes,
//	      crc32c}], entries, sha256}, sha256 being that of every byte of
//	      the file before the 'E' frame
//
// An import reads and verifies the whole file — every frame's CRC, the
// part table against the parts read, the SHA-256, nothing after 'E' —
// into an uncommitted batch, and commits it with the READY record in one
// write: a damaged or truncated file is refused (SNAPSHOT_CORRUPT) and
// leaves nothing behind.

// SnapshotFileVersion is the format version export writes and import
// reads.
const SnapshotFileVersion = 1

const (
	snapshotFileMagic = "WEIRSNAP"
	frameManifest     = 'M'
	framePart         = 'P'
	frameEnd          = 'E'
	// maxFrameBytes bounds one frame, so that a damaged length cannot make
	// an import allocate without limit.
	maxFrameBytes = 1 << 30
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// snapshotManifest is the 'M' frame.
type snapshotManifest struct {
	FormatVersion int              `json:"format_version"`
	Snapshot      *record.Snapshot `json:"snapshot"`
	Checkpoint    json.RawMessage  `json:"checkpoint"`
	ExportTime    time.Time        `json:"export_time"`
}

// filePart describes one 'P' frame in the 'E' frame.
type filePart struct {
	Step     string `json:"step"`
	KeyGroup uint16 `json:"key_group"`
	Entries  int    `json:"entries"`
	Bytes    int    `json:"bytes"`
	CRC32C   uint32 `json:"crc32c"`
}

// fileEnd is the 'E' frame.
type fileEnd struct {
	Parts   []filePart `json:"parts"`
	Entries int        `json:"entries"`
	SHA256  string     `json:"sha256"`
}

// SnapshotFileInfo summarises a snapshot file.
type SnapshotFileInfo struct {
	SnapshotID string `json:"snapshot_id"`
	JobName    string `json:"job_name"`
	Version    int    `json:"format_version"`
	Parts      int    `json:"parts"`
	Entries    int    `json:"entries"`
	Bytes      int64  `json:"bytes"`
}

// frameWriter writes frames, hashing everything it writes.
type frameWriter struct {
	w    *bufio.Writer
	sha  hash.Hash
	n    int64
	hdr  [5]byte
	crcb [4]byte
}

func (fw *frameWriter) raw(b []byte) error {
	fw.sha.Write(b)
	fw.n += int64(len(b))
	_, err := fw.w.Write(b)
	return err
}

func (fw *frameWriter) frame(kind byte, payload []byte) (uint32, error) {
	if len(payload) > maxFrameBytes {
		return 0, fmt.Errorf("a frame of %d bytes is over the format's limit of %d (a key group too large to export)", len(payload), maxFrameBytes)
	}
	fw.hdr[0] = kind
	binary.BigEndian.PutUint32(fw.hdr[1:], uint32(len(payload)))
	crc := crc32.Update(crc32.Update(0, crcTable, fw.hdr[:]), crcTable, payload)
	binary.BigEndian.PutUint32(fw.crcb[:], crc)
	for _, b := range [][]byte{fw.hdr[:], payload, fw.crcb[:]} {
		if err := fw.raw(b); err != nil {
			return 0, err
		}
	}
	return crc, nil
}

// ExportSnapshot writes READY snapshot id to w as a snapshot file and
// returns what it wrote. It reads the snapshot through a pinned view of
// the store (a delete meanwhile does not tear the file) and takes no lock.
func (s *Snapshots) ExportSnapshot(ctx context.Context, id string, w io.Writer) (SnapshotFileInfo, error) {
	snap, err := s.GetSnapshot(id)
	if err != nil {
		return SnapshotFileInfo{}, err
	}
	if snap.State != record.SnapshotReady {
		return SnapshotFileInfo{}, errcode.Errorf(errcode.SnapshotCorrupt, "snapshot %s is %s: only a READY snapshot can be exported", id, snap.State)
	}
	pin := s.Store.Pin()
	defer pin.Release()
	fw := &frameWriter{w: bufio.NewWriterSize(w, 1<<20), sha: sha256.New()}
	info := SnapshotFileInfo{SnapshotID: id, JobName: snap.JobName, Version: SnapshotFileVersion}
	var end fileEnd
	var cur *filePart
	var part []byte
	flush := func() error {
		if cur == nil {
			return nil
		}
		var hdr []byte
		hdr = binary.AppendUvarint(hdr, uint64(len(cur.Step)))
		hdr = append(hdr, cur.Step...)
		hdr = binary.BigEndian.AppendUint16(hdr, cur.KeyGroup)
		hdr = binary.AppendUvarint(hdr, uint64(cur.Entries))
		payload := append(hdr, part...)
		crc, err := fw.frame(framePart, payload)
		if err != nil {
			return err
		}
		cur.CRC32C, cur.Bytes = crc, len(payload)
		end.Parts = append(end.Parts, *cur)
		cur, part = nil, part[:0]
		return nil
	}
	sawCP := false
	n := 0
	err = s.Store.SnapshotEntries(pin, id, func(rel, value []byte) error {
		if n++; n%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if string(rel) == "cp" {
			sawCP = true
			m := snapshotManifest{FormatVersion: SnapshotFileVersion, Snapshot: snap, Checkpoint: json.RawMessage(bytes.Clone(value)), ExportTime: s.Now()}
			b, err := json.Marshal(m)
			if err != nil {
				return fmt.Errorf("encoding the manifest: %w", err)
			}
			var ver [2]byte
			binary.BigEndian.PutUint16(ver[:], SnapshotFileVersion)
			if err := fw.raw(append([]byte(snapshotFileMagic), ver[:]...)); err != nil {
				return err
			}
			_, err = fw.frame(frameManifest, b)
			return err
		}
		if !sawCP {
			return fmt.Errorf("state before the checkpoint record")
		}
		step, kg, key, err := splitStateKey(rel)
		if err != nil {
			return err
		}
		if cur == nil || cur.Step != step || cur.KeyGroup != kg {
			if err := flush(); err != nil {
				return err
			}
			cur = &filePart{Step: step, KeyGroup: kg}
		}
		part = binary.AppendUvarint(part, uint64(len(key)))
		part = append(part, key...)
		part = binary.AppendUvarint(part, uint64(len(value)))
		part = append(part, value...)
		cur.Entries++
		end.Entries++
		return nil
	})
	if err == nil && !sawCP {
		err = errcode.Errorf(errcode.SnapshotNotFound, "snapshot %s has no data (deleted meanwhile?)", id)
	}
	if err == nil {
		err = flush()
	}
	if err == nil {
		end.SHA256 = hex.EncodeToString(fw.sha.Sum(nil))
		var b []byte
		if b, err = json.Marshal(end); err == nil {
			_, err = fw.frame(frameEnd, b)
		}
	}
	if err == nil {
		err = fw.w.Flush()
	}
	if err != nil {
		var se *errcode.Error
		if errors.As(err, &se) {
			return SnapshotFileInfo{}, err
		}
		return SnapshotFileInfo{}, fmt.Errorf("exporting snapshot %s: %w", id, err)
	}
	info.Parts, info.Entries, info.Bytes = len(end.Parts), end.Entries, fw.n
	s.Opts.Logger.Info("snapshot exported", "snapshot_id", id, "bytes", fw.n, "parts", info.Parts)
	return info, nil
}

// splitStateKey splits "s/<step>\x00<kg><key>".
func splitStateKey(rel []byte) (step string, kg uint16, key []byte, err error) {
	r, ok := bytes.CutPrefix(rel, []byte("s/"))
	i := bytes.IndexByte(r, 0)
	if !ok || i < 0 || len(r) < i+3 {
		return "", 0, nil, fmt.Errorf("key %q is not a snapshot state key", rel)
	}
	return string(r[:i]), binary.BigEndian.Uint16(r[i+1 : i+3]), r[i+3:], nil
}

func corruptf(format string, args ...any) error {
	return errcode.Errorf(errcode.SnapshotCorrupt, "snapshot file: "+format, args...)
}

// countingReader hashes and counts what is read through it.
type countingReader struct {
	r   *bufio.Reader
	sha hash.Hash
	n   int64
}

func (c *countingReader) full(b []byte) error {
	if _, err := io.ReadFull(c.r, b); err != nil {
		return err
	}
	c.sha.Write(b)
	c.n += int64(len(b))
	return nil
}

// upTo reads the n bytes a frame states into a buffer that grows with
// the bytes that arrive, not to n at once: a short file claiming a large
// frame costs what it holds. A file that ends first is io.ErrUnexpectedEOF.
func (c *countingReader) upTo(n uint32) ([]byte, error) {
	var b bytes.Buffer
	b.Grow(int(min(n, 1<<20)))
	m, err := io.CopyN(&b, c.r, int64(n))
	c.sha.Write(b.Bytes())
	c.n += m
	if m < int64(n) && (err == nil || errors.Is(err, io.EOF)) {
		err = io.ErrUnexpectedEOF
	}
	return b.Bytes(), err
}

// readSnapshotFile reads and verifies a snapshot file, calling manifest
// with the manifest (first) and put with every entry (key relative to the
// snapshot's key space). A damaged, truncated or foreign file is
// SNAPSHOT_CORRUPT, with what is wrong; nothing put is valid then.
func readSnapshotFile(r io.Reader, manifest func(*snapshotManifest) error, put func(rel, value []byte) error) (SnapshotFileInfo, error) {
	cr := &countingReader{r: bufio.NewReaderSize(r, 1<<20), sha: sha256.New()}
	var info SnapshotFileInfo
	head := make([]byte, len(snapshotFileMagic)+2)
	if err := cr.full(head); err != nil {
		return info, corruptf("it is too short to be a weir snapshot file (%d bytes)", cr.n)
	}
	if string(head[:len(snapshotFileMagic)]) != snapshotFileMagic {
		return info, corruptf("it is not a weir snapshot file (it does not start with %q)", snapshotFileMagic)
	}
	if v := binary.BigEndian.Uint16(head[len(snapshotFileMagic):]); v != SnapshotFileVersion {
		return info, corruptf("format version %d: this weir reads version %d", v, SnapshotFileVersion)
	}
	info.Version = SnapshotFileVersion
	var seen []filePart
	var hdr [5]byte
	var crcb [4]byte
	for frame := 1; ; frame++ {
		before := hex.EncodeToString(cr.sha.Sum(nil))
		at := cr.n
		if err := cr.full(hdr[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return info, corruptf("it ends at byte %d before its end record: the file is truncated", cr.n)
			}
			return info, fmt.Errorf("reading the snapshot file: %w", err)
		}
		kind, size := hdr[0], binary.BigEndian.Uint32(hdr[1:])
		if size > maxFrameBytes {
			return info, corruptf("frame %d at byte %d claims %d bytes, over the format's limit: the file is damaged", frame, at, size)
		}
		payload, err := cr.upTo(size)
		if err != nil {
			return info, corruptf("frame %d at byte %d is cut short (%d of %d bytes): the file is truncated", frame, at, cr.n-at-5, size)
		}
		if err := cr.full(crcb[:]); err != nil {
			return info, corruptf("frame %d at byte %d has no checksum: the file is truncated", frame, at)
		}
		crc := crc32.Update(crc32.Update(0, crcTable, hdr[:]), crcTable, payload)
		if crc != binary.BigEndian.Uint32(crcb[:]) {
			return info, corruptf("frame %d at byte %d fails its checksum: the file is damaged", frame, at)
		}
		switch {
		case frame == 1 && kind != frameManifest:
			return info, corruptf("its first frame is %q, not the manifest", kind)
		case kind == frameManifest && frame != 1:
			return info, corruptf("frame %d is a second manifest", frame)
		case kind == frameManifest:
			var m snapshotManifest
			if err := json.Unmarshal(payload, &m); err != nil || m.Snapshot == nil || len(m.Checkpoint) == 0 {
				return info, corruptf("its manifest does not decode (%v)", err)
			}
			if m.FormatVersion != SnapshotFileVersion {
				return info, corruptf("its manifest says format version %d, its header %d", m.FormatVersion, SnapshotFileVersion)
			}
			info.SnapshotID, info.JobName = m.Snapshot.ID, m.Snapshot.JobName
			if err := manifest(&m); err != nil {
				return info, err
			}
			if put != nil {
				if err := put([]byte("cp"), m.Checkpoint); err != nil {
					return info, err
				}
			}
		case kind == framePart:
			p, err := readPart(payload, put)
			var pe putError
			if errors.As(err, &pe) {
				return info, pe.err // the importer's, not the file's
			}
			if err != nil {
				return info, corruptf("frame %d at byte %d: %v", frame, at, err)
			}
			p.CRC32C, p.Bytes = crc, len(payload)
			seen = append(seen, p)
			info.Entries += p.Entries
		case kind == frameEnd:
			var end fileEnd
			if err := json.Unmarshal(payload, &end); err != nil {
				return info, corruptf("its end record does not decode: %v", err)
			}
			if end.SHA256 != before {
				return info, corruptf("its SHA-256 does not match its end record: the file is damaged")
			}
			if len(end.Parts) != len(seen) || end.Entries != info.Entries {
				return info, corruptf("its end record lists %d parts and %d entries, the file holds %d and %d", len(end.Parts), end.Entries, len(seen), info.Entries)
			}
			for i := range seen {
				if seen[i] != end.Parts[i] {
					return info, corruptf("part %d (%s, key group %d) differs from its end record", i, seen[i].Step, seen[i].KeyGroup)
				}
			}
			if _, err := cr.r.ReadByte(); err != io.EOF {
				return info, corruptf("data follows its end record at byte %d", cr.n)
			}
			info.Parts, info.Bytes = len(seen), cr.n
			return info, nil
		default:
			return info, corruptf("frame %d at byte %d has unknown kind %q", frame, at, kind)
		}
	}
}

// putError carries an error of readSnapshotFile's put callback (a write
// of the importer) through readPart, so it is not reported as damage.
type putError struct{ err error }

func (e putError) Error() string { return e.err.Error() }

// readPart decodes a 'P' payload, calling put with each entry.
func readPart(p []byte, put func(rel, value []byte) error) (filePart, error) {
	var fp filePart
	next := func() ([]byte, error) {
		n, k := binary.Uvarint(p)
		if k <= 0 || uint64(len(p)-k) < n {
			return nil, errors.New("a length runs past the part's end")
		}
		b := p[k : k+int(n)]
		p = p[k+int(n):]
		return b, nil
	}
	step, err := next()
	if err != nil {
		return fp, err
	}
	if len(p) < 2 {
		return fp, errors.New("the part has no key group")
	}
	fp.Step, fp.KeyGroup = string(step), binary.BigEndian.Uint16(p)
	p = p[2:]
	n, k := binary.Uvarint(p)
	if k <= 0 {
		return fp, errors.New("the part has no entry count")
	}
	p = p[k:]
	prefix := append(append([]byte("s/"), step...), 0, byte(fp.KeyGroup>>8), byte(fp.KeyGroup))
	for i := uint64(0); i < n; i++ {
		key, err := next()
		if err != nil {
			return fp, err
		}
		val, err := next()
		if err != nil {
			return fp, err
		}
		if put != nil {
			if err := put(append(bytes.Clone(prefix), key...), val); err != nil {
				return fp, putError{err}
			}
		}
		fp.Entries++
	}
	if len(p) != 0 {
		return fp, fmt.Errorf("%d bytes follow the part's %d entries", len(p), n)
	}
	return fp, nil
}

// VerifySnapshotFile reads a snapshot file to its end and checks it as an
// import does, without importing anything.
func VerifySnapshotFile(r io.Reader) (SnapshotFileInfo, error) {
	return readSnapshotFile(r, func(*snapshotManifest) error { return nil }, nil)
}

// ReadSnapshotFileState reads a snapshot file to its end, checking it as an
// import does, and calls entry with every state entry: its step, key
// group, key and value (entry may keep the slices). It returns the
// snapshot's record as the file carries it. A rehearsal starts its
// sandboxed runs from this state; nothing is imported.
func ReadSnapshotFileState(r io.Reader, entry func(step string, kg uint16, key, value []byte) error) (*record.Snapshot, SnapshotFileInfo, error) {
	var snap *record.Snapshot
	info, err := readSnapshotFile(r, func(m *snapshotManifest) error {
		snap = m.Snapshot
		return nil
	}, func(rel, value []byte) error {
		rest, ok := bytes.CutPrefix(rel, []byte("s/"))
		if !ok {
			return nil // the checkpoint record
		}
		i := bytes.IndexByte(rest, 0)
		if i < 0 || len(rest) < i+3 {
			return fmt.Errorf("a state entry's key %q has no step and key group", rel)
		}
		return entry(string(rest[:i]), uint16(rest[i+1])<<8|uint16(rest[i+2]), rest[i+3:], value)
	})
	if err != nil {
		return nil, info, err
	}
	return snap, info, nil
}
