package compat_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/yamlpipe"
)

// A running job whose graph was stored before a Beam-style Combine's
// window and pane became element metadata only (testdata/beam_window_meta:
// each *_stored.json is the graph weir 8e672fd stored for the YAML file of
// its name (base directory /srv/weir), with window_start, window_end and
// pane columns in the windowed Combines' rows) can be updated in place by
// the same file loaded today: the rows' shape is a representation, not
// state.
//
// A Join reading such a Combine stores its input rows, whose row type lost
// the three fields: the check warns (STORED_WINDOW_FIELDS_DROPPED) and lets
// the update go ahead, wherever the fields were in the row (after a
// MapToFields with append) and under a Join of a Join's suffixed names.
// Combines whose accumulators hold lists of the rows' values (top-N, group,
// concat) store only the values' types, which did not change. A windowed
// Beam Combine's count of a field counts elements now (Beam's count): the
// stored counter is the same, so that is COMBINE_FN_CHANGED, a warning
// saying what the stored counts left out. A stored row
// type that changed in any other way is still STATE_CODER_CHANGED.
func TestWindowMetadataRepresentationIsCompatible(t *testing.T) {
	// retype gives the Join's stored rows of input s another type for
	// total: a genuinely different coder.
	retype := func(t *testing.T, p *graph.Pipeline) {
		t.Helper()
		s := p.Step("WithBest/group")
		if s == nil || s.StoredCoder == nil || s.StoredCoder.Fields[0].Name != "s" {
			t.Fatalf("no stored rows of input s in WithBest/group: %+v", s)
		}
		f := &s.StoredCoder.Fields[0]
		if !strings.Contains(f.Type, "total:int") {
			t.Fatalf("input s's rows have no total:int: %s", f.Type)
		}
		f.Type = strings.Replace(f.Type, "total:int", "total:float", 1)
	}
	tests := []struct {
		name, pipeline, stored string
		mutate                 func(*testing.T, *graph.Pipeline)
		want                   want
	}{
		{name: "combine", pipeline: "pipeline.yaml", stored: "stored.json",
			want: want{compatible: true, matches: []string{"Best->Best", "ReadEvents->ReadEvents", "SumPerUser->SumPerUser"}}},
		{name: "join", pipeline: "join.yaml", stored: "join_stored.json",
			want: want{compatible: true, warnings: []string{"WithBest/group STORED_WINDOW_FIELDS_DROPPED"},
				matches: []string{"Best->Best", "ReadEvents->ReadEvents", "SumPerUser->SumPerUser", "WithBest/group->WithBest/group"},
				text:    []string{"s: window_start, window_end, pane; b: window_start, window_end, pane"}}},
		{name: "join shapes", pipeline: "join_shapes.yaml", stored: "join_shapes_stored.json",
			want: want{compatible: true, warnings: []string{"Again/group STORED_WINDOW_FIELDS_DROPPED", "CountPerUser COMBINE_FN_CHANGED", "WithCount/group STORED_WINDOW_FIELDS_DROPPED"},
				text: []string{"w: window_start, window_end, pane, window_start0, window_end0, pane0; t: window_start, window_end, pane",
					"s: window_start, window_end, pane; c: window_start, window_end, pane",
					"count at position 1 of its accumulator counted the non-null values of a field and count elements now"}}},
		{name: "combine fns", pipeline: "combine_fns.yaml", stored: "combine_fns_stored.json",
			want: want{compatible: true, matches: []string{"AllUsers->AllUsers", "Leaders->Leaders", "ReadEvents->ReadEvents", "SumPerUser->SumPerUser"}}},
		{name: "join with a changed field type", pipeline: "join.yaml", stored: "join_stored.json", mutate: retype,
			want: want{errors: []string{"WithBest/group STATE_CODER_CHANGED"}, notText: []string{"STORED_WINDOW_FIELDS_DROPPED"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join("testdata", "beam_window_meta")
			stored, err := os.ReadFile(filepath.Join(dir, tc.stored))
			if err != nil {
				t.Fatal(err)
			}
			old, err := graph.Parse(stored)
			if err != nil {
				t.Fatal(err)
			}
			p, err := yamlpipe.LoadFile(filepath.Join(dir, tc.pipeline), yamlpipe.Options{BaseDir: "/srv/weir"})
			if err != nil {
				t.Fatal(err)
			}
			g := p.Graph()
			if tc.mutate != nil {
				tc.mutate(t, g)
			}
			tc.want.check(t, compat.Check(old, g, compat.Options{}))
		})
	}
}

// TestWeirCombineRowsAreTheOldBeamRows: weir's own Combine (no language)
// gives today exactly the rows, and so the stored coders, that weir 8e672fd
// gave a windowed Combine with language: join.yaml without its language
// keys has every key, stored and collection coder of join_stored.json. The
// service's update test (TestUpdateJoinStoredBeforeWindowMetadata) relies
// on it to run a job whose graph and state have the old shape.
func TestWeirCombineRowsAreTheOldBeamRows(t *testing.T) {
	dir := filepath.Join("testdata", "beam_window_meta")
	stored, err := os.ReadFile(filepath.Join(dir, "join_stored.json"))
	if err != nil {
		t.Fatal(err)
	}
	old, err := graph.Parse(stored)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(dir, "join.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	weirs := strings.ReplaceAll(string(src), "language: python", "# no language")
	p, err := yamlpipe.Load("join.yaml", []byte(weirs), yamlpipe.Options{BaseDir: "/srv/weir"})
	if err != nil {
		t.Fatal(err)
	}
	now := p.Graph()
	coder := func(c *graph.Coder) string {
		if c == nil {
			return "none"
		}
		return c.String()
	}
	for _, o := range old.Steps {
		n := now.Step(o.Name)
		if n == nil {
			t.Errorf("step %s is gone", o.Name)
			continue
		}
		if coder(o.KeyCoder) != coder(n.KeyCoder) || coder(o.StoredCoder) != coder(n.StoredCoder) {
			t.Errorf("step %s: key %s stored %s, 8e672fd: key %s stored %s", o.Name, coder(n.KeyCoder), coder(n.StoredCoder), coder(o.KeyCoder), coder(o.StoredCoder))
		}
	}
	for _, oc := range old.Collections {
		nc := now.Collection(oc.ID)
		if nc == nil {
			t.Errorf("collection %s is gone", oc.ID)
			continue
		}
		if oc.Coder.String() != nc.Coder.String() {
			t.Errorf("collection %s: %s, 8e672fd: %s", oc.ID, nc.Coder.String(), oc.Coder.String())
		}
	}
	if r := compat.Check(old, now, compat.Options{}); !r.Compatible || len(r.Warnings) != 0 {
		t.Errorf("the check of 8e672fd's graph against weir's Combines: %+v", r)
	}
}
