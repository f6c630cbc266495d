package compat_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/yamlpipe"
)

// A running job whose graph was stored before a Beam-style Combine's
// window and pane became element metadata only (testdata/beam_window_meta:
// stored.json is the graph weir 8e672fd stored for pipeline.yaml (base
// directory /srv/weir), with
// window_start, window_end and pane columns in the Combine's rows) can be
// updated in place by the same file loaded today: the rows' shape is a
// representation, not state.
//
// A Join reading such a Combine stores its input rows, whose shape did
// change: that update is refused (join.yaml), never read wrongly.
func TestWindowMetadataRepresentationIsCompatible(t *testing.T) {
	tests := []struct {
		pipeline, stored string
		want             want
	}{
		{"pipeline.yaml", "stored.json", want{compatible: true, matches: []string{"Best->Best", "ReadEvents->ReadEvents", "SumPerUser->SumPerUser"}}},
		{"join.yaml", "join_stored.json", want{errors: []string{"WithBest/group STATE_CODER_CHANGED"}}},
	}
	for _, tc := range tests {
		t.Run(tc.pipeline, func(t *testing.T) {
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
			tc.want.check(t, compat.Check(old, p.Graph(), compat.Options{}))
		})
	}
}
