package service

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/io/pubsub"
)

// TestCreateFromSnapshotKeepsCombineSlots starts a job from a snapshot
// whose Combine stored total then n, with its outputs declared in another
// order and a new one first: the restore reads each stored accumulator
// into its output (the snapshot's graph gives the slots), and a restart
// after the new job's own checkpoints reads them the same way (its own
// graph records the slot order). Every key's total and count is the
// snapshot's plus what was published after the cut.
func TestCreateFromSnapshotKeepsCombineSlots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b := startBroker(t, dir, "recipe-events")
	data := filepath.Join(dir, "data")
	s := openServiceWithBroker(t, data, b)
	snap, j := recipeSnapshot(t, s, b, "totals", filepath.Join(dir, "totals.sqlite"), dir)
	drainTotals(t, s, j.ID, filepath.Join(dir, "totals.sqlite"))

	want := map[string][2]int64{}
	addRecipe(want, 0, 400)
	db := filepath.Join(dir, "reordered.sqlite")
	pipeline := strings.Replace(fmt.Sprintf(recipeYAML, db), "          total: {value: amount, fn: sum}\n          n: {value: amount, fn: count}\n",
		"          biggest: {value: amount, fn: max}\n          n: {value: amount, fn: count}\n          total: {value: amount, fn: sum}\n", 1)
	if !strings.Contains(pipeline, "biggest") {
		t.Fatal("the test's pipeline did not change")
	}
	res, err := s.CreateFromSnapshot(ctx, FromSnapshotRequest{SubmitRequest: SubmitRequest{Name: "reordered",
		Pipeline: pipeline, PipelineFile: "p.yaml", BaseDir: dir}, SnapshotID: snap.ID})
	if err != nil {
		t.Fatalf("CreateFromSnapshot with the outputs reordered: %v", err)
	}
	found := false
	for _, w := range res.Report.Warnings {
		found = found || w.Code == errcode.CombineOutputsChanged
	}
	if !found {
		t.Errorf("the report lacks %s: %+v", errcode.CombineOutputsChanged, res.Report.Warnings)
	}
	publishRecipe(t, b, 400, 550, want)
	sub := pubsub.SubscriptionName("reordered", "Events")
	waitBacklog(t, s, b, sub)
	waitCheckpointsAfter(t, s, 2, res.Job.ID)
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s = openServiceWithBroker(t, data, b)
	publishRecipe(t, b, 550, 700, want)
	waitBacklog(t, s, b, sub)
	got := drainTotals(t, s, res.Job.ID, db)
	if w := rowsOf(want); strings.Join(got, "\n") != strings.Join(w, "\n") {
		t.Errorf("the job from the snapshot (key total count):\n%s\nthe snapshot's sums and what came after:\n%s", strings.Join(got, "\n"), strings.Join(w, "\n"))
	}
}
