package service

import (
	"io"
	"time"

	"github.com/weir-dev/weir/service/internal/snapshots"
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

// SourceSnapshotName is snapshots.SourceSnapshotName.
func SourceSnapshotName(id, sub string) string { return snapshots.SourceSnapshotName(id, sub) }
