package service

import (
	"context"
	"strings"
	"testing"

	"github.com/weir-dev/weir/service/record"
)

// TestLineageHistoryAcrossNames: the history of a name whose first job
// replaced a job under another name (parallel_replace_job_name) starts
// with that name's generations it continues, each marked with its name,
// across a chain of names (sums → sums-v2 → sums-v3); the old name's own
// history is unchanged. It showed only the name's own jobs.
func TestLineageHistoryAcrossNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, _, clock := openWithBroker(t, dir)
	j1 := submit(t, s, "sums", streamingYAML, dir)
	waitFor(t, s, j1.ID, "a checkpoint", checkpointed(1))
	up, err := s.Update(ctx, UpdateRequest{SubmitRequest: streamingReq("sums", dir)})
	if err != nil {
		t.Fatalf("in-place update: %v", err)
	}
	j2 := up.Job
	prev := j2
	var ids []string
	for _, name := range []string{"sums-v2", "sums-v3"} {
		waitFor(t, s, prev.ID, "a checkpoint", checkpointed(1))
		clock.advance(DefaultMinReplaceInterval)
		req := streamingReq(name, dir, "parallel_replace_job_name="+prev.Name,
			"parallel_replace_job_max_stop_duration=1m", "weir_replace_rewind=false")
		// A file sink belongs to one name: each name writes its own.
		req.Pipeline = strings.Replace(req.Pipeline, "out/sums.jsonl", "out/"+name+".jsonl", 1)
		nj, err := s.Submit(ctx, req)
		if err != nil {
			t.Fatalf("stop-and-replace under the new name %s: %v", name, err)
		}
		if fin := waitPhase(t, s, nj.ID); fin.Replacement.Phase != record.PhaseCutOver {
			t.Fatalf("%s: %+v", name, fin.Replacement)
		}
		ids = append(ids, nj.ID)
		if prev, err = s.Get(nj.ID); err != nil {
			t.Fatal(err)
		}
	}
	want := []struct {
		id, name, how string
		gen           int64
	}{
		{j1.ID, "sums", HowCreate, 1},
		{j2.ID, "sums", HowInPlaceUpdate, 2},
		{ids[0], "sums-v2", HowStopAndReplace, 3},
		{ids[1], "", HowStopAndReplace, 4},
	}
	h, err := s.LineageHistory("sums-v3")
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != len(want) {
		t.Fatalf("history of sums-v3: %d generations, want %d: %+v", len(h), len(want), h)
	}
	for i, w := range want {
		if g := h[i]; g.JobID != w.id || g.JobName != w.name || g.How != w.how || g.Generation != w.gen {
			t.Errorf("generation %d: job %s name %q how %s gen %d; want job %s name %q how %s gen %d",
				i, g.JobID, g.JobName, g.How, g.Generation, w.id, w.name, w.how, w.gen)
		}
	}
	h, err = s.LineageHistory("sums")
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 2 || h[0].JobName != "" || h[1].JobName != "" {
		t.Fatalf("history of sums: %+v", h)
	}
}
