package pubsubgrpc_test

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/io/pubsub/pubsubgrpc"
)

// pullN pulls n messages of sub with the client's Pull and returns their
// ack IDs by data.
func pullN(t *testing.T, f *fixture, sub string, n int) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ids := map[string]string{}
	for len(ids) < n {
		r, err := f.client.SubscriptionAdminClient.Pull(ctx, &pubsubpb.PullRequest{Subscription: subPath(sub), MaxMessages: int32(n - len(ids))})
		if err != nil {
			t.Fatalf("Pull: %v (got %d of %d)", err, len(ids), n)
		}
		for _, rm := range r.GetReceivedMessages() {
			ids[string(rm.GetMessage().GetData())] = rm.GetAckId()
		}
	}
	return ids
}

// ackData acknowledges, with the client's Acknowledge and in the order
// given, the messages data of ids.
func ackData(t *testing.T, f *fixture, sub string, ids map[string]string, data ...string) {
	t.Helper()
	for _, d := range data {
		if err := f.client.SubscriptionAdminClient.Acknowledge(context.Background(),
			&pubsubpb.AcknowledgeRequest{Subscription: subPath(sub), AckIds: []string{ids[d]}}); err != nil {
			t.Fatalf("Acknowledge %s: %v", d, err)
		}
	}
}

// TestSeekToSnapshotKeepsPerMessageAcks: a snapshot holds which messages
// were acknowledged one by one, out of order, above the acknowledgement
// floor, as Pub/Sub's does. Ten messages, 1, 2, 3, 5 and 8 acknowledged
// (in the order 8, 3, 5, 1, 2), a snapshot, the rest acknowledged: a seek
// to the snapshot delivers again exactly 4, 6, 7, 9 and 10 (before, 5 and
// 8 came again too: the snapshot held only the floor, 3). A seek to a time
// still makes everything from that time unacknowledged.
func TestSeekToSnapshotKeepsPerMessageAcks(t *testing.T) {
	f := start(t, pubsubgrpc.Options{})
	ctx := context.Background()
	sc := f.client.SubscriptionAdminClient
	f.topic(t, "t")
	f.subscription(t, "s", "t", false, 600)
	p := f.client.Publisher("t")
	defer p.Stop()
	for i := 1; i <= 10; i++ {
		if _, err := p.Publish(ctx, &gpubsub.Message{Data: []byte(strconv.Itoa(i))}).Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ids := pullN(t, f, "s", 10)
	ackData(t, f, "s", ids, "8", "3", "5", "1", "2")
	if _, err := sc.CreateSnapshot(ctx, &pubsubpb.CreateSnapshotRequest{Name: snapPath("snap"), Subscription: subPath("s")}); err != nil {
		t.Fatalf("CreateSnapshot: %v", err)
	}
	snap, err := f.b.SubscriptionSnapshot(ctx, "snap")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"1", "2", "3", "5", "8"} {
		q, _ := strconv.ParseUint(d, 10, 64)
		if q > snap.AckFloor && !held(snap.Acked, q) {
			t.Errorf("the snapshot does not hold %s as acknowledged: floor %d, acked %v", d, snap.AckFloor, snap.Acked)
		}
	}
	ackData(t, f, "s", ids, "4", "6", "7", "9", "10")
	f.settled(t, "s")

	if _, err := sc.Seek(ctx, &pubsubpb.SeekRequest{Subscription: subPath("s"), Target: &pubsubpb.SeekRequest_Snapshot{Snapshot: snapPath("snap")}}); err != nil {
		t.Fatalf("Seek to the snapshot: %v", err)
	}
	if got := datas(f.receive(t, "s", 5, nil)); got != "10,4,6,7,9" {
		t.Fatalf("after the seek to the snapshot: %s, want 4, 6, 7, 9 and 10", got)
	}
	f.settled(t, "s")
	if r, err := sc.Pull(ctx, &pubsubpb.PullRequest{Subscription: subPath("s"), MaxMessages: 10, ReturnImmediately: true}); err != nil || len(r.GetReceivedMessages()) != 0 {
		t.Fatalf("more after the seek: %v %v", r.GetReceivedMessages(), err)
	}

	// A second seek to the same snapshot, now through weir's API (the
	// HTTP API's and CLI's), and a pull as weir's HTTP API pulls.
	if _, err := f.b.Seek(ctx, "s", pubsub.SeekTarget{Snapshot: "snap"}); err != nil {
		t.Fatalf("weir's seek: %v", err)
	}
	if got := pullUntil(t, f.b, "s", 5); got != "10,4,6,7,9" {
		info, err := f.b.Subscription(ctx, "s")
		t.Fatalf("weir's pull after weir's seek: %s (%+v %v)", got, info, err)
	}

	// A seek to a time before everything: all ten again, the restored
	// acknowledgements forgotten.
	if _, err := sc.Seek(ctx, &pubsubpb.SeekRequest{Subscription: subPath("s"), Target: &pubsubpb.SeekRequest_Time{Time: timestamppb.New(time.Unix(0, 0))}}); err != nil {
		t.Fatalf("Seek to a time: %v", err)
	}
	if got := datas(f.receive(t, "s", 10, nil)); got != "1,10,2,3,4,5,6,7,8,9" {
		t.Fatalf("after the seek to a time: %s", got)
	}
}

// pullUntil pulls (and acknowledges) from sub as weir's HTTP API does
// until n messages came (or 20s passed), and returns them sorted. More
// than one pull may be needed: deliveries a finished streaming pull's
// fetch got after the seek come back a moment later.
func pullUntil(t *testing.T, b *pubsub.Broker, sub string, n int) string {
	t.Helper()
	var got []string
	await.Until(20*time.Second, 10*time.Millisecond, func() bool {
		ms, err := b.Pull(context.Background(), sub, 100, true)
		if err != nil {
			t.Fatalf("Pull %s: %v", sub, err)
		}
		for _, m := range ms {
			got = append(got, string(m.Data))
		}
		return len(got) >= n
	})
	sort.Strings(got)
	return strings.Join(got, ",")
}

func held(runs []pubsub.SeqRange, q uint64) bool {
	for _, r := range runs {
		if r.First <= q && q <= r.Last {
			return true
		}
	}
	return false
}

// TestAcksOfDeliveriesBeforeASeekAreIgnored: after a seek, an
// acknowledgement that comes with the ack ID of a delivery made before it
// is ignored, as Pub/Sub ignores ack IDs that are no longer valid. Before,
// weir recorded it though JetStream had dropped the delivery, so a
// snapshot taken next held the message as acknowledged and a seek to it
// skipped a message nobody had acknowledged since; and once the message
// was delivered again, the stale ack ID acknowledged the new delivery.
func TestAcksOfDeliveriesBeforeASeekAreIgnored(t *testing.T) {
	f := start(t, pubsubgrpc.Options{})
	ctx := context.Background()
	sc := f.client.SubscriptionAdminClient
	f.topic(t, "t")
	f.subscription(t, "s", "t", false, 600)
	p := f.client.Publisher("t")
	defer p.Stop()
	for i := 1; i <= 3; i++ {
		if _, err := p.Publish(ctx, &gpubsub.Message{Data: []byte(strconv.Itoa(i))}).Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	seekToStart := func() {
		t.Helper()
		if _, err := sc.Seek(ctx, &pubsubpb.SeekRequest{Subscription: subPath("s"), Target: &pubsubpb.SeekRequest_Time{Time: timestamppb.New(time.Unix(0, 0))}}); err != nil {
			t.Fatalf("Seek to a time: %v", err)
		}
	}
	old := pullN(t, f, "s", 3)
	seekToStart()
	ackData(t, f, "s", old, "1", "2", "3") // not an error: ignored
	if _, err := sc.CreateSnapshot(ctx, &pubsubpb.CreateSnapshotRequest{Name: snapPath("snap"), Subscription: subPath("s")}); err != nil {
		t.Fatalf("CreateSnapshot: %v", err)
	}
	snap, err := f.b.SubscriptionSnapshot(ctx, "snap")
	if err != nil {
		t.Fatal(err)
	}
	if snap.AckFloor != 0 || len(snap.Acked) != 0 {
		t.Fatalf("the snapshot holds acknowledgements of deliveries made before the seek: floor %d, acked %v; want none", snap.AckFloor, snap.Acked)
	}

	// Delivered again after the seek: the old ack IDs do not acknowledge
	// the new deliveries either.
	seekToStart()
	again := pullN(t, f, "s", 3)
	ackData(t, f, "s", old, "1", "2", "3")
	var ids []string
	for _, id := range again {
		ids = append(ids, id)
	}
	if err := sc.ModifyAckDeadline(ctx, &pubsubpb.ModifyAckDeadlineRequest{Subscription: subPath("s"), AckIds: ids, AckDeadlineSeconds: 0}); err != nil {
		t.Fatalf("ModifyAckDeadline 0: %v", err)
	}
	third := pullN(t, f, "s", 3)
	ackData(t, f, "s", third, "1", "2", "3")
	f.settled(t, "s")
}
