package schedules

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/service/record"
)

func TestCheckFileSetTemplates(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   []string
		sides   map[string]string
		ready   string
		wantErr string
	}{
		{name: "a directory per set", files: []string{"/in/{partition}/*.jsonl"}, ready: "/in/{partition}/_SUCCESS"},
		{name: "literal text around it", files: []string{"/in/sales-{partition}.csv"}},
		{name: "no files", wantErr: "--files PATTERN"},
		{name: "no partition", files: []string{"/in/*.jsonl"}, wantErr: "once"},
		{name: "twice", files: []string{"/in/{partition}/{partition}.jsonl"}, wantErr: "once"},
		{name: "a glob beside it", files: []string{"/in/*-{partition}/x.jsonl"}, wantErr: "literal"},
		{name: "** after it", files: []string{"/in/{partition}/**.jsonl"}},
		{name: "** before it", files: []string{"/in/**/{partition}/x.jsonl"}, wantErr: "** may come only after the {partition} segment"},
		{name: "a time field", files: []string{"/in/{partition}/{YYYY}.jsonl"}, wantErr: "drop {YYYY}"},
		{name: "a time field in a side input", files: []string{"/in/{partition}/x"}, sides: map[string]string{"r": "/ref/{DD}.csv"}, wantErr: "drop {DD}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckFileSetTemplates(tc.files, tc.sides, tc.ready)
			if (err != nil) != (tc.wantErr != "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("got %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
}

// TestDiscoverFileSets: the values of {partition} found on disk, with
// their newest file (below the set's directory: the pattern's ** crosses
// directories) and whether their ready file exists.
func TestDiscoverFileSets(t *testing.T) {
	dir := t.TempDir()
	old := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	write := func(rel string, at time.Time) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	write("in/a/1.jsonl", old)
	write("in/a/2.jsonl", old.Add(time.Minute))
	write("in/a/_SUCCESS", old)
	write("in/b/1.jsonl", old)
	write("in/b/notes.txt", old.Add(time.Hour)) // not an input
	write("in/b/deep/2.jsonl", old.Add(2*time.Minute))
	write("in/c.jsonl", old) // not in a set's directory
	sch := &record.Schedule{FileSets: true, Files: []string{filepath.Join(dir, "in/{partition}/**.jsonl")}, ReadyFile: filepath.Join(dir, "in/{partition}/_SUCCESS")}
	sets, err := DiscoverFileSets(sch)
	if err != nil {
		t.Fatal(err)
	}
	if len(sets) != 2 || sets["a"] == nil || sets["b"] == nil {
		t.Fatalf("found %v, want a and b", sets)
	}
	if a := sets["a"]; !a.Ready || !a.Newest.Equal(old.Add(time.Minute)) {
		t.Errorf("a: %+v, want ready, newest %s", a, old.Add(time.Minute))
	}
	// ** crosses directories: b's newest input is in b/deep.
	if b := sets["b"]; b.Ready || !b.Newest.Equal(old.Add(2*time.Minute)) {
		t.Errorf("b: %+v, want not ready, newest %s", b, old.Add(2*time.Minute))
	}
}

// TestDecideFileSets: a file set becomes a run once due, the first by ID
// of those due; runs keep the order they were found in; a retry comes
// first; a running run starts nothing.
func TestDecideFileSets(t *testing.T) {
	now := ts("2026-12-04T12:00:00Z")
	v1 := record.ScheduleVersion{Version: 1, From: ts("2026-12-01T00:00:00Z")}
	v2 := record.ScheduleVersion{Version: 2, From: ts("2026-12-04T11:00:00Z")}
	sch := func(ready string, delay string, vs ...record.ScheduleVersion) *record.Schedule {
		return &record.Schedule{FileSets: true, ReadyFile: ready, Delay: delay, Versions: vs}
	}
	set := func(id string, newest string, ready bool) *FileSet {
		return &FileSet{ID: id, Newest: ts(newest), Ready: ready}
	}
	for _, tc := range []struct {
		name    string
		sch     *record.Schedule
		runs    []record.ScheduleRun
		sets    []*FileSet
		want    string // partition started, "" none
		new     bool
		version int
		why     string
	}{
		{name: "ready files: the ready one", sch: sch("/r/{partition}", "0s", v1),
			sets: []*FileSet{set("b", "2026-12-04T10:00:00Z", false), set("c", "2026-12-04T10:00:00Z", true)}, want: "c", new: true, version: 1},
		{name: "none ready", sch: sch("/r/{partition}", "0s", v1),
			sets: []*FileSet{set("b", "2026-12-04T10:00:00Z", false)}, why: "waits for its ready file"},
		{name: "quiet for the delay: the first by ID", sch: sch("", "30m", v1),
			sets: []*FileSet{set("b", "2026-12-04T10:00:00Z", false), set("a", "2026-12-04T11:00:00Z", false)}, want: "a", new: true, version: 1},
		{name: "still changing", sch: sch("", "30m", v1),
			sets: []*FileSet{set("a", "2026-12-04T11:45:00Z", false)}, why: "is due at 2026-12-04T12:15:00Z"},
		{name: "a set with a run is not new", sch: sch("", "0s", v1),
			runs: []record.ScheduleRun{{Partition: "a", Start: ts("2026-12-03T00:00:00Z"), Status: record.RunPublished}},
			sets: []*FileSet{set("a", "2026-12-02T00:00:00Z", false)}, why: "no new file set"},
		{name: "a retry due first", sch: sch("", "0s", v1),
			runs: []record.ScheduleRun{{Partition: "z", Start: ts("2026-12-03T00:00:00Z"), Status: record.RunRetrying, NextAttempt: tp("2026-12-04T11:59:00Z")}},
			sets: []*FileSet{set("a", "2026-12-02T00:00:00Z", false)}, want: "z", version: 1},
		{name: "running: nothing starts", sch: sch("", "0s", v1),
			runs: []record.ScheduleRun{{Partition: "z", Start: ts("2026-12-03T00:00:00Z"), Status: record.RunRunning, JobID: "j"}},
			sets: []*FileSet{set("a", "2026-12-02T00:00:00Z", false)}, why: "is running"},
		{name: "found after a switch: the new version", sch: sch("", "0s", v1, v2),
			sets: []*FileSet{set("a", "2026-12-02T00:00:00Z", false)}, want: "a", new: true, version: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sets := map[string]*FileSet{}
			for _, s := range tc.sets {
				sets[s.ID] = s
			}
			st := DecideFileSets(tc.sch, tc.runs, sets, now)
			if tc.want == "" {
				if st.Start || !strings.Contains(st.Why, tc.why) {
					t.Errorf("got %+v, want nothing because %q", st, tc.why)
				}
				return
			}
			if !st.Start || st.Run.Partition != tc.want || st.New != tc.new || st.Version.Version != tc.version {
				t.Fatalf("got %+v, want partition %s (new %t) by version %d", st, tc.want, tc.new, tc.version)
			}
			if st.New && len(tc.runs) > 0 && !st.Run.Start.After(tc.runs[len(tc.runs)-1].Start) {
				t.Errorf("a new run found at %s, not after the last run's %s", st.Run.Start, tc.runs[len(tc.runs)-1].Start)
			}
		})
	}
}
