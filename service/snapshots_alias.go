package service

import (
	"io"
	"time"

	"github.com/weir-dev/weir/service/internal/snapshots"
	"github.com/weir-dev/weir/service/record"
)

// Temporary aliases while snapshots move to package snapshots.
type (
	FromSnapshotRequest = snapshots.FromSnapshotRequest
	SnapshotFileInfo    = snapshots.SnapshotFileInfo
	SnapshotRequest     = snapshots.SnapshotRequest
	SourceSnapshotter   = snapshots.SourceSnapshotter
	UploadChunk         = snapshots.UploadChunk
	UploadProgress      = snapshots.UploadProgress
)

const (
	ActionCreatedFromSnapshot = snapshots.ActionCreatedFromSnapshot
	DefaultSnapshotTTL        = snapshots.DefaultSnapshotTTL
	MaxSnapshotTTL            = snapshots.MaxSnapshotTTL
	MinSnapshotTTL            = snapshots.MinSnapshotTTL
	SnapshotFileVersion       = snapshots.SnapshotFileVersion
)

// ParseSnapshotTTL is snapshots.ParseSnapshotTTL.
func ParseSnapshotTTL(v string) (time.Duration, error) { return snapshots.ParseSnapshotTTL(v) }

// VerifySnapshotFile is snapshots.VerifySnapshotFile.
func VerifySnapshotFile(r io.Reader) (SnapshotFileInfo, error) {
	return snapshots.VerifySnapshotFile(r)
}

// ReadSnapshotFileState is snapshots.ReadSnapshotFileState.
func ReadSnapshotFileState(r io.Reader, entry func(step string, kg uint16, key, value []byte) error) (*record.Snapshot, SnapshotFileInfo, error) {
	return snapshots.ReadSnapshotFileState(r, entry)
}
