package pubsubgrpc_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/io/pubsub/pubsubgrpc"
)

func snapPath(id string) string { return "projects/" + project + "/snapshots/" + id }

// grpcSnapshots lists the snapshot names through the gRPC API.
func grpcSnapshots(t *testing.T, f *fixture) []string {
	t.Helper()
	var names []string
	it := f.client.SubscriptionAdminClient.ListSnapshots(context.Background(), &pubsubpb.ListSnapshotsRequest{Project: "projects/" + project})
	for {
		s, err := it.Next()
		if err != nil {
			break
		}
		names = append(names, strings.TrimPrefix(s.GetName(), "projects/"+project+"/snapshots/"))
	}
	return names
}

// pullAll pulls (and acknowledges) what weir's cumulative subscription sub
// has, as the HTTP API's pull does.
func pullAll(t *testing.T, b *pubsub.Broker, sub string) string {
	t.Helper()
	ms, err := b.Pull(context.Background(), sub, 100, true)
	if err != nil {
		t.Fatalf("Pull %s: %v", sub, err)
	}
	var out []string
	for _, m := range ms {
		out = append(out, string(m.Data))
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// TestSnapshotsSharedWithWeir: the gRPC API and weir's own API (the
// broker's methods, which weir's HTTP API and CLI call) keep subscription
// snapshots in one store. A snapshot made through either is listed,
// described and deleted through both, and a subscription of either kind
// seeks to a snapshot made through the other; a seek keeps each
// subscription's acknowledgement mode (per message for the gRPC API's).
func TestSnapshotsSharedWithWeir(t *testing.T) {
	f := start(t, pubsubgrpc.Options{})
	ctx := context.Background()
	sc := f.client.SubscriptionAdminClient
	f.topic(t, "t")
	f.subscription(t, "g", "t", false, 0)
	if _, err := f.b.CreateSubscription(ctx, "w", "t", pubsub.SubscriptionConfig{}); err != nil {
		t.Fatal(err)
	}
	p := f.client.Publisher("t")
	defer p.Stop()
	publish := func(data ...string) {
		for _, d := range data {
			if _, err := p.Publish(ctx, &gpubsub.Message{Data: []byte(d)}).Get(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish("a", "b")
	f.receive(t, "g", 2, nil)
	f.settled(t, "g")
	if got := pullAll(t, f.b, "w"); got != "a,b" {
		t.Fatalf("weir's subscription pulled %q", got)
	}

	// Made through gRPC, seen by weir.
	gs, err := sc.CreateSnapshot(ctx, &pubsubpb.CreateSnapshotRequest{Name: snapPath("from-grpc"), Subscription: subPath("g"), Labels: map[string]string{"team": "data"}})
	if err != nil {
		t.Fatalf("CreateSnapshot: %v", err)
	}
	ws, err := f.b.SubscriptionSnapshot(ctx, "from-grpc")
	if err != nil || ws.Subscription != "g" || ws.Topic != "t" || ws.AckFloor != 2 || ws.Labels["team"] != "data" ||
		!ws.ExpireTime.Equal(gs.GetExpireTime().AsTime()) {
		t.Fatalf("weir sees the gRPC snapshot as %+v, %v (gRPC: %v)", ws, err, gs)
	}
	// Made through weir, seen by gRPC.
	if _, err := f.b.CreateSubscriptionSnapshot(ctx, "from-weir", "w"); err != nil {
		t.Fatal(err)
	}
	got, err := sc.GetSnapshot(ctx, &pubsubpb.GetSnapshotRequest{Snapshot: snapPath("from-weir")})
	if err != nil || got.GetTopic() != topicPath("t") {
		t.Fatalf("gRPC sees weir's snapshot as %v, %v", got, err)
	}
	if names := grpcSnapshots(t, f); strings.Join(names, ",") != "from-grpc,from-weir" {
		t.Fatalf("gRPC ListSnapshots: %v", names)
	}
	if list, err := f.b.ListSubscriptionSnapshots(ctx, "t"); err != nil || len(list) != 2 {
		t.Fatalf("weir lists %+v, %v", list, err)
	}
	var topicSnaps []string
	tit := f.client.TopicAdminClient.ListTopicSnapshots(ctx, &pubsubpb.ListTopicSnapshotsRequest{Topic: topicPath("t")})
	for {
		s, err := tit.Next()
		if err != nil {
			break
		}
		topicSnaps = append(topicSnaps, s)
	}
	if len(topicSnaps) != 2 {
		t.Fatalf("ListTopicSnapshots: %v", topicSnaps)
	}
	if _, err := sc.CreateSnapshot(ctx, &pubsubpb.CreateSnapshotRequest{Name: snapPath("from-weir"), Subscription: subPath("g")}); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("gRPC CreateSnapshot of a name weir took: %v, want ALREADY_EXISTS", err)
	}

	publish("c", "d")
	if got := datas(f.receive(t, "g", 2, nil)); got != "c,d" {
		t.Fatalf("got %s", got)
	}
	f.settled(t, "g")
	if got := pullAll(t, f.b, "w"); got != "c,d" {
		t.Fatalf("weir's subscription pulled %q", got)
	}

	// weir's subscription seeks to the gRPC snapshot, through weir.
	if _, err := f.b.Seek(ctx, "w", pubsub.SeekTarget{Snapshot: "from-grpc"}); err != nil {
		t.Fatalf("weir seek to the gRPC snapshot: %v", err)
	}
	if got := pullAll(t, f.b, "w"); got != "c,d" {
		t.Fatalf("after seeking to the gRPC snapshot weir's subscription pulled %q, want c,d", got)
	}
	// The gRPC subscription seeks to weir's snapshot, through gRPC.
	if _, err := sc.Seek(ctx, &pubsubpb.SeekRequest{Subscription: subPath("g"), Target: &pubsubpb.SeekRequest_Snapshot{Snapshot: snapPath("from-weir")}}); err != nil {
		t.Fatalf("gRPC seek to weir's snapshot: %v", err)
	}
	if got := datas(f.receive(t, "g", 2, nil)); got != "c,d" {
		t.Fatalf("after seeking to weir's snapshot: %s", got)
	}
	f.settled(t, "g")
	// The gRPC subscription seeks through weir (its HTTP API's path) and
	// stays a per-message subscription.
	if _, err := f.b.Seek(ctx, "g", pubsub.SeekTarget{Snapshot: "from-grpc"}); err != nil {
		t.Fatalf("weir seek of the gRPC subscription: %v", err)
	}
	if info, err := f.b.Subscription(ctx, "g"); err != nil || !info.PerMessageAck {
		t.Fatalf("after weir's seek the gRPC subscription is %+v, %v: want per-message acknowledgements", info, err)
	}
	if got := datas(f.receive(t, "g", 2, nil)); got != "c,d" {
		t.Fatalf("after weir's seek of the gRPC subscription: %s", got)
	}

	// Deleted through one, gone from the other.
	if err := f.b.DeleteSubscriptionSnapshot(ctx, "from-grpc"); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.GetSnapshot(ctx, &pubsubpb.GetSnapshotRequest{Snapshot: snapPath("from-grpc")}); status.Code(err) != codes.NotFound {
		t.Fatalf("gRPC GetSnapshot of a snapshot weir deleted: %v", err)
	}
	if err := sc.DeleteSnapshot(ctx, &pubsubpb.DeleteSnapshotRequest{Snapshot: snapPath("from-weir")}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.b.SubscriptionSnapshot(ctx, "from-weir"); !errors.Is(err, pubsub.ErrSnapshotNotFound) {
		t.Fatalf("weir reads a snapshot gRPC deleted: %v", err)
	}
}

// TestLegacyGRPCSnapshotsMove: snapshots an earlier version of the gRPC
// API kept in its own bucket move into the one store on its first use
// (expired ones are dropped) and the old bucket is deleted; a name taken
// in the store keeps the store's snapshot and leaves the old one (and the
// bucket) in place.
func TestLegacyGRPCSnapshotsMove(t *testing.T) {
	f := start(t, pubsubgrpc.Options{})
	ctx := context.Background()
	f.topic(t, "t")
	f.subscription(t, "g", "t", false, 0)
	js := f.b.JetStream()
	legacy := func(entries map[string]time.Duration) {
		t.Helper()
		kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "WEIR_PUBSUB_GRPC_SNAPSHOTS", Storage: jetstream.FileStorage})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		for name, left := range entries {
			b, _ := json.Marshal(map[string]any{"topic": "t", "subscription": "g", "ack_floor": 7, "created": now.Add(-time.Hour),
				"expire": now.Add(left), "labels": map[string]string{"was": name}})
			if _, err := kv.Put(ctx, name, b); err != nil {
				t.Fatal(err)
			}
		}
	}
	legacy(map[string]time.Duration{"kept-1": 48 * time.Hour, "kept-2": time.Hour, "gone": -time.Minute})
	got, err := f.client.SubscriptionAdminClient.GetSnapshot(ctx, &pubsubpb.GetSnapshotRequest{Snapshot: snapPath("kept-1")})
	if err != nil || got.GetLabels()["was"] != "kept-1" || got.GetTopic() != topicPath("t") {
		t.Fatalf("the moved snapshot reads %v, %v", got, err)
	}
	if names := grpcSnapshots(t, f); strings.Join(names, ",") != "kept-1,kept-2" {
		t.Fatalf("after the move the store lists %v, want kept-1,kept-2", names)
	}
	if ws, err := f.b.SubscriptionSnapshot(ctx, "kept-2"); err != nil || ws.AckFloor != 7 || ws.Subscription != "g" {
		t.Fatalf("weir reads the moved snapshot as %+v, %v", ws, err)
	}
	if _, err := js.KeyValue(ctx, "WEIR_PUBSUB_GRPC_SNAPSHOTS"); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("the old bucket is still there: %v", err)
	}

	// A clash: kept-1 exists in the store; an old bucket holds another.
	legacy(map[string]time.Duration{"kept-1": 24 * time.Hour, "new-3": 24 * time.Hour})
	if names := grpcSnapshots(t, f); !slices.Equal(names, []string{"kept-1", "kept-2", "new-3"}) {
		t.Fatalf("after the second move the store lists %v", names)
	}
	if ws, err := f.b.SubscriptionSnapshot(ctx, "kept-1"); err != nil || ws.ExpireTime.Before(time.Now().Add(47*time.Hour)) {
		t.Fatalf("the store's kept-1 was replaced: %+v, %v", ws, err)
	}
	kv, err := js.KeyValue(ctx, "WEIR_PUBSUB_GRPC_SNAPSHOTS")
	if err != nil {
		t.Fatalf("the old bucket with a clashing snapshot was deleted: %v", err)
	}
	keys, err := kv.Keys(ctx)
	if err != nil || !slices.Equal(keys, []string{"kept-1"}) {
		t.Fatalf("the old bucket holds %v, %v; want only the clashing kept-1", keys, err)
	}
}
