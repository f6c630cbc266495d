package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
)

// TestOrderingKeyHeldBackAfterKill: with message ordering, a message
// delivered and not acknowledged before the server is killed (SIGKILL)
// still holds its ordering key back after the restart, as Pub/Sub's rule
// says (when a message is delivered again, every later message of its key
// is delivered after it): the first delivery after the restart is its
// redelivery, and the key's later messages follow in order. Before, the
// restarted server started with every key free and handed out message 2
// at once, before message 1 came again at its ack deadline.
func TestOrderingKeyHeldBackAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	dir, work := t.TempDir(), t.TempDir()
	ctx := context.Background()
	srv := startServer(t, dir)
	if r := srv.cli(work, "topics", "create", "t"); r.code != ExitOK {
		t.Fatalf("topics create: %d %s%s", r.code, r.stdout, r.stderr)
	}
	t.Setenv("PUBSUB_EMULATOR_HOST", srv.grpcAddr())
	client, err := gpubsub.NewClient(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	const sub = "projects/p/subscriptions/o"
	if _, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub, Topic: "projects/p/topics/t",
		AckDeadlineSeconds: 10, EnableMessageOrdering: true}); err != nil {
		t.Fatal(err)
	}
	p := client.Publisher("t")
	p.EnableMessageOrdering = true
	for _, d := range []string{"1", "2", "3"} {
		if _, err := p.Publish(ctx, &gpubsub.Message{Data: []byte(d), OrderingKey: "k"}).Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	p.Stop()
	r, err := client.SubscriptionAdminClient.Pull(ctx, &pubsubpb.PullRequest{Subscription: sub, MaxMessages: 1})
	if err != nil || len(r.GetReceivedMessages()) != 1 || string(r.GetReceivedMessages()[0].GetMessage().GetData()) != "1" {
		t.Fatalf("first pull: %v %v, want message 1", r.GetReceivedMessages(), err)
	}
	client.Close()
	srv.stop(syscall.SIGKILL) // message 1 delivered, not acknowledged

	srv = startServer(t, dir)
	t.Setenv("PUBSUB_EMULATOR_HOST", srv.grpcAddr())
	client, err = gpubsub.NewClient(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var order []string
	for len(order) < 3 {
		r, err := client.SubscriptionAdminClient.Pull(pctx, &pubsubpb.PullRequest{Subscription: sub, MaxMessages: 10})
		if err != nil {
			t.Fatalf("Pull after the restart: %v (got %v)", err, order)
		}
		var ids []string
		for _, rm := range r.GetReceivedMessages() {
			order = append(order, string(rm.GetMessage().GetData()))
			ids = append(ids, rm.GetAckId())
		}
		if len(ids) > 0 {
			if err := client.SubscriptionAdminClient.Acknowledge(ctx, &pubsubpb.AcknowledgeRequest{Subscription: sub, AckIds: ids}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := strings.Join(order, ","); got != "1,2,3" {
		t.Fatalf("after the restart the deliveries came in the order %s, want 1 (again), then 2, 3", got)
	}
}
