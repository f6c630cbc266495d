package service

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-dev/weir/errcode"
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
	f := drainedRecipeSnapshot(t)
	db := filepath.Join(f.dir, "reordered.sqlite")
	pipeline := strings.Replace(fmt.Sprintf(recipeYAML, db), "          total: {value: amount, fn: sum}\n          n: {value: amount, fn: count}\n",
		"          biggest: {value: amount, fn: max}\n          n: {value: amount, fn: count}\n          total: {value: amount, fn: sum}\n", 1)
	if !strings.Contains(pipeline, "biggest") {
		t.Fatal("the test's pipeline did not change")
	}
	res, got, _ := f.fromSnapshotAcrossRestart(t, "reordered", pipeline, 1, db)
	found := false
	for _, w := range res.Report.Warnings {
		found = found || w.Code == errcode.CombineOutputsChanged
	}
	if !found {
		t.Errorf("the report lacks %s: %+v", errcode.CombineOutputsChanged, res.Report.Warnings)
	}
	want := map[string][2]int64{}
	addRecipe(want, 0, 700) // the snapshot's messages and those published after it
	if w := rowsOf(want); strings.Join(got, "\n") != strings.Join(w, "\n") {
		t.Errorf("the job from the snapshot (key total count):\n%s\nthe snapshot's sums and what came after:\n%s", strings.Join(got, "\n"), strings.Join(w, "\n"))
	}
}
