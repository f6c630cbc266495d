package files

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

var testSchema = row.MustSchema(row.Field{Name: "n", Type: row.Of(row.KindInt)})

func rowsOf(ns ...int64) []contract.Element {
	out := make([]contract.Element, len(ns))
	for i, n := range ns {
		out[i] = contract.Element{Value: &row.Row{Schema: testSchema, Values: []any{n}}}
	}
	return out
}

// visible returns the names of the files in dir a reader sees (not
// hidden), and their contents concatenated in name order.
func visible(t *testing.T, dir string) ([]string, string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var all strings.Builder
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		names = append(names, e.Name())
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	return names, all.String()
}

// TestEpochSinkCommitsPerEpoch walks a streaming file sink through its
// lifecycle and checks what a reader sees after every step: nothing
// before a commit, each epoch's part once committed, nothing twice on a
// replayed commit, and nothing of what a crash interrupted.
func TestEpochSinkCommitsPerEpoch(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "out", "orders.jsonl")
	owner := &Owner{JobName: "orders", JobID: "job-1", Generation: 3}
	newSink := func() *EpochSink {
		s, err := NewEpochSink(SinkConfig{Path: path, Format: JSONLines, Schema: testSchema, Owner: owner})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := newSink()
	out := filepath.Dir(path)
	type step struct {
		name      string
		do        func() error
		wantFiles []string
		wantRows  string
	}
	var parts1, parts2 [][]byte
	steps := []step{
		{name: "write epoch 1 on two workers", do: func() error {
			return errors.Join(s.Write(ctx, 0, rowsOf(1, 2)), s.Write(ctx, 1, rowsOf(3)))
		}},
		{name: "pre-commit epoch 1", do: func() error {
			p0, err0 := s.PreCommit(ctx, 0, 1)
			p1, err1 := s.PreCommit(ctx, 1, 1)
			parts1 = [][]byte{p0, p1}
			return errors.Join(err0, err1)
		}},
		{name: "write epoch 2 on worker 0 only", do: func() error { return s.Write(ctx, 0, rowsOf(4)) }},
		{name: "commit epoch 1", do: func() error { return s.Commit(ctx, 1, parts1) },
			wantFiles: []string{"orders-g0003-e00000001-w00.jsonl", "orders-g0003-e00000001-w01.jsonl"}, wantRows: "1,2,3"},
		{name: "replay the commit of epoch 1", do: func() error { return s.Commit(ctx, 1, parts1) },
			wantFiles: []string{"orders-g0003-e00000001-w00.jsonl", "orders-g0003-e00000001-w01.jsonl"}, wantRows: "1,2,3"},
		{name: "pre-commit epoch 2 (worker 1 wrote nothing)", do: func() error {
			p0, err0 := s.PreCommit(ctx, 0, 2)
			p1, err1 := s.PreCommit(ctx, 1, 2)
			if p1 != nil {
				return errors.New("a worker that wrote nothing has a part")
			}
			parts2 = [][]byte{p0, p1}
			return errors.Join(err0, err1)
		}, wantFiles: []string{"orders-g0003-e00000001-w00.jsonl", "orders-g0003-e00000001-w01.jsonl"}, wantRows: "1,2,3"},
		{name: "write epoch 3, then crash before its barrier", do: func() error { return s.Write(ctx, 0, rowsOf(99)) },
			wantFiles: []string{"orders-g0003-e00000001-w00.jsonl", "orders-g0003-e00000001-w01.jsonl"}, wantRows: "1,2,3"},
		{name: "after the crash, the restored checkpoint's commit (epoch 2)", do: func() error {
			s = newSink()
			return s.Commit(ctx, 2, parts2)
		}, wantFiles: []string{"orders-g0003-e00000001-w00.jsonl", "orders-g0003-e00000001-w01.jsonl", "orders-g0003-e00000002-w00.jsonl"}, wantRows: "1,2,3,4"},
		{name: "epoch 3 replayed by the new execution", do: func() error {
			if err := s.Write(ctx, 0, rowsOf(5)); err != nil {
				return err
			}
			p, err := s.PreCommit(ctx, 0, 3)
			if err != nil {
				return err
			}
			return s.Commit(ctx, 3, [][]byte{p})
		}, wantFiles: []string{"orders-g0003-e00000001-w00.jsonl", "orders-g0003-e00000001-w01.jsonl", "orders-g0003-e00000002-w00.jsonl", "orders-g0003-e00000003-w00.jsonl"}, wantRows: "1,2,3,4,5"},
		{name: "close", do: func() error { return s.Close(ctx) },
			wantFiles: []string{"orders-g0003-e00000001-w00.jsonl", "orders-g0003-e00000001-w01.jsonl", "orders-g0003-e00000002-w00.jsonl", "orders-g0003-e00000003-w00.jsonl"}, wantRows: "1,2,3,4,5"},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if _, err := os.Stat(out); err != nil && st.wantFiles == nil {
			continue // nothing created yet
		}
		names, content := visible(t, out)
		if !slices.Equal(names, st.wantFiles) {
			t.Errorf("%s: visible files %v, want %v", st.name, names, st.wantFiles)
		}
		if got := nsOf(t, content); got != st.wantRows {
			t.Errorf("%s: visible rows %s, want %s", st.name, got, st.wantRows)
		}
	}
	if err := s.Commit(ctx, 4, [][]byte{[]byte(PartName(path, 3, 4, 0))}); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("committing a part that is nowhere: %v, want an error saying it is missing", err)
	}
	if err := s.Commit(ctx, 4, [][]byte{[]byte("../escape.jsonl")}); err == nil {
		t.Error("a part name with a directory was committed")
	}
}

// nsOf returns the "n" fields of JSON lines, comma-separated, sorted.
func nsOf(t *testing.T, content string) string {
	t.Helper()
	var ns []string
	for _, l := range strings.Split(strings.TrimSpace(content), "\n") {
		if l == "" {
			continue
		}
		ns = append(ns, strings.TrimSuffix(strings.TrimPrefix(l, `{"n":`), "}"))
	}
	slices.Sort(ns)
	return strings.Join(ns, ",")
}

// TestEpochSinkWithoutCheckpoints: an execution that takes no checkpoints
// only closes the sink, which finalises what each worker wrote.
func TestEpochSinkWithoutCheckpoints(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "totals.csv")
	s, err := NewEpochSink(SinkConfig{Path: path, Format: CSV, Schema: testSchema, Owner: &Owner{JobName: "t", JobID: "j", Generation: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, 0, rowsOf(7, 8)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "totals-g0001-e00000001-w00.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "n\n7\n8\n" {
		t.Errorf("part %q, want a CSV file with its header", b)
	}
}

// TestSinkFileModes: created files are 0640 unless the config says
// otherwise (issue 11 item 6), part files and owner files included.
func TestSinkFileModes(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		mode os.FileMode
		want os.FileMode
	}{
		{name: "default", want: 0o640},
		{name: "file_mode 0600", mode: 0o600, want: 0o600},
	}
	old := setUmask(0o022)
	defer setUmask(old)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			one := filepath.Join(dir, "new", "one.jsonl")
			s := NewFileSink(SinkConfig{Path: one, Format: JSONLines, Mode: tc.mode, Owner: &Owner{JobName: "a", JobID: "1"}})
			if err := errors.Join(s.Write(ctx, 0, rowsOf(1)), s.Close(ctx)); err != nil {
				t.Fatal(err)
			}
			parts := filepath.Join(dir, "parts.jsonl")
			es, err := NewEpochSink(SinkConfig{Path: parts, Format: JSONLines, Mode: tc.mode, Owner: &Owner{JobName: "b", JobID: "2", Generation: 1}})
			if err != nil {
				t.Fatal(err)
			}
			if err := errors.Join(es.Write(ctx, 0, rowsOf(1)), es.Close(ctx)); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{one, OwnerFile(one), filepath.Join(dir, PartName(parts, 1, 1, 0)), OwnerFile(parts)} {
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode().Perm() != tc.want {
					t.Errorf("%s: mode %v, want %v", filepath.Base(p), fi.Mode().Perm(), tc.want)
				}
			}
			fi, err := os.Stat(filepath.Dir(one))
			if err != nil {
				t.Fatal(err)
			}
			if want := dirMode(tc.want); fi.Mode().Perm() != want {
				t.Errorf("created directory: mode %v, want %v", fi.Mode().Perm(), want)
			}
		})
	}
}

// TestCheckOutput: who may write a sink's path (issue 12 item 13).
func TestCheckOutput(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	write := func(path string, o Owner, parts bool) {
		t.Helper()
		var err error
		if parts {
			var s *EpochSink
			if s, err = NewEpochSink(SinkConfig{Path: path, Format: JSONLines, Owner: &o}); err == nil {
				err = errors.Join(s.Write(ctx, 0, rowsOf(1)), s.Close(ctx))
			}
		} else {
			s := NewFileSink(SinkConfig{Path: path, Format: JSONLines, Owner: &o})
			err = errors.Join(s.Write(ctx, 0, rowsOf(1)), s.Close(ctx))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	foreign := filepath.Join(dir, "foreign.jsonl")
	if err := os.WriteFile(foreign, []byte("mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	batch := filepath.Join(dir, "batch.jsonl")
	write(batch, Owner{JobName: "daily", JobID: "d1", Generation: 1}, false)
	stream := filepath.Join(dir, "stream.jsonl")
	write(stream, Owner{JobName: "live", JobID: "l1", Generation: 1}, true)
	// A failed job's empty file: it wrote nothing.
	empty := filepath.Join(dir, "empty.jsonl")
	if err := claimOutput(empty, Owner{JobName: "daily2", JobID: "e1", Generation: 1}, LayoutFile, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	unowned := filepath.Join(dir, "unowned.jsonl")
	if err := os.WriteFile(filepath.Join(dir, PartName(unowned, 1, 1, 0)), []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		path    string
		owner   Owner
		layout  string
		wantErr string // "" for allowed
	}{
		{name: "a new path", path: filepath.Join(dir, "new.jsonl"), owner: Owner{JobName: "x", JobID: "x1"}, layout: LayoutFile},
		{name: "a file weir did not create", path: foreign, owner: Owner{JobName: "x", JobID: "x1"}, layout: LayoutFile, wantErr: "weir did not create"},
		{name: "a file weir did not create, streaming", path: foreign, owner: Owner{JobName: "x", JobID: "x1"}, layout: LayoutParts, wantErr: "weir did not create"},
		{name: "part files weir did not record", path: unowned, owner: Owner{JobName: "x", JobID: "x1"}, layout: LayoutParts, wantErr: "weir did not create"},
		{name: "another job name's file", path: batch, owner: Owner{JobName: "other", JobID: "o1"}, layout: LayoutFile, wantErr: "output of job daily"},
		{name: "another job name's parts", path: stream, owner: Owner{JobName: "other", JobID: "o1"}, layout: LayoutParts, wantErr: "output of job live"},
		{name: "a rerun of the name over its file", path: batch, owner: Owner{JobName: "daily", JobID: "d2", Generation: 2}, layout: LayoutFile, wantErr: "earlier job of daily"},
		{name: "a rerun of the name over its empty file", path: empty, owner: Owner{JobName: "daily2", JobID: "e2", Generation: 2}, layout: LayoutFile},
		{name: "another job name over an empty file", path: empty, owner: Owner{JobName: "other", JobID: "o1"}, layout: LayoutFile, wantErr: "output of job daily2"},
		{name: "the same job again (a restart)", path: batch, owner: Owner{JobName: "daily", JobID: "d1", Generation: 1}, layout: LayoutFile},
		{name: "a new streaming job of the name", path: stream, owner: Owner{JobName: "live", JobID: "l2", Generation: 2}, layout: LayoutParts},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckOutput(tc.path, tc.owner, tc.layout)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckOutput = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrOutputExists) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("CheckOutput = %v, want ErrOutputExists saying %q", err, tc.wantErr)
			}
		})
	}
	// A new streaming job of the name writes new parts: the earlier ones
	// stay as they were.
	before, _ := visible(t, dir)
	write(stream, Owner{JobName: "live", JobID: "l2", Generation: 2}, true)
	after, _ := visible(t, dir)
	for _, name := range before {
		if !slices.Contains(after, name) {
			t.Errorf("the second job of live removed %s", name)
		}
	}
	if !slices.Contains(after, PartName(stream, 2, 1, 0)) {
		t.Errorf("the second job of live wrote no part of generation 2: %v", after)
	}
	// A sink refuses to write a path another name claimed since its check.
	s := NewFileSink(SinkConfig{Path: stream, Format: JSONLines, Owner: &Owner{JobName: "late", JobID: "z"}})
	if err := s.Write(ctx, 0, rowsOf(1)); !errors.Is(err, ErrOutputExists) {
		t.Errorf("a sink wrote over another name's output: %v", err)
	}
}

// TestGenerationGlob: the glob of a generation's parts matches its
// committed parts only (not another generation's, not hidden files).
func TestGenerationGlob(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "orders.jsonl")
	for _, n := range []string{PartName(path, 3, 1, 0), PartName(path, 3, 2, 1), PartName(path, 4, 1, 0), ".orders-g0003-w00.jsonl.inprogress"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := filepath.Glob(GenerationGlob(path, 3))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, PartName(path, 3, 1, 0)), filepath.Join(dir, PartName(path, 3, 2, 1))}
	if !slices.Equal(got, want) {
		t.Errorf("GenerationGlob matched %v, want %v", got, want)
	}
}
