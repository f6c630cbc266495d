package pubsubgrpc_test

import (
	"context"
	"sync"
	"testing"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/io/pubsub/pubsubgrpc"
)

// publishOne publishes data (with attrs) to topic and waits for its ID.
func (f *fixture) publishOne(t *testing.T, topic, data string, attrs map[string]string) {
	t.Helper()
	p := f.client.Publisher(topic)
	defer p.Stop()
	if _, err := p.Publish(context.Background(), &gpubsub.Message{Data: []byte(data), Attributes: attrs}).Get(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// pullOnce pulls up to 10 messages of sub, waiting the server's PullWait
// for a first one.
func (f *fixture) pullOnce(t *testing.T, sub string) []*pubsubpb.ReceivedMessage {
	t.Helper()
	r, err := f.client.SubscriptionAdminClient.Pull(context.Background(), &pubsubpb.PullRequest{Subscription: subPath(sub), MaxMessages: 10})
	if err != nil {
		t.Fatalf("Pull %s: %v", sub, err)
	}
	return r.GetReceivedMessages()
}

// TestDeadLetterPolicy: a message nacked on each of its
// max_delivery_attempts deliveries (each carrying its delivery_attempt)
// goes to the dead-letter topic, with Pub/Sub's attributes, instead of a
// further delivery; the subscription then holds nothing.
func TestDeadLetterPolicy(t *testing.T) {
	f := start(t, pubsubgrpc.Options{PullWait: 300 * time.Millisecond})
	ctx := context.Background()
	sc := f.client.SubscriptionAdminClient
	f.topic(t, "t")
	f.topic(t, "dead")
	f.subscription(t, "dead-sub", "dead", false, 0)
	if _, err := sc.CreateSubscription(ctx, &pubsubpb.Subscription{Name: subPath("s"), Topic: topicPath("t"),
		DeadLetterPolicy: &pubsubpb.DeadLetterPolicy{DeadLetterTopic: topicPath("dead"), MaxDeliveryAttempts: 5}}); err != nil {
		t.Fatal(err)
	}
	got, err := sc.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: subPath("s")})
	if err != nil || got.GetDeadLetterPolicy().GetMaxDeliveryAttempts() != 5 || got.GetDeadLetterPolicy().GetDeadLetterTopic() != topicPath("dead") {
		t.Fatalf("GetSubscription: %v %v", got.GetDeadLetterPolicy(), err)
	}
	f.publishOne(t, "t", "poison", map[string]string{"a": "1"})
	for attempt := int32(1); attempt <= 5; attempt++ {
		var ms []*pubsubpb.ReceivedMessage
		if !await.Until(30*time.Second, time.Millisecond, func() bool { ms = f.pullOnce(t, "s"); return len(ms) > 0 }) {
			t.Fatalf("attempt %d never came", attempt)
		}
		if len(ms) != 1 || ms[0].GetDeliveryAttempt() != attempt {
			t.Fatalf("delivery %d: %d messages, delivery_attempt %d", attempt, len(ms), ms[0].GetDeliveryAttempt())
		}
		if err := sc.ModifyAckDeadline(ctx, &pubsubpb.ModifyAckDeadlineRequest{Subscription: subPath("s"), AckIds: []string{ms[0].GetAckId()}}); err != nil {
			t.Fatal(err)
		}
	}
	var dead []*pubsubpb.ReceivedMessage
	if !await.Until(30*time.Second, time.Millisecond, func() bool { dead = f.pullOnce(t, "dead-sub"); return len(dead) > 0 }) {
		t.Fatal("nothing reached the dead-letter topic")
	}
	m := dead[0].GetMessage()
	if string(m.GetData()) != "poison" || m.GetAttributes()["a"] != "1" || m.GetAttributes()["CloudPubSubDeadLetterSourceDeliveryCount"] != "5" ||
		m.GetAttributes()["CloudPubSubDeadLetterSourceSubscription"] != "s" {
		t.Fatalf("dead-lettered message: %q %v", m.GetData(), m.GetAttributes())
	}
	if more := f.pullOnce(t, "s"); len(more) != 0 {
		t.Fatalf("the subscription delivered it again after the dead letter: %v", more)
	}
	// A dead-letter topic that does not exist, and attempts out of range.
	for _, dlp := range []*pubsubpb.DeadLetterPolicy{
		{DeadLetterTopic: topicPath("nope"), MaxDeliveryAttempts: 5},
		{DeadLetterTopic: topicPath("dead"), MaxDeliveryAttempts: 2},
	} {
		if _, err := sc.CreateSubscription(ctx, &pubsubpb.Subscription{Name: subPath("s2"), Topic: topicPath("t"), DeadLetterPolicy: dlp}); status.Code(err) == codes.OK {
			t.Errorf("CreateSubscription with %v succeeded", dlp)
		}
	}
}

// TestRetryPolicy: a nacked message comes again after the retry policy's
// backoff, not at once; the policy can be set by UpdateSubscription too.
func TestRetryPolicy(t *testing.T) {
	f := start(t, pubsubgrpc.Options{PullWait: 300 * time.Millisecond})
	ctx := context.Background()
	sc := f.client.SubscriptionAdminClient
	f.topic(t, "t")
	f.subscription(t, "s", "t", false, 0)
	if _, err := sc.UpdateSubscription(ctx, &pubsubpb.UpdateSubscriptionRequest{
		Subscription: &pubsubpb.Subscription{Name: subPath("s"), RetryPolicy: &pubsubpb.RetryPolicy{MinimumBackoff: durationpb.New(5 * time.Second), MaximumBackoff: durationpb.New(20 * time.Second)}},
		UpdateMask:   &fieldmaskpb.FieldMask{Paths: []string{"retry_policy"}}}); err != nil {
		t.Fatal(err)
	}
	got, err := sc.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: subPath("s")})
	if err != nil || got.GetRetryPolicy().GetMinimumBackoff().AsDuration() != 5*time.Second {
		t.Fatalf("GetSubscription: %v %v", got.GetRetryPolicy(), err)
	}
	f.publishOne(t, "t", "m", nil)
	var ms []*pubsubpb.ReceivedMessage
	if !await.Until(30*time.Second, time.Millisecond, func() bool { ms = f.pullOnce(t, "s"); return len(ms) > 0 }) {
		t.Fatal("no delivery")
	}
	if err := sc.ModifyAckDeadline(ctx, &pubsubpb.ModifyAckDeadlineRequest{Subscription: subPath("s"), AckIds: []string{ms[0].GetAckId()}}); err != nil {
		t.Fatal(err)
	}
	// Without a retry policy a nacked message is pulled again at once.
	if again := f.pullOnce(t, "s"); len(again) != 0 {
		t.Fatalf("the nacked message came again at once: the 5 s backoff was not applied")
	}
	if !await.Until(60*time.Second, time.Millisecond, func() bool { ms = f.pullOnce(t, "s"); return len(ms) > 0 }) || string(ms[0].GetMessage().GetData()) != "m" {
		t.Fatal("the nacked message never came again")
	}
	if _, err := sc.CreateSubscription(ctx, &pubsubpb.Subscription{Name: subPath("bad"), Topic: topicPath("t"),
		RetryPolicy: &pubsubpb.RetryPolicy{MinimumBackoff: durationpb.New(time.Minute), MaximumBackoff: durationpb.New(time.Second)}}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a minimum backoff above the maximum: %v", err)
	}
}

// TestSubscriptionFilter: a subscription with a filter receives only the
// messages whose attributes match; the others are acknowledged for it
// without delivery. A filter that does not parse is INVALID_ARGUMENT.
func TestSubscriptionFilter(t *testing.T) {
	f := start(t, pubsubgrpc.Options{})
	ctx := context.Background()
	sc := f.client.SubscriptionAdminClient
	f.topic(t, "t")
	const flt = `attributes.color = "red" AND NOT attributes:draft OR hasPrefix(attributes.region, "eu-")`
	if _, err := sc.CreateSubscription(ctx, &pubsubpb.Subscription{Name: subPath("bad"), Topic: topicPath("t"), Filter: flt}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a filter mixing AND and OR without parentheses: %v", err)
	}
	if _, err := sc.CreateSubscription(ctx, &pubsubpb.Subscription{Name: subPath("s"), Topic: topicPath("t"),
		Filter: `(attributes.color = "red" AND NOT attributes:draft) OR hasPrefix(attributes.region, "eu-")`}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		data  string
		attrs map[string]string
	}{
		{"red", map[string]string{"color": "red"}},
		{"red-draft", map[string]string{"color": "red", "draft": "1"}},
		{"blue", map[string]string{"color": "blue"}},
		{"eu", map[string]string{"region": "eu-west-1"}},
		{"none", nil},
	} {
		f.publishOne(t, "t", m.data, m.attrs)
	}
	got := f.receive(t, "s", 2, nil)
	if d := datas(got); d != "red,eu" && d != "eu,red" {
		t.Fatalf("received %s, want red,eu", d)
	}
	if !await.Until(30*time.Second, 10*time.Millisecond, func() bool {
		info, err := f.b.Subscription(ctx, "s")
		return err == nil && info.Backlog == 0
	}) {
		info, _ := f.b.Subscription(ctx, "s")
		t.Fatalf("the filtered-out messages were not acknowledged: %+v", info)
	}
	if s, err := sc.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: subPath("s")}); err != nil || s.GetFilter() == "" {
		t.Fatalf("GetSubscription: filter %q, %v", s.GetFilter(), err)
	}
}

// TestFilteredAckOutlivesItsRequest: the server's own acknowledgement of a
// message the client never sees (one its filter drops) lands even when the
// request that fetched it has ended — a Receive that returns while a
// filtered-out message is in flight must not leave it pending.
func TestFilteredAckOutlivesItsRequest(t *testing.T) {
	f := start(t, pubsubgrpc.Options{PullWait: 300 * time.Millisecond})
	ctx := context.Background()
	f.topic(t, "t")
	f.subscription(t, "s", "t", false, 0)
	f.publishOne(t, "t", "dropped", nil)
	got := f.pullOnce(t, "s")
	if len(got) != 1 {
		t.Fatalf("pulled %d messages, want 1", len(got))
	}
	if err := f.srv.AutoAckAfterEnd("s", got[0].GetAckId()); err != nil {
		t.Fatalf("an acknowledgement after its request ended: %v", err)
	}
	info, err := f.b.Subscription(ctx, "s")
	if err != nil || info.Backlog != 0 {
		t.Fatalf("backlog after the acknowledgement: %+v, %v", info, err)
	}
}

// TestExactlyOnceDelivery: with enable_exactly_once_delivery, Google's Go
// client acknowledges with results, and they succeed.
func TestExactlyOnceDelivery(t *testing.T) {
	f := start(t, pubsubgrpc.Options{})
	ctx := context.Background()
	sc := f.client.SubscriptionAdminClient
	f.topic(t, "t")
	if _, err := sc.CreateSubscription(ctx, &pubsubpb.Subscription{Name: subPath("s"), Topic: topicPath("t"), EnableExactlyOnceDelivery: true}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"a", "b", "c"} {
		f.publishOne(t, "t", d, nil)
	}
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	var statuses []gpubsub.AcknowledgeStatus
	err := f.client.Subscriber("s").Receive(rctx, func(ctx context.Context, m *gpubsub.Message) {
		st, err := m.AckWithResult().Get(ctx)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			t.Errorf("ack result of %s: %v", m.Data, err)
		}
		statuses = append(statuses, st)
		if len(statuses) == 3 {
			cancel()
		}
	})
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	for _, st := range statuses {
		if st != gpubsub.AcknowledgeStatusSuccess {
			t.Errorf("ack status %v, want success", st)
		}
	}
	if len(statuses) != 3 {
		t.Fatalf("%d ack results, want 3", len(statuses))
	}
}

// TestDetachSubscription: a detached subscription stays, says detached,
// and its pulls are FAILED_PRECONDITION.
func TestDetachSubscription(t *testing.T) {
	f := start(t, pubsubgrpc.Options{})
	ctx := context.Background()
	f.topic(t, "t")
	f.subscription(t, "s", "t", false, 0)
	if _, err := f.client.TopicAdminClient.DetachSubscription(ctx, &pubsubpb.DetachSubscriptionRequest{Subscription: subPath("s")}); err != nil {
		t.Fatal(err)
	}
	got, err := f.client.SubscriptionAdminClient.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: subPath("s")})
	if err != nil || !got.GetDetached() {
		t.Fatalf("GetSubscription after detach: detached %v, %v", got.GetDetached(), err)
	}
	_, err = f.client.SubscriptionAdminClient.Pull(ctx, &pubsubpb.PullRequest{Subscription: subPath("s"), MaxMessages: 1})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Pull from a detached subscription: %v, want FAILED_PRECONDITION", err)
	}
	if _, err := f.client.TopicAdminClient.DetachSubscription(ctx, &pubsubpb.DetachSubscriptionRequest{Subscription: subPath("s")}); err != nil {
		t.Fatalf("detaching again: %v", err)
	}
}

// TestTenMegabyteMessage: a message of (nearly) Pub/Sub's 10 MB, the
// largest Google's Go client publishes, goes through Publish, a streaming
// pull and a pull intact; a larger one is INVALID_ARGUMENT naming the
// limit.
func TestTenMegabyteMessage(t *testing.T) {
	f := start(t, pubsubgrpc.Options{PullWait: time.Second})
	ctx := context.Background()
	f.topic(t, "t")
	f.subscription(t, "s", "t", false, 60)
	f.subscription(t, "p", "t", false, 60)
	data := make([]byte, 9_990_000)
	for i := range data {
		data[i] = byte(i*7 + i/1000)
	}
	f.publishOne(t, "t", string(data), map[string]string{"k": "v"})
	f.publishOne(t, "t", "small", nil)
	got := f.receive(t, "s", 2, nil)
	if len(got) != 2 || string(got[0].Data) != string(data) && string(got[1].Data) != string(data) {
		t.Fatalf("streaming pull: %d messages, sizes %d and %d", len(got), len(got[0].Data), len(got[len(got)-1].Data))
	}
	var pulled []*pubsubpb.ReceivedMessage
	if !await.Until(30*time.Second, time.Millisecond, func() bool { pulled = append(pulled, f.pullOnce(t, "p")...); return len(pulled) >= 2 }) {
		t.Fatalf("pull: %d messages", len(pulled))
	}
	if string(pulled[0].GetMessage().GetData()) != string(data) || pulled[0].GetMessage().GetAttributes()["k"] != "v" {
		t.Fatalf("pull: the large message came back with %d bytes", len(pulled[0].GetMessage().GetData()))
	}
	// Over the limit, published through the raw API (Google's client
	// refuses it before sending).
	_, err := f.client.TopicAdminClient.Publish(ctx, &pubsubpb.PublishRequest{Topic: topicPath("t"),
		Messages: []*pubsubpb.PubsubMessage{{Data: make([]byte, 10<<20+1)}}})
	if status.Code(err) != codes.InvalidArgument && status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a message over 10 MiB: %v", err)
	}
}

// TestIDsWithDots: topic and subscription IDs with '.', '~', '+' and '%',
// as Pub/Sub allows, publish, receive, acknowledge and take a snapshot
// through Google's Go client; '*' (which Pub/Sub does not allow either) is
// INVALID_ARGUMENT naming the rule.
func TestIDsWithDots(t *testing.T) {
	f := start(t, pubsubgrpc.Options{})
	f.topic(t, "orders.eu~v2")
	f.subscription(t, "orders.eu+audit%1", "orders.eu~v2", false, 0)
	f.publishOne(t, "orders.eu~v2", "o1", nil)
	if got := f.receive(t, "orders.eu+audit%1", 1, nil); datas(got) != "o1" {
		t.Fatalf("received %s", datas(got))
	}
	if _, err := f.client.SubscriptionAdminClient.CreateSnapshot(context.Background(), &pubsubpb.CreateSnapshotRequest{
		Name: "projects/" + project + "/snapshots/s~1", Subscription: subPath("orders.eu+audit%1")}); err != nil {
		t.Fatalf("CreateSnapshot: %v", err)
	}
	if _, err := f.client.SubscriptionAdminClient.Seek(context.Background(), &pubsubpb.SeekRequest{Subscription: subPath("orders.eu+audit%1"),
		Target: &pubsubpb.SeekRequest_Snapshot{Snapshot: "projects/" + project + "/snapshots/s~1"}}); err != nil {
		t.Fatalf("Seek: %v", err)
	}
	_, err := f.client.TopicAdminClient.CreateTopic(context.Background(), &pubsubpb.Topic{Name: topicPath("a*b")})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("CreateTopic a~b: %v", err)
	}
}
