package files

import (
	"context"
	"path/filepath"
	"testing"
)

// TestStagedSinkDigestSpills: a partition whose rows do not fit the
// digest's memory bound is described with the same output digest and row
// count as one that fits: the publication's digest does not depend on the
// partition's size.
func TestStagedSinkDigestSpills(t *testing.T) {
	ctx := context.Background()
	var ns []int64
	for i := range 3000 {
		ns = append(ns, int64(i*7919%3001))
	}
	digest := func(memory int) (string, int64) {
		path := filepath.Join(t.TempDir(), "totals.jsonl")
		s := newStaged(t, path, JSONLines, stagedRun{job: "j1", partition: "p1", digest: "sha256:a"})
		s.digestMemory = memory
		for w := range 3 {
			if err := s.Write(ctx, w, rowsOf(ns[w*1000:(w+1)*1000]...)); err != nil {
				t.Fatal(err)
			}
		}
		finish(t, s, 0, 1, 2)
		p := mustManifest(t, path).Partitions["p1"]
		return p.OutputDigest, p.RowCount
	}
	wantDigest, wantRows := digest(0)
	gotDigest, gotRows := digest(2_000)
	if gotDigest != wantDigest || gotRows != wantRows || wantRows != 3000 {
		t.Errorf("spilled: %s, %d rows; in memory: %s, %d rows (want 3000)", gotDigest, gotRows, wantDigest, wantRows)
	}
}
