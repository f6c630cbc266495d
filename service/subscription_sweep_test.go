package service

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/service/record"
)

// openShiftedBroker opens a service with broker b on a clock tests move
// forward, and a rollback retention of one hour.
func openShiftedBroker(t *testing.T, dataDir string, b *pubsub.Broker) (*Service, *shiftClock) {
	t.Helper()
	clock := &shiftClock{base: time.Now()}
	s, err := Open(context.Background(), Options{DataDir: dataDir, CheckpointInterval: 50 * time.Millisecond, RollbackRetention: time.Hour,
		Clock: clock, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Broker: b})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s, clock
}

// TestSubscriptionSweep (issue 22 item 7): a topic source's subscription,
// made by the service for the job, is kept while the job runs (read by
// it), then after the job ended for the rollback retention (the next job
// of the name reads on from it), and deleted by the sweep once that has
// passed; a later job of the name makes it again. Who made it and why it
// is kept are said at each step; a user's named subscription is never
// touched.
func TestSubscriptionSweep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b := startBroker(t, dir, "recipe-events")
	if _, err := b.CreateSubscription(ctx, "users-own", "recipe-events", pubsub.SubscriptionConfig{}); err != nil {
		t.Fatal(err)
	}
	s, clock := openShiftedBroker(t, filepath.Join(dir, "data"), b)
	sub := pubsub.SubscriptionName("sums", "Events")
	y := strings.Replace(recipeYAML, "%s", filepath.Join(dir, "totals.sqlite"), 1)
	exists := func() bool {
		_, err := b.Subscription(ctx, sub)
		return err == nil
	}
	use := func() (SubscriptionUse, bool) {
		t.Helper()
		uses, err := s.SubscriptionUses()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := uses["users-own"]; ok {
			t.Errorf("the user's own subscription is listed as the service's: %+v", uses["users-own"])
		}
		u, ok := uses[sub]
		return u, ok
	}
	sweep := func() []string {
		t.Helper()
		got, err := s.replace.SweepSubscriptions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	j := submit(t, s, "sums", y, dir)
	waitFor(t, s, j.ID, "RUNNING", func(j *record.Job) bool { return j.State == record.StateRunning })
	publishRecipe(t, b, 0, 10, nil)
	waitBacklog(t, s, b, sub)
	u, ok := use()
	if !ok || u.MadeBy.ID != j.ID || u.Step != "Events" || len(u.ReadBy) != 1 || u.ReadBy[0].ID != j.ID || !strings.Contains(u.Kept, "read by "+j.ID) {
		t.Fatalf("while the job runs: %+v (listed %v)", u, ok)
	}
	if got := sweep(); len(got) != 0 || !exists() {
		t.Fatalf("the sweep deleted %v while the job ran", got)
	}

	cancelAndWait(t, s, j.ID)
	publishRecipe(t, b, 10, 20, nil) // the backlog an abandoned subscription grows
	u, ok = use()
	if !ok || len(u.ReadBy) != 0 || !strings.Contains(u.Kept, "next job of sums reads on") || u.KeepUntil == nil {
		t.Fatalf("after the cancel: %+v (listed %v)", u, ok)
	}
	if got := sweep(); len(got) != 0 || !exists() {
		t.Fatalf("the sweep deleted %v within the rollback retention", got)
	}

	clock.advance(time.Hour + time.Minute)
	u, ok = use()
	if !ok || u.Kept != "" {
		t.Fatalf("after the retention: %+v (listed %v), want nothing keeping it", u, ok)
	}
	if got := sweep(); len(got) != 1 || got[0] != sub || exists() {
		t.Fatalf("after the retention the sweep deleted %v (the subscription exists: %v), want %s deleted", got, exists(), sub)
	}
	if _, ok := use(); ok {
		t.Errorf("a deleted subscription is still listed")
	}
	if got := sweep(); len(got) != 0 {
		t.Errorf("a second sweep deleted %v again", got)
	}
	if _, err := b.Subscription(ctx, "users-own"); err != nil {
		t.Errorf("the user's own subscription: %v", err)
	}

	// A later job of the name makes it again, and reads it.
	j2 := submit(t, s, "sums", y, dir)
	waitFor(t, s, j2.ID, "RUNNING", func(j *record.Job) bool { return j.State == record.StateRunning })
	if !exists() {
		t.Fatalf("the next job of the name did not make its subscription again")
	}
	if u, ok = use(); !ok || len(u.ReadBy) != 1 || u.ReadBy[0].ID != j2.ID {
		t.Fatalf("the next job's subscription: %+v (listed %v)", u, ok)
	}
	if got := sweep(); len(got) != 0 || !exists() {
		t.Fatalf("the sweep deleted %v while the next job ran", got)
	}
}
