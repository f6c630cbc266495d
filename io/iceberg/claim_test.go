package iceberg

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestKilledCommitsClaimIsCleared: a hadoop catalog's commit claims the
// next metadata version (v<N>.metadata.json.claim) before it renames the
// claim to the version's file, and honours a claim for a minute. A sink
// whose process was killed in between left its claim; the job's commit
// after the restart removes it and commits (each epoch once), where it
// failed for that minute. A claim of another writer is left alone and the
// commit fails, as the catalog decides.
func TestKilledCommitsClaimIsCleared(t *testing.T) {
	for _, tc := range []struct {
		name    string
		claimer string // the SinkID of the killed commit
		cleared bool
	}{
		{"the sink's own claim", "job-1/write", true},
		{"another writer's claim", "job-2/write", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			tg := hadoopTarget(t)
			meta := filepath.Join(tg.Warehouse, "db", "claimed", "metadata")
			newSink := func(id string) *Sink {
				s, err := NewSink(SinkConfig{Target: tg, Table: "db.claimed", SinkID: id}, testSchema)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			in := testRows(5)
			commitTwice(t, newSink("job-1/write"), in[:3], 1)
			before := latestVersion(t, meta)

			// The killed commit: it published version before+1; undo
			// its last step (the claim renamed to the version's file)
			// and the version hint the catalog writes after it.
			part := commitTwice(t, newSink(tc.claimer), in[3:], 2)
			v := before + 1
			if got := latestVersion(t, meta); got != v {
				t.Fatalf("the commit wrote version %d, want %d", got, v)
			}
			claim := filepath.Join(meta, "v"+strconv.Itoa(v)+".metadata.json.claim")
			if err := os.Rename(filepath.Join(meta, "v"+strconv.Itoa(v)+".metadata.json"), claim); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(meta, "version-hint.text"), []byte(strconv.Itoa(before)), 0o644); err != nil {
				t.Fatal(err)
			}

			restarted := newSink("job-1/write")
			err := restarted.Commit(ctx, 2, [][]byte{part})
			if err2 := restarted.Close(ctx); err2 != nil {
				t.Fatal(err2)
			}
			_, statErr := os.Stat(claim)
			if !tc.cleared {
				if err == nil || !strings.Contains(err.Error(), "claimed") || statErr != nil {
					t.Fatalf("over another writer's claim: commit %v, claim %v", err, statErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("the commit after the restart: %v", err)
			}
			if !os.IsNotExist(statErr) {
				t.Errorf("the killed commit's claim is still there: %v", statErr)
			}
			if _, rows := readAll(t, ReadConfig{Target: tg, Table: "db.claimed"}); len(rows) != 5 {
				t.Errorf("read %d rows, want 5 (each epoch once)", len(rows))
			}
		})
	}
}

// latestVersion returns the highest N of the vN.metadata.json files in dir.
func latestVersion(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	best := -1
	for _, e := range ents {
		if v, ok := metadataVersion(e.Name()); ok && strings.HasSuffix(e.Name(), ".metadata.json") {
			best = max(best, v)
		}
	}
	return best
}
