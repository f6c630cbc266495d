package snapshots

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"strings"
	"testing"

	"github.com/weir-dev/weir/errcode"
)

// TestFrameClaimsMoreThanTheFileHolds: a file of a few bytes whose frame
// header claims up to the format's limit (1 GiB) is refused as truncated,
// having allocated about what it holds, not what it claims — an upload of
// a few such files must not cost the server gigabytes.
func TestFrameClaimsMoreThanTheFileHolds(t *testing.T) {
	for _, size := range []uint32{maxFrameBytes, 64 << 20, 4096} {
		var f bytes.Buffer
		f.WriteString(snapshotFileMagic)
		f.Write(binary.BigEndian.AppendUint16(nil, SnapshotFileVersion))
		f.WriteByte(frameManifest)
		f.Write(binary.BigEndian.AppendUint32(nil, size))
		f.WriteString(`{"format_version": 1}`)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := VerifySnapshotFile(bytes.NewReader(f.Bytes()))
		runtime.ReadMemStats(&after)
		if errcode.Of(err) != errcode.SnapshotCorrupt || !strings.Contains(err.Error(), "truncated") {
			t.Errorf("a frame claiming %d bytes in a %d-byte file: %v, want SNAPSHOT_CORRUPT saying it is truncated", size, f.Len(), err)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 8<<20 {
			t.Errorf("refusing a %d-byte file whose frame claims %d bytes allocated %d bytes", f.Len(), size, got)
		}
	}
}
