package service

import (
	"bytes"
	"context"
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/errcode"
)

// TestSnapshotExportImport covers (g): a snapshot exported to a file and
// imported into a fresh data directory (another machine's) starts a job
// whose table equals a run without interruption; the import keeps the ID,
// counts the TTL from the import, and a second import is SNAPSHOT_EXISTS.
func TestSnapshotExportImport(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "job.sqlite")
	s := openService(t, filepath.Join(dir, "data"))
	v1 := submit(t, s, "totals", snapshotPipeline(db, "Sums"), dir)
	waitElements(t, s, v1.ID, "Events", 400)
	snap := snapshotOf(t, s, "totals")
	cancelAndWait(t, s, v1.ID)
	var file bytes.Buffer
	info, err := s.ExportSnapshot(context.Background(), snap.ID, &file)
	if err != nil {
		t.Fatalf("ExportSnapshot: %v", err)
	}
	if info.SnapshotID != snap.ID || info.Parts == 0 || info.Entries == 0 || info.Bytes != int64(file.Len()) {
		t.Fatalf("export info %+v (file %d bytes)", info, file.Len())
	}
	if got, err := VerifySnapshotFile(bytes.NewReader(file.Bytes())); err != nil || got != info {
		t.Fatalf("VerifySnapshotFile = %+v, %v; want %+v", got, err, info)
	}

	s2 := openService(t, filepath.Join(dir, "data2"))
	imp, err := s2.ImportSnapshot(context.Background(), bytes.NewReader(file.Bytes()), 0)
	if err != nil {
		t.Fatalf("ImportSnapshot: %v", err)
	}
	if imp.ID != snap.ID || imp.State != record.SnapshotReady || imp.DiskSizeBytes != snap.DiskSizeBytes || imp.JobName != "totals" ||
		!imp.ExpireTime.Equal(imp.StateTime.Add(DefaultSnapshotTTL)) || !imp.CreationTime.Equal(snap.CreationTime) {
		t.Fatalf("imported %+v\nexported %+v", imp, snap)
	}
	if _, err := s2.ImportSnapshot(context.Background(), bytes.NewReader(file.Bytes()), 0); errcode.Of(err) != errcode.SnapshotExists {
		t.Fatalf("second import: %v, want SNAPSHOT_EXISTS", err)
	}
	db2 := filepath.Join(dir, "moved.sqlite")
	_, n := drainFrom(t, s2, imp, "totals", snapshotPipeline(db2, "Totals"), `{"Sums": "Totals"}`, dir, 1500)
	cut := binary.BigEndian.Uint64(snap.Positions["Events"][0])
	if n >= 3600 {
		t.Fatalf("read %d events: past the first window, the oracle does not apply", n)
	}
	if got, want := tableRows(t, db2), oracleOf(t, dir, n); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the job from the imported snapshot (read %d, cut at %d) holds:\n%s\nwithout interruption:\n%s", n, cut, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestSnapshotFileDamage: every flipped byte and every truncation of a
// snapshot file is refused with SNAPSHOT_CORRUPT and imports nothing.
func TestSnapshotFileDamage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openService(t, filepath.Join(dir, "data"))
	v1 := submit(t, s, "totals", snapshotPipeline(filepath.Join(dir, "job.sqlite"), "Sums"), dir)
	waitElements(t, s, v1.ID, "Events", 200)
	snap := snapshotOf(t, s, "totals")
	var file bytes.Buffer
	if _, err := s.ExportSnapshot(context.Background(), snap.ID, &file); err != nil {
		t.Fatal(err)
	}
	good := file.Bytes()
	s2 := openService(t, filepath.Join(dir, "data2"))
	type damage struct {
		name string
		file []byte
		want string
	}
	var cases []damage
	// A flipped byte at many places: header, manifest, parts, checksums, end.
	for _, at := range []int{0, 9, 12, len(good) / 3, len(good) / 2, len(good) - 40, len(good) - 1} {
		b := bytes.Clone(good)
		b[at] ^= 0x20
		cases = append(cases, damage{"flipped byte " + itoa(at), b, ""})
	}
	for _, n := range []int{0, 5, 10, 20, len(good) / 2, len(good) - 4, len(good) - 1} {
		cases = append(cases, damage{"truncated to " + itoa(n), good[:n], ""})
	}
	cases = append(cases,
		damage{"data after the end", append(bytes.Clone(good), 0), "data follows its end record"},
		damage{"another format version", append(append([]byte("WEIRSNAP"), 0, 9), good[10:]...), "format version 9"},
		damage{"not a snapshot file", []byte("hello, world: not a snapshot at all"), "not a weir snapshot file"},
	)
	for _, c := range cases {
		_, err := s2.ImportSnapshot(context.Background(), bytes.NewReader(c.file), 0)
		if errcode.Of(err) != errcode.SnapshotCorrupt || !strings.Contains(err.Error(), "snapshot file") || c.want != "" && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want SNAPSHOT_CORRUPT %q", c.name, err, c.want)
		}
	}
	for _, n := range []int{len(good) / 2, len(good) - 1} {
		_, err := s2.ImportSnapshot(context.Background(), bytes.NewReader(good[:n]), 0)
		if err == nil || !strings.Contains(err.Error(), "truncated") {
			t.Errorf("truncated to %d: %v, want a message saying the file is truncated", n, err)
		}
	}
	if list, err := s2.ListSnapshots("", true); err != nil || len(list) != 0 {
		t.Fatalf("refused imports left snapshots: %+v %v", list, err)
	}
	if _, err := s2.ImportSnapshot(context.Background(), bytes.NewReader(good), 0); err != nil {
		t.Fatalf("the undamaged file after the refusals: %v", err)
	}
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	if n == 0 {
		return "0"
	}
	for ; n > 0; n /= 10 {
		i--
		b[i] = byte('0' + n%10)
	}
	return string(b[i:])
}
