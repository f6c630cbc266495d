package files

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// stagedRun is one partition run of the staged file sink in a test.
type stagedRun struct {
	job, partition, digest string
	shadow                 bool
}

func newStaged(t *testing.T, path string, format Format, r stagedRun) *StagedSink {
	t.Helper()
	s, err := NewStagedSink(SinkConfig{Path: path, Format: format, Schema: testSchema, Owner: &Owner{JobName: "sales", JobID: r.job}},
		Stage{JobName: "sales", JobID: r.job, Partition: r.partition, ManifestDigest: r.digest, Shadow: r.shadow})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// finish ends a checkpointed run: every worker's final share, the final
// commit, then Close (as the job service does once the job is DONE).
func finish(t *testing.T, s *StagedSink, workers ...int) [][]byte {
	t.Helper()
	ctx := context.Background()
	var parts [][]byte
	for _, w := range workers {
		p, err := s.PreCommitFinal(ctx, w, 7)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, p)
	}
	if err := s.Commit(ctx, 7, parts); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return parts
}

// viewRows returns the sorted non-empty lines of the published view.
func viewRows(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return out
}

func mustManifest(t *testing.T, path string) *PublicationManifest {
	t.Helper()
	m, found, err := ReadPublicationManifest(path)
	if err != nil || !found {
		t.Fatalf("publication manifest of %s: found %v, %v", path, found, err)
	}
	return m
}

// TestStagedSinkPublishesOnce walks partition runs of one target through
// the publication rules: a run publishes its version at its end (the
// manifest names its files, the view at the path holds its rows); a rerun
// of the same manifest publishes nothing and drops its own version; a new
// manifest of the partition replaces its rows; another partition leaves
// the first alone; a shadow run and a run that stopped short publish
// nothing.
func TestStagedSinkPublishesOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "out", "totals.jsonl")

	s := newStaged(t, path, JSONLines, stagedRun{job: "j1", partition: "2026-12-01", digest: "sha256:a"})
	for w, ns := range [][]int64{{1, 2}, {3}} {
		if err := s.Write(ctx, w, rowsOf(ns...)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(ManifestPath(path)); !os.IsNotExist(err) {
		t.Fatalf("a manifest before the run's end: %v", err)
	}
	finish(t, s, 0, 1, 2) // worker 2 wrote nothing: no file
	m := mustManifest(t, path)
	p := m.Partitions["2026-12-01"]
	if p == nil || p.JobID != "j1" || p.RowCount != 3 || len(p.Files) != 2 || len(m.Log) != 1 || p.ReplacedRows != 0 ||
		!strings.HasPrefix(p.OutputDigest, "sha256:") || p.Version != "totals.jsonl.versions/2026-12-01/j1" {
		t.Fatalf("after the first run: %+v (log %d)", p, len(m.Log))
	}
	for _, f := range p.Files {
		if n, d, err := fileDigest(filepath.Join(filepath.Dir(path), f.Path)); err != nil || n != f.Bytes || d != f.SHA256 {
			t.Errorf("file %s: %d bytes %s, the manifest says %d %s (%v)", f.Path, n, d, f.Bytes, f.SHA256, err)
		}
	}
	if got, want := viewRows(t, path), []string{`{"n":1}`, `{"n":2}`, `{"n":3}`}; !slices.Equal(got, want) {
		t.Fatalf("view %q, want %q", got, want)
	}
	first := p.OutputDigest

	// A rerun of the same manifest: nothing new, its version removed.
	s = newStaged(t, path, JSONLines, stagedRun{job: "j2", partition: "2026-12-01", digest: "sha256:a"})
	if err := s.Write(ctx, 0, rowsOf(1, 2, 3)); err != nil {
		t.Fatal(err)
	}
	finish(t, s, 0)
	if m := mustManifest(t, path); len(m.Log) != 1 || m.Partitions["2026-12-01"].JobID != "j1" {
		t.Fatalf("a rerun of the same manifest published: log %d, current %s", len(m.Log), m.Partitions["2026-12-01"].JobID)
	}
	if _, err := os.Stat(VersionDir(path, "2026-12-01", "j2")); !os.IsNotExist(err) {
		t.Errorf("the rerun's version stays: %v", err)
	}

	// A new manifest of the partition replaces its rows.
	s = newStaged(t, path, JSONLines, stagedRun{job: "j3", partition: "2026-12-01", digest: "sha256:b"})
	if err := s.Write(ctx, 0, rowsOf(10)); err != nil {
		t.Fatal(err)
	}
	finish(t, s, 0)
	m = mustManifest(t, path)
	if p := m.Partitions["2026-12-01"]; p.JobID != "j3" || p.RowCount != 1 || p.ReplacedRows != 3 || len(m.Log) != 2 || p.OutputDigest == first {
		t.Fatalf("a new manifest: %+v, log %d", p, len(m.Log))
	}
	if got, want := viewRows(t, path), []string{`{"n":10}`}; !slices.Equal(got, want) {
		t.Fatalf("view %q, want %q", got, want)
	}
	// The replaced version stays on disk (the log names it).
	if _, err := os.Stat(VersionDir(path, "2026-12-01", "j1")); err != nil {
		t.Errorf("the replaced version was removed: %v", err)
	}

	// Another partition: both in the view, partitions in order.
	s = newStaged(t, path, JSONLines, stagedRun{job: "j4", partition: "2026-12-02", digest: "sha256:c"})
	if err := s.Write(ctx, 0, rowsOf(20)); err != nil {
		t.Fatal(err)
	}
	finish(t, s, 0)
	if got, want := viewRows(t, path), []string{`{"n":10}`, `{"n":20}`}; !slices.Equal(got, want) {
		t.Fatalf("view %q, want %q", got, want)
	}

	// A shadow run and an aborted run publish nothing and keep their
	// versions.
	before, _ := os.ReadFile(ManifestPath(path))
	s = newStaged(t, path, JSONLines, stagedRun{job: "j5", partition: "2026-12-02", digest: "sha256:d", shadow: true})
	if err := s.Write(ctx, 0, rowsOf(99)); err != nil {
		t.Fatal(err)
	}
	finish(t, s, 0)
	s = newStaged(t, path, JSONLines, stagedRun{job: "j6", partition: "2026-12-02", digest: "sha256:e"})
	if err := s.Write(ctx, 0, rowsOf(98)); err != nil {
		t.Fatal(err)
	}
	if err := s.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(ManifestPath(path))
	if string(before) != string(after) {
		t.Errorf("a shadow or aborted run changed the manifest")
	}
	if names, rows := visible(t, VersionDir(path, "2026-12-02", "j5")); len(names) != 1 || rows != "{\"n\":99}\n" {
		t.Errorf("the shadow run's version: %v %q", names, rows)
	}
	if _, err := os.Stat(VersionDir(path, "2026-12-02", "j6")); err != nil {
		t.Errorf("the aborted run's version: %v", err)
	}
	if got, want := viewRows(t, path), []string{`{"n":10}`, `{"n":20}`}; !slices.Equal(got, want) {
		t.Fatalf("view %q, want %q", got, want)
	}
}

// TestStagedSinkRestarts covers the two ways a restarted server meets a
// partition run: after its final checkpoint (the fresh sink replays the
// commit and publishes the earlier execution's files), and in its middle
// (a checkpoint holding one worker's final share is replayed, then the
// job runs again from the beginning of its files without checkpoints:
// only the new execution's rows are published, nothing twice).
func TestStagedSinkRestarts(t *testing.T) {
	ctx := context.Background()
	t.Run("after the final checkpoint", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "totals.jsonl")
		r := stagedRun{job: "j1", partition: "p", digest: "sha256:a"}
		s := newStaged(t, path, JSONLines, r)
		if err := s.Write(ctx, 0, rowsOf(1, 2)); err != nil {
			t.Fatal(err)
		}
		part, err := s.PreCommitFinal(ctx, 0, 4)
		if err != nil {
			t.Fatal(err)
		}
		// The process dies here; the restart builds a new sink.
		s2 := newStaged(t, path, JSONLines, r)
		if err := s2.Commit(ctx, 4, [][]byte{part}); err != nil {
			t.Fatal(err)
		}
		if err := s2.Commit(ctx, 4, [][]byte{part}); err != nil { // replayed twice: harmless
			t.Fatal(err)
		}
		if err := s2.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if got, want := viewRows(t, path), []string{`{"n":1}`, `{"n":2}`}; !slices.Equal(got, want) {
			t.Fatalf("view %q, want %q", got, want)
		}
	})
	t.Run("in the middle", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "totals.jsonl")
		r := stagedRun{job: "j1", partition: "p", digest: "sha256:a"}
		s := newStaged(t, path, JSONLines, r)
		if err := s.Write(ctx, 0, rowsOf(1, 2)); err != nil {
			t.Fatal(err)
		}
		if err := s.Write(ctx, 1, rowsOf(3)); err != nil {
			t.Fatal(err)
		}
		part, err := s.PreCommitFinal(ctx, 0, 4) // worker 0 ended; worker 1 still reads
		if err != nil {
			t.Fatal(err)
		}
		s2 := newStaged(t, path, JSONLines, r)
		if err := s2.Commit(ctx, 4, [][]byte{part}); err != nil {
			t.Fatal(err)
		}
		// Again from the beginning, without checkpoints: Close at the end.
		if err := s2.Write(ctx, 0, rowsOf(1, 2)); err != nil {
			t.Fatal(err)
		}
		if err := s2.Write(ctx, 1, rowsOf(3, 4)); err != nil {
			t.Fatal(err)
		}
		if err := s2.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if got, want := viewRows(t, path), []string{`{"n":1}`, `{"n":2}`, `{"n":3}`, `{"n":4}`}; !slices.Equal(got, want) {
			t.Fatalf("view %q, want %q", got, want)
		}
		if m := mustManifest(t, path); m.Partitions["p"].RowCount != 4 {
			t.Errorf("published %d rows, want 4", m.Partitions["p"].RowCount)
		}
	})
}

// TestStagedSinkCSVView: the CSV view keeps one header over every
// partition's rows, partitions in order, then workers.
func TestStagedSinkCSVView(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "totals.csv")
	for i, p := range []string{"p1", "p2"} {
		s := newStaged(t, path, CSV, stagedRun{job: "j" + p, partition: p, digest: "sha256:" + p})
		if err := s.Write(ctx, 0, rowsOf(int64(i+1))); err != nil {
			t.Fatal(err)
		}
		if err := s.Write(ctx, 1, rowsOf(int64(i+10))); err != nil {
			t.Fatal(err)
		}
		finish(t, s, 0, 1)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), "n\n1\n10\n2\n11\n"; got != want {
		t.Errorf("CSV view %q, want %q", got, want)
	}

	// A partition whose version has another header: no view can hold both
	// (the manifest still names every version), and no temporary file is
	// left behind.
	other := row.MustSchema(row.Field{Name: "m", Type: row.Of(row.KindInt)})
	s, err := NewStagedSink(SinkConfig{Path: path, Format: CSV, Schema: other, Owner: &Owner{JobName: "sales", JobID: "jp3"}},
		Stage{JobName: "sales", JobID: "jp3", Partition: "p3", ManifestDigest: "sha256:p3"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, 0, []contract.Element{{Value: &row.Row{Schema: other, Values: []any{int64(7)}}}}); err != nil {
		t.Fatal(err)
	}
	finish(t, s, 0)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a view over versions of two headers: %v", err)
	}
	if m := mustManifest(t, path); len(m.Partitions) != 3 {
		t.Errorf("the manifest has %d partitions, want 3", len(m.Partitions))
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("a temporary file is left: %s", e.Name())
		}
	}
}

// TestCheckPartitionOutput: who may stage and publish at a path.
func TestCheckPartitionOutput(t *testing.T) {
	dir := t.TempDir()
	mine := Owner{JobName: "sales", JobID: "j1"}
	foreign := filepath.Join(dir, "foreign.jsonl")
	if err := os.WriteFile(foreign, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.jsonl")
	if err := claimOutput(other, Owner{JobName: "billing", JobID: "b1"}, LayoutPartitions, 0o640); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain.jsonl")
	if err := claimOutput(plain, Owner{JobName: "sales", JobID: "j0"}, LayoutFile, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plain, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		path   string
		shadow bool
		ok     bool
	}{
		{"a free path", filepath.Join(dir, "free.jsonl"), false, true},
		{"a file weir did not create", foreign, false, false},
		{"another name's partitions", other, false, false},
		{"another name's partitions, shadow", other, true, true},
		{"a plain batch output of the name", plain, false, false},
	} {
		err := CheckPartitionOutput(tc.path, mine, tc.shadow)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

// TestStagedSinkConcurrentPublishes: partition runs of different
// partitions of one target may end at the same moment (one writer per
// partition, not per target). Each publication reads the manifest,
// adds itself and writes it back; without a lock across that, the last
// writer drops the others' entries and their rows vanish from the view.
func TestStagedSinkConcurrentPublishes(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "out", "totals.jsonl")
	const runs = 8
	for round := 0; round < 5; round++ {
		sinks := make([]*StagedSink, runs)
		for i := range sinks {
			part := fmt.Sprintf("r%d-p%d", round, i)
			sinks[i] = newStaged(t, path, JSONLines, stagedRun{job: "j-" + part, partition: part, digest: "sha256:" + part})
			if err := sinks[i].Write(ctx, 0, rowsOf(int64(round*100+i))); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		errs := make(chan error, runs)
		for _, s := range sinks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p, err := s.PreCommitFinal(ctx, 0, 7)
				if err == nil {
					err = s.Commit(ctx, 7, [][]byte{p})
				}
				if err == nil {
					err = s.Close(ctx)
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		m := mustManifest(t, path)
		if want := (round + 1) * runs; len(m.Partitions) != want || len(m.Log) != want {
			t.Fatalf("round %d: the manifest has %d partitions and %d log entries, want %d of each", round, len(m.Partitions), len(m.Log), want)
		}
		if got := len(viewRows(t, path)); got != (round+1)*runs {
			t.Fatalf("round %d: the view has %d rows, want %d", round, got, (round+1)*runs)
		}
	}
}

// TestRemoveReplacedVersion: a version a later publication of its
// partition replaced can be removed; the log keeps its entry, marked
// pruned; the version a partition reads, a version the log does not name
// and a path outside the versions are refused and left alone; a second
// removal is harmless.
func TestRemoveReplacedVersion(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "out", "totals.jsonl")
	publishRun := func(job, part, digest string, n int64) *StagedSink {
		s := newStaged(t, path, JSONLines, stagedRun{job: job, partition: part, digest: digest})
		if err := s.Write(ctx, 0, rowsOf(n)); err != nil {
			t.Fatal(err)
		}
		finish(t, s, 0)
		return s
	}
	publishRun("j1", "2026-12-01", "sha256:a", 1)
	publishRun("j2", "2026-12-02", "sha256:b", 2)
	s := publishRun("j3", "2026-12-01", "sha256:c", 3) // replaces j1
	old, cur, other := VersionDir(path, "2026-12-01", "j1"), VersionDir(path, "2026-12-01", "j3"), VersionDir(path, "2026-12-02", "j2")
	unpublished := VersionDir(path, "2026-12-01", "j9")
	if err := os.MkdirAll(unpublished, 0o755); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(filepath.Dir(path), "elsewhere")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ dir, want string }{
		{cur, "the version partition 2026-12-01 reads"},
		{other, "the version partition 2026-12-02 reads"},
		{unpublished, "not a published version"},
		{outside, "not under the versions directory"},
	} {
		if err := s.RemoveReplacedVersion(ctx, tc.dir); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("RemoveReplacedVersion(%s) = %v, want an error saying %q", tc.dir, err, tc.want)
		}
		if _, err := os.Stat(tc.dir); err != nil {
			t.Errorf("a refused removal removed %s: %v", tc.dir, err)
		}
	}
	for range 2 {
		if err := s.RemoveReplacedVersion(ctx, old); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Fatalf("the replaced version is still there: %v", err)
	}
	m := mustManifest(t, path)
	if len(m.Log) != 3 || m.Log[0].JobID != "j1" || m.Log[0].PrunedAt == nil || m.Log[1].PrunedAt != nil || m.Log[2].PrunedAt != nil {
		t.Fatalf("the log after the removal: %d entries, first %+v", len(m.Log), m.Log[0])
	}
	fp, err := s.FilePublications()
	if err != nil {
		t.Fatal(err)
	}
	if !fp.Published[0].Pruned || fp.Published[1].Pruned || fp.Published[2].Pruned {
		t.Errorf("FilePublications' pruned flags: %+v", fp.Published)
	}
	if got, want := viewRows(t, path), []string{`{"n":2}`, `{"n":3}`}; !slices.Equal(got, want) {
		t.Fatalf("view %q, want %q", got, want)
	}
}
