package service

// Parallel replacements of jobs and pipelines that read a named
// subscription (the scenarios of TestParallelReplace with named set are in
// replace_parallel_test.go).

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/io/pubsub"
)

// checkNamedRecord checks the record of the new job fin of a parallel
// replacement in which named ("old", "new", "both") read the named
// subscription par-sub: the new job reads its own subscription, in place
// of par-sub when its step names it, and the record says what happens to
// par-sub.
func checkNamedRecord(t *testing.T, fin *record.Job, named string) {
	t.Helper()
	ps := fin.Replacement.Parallel.Subscriptions
	if len(ps) != 1 {
		t.Fatalf("flow subscriptions %+v, want one", ps)
	}
	notes := strings.Join(fin.Replacement.Notes, "\n")
	if oldNamed := named != "new"; ps[0].OldNamed != oldNamed || ps[0].OldDeleted == oldNamed ||
		oldNamed != strings.Contains(notes, "subscription par-sub, which job "+fin.ReplacesJobID+" reads, is the user's") {
		t.Errorf("old subscription %+v, notes %q: want it the user's (kept, said so) = %v", ps[0], notes, oldNamed)
	}
	if newNamed := named != "old"; newNamed != (ps[0].InsteadOf == "par-sub") || newNamed && fin.Subscriptions["Events"] != ps[0].New ||
		newNamed != strings.Contains(notes, "in place of the named subscription par-sub") {
		t.Errorf("new subscription %+v, job subscriptions %v, notes %q: want %s read in place of par-sub = %v", ps[0], fin.Subscriptions, notes, ps[0].New, newNamed)
	}
}

// TestParallelNamedSubscriptionReplacedAgain: a job reading the user's
// named subscription par-sub is replaced in parallel (the new job reads
// sums--g2--Events in place of par-sub), that job is replaced in parallel
// again (its subscription, the service's, is deleted at the cut-over) and
// then stopped-and-replaced under a new name (its subscription handed
// over to sums-v2--Events and deleted): par-sub is never deleted, each job
// reads on where its predecessor stood, and the view's consumer never
// sees a double count or a total going backwards; at the end every total
// equals the ground truth.
func TestParallelNamedSubscriptionReplacedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, b, clock := openParallel(t, dir)
	if _, err := b.CreateSubscription(ctx, "par-sub", "par-events", pubsub.SubscriptionConfig{FromBeginning: true}); err != nil {
		t.Fatal(err)
	}
	sinkCfg, view := parDrivers()[0].setup(t, dir)
	defer view.close()
	base := time.Now().Add(30 * time.Minute).Truncate(time.Minute)
	p := strings.Replace(fmt.Sprintf(parYAML, sinkCfg), "topic: par-events", "subscription: par-sub", 1)
	var all []srEvent
	publish := func(evs []srEvent) []srEvent { publishPar(t, b, evs); all = append(all, evs...); return evs }
	old := submit(t, s, "sums", p, dir)
	ph1 := publish(parEvents(base, 0, 30, 1))
	waitElements(t, s, old.ID, "Events", int64(len(ph1)))
	waitAcked(t, s, b, "par-sub")
	cons := startConsumer(s, view)
	exists := func(sub string) bool {
		_, err := b.Subscription(ctx, sub)
		if err != nil && !errors.Is(err, pubsub.ErrSubscriptionNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	parallel := func(from, to int, seed int64) *record.Job {
		t.Helper()
		clock.advance(DefaultMinReplaceInterval)
		res, err := s.Update(ctx, UpdateRequest{SubmitRequest: SubmitRequest{Name: "sums", Pipeline: p, BaseDir: dir,
			ServiceOptions: []string{"update_strategy_parallel_job_update", "parallel_replace_job_min_parallel_pipelines_duration=0s", "parallel_replace_job_max_stop_duration=5m", "weir_replace_rewind=false"}}})
		if err != nil {
			t.Fatalf("parallel replacement: %v", err)
		}
		evs := publish(parEvents(base, from, to, seed))
		fin := waitFor(t, s, res.Job.ID, "CUT_OVER", func(j *record.Job) bool { return j.Replacement.Phase.Final() })
		if fin.Replacement.Phase != record.PhaseCutOver || fin.State != record.StateRunning {
			t.Fatalf("new job after the flow: %s %+v (error %q)", fin.State, fin.Replacement, fin.Error)
		}
		waitElements(t, s, fin.ID, "Events", int64(len(evs)))
		return fin
	}
	nj1 := parallel(30, 60, 1000)
	ps1 := nj1.Replacement.Parallel.Subscriptions[0]
	if ps1.Old != "par-sub" || !ps1.OldNamed || ps1.OldDeleted || ps1.InsteadOf != "par-sub" || ps1.New != "sums--g2--Events" || nj1.Subscriptions["Events"] != ps1.New {
		t.Fatalf("first replacement: %+v, job subscriptions %v", ps1, nj1.Subscriptions)
	}
	nj2 := parallel(60, 90, 2000)
	ps2 := nj2.Replacement.Parallel.Subscriptions[0]
	if ps2.Old != ps1.New || ps2.OldNamed || !ps2.OldDeleted || ps2.InsteadOf != "par-sub" || nj2.Subscriptions["Events"] != ps2.New {
		t.Fatalf("second replacement: %+v, job subscriptions %v", ps2, nj2.Subscriptions)
	}
	// What a delete or seek of a subscription would break: the job reads
	// its own subscription, not par-sub.
	if uses, err := s.PubSubUsers("", "par-sub"); err != nil || len(uses) != 0 {
		t.Fatalf("users of par-sub after the cut-over: %+v %v, want none", uses, err)
	}
	if uses, err := s.PubSubUsers("", ps2.New); err != nil || len(uses) != 1 || uses[0].Job.ID != nj2.ID || !strings.Contains(uses[0].Use, "in place of par-sub") {
		t.Fatalf("users of %s: %+v %v, want job %s", ps2.New, uses, err, nj2.ID)
	}
	if exists(ps1.New) || !exists("par-sub") {
		t.Fatalf("after the second cut-over: %s exists %v (want deleted), par-sub exists %v (want kept)", ps1.New, exists(ps1.New), exists("par-sub"))
	}
	// A stop-and-replace under a new name hands the service's
	// subscription over.
	clock.advance(DefaultMinReplaceInterval)
	nj3, err := s.Submit(ctx, SubmitRequest{Name: "sums-v2", Pipeline: p, BaseDir: dir,
		ServiceOptions: []string{"parallel_replace_job_name=sums", "parallel_replace_job_max_stop_duration=5m", "weir_replace_rewind=false"}})
	if err != nil {
		t.Fatalf("stop-and-replace under a new name: %v", err)
	}
	fin := waitPhase(t, s, nj3.ID)
	hs := fin.Replacement.Handover
	if fin.Replacement.Phase != record.PhaseCutOver || fin.State != record.StateRunning || len(hs) != 1 || hs[0].Old != ps2.New || hs[0].New != "sums-v2--Events" ||
		hs[0].InsteadOf != "par-sub" || !hs[0].OldDeleted || hs[0].Topic != "par-events" || fin.Subscriptions["Events"] != hs[0].New {
		t.Fatalf("stop-and-replace: %s %+v, job subscriptions %v (error %q)", fin.State, fin.Replacement, fin.Subscriptions, fin.Error)
	}
	if exists(ps2.New) || !exists("par-sub") || !exists(hs[0].New) {
		t.Fatalf("after the stop-and-replace: %s exists %v (want deleted), par-sub %v and %s %v (want kept)", ps2.New, exists(ps2.New), exists("par-sub"), hs[0].New, exists(hs[0].New))
	}
	waitFor(t, s, nj3.ID, "its execution", func(j *record.Job) bool { return s.core.RunningJob(j.ID) != nil })
	ph4 := publish(parEvents(base, 90, 120, 3000))
	waitElements(t, s, nj3.ID, "Events", int64(len(ph4)))
	if _, err := s.Drain(ctx, nj3.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, s, nj3.ID, "DRAINED and committed", drainedAndCommitted)
	if diff := diffTotals(cons.finish(t), parTruth(all)); diff != "" {
		t.Fatalf("the view %s against the ground truth:\n%s", view.name, diff)
	}
}
