package console_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/server"
)

// TestConsoleLineageReplacement: after a stop-and-replace, the lineage
// page names the strategy from the jobs' replacement records, shows the
// recorded phase and fields (job IDs linked), and links the two jobs both
// ways (replaces_job_id, replaced_by_job_id).
func TestConsoleLineageReplacement(t *testing.T) {
	t.Parallel()
	ctx := newBrowser(t)
	p, c := startWeir(t, server.Config{MinReplaceInterval: -1})
	old := submit(t, c, "swap", streamingYAML)
	waitJob(t, c, old.ID, "the job runs and checkpoints", running)
	res, err := c.Update(context.Background(), client.UpdateRequest{SubmitRequest: client.SubmitRequest{Name: "swap", Pipeline: streamingYAML, BaseDir: t.TempDir(),
		ServiceOptions: []string{"update_strategy_parallel_job_update", "weir_replace_rewind=false", "parallel_replace_job_max_stop_duration=5m"}}})
	if err != nil {
		t.Fatalf("stop-and-replace: %v", err)
	}
	nj := res.Job.ID
	fin := waitJob(t, c, nj, "the flow cut over", func(j *client.Job) bool {
		return j.State == client.StateRunning && j.Replacement != nil && j.Replacement.Phase == client.PhaseCutOver
	})
	o := waitJob(t, c, old.ID, "the old job drained", func(j *client.Job) bool { return j.State.Terminal() && j.ReplacedByJobID == nj })

	if err := chromedp.Do(ctx, chromedp.Navigate(p.Address()+"/lineage/swap"),
		present(fmt.Sprintf(`li[data-job-id=%q] .replacement`, nj))); err != nil {
		t.Fatalf("the lineage page shows no replacement: %v", err)
	}
	type gen struct {
		How, Strategy, Phase, Successor, Predecessor, OldField, NewField string
	}
	read := func(id string) gen {
		t.Helper()
		var g gen
		if err := evaluate(ctx, fmt.Sprintf(`(() => { const li = document.querySelector('li[data-job-id=%q]'); const r = li.querySelector('.replacement') || {dataset: {}};
			const f = (k) => { const td = li.querySelector('.replacement tr[data-field="' + k + '"] td'); return td ? td.textContent : ''; };
			return {How: li.querySelector('strong').textContent, Strategy: r.dataset.strategy || '', Phase: r.dataset.phase || '',
				Successor: (li.querySelector('a.successor') || {dataset: {}}).dataset.successor || '',
				Predecessor: (li.querySelector('a.predecessor') || {dataset: {}}).dataset.predecessor || '',
				OldField: f('old_job_id'), NewField: f('new_job_id')}; })()`, id), &g); err != nil {
			t.Fatal(err)
		}
		return g
	}
	if g := read(nj); g.How != "stop-and-replace" || g.Strategy != fin.Replacement.Strategy || g.Phase != string(fin.Replacement.Phase) ||
		g.Predecessor != old.ID || g.OldField != old.ID || g.NewField != nj+" (this job)" {
		t.Errorf("the new job's generation shows %+v, want a stop-and-replace of %s at phase %s", g, old.ID, fin.Replacement.Phase)
	}
	if g := read(old.ID); g.Successor != nj || g.Phase != string(o.Replacement.Phase) || g.NewField != nj {
		t.Errorf("the old job's generation shows %+v, want replaced by %s at phase %s", g, nj, o.Replacement.Phase)
	}
	screenshot(t, ctx, "console-lineage-replacement")
}
