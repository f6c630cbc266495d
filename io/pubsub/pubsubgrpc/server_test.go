package pubsubgrpc_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/io/pubsub/pubsubgrpc"
)

const project = "test-project"

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fixture is a broker, the gRPC API over it on a loopback port, and
// Google's Go client pointed at it with PUBSUB_EMULATOR_HOST.
type fixture struct {
	b      *pubsub.Broker
	srv    *pubsubgrpc.Server
	addr   string
	client *gpubsub.Client
}

func start(t testing.TB, opts pubsubgrpc.Options) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := pubsub.StartEmbedded(ctx, pubsub.Options{StoreDir: t.TempDir(), Logger: quiet()})
	if err != nil {
		t.Fatalf("StartEmbedded: %v", err)
	}
	opts.Logger = quiet()
	srv := pubsubgrpc.New(b, opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	f := &fixture{b: b, srv: srv, addr: ln.Addr().String()}
	t.Setenv("PUBSUB_EMULATOR_HOST", f.addr)
	if f.client, err = gpubsub.NewClient(ctx, project); err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() {
		f.client.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Stop(ctx)
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if err := b.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return f
}

func topicPath(id string) string { return "projects/" + project + "/topics/" + id }
func subPath(id string) string   { return "projects/" + project + "/subscriptions/" + id }

func (f *fixture) topic(t testing.TB, id string) {
	t.Helper()
	if _, err := f.client.TopicAdminClient.CreateTopic(context.Background(), &pubsubpb.Topic{Name: topicPath(id)}); err != nil {
		t.Fatalf("CreateTopic %s: %v", id, err)
	}
}

func (f *fixture) subscription(t testing.TB, id, topic string, ordered bool, ackSecs int32) {
	t.Helper()
	_, err := f.client.SubscriptionAdminClient.CreateSubscription(context.Background(), &pubsubpb.Subscription{
		Name: subPath(id), Topic: topicPath(topic), EnableMessageOrdering: ordered, AckDeadlineSeconds: ackSecs})
	if err != nil {
		t.Fatalf("CreateSubscription %s: %v", id, err)
	}
}

// receive runs the client's streaming pull until n messages arrived (or
// 30s passed), acknowledging each, and returns them in arrival order.
func (f *fixture) receive(t *testing.T, sub string, n int, settings func(*gpubsub.ReceiveSettings)) []*gpubsub.Message {
	t.Helper()
	s := f.client.Subscriber(sub)
	if settings != nil {
		settings(&s.ReceiveSettings)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	var got []*gpubsub.Message
	err := s.Receive(ctx, func(_ context.Context, m *gpubsub.Message) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, m)
		m.Ack()
		if len(got) >= n {
			cancel()
		}
	})
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	if len(got) < n {
		t.Fatalf("received %d messages, want %d", len(got), n)
	}
	// The client closes its streams as Receive returns; the server ends
	// them a moment later (at most one fetch wait). A message the broker
	// hands a closing stream goes to a client that no longer reads and is
	// delivered again only after its ack deadline, so wait for them to end
	// before the test changes the subscription (a seek) and receives again.
	if !await.Until(10*time.Second, 5*time.Millisecond, func() bool { return f.srv.OpenStreams(sub) == 0 }) {
		t.Fatalf("subscription %s: %d streaming pulls still open after Receive returned", sub, f.srv.OpenStreams(sub))
	}
	return got
}

func TestClientPublishesAndReceivesThroughStreamingPull(t *testing.T) {
	f := start(t, pubsubgrpc.Options{})
	ctx := context.Background()
	f.topic(t, "orders")
	f.subscription(t, "orders-reader", "orders", false, 0)

	before := time.Now().Add(-time.Second)
	p := f.client.Publisher("orders")
	defer p.Stop()
	const n = 50
	ids := map[string]int{}
	for i := range n {
		r := p.Publish(ctx, &gpubsub.Message{Data: []byte(fmt.Sprintf(`{"n":%d}`, i)), Attributes: map[string]string{"i": strconv.Itoa(i), "kind": "order"}})
		id, err := r.Get(ctx)
		if err != nil {
			t.Fatalf("Publish %d: %v", i, err)
		}
		ids[id] = i
	}
	if len(ids) != n {
		t.Fatalf("%d distinct message IDs for %d messages", len(ids), n)
	}
	got := f.receive(t, "orders-reader", n, nil)
	seen := map[int]bool{}
	for _, m := range got {
		i, ok := ids[m.ID]
		if !ok {
			t.Fatalf("message ID %q was not returned by Publish", m.ID)
		}
		if want := fmt.Sprintf(`{"n":%d}`, i); string(m.Data) != want {
			t.Errorf("message %s: data %q, want %q", m.ID, m.Data, want)
		}
		if m.Attributes["i"] != strconv.Itoa(i) || m.Attributes["kind"] != "order" || len(m.Attributes) != 2 {
			t.Errorf("message %s: attributes %v", m.ID, m.Attributes)
		}
		if m.PublishTime.Before(before) || m.PublishTime.After(time.Now()) {
			t.Errorf("message %s: publish time %v outside the test", m.ID, m.PublishTime)
		}
		seen[i] = true
	}
	if len(seen) != n {
		t.Fatalf("received %d distinct messages, want %d", len(seen), n)
	}
	// Every message was acknowledged: nothing is delivered again (the
	// deadline is 10s; the acknowledgements are confirmed on Stop of
	// Receive, so the subscription's backlog is the check).
	if !await.Until(10*time.Second, 20*time.Millisecond, func() bool {
		info, err := f.b.Subscription(ctx, "orders-reader")
		return err == nil && info.Backlog == 0
	}) {
		info, _ := f.b.Subscription(ctx, "orders-reader")
		t.Fatalf("backlog after acknowledging everything: %+v", info)
	}
}

func TestPullModifyAckDeadlineAndRedelivery(t *testing.T) {
	f := start(t, pubsubgrpc.Options{})
	ctx := context.Background()
	f.topic(t, "t")
	f.subscription(t, "s", "t", false, 10)
	p := f.client.Publisher("t")
	defer p.Stop()
	for i := range 3 {
		if _, err := p.Publish(ctx, &gpubsub.Message{Data: []byte{byte('a' + i)}}).Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	sc := f.client.SubscriptionAdminClient
	pull := func(immediately bool) []*pubsubpb.ReceivedMessage {
		t.Helper()
		r, err := sc.Pull(ctx, &pubsubpb.PullRequest{Subscription: subPath("s"), MaxMessages: 10, ReturnImmediately: immediately})
		if err != nil {
			t.Fatalf("Pull: %v", err)
		}
		return r.GetReceivedMessages()
	}
	first := pull(false)
	if len(first) != 3 {
		t.Fatalf("pulled %d messages, want 3", len(first))
	}
	// Within the deadline nothing is delivered again.
	if again := pull(true); len(again) != 0 {
		t.Fatalf("pulled %d messages again within their deadline", len(again))
	}
	// a is acknowledged, b's deadline becomes 1s, c goes back at once.
	if err := sc.Acknowledge(ctx, &pubsubpb.AcknowledgeRequest{Subscription: subPath("s"), AckIds: []string{first[0].AckId}}); err != nil {
		t.Fatalf("Acknowledge: %v", err)
	}
	if err := sc.ModifyAckDeadline(ctx, &pubsubpb.ModifyAckDeadlineRequest{Subscription: subPath("s"), AckIds: []string{first[1].AckId}, AckDeadlineSeconds: 1}); err != nil {
		t.Fatalf("ModifyAckDeadline: %v", err)
	}
	if err := sc.ModifyAckDeadline(ctx, &pubsubpb.ModifyAckDeadlineRequest{Subscription: subPath("s"), AckIds: []string{first[2].AckId}, AckDeadlineSeconds: 0}); err != nil {
		t.Fatalf("ModifyAckDeadline 0: %v", err)
	}
	var redelivered []string
	if !await.Until(15*time.Second, 50*time.Millisecond, func() bool {
		for _, m := range pull(true) {
			redelivered = append(redelivered, string(m.GetMessage().GetData()))
			if err := sc.Acknowledge(ctx, &pubsubpb.AcknowledgeRequest{Subscription: subPath("s"), AckIds: []string{m.AckId}}); err != nil {
				t.Fatalf("Acknowledge: %v", err)
			}
		}
		return len(redelivered) >= 2
	}) {
		t.Fatalf("redelivered %q, want c and b", redelivered)
	}
	if strings.Join(redelivered, ",") != "c,b" {
		t.Fatalf("redelivered %q, want c (nacked) then b (deadline of 1s passed)", redelivered)
	}
	if again := pull(true); len(again) != 0 {
		t.Fatalf("pulled %d messages after acknowledging all", len(again))
	}
}

func TestReceiveRedeliversNackedMessages(t *testing.T) {
	f := start(t, pubsubgrpc.Options{})
	ctx := context.Background()
	f.topic(t, "t")
	f.subscription(t, "s", "t", false, 0)
	p := f.client.Publisher("t")
	defer p.Stop()
	if _, err := p.Publish(ctx, &gpubsub.Message{Data: []byte("retry me")}).Get(ctx); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var deliveries []string
	err := f.client.Subscriber("s").Receive(rctx, func(_ context.Context, m *gpubsub.Message) {
		deliveries = append(deliveries, m.ID)
		if len(deliveries) == 1 {
			m.Nack()
			return
		}
		m.Ack()
		cancel()
	})
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	if len(deliveries) != 2 || deliveries[0] != deliveries[1] {
		t.Fatalf("deliveries %v, want the same message twice", deliveries)
	}
}

func TestOrderingKeys(t *testing.T) {
	f := start(t, pubsubgrpc.Options{})
	ctx := context.Background()
	f.topic(t, "t")
	f.subscription(t, "s", "t", true, 0)
	got, err := f.client.SubscriptionAdminClient.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: subPath("s")})
	if err != nil || !got.GetEnableMessageOrdering() || got.GetAckDeadlineSeconds() != 10 || got.GetTopic() != topicPath("t") {
		t.Fatalf("GetSubscription: %v, %v", got, err)
	}
	p := f.client.Publisher("t")
	p.EnableMessageOrdering = true
	defer p.Stop()
	keys := []string{"k1", "k2", "k3"}
	var results []*gpubsub.PublishResult
	const per = 30
	for i := range per {
		for _, k := range keys {
			results = append(results, p.Publish(ctx, &gpubsub.Message{Data: []byte(strconv.Itoa(i)), OrderingKey: k}))
		}
	}
	for _, r := range results {
		if _, err := r.Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	msgs := f.receive(t, "s", per*len(keys), nil)
	next := map[string]int{}
	for _, m := range msgs {
		if m.OrderingKey == "" {
			t.Fatalf("message %s has no ordering key", m.ID)
		}
		if _, ok := m.Attributes[pubsubgrpc.OrderingKeyAttribute]; ok {
			t.Fatalf("the ordering key leaked into the attributes: %v", m.Attributes)
		}
		if want := strconv.Itoa(next[m.OrderingKey]); string(m.Data) != want {
			t.Fatalf("key %s: got %s, want %s (out of order)", m.OrderingKey, m.Data, want)
		}
		next[m.OrderingKey]++
	}
}

// settled waits until the broker has every acknowledgement of sub (the
// client sends them asynchronously, possibly after Receive returned).
func (f *fixture) settled(t testing.TB, sub string) {
	t.Helper()
	if !await.Until(20*time.Second, 10*time.Millisecond, func() bool {
		info, err := f.b.Subscription(context.Background(), sub)
		return err == nil && info.Backlog == 0
	}) {
		info, err := f.b.Subscription(context.Background(), sub)
		t.Fatalf("subscription %s still has a backlog: %+v %v", sub, info, err)
	}
}

// datas returns the messages' data, sorted, comma-separated.
func datas(ms []*gpubsub.Message) string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.Data)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func TestSeekToTime(t *testing.T) {
	f := start(t, pubsubgrpc.Options{})
	ctx := context.Background()
	f.topic(t, "t")
	f.subscription(t, "s", "t", false, 0)
	p := f.client.Publisher("t")
	defer p.Stop()
	publish := func(data string) {
		if _, err := p.Publish(ctx, &gpubsub.Message{Data: []byte(data)}).Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	publish("old")
	f.receive(t, "s", 1, nil)
	f.settled(t, "s")
	// The broker's publish times have nanosecond resolution: a mark
	// between two publishes separates them.
	mark := time.Now()
	await.Until(time.Second, time.Millisecond, func() bool { return time.Now().After(mark.Add(2 * time.Millisecond)) })
	publish("new1")
	publish("new2")
	if got := datas(f.receive(t, "s", 2, nil)); got != "new1,new2" {
		t.Fatalf("got %s", got)
	}
	f.settled(t, "s")
	// Seek back to the mark: new1 and new2 count as unacknowledged again,
	// old stays acknowledged.
	if _, err := f.client.SubscriptionAdminClient.Seek(ctx, &pubsubpb.SeekRequest{Subscription: subPath("s"),
		Target: &pubsubpb.SeekRequest_Time{Time: timestamppb.New(mark)}}); err != nil {
		t.Fatalf("Seek: %v", err)
	}
	if got := datas(f.receive(t, "s", 2, nil)); got != "new1,new2" {
		t.Fatalf("after seek: %s", got)
	}
	f.settled(t, "s")
	// Seek to the beginning: all three.
	if _, err := f.client.SubscriptionAdminClient.Seek(ctx, &pubsubpb.SeekRequest{Subscription: subPath("s"),
		Target: &pubsubpb.SeekRequest_Time{Time: timestamppb.New(time.Unix(0, 0))}}); err != nil {
		t.Fatalf("Seek: %v", err)
	}
	if got := datas(f.receive(t, "s", 3, nil)); got != "new1,new2,old" {
		t.Fatalf("after seek to the epoch: %s, want all three", got)
	}
}

func TestAdminCallsAndStatusCodes(t *testing.T) {
	f := start(t, pubsubgrpc.Options{Project: project})
	ctx := context.Background()
	tc, sc := f.client.TopicAdminClient, f.client.SubscriptionAdminClient
	f.topic(t, "a")
	f.topic(t, "b")
	f.subscription(t, "a-1", "a", false, 30)
	f.subscription(t, "a-2", "a", false, 0)
	// A subscription a weir job reads: cumulative acknowledgements.
	if _, err := f.b.CreateSubscription(ctx, "orders-job--Read", "b", pubsub.SubscriptionConfig{}); err != nil {
		t.Fatal(err)
	}

	var topics []string
	it := tc.ListTopics(ctx, &pubsubpb.ListTopicsRequest{Project: "projects/" + project, PageSize: 1})
	for {
		tp, err := it.Next()
		if err != nil {
			if !strings.Contains(err.Error(), "no more items") {
				t.Fatalf("ListTopics: %v", err)
			}
			break
		}
		topics = append(topics, tp.GetName())
	}
	if strings.Join(topics, ",") != topicPath("a")+","+topicPath("b") {
		t.Fatalf("ListTopics (pages of 1): %v", topics)
	}
	var subs []string
	sit := tc.ListTopicSubscriptions(ctx, &pubsubpb.ListTopicSubscriptionsRequest{Topic: topicPath("a")})
	for {
		s, err := sit.Next()
		if err != nil {
			break
		}
		subs = append(subs, s)
	}
	if strings.Join(subs, ",") != subPath("a-1")+","+subPath("a-2") {
		t.Fatalf("ListTopicSubscriptions: %v", subs)
	}
	s1, err := sc.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: subPath("a-1")})
	if err != nil || s1.GetAckDeadlineSeconds() != 30 {
		t.Fatalf("GetSubscription: %v %v", s1, err)
	}

	cases := []struct {
		name string
		call func() error
		code codes.Code
		msg  string
	}{
		{"get missing topic", func() error {
			_, err := tc.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: topicPath("nope")})
			return err
		}, codes.NotFound, "topic nope"},
		{"create existing topic", func() error {
			_, err := tc.CreateTopic(ctx, &pubsubpb.Topic{Name: topicPath("a")})
			return err
		}, codes.AlreadyExists, "already exists"},
		{"topic ID outside weir's rule", func() error {
			_, err := tc.CreateTopic(ctx, &pubsubpb.Topic{Name: topicPath("bad*name")})
			return err
		}, codes.InvalidArgument, "use letters, digits"},
		{"malformed topic name", func() error {
			_, err := tc.CreateTopic(ctx, &pubsubpb.Topic{Name: "topics/x"})
			return err
		}, codes.InvalidArgument, "want projects/{project}/topics/{id}"},
		{"another project", func() error {
			_, err := tc.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: "projects/other/topics/a"})
			return err
		}, codes.NotFound, "--pubsub-project"},
		{"publish to missing topic", func() error {
			_, err := tc.Publish(ctx, &pubsubpb.PublishRequest{Topic: topicPath("nope"), Messages: []*pubsubpb.PubsubMessage{{Data: []byte("x")}}})
			return err
		}, codes.NotFound, "nope"},
		{"empty message", func() error {
			_, err := tc.Publish(ctx, &pubsubpb.PublishRequest{Topic: topicPath("a"), Messages: []*pubsubpb.PubsubMessage{{}}})
			return err
		}, codes.InvalidArgument, "data or at least one attribute"},
		{"reserved attribute", func() error {
			_, err := tc.Publish(ctx, &pubsubpb.PublishRequest{Topic: topicPath("a"), Messages: []*pubsubpb.PubsubMessage{{Data: []byte("x"), Attributes: map[string]string{"googfoo": "1"}}}})
			return err
		}, codes.InvalidArgument, "reserved"},
		{"more messages than Pub/Sub takes in one request", func() error {
			msgs := make([]*pubsubpb.PubsubMessage, pubsubgrpc.MaxPublishMessages+1)
			for i := range msgs {
				msgs[i] = &pubsubpb.PubsubMessage{Data: []byte("x")}
			}
			_, err := tc.Publish(ctx, &pubsubpb.PublishRequest{Topic: topicPath("a"), Messages: msgs})
			return err
		}, codes.InvalidArgument, "1001 messages in one request, more than the 1000"},
		{"more bytes than Pub/Sub takes in one request", func() error {
			big := make([]byte, 6<<20)
			_, err := tc.Publish(ctx, &pubsubpb.PublishRequest{Topic: topicPath("a"), Messages: []*pubsubpb.PubsubMessage{{Data: big}, {Data: big}}})
			return err
		}, codes.InvalidArgument, "more than the 10485760"},
		{"more attributes than Pub/Sub allows", func() error {
			attrs := map[string]string{}
			for i := range pubsubgrpc.MaxAttributes + 1 {
				attrs[fmt.Sprint("k", i)] = "v"
			}
			_, err := tc.Publish(ctx, &pubsubpb.PublishRequest{Topic: topicPath("a"), Messages: []*pubsubpb.PubsubMessage{{Data: []byte("x"), Attributes: attrs}}})
			return err
		}, codes.InvalidArgument, "101 attributes, more than the 100"},
		{"subscription exists", func() error {
			_, err := sc.CreateSubscription(ctx, &pubsubpb.Subscription{Name: subPath("a-1"), Topic: topicPath("b")})
			return err
		}, codes.AlreadyExists, "already exists"},
		{"subscription of missing topic", func() error {
			_, err := sc.CreateSubscription(ctx, &pubsubpb.Subscription{Name: subPath("x"), Topic: topicPath("nope")})
			return err
		}, codes.NotFound, "nope"},
		{"ack deadline out of range", func() error {
			_, err := sc.CreateSubscription(ctx, &pubsubpb.Subscription{Name: subPath("x"), Topic: topicPath("a"), AckDeadlineSeconds: 5})
			return err
		}, codes.InvalidArgument, "10 to 600"},
		{"filter that does not parse", func() error {
			_, err := sc.CreateSubscription(ctx, &pubsubpb.Subscription{Name: subPath("x"), Topic: topicPath("a"), Filter: `attributes.k == "v"`})
			return err
		}, codes.InvalidArgument, "want a double-quoted string"},
		{"pull from a job's subscription", func() error {
			_, err := sc.Pull(ctx, &pubsubpb.PullRequest{Subscription: subPath("orders-job--Read"), MaxMessages: 1, ReturnImmediately: true})
			return err
		}, codes.FailedPrecondition, "weir job orders-job"},
		{"pull from missing subscription", func() error {
			_, err := sc.Pull(ctx, &pubsubpb.PullRequest{Subscription: subPath("nope"), MaxMessages: 1})
			return err
		}, codes.NotFound, "nope"},
		{"foreign ack ID", func() error {
			return sc.Acknowledge(ctx, &pubsubpb.AcknowledgeRequest{Subscription: subPath("a-1"), AckIds: []string{"$JS.ACK.WEIR_TOPIC_a.a-2.1.1.1.1.0"}})
		}, codes.InvalidArgument, "not one of subscription a-1's"},
		{"delete missing subscription", func() error {
			return sc.DeleteSubscription(ctx, &pubsubpb.DeleteSubscriptionRequest{Subscription: subPath("nope")})
		}, codes.NotFound, "nope"},
		{"seek to a missing snapshot", func() error {
			_, err := sc.Seek(ctx, &pubsubpb.SeekRequest{Subscription: subPath("a-1"), Target: &pubsubpb.SeekRequest_Snapshot{Snapshot: "projects/" + project + "/snapshots/x"}})
			return err
		}, codes.NotFound, "snapshot x"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			st, _ := status.FromError(err)
			if st.Code() != c.code || !strings.Contains(st.Message(), c.msg) {
				t.Fatalf("got %v (%s), want %v containing %q", st.Code(), st.Message(), c.code, c.msg)
			}
		})
	}

	if err := sc.DeleteSubscription(ctx, &pubsubpb.DeleteSubscriptionRequest{Subscription: subPath("a-2")}); err != nil {
		t.Fatalf("DeleteSubscription: %v", err)
	}
	if err := tc.DeleteTopic(ctx, &pubsubpb.DeleteTopicRequest{Topic: topicPath("b")}); err != nil {
		t.Fatalf("DeleteTopic: %v", err)
	}
	if _, err := tc.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: topicPath("b")}); status.Code(err) != codes.NotFound {
		t.Fatalf("GetTopic after delete: %v", err)
	}
}

func TestLimits(t *testing.T) {
	f := start(t, pubsubgrpc.Options{MaxTopics: 1, MaxSubscriptions: 1})
	ctx := context.Background()
	f.topic(t, "a")
	if _, err := f.client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topicPath("b")}); status.Code(err) != codes.ResourceExhausted ||
		!strings.Contains(err.Error(), "--max-topics 1") {
		t.Fatalf("a second topic: %v", err)
	}
	f.subscription(t, "s", "a", false, 0)
	if _, err := f.client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: subPath("s2"), Topic: topicPath("a")}); status.Code(err) != codes.ResourceExhausted ||
		!strings.Contains(err.Error(), "--max-subscriptions 1") {
		t.Fatalf("a second subscription: %v", err)
	}
}

// tokens is an Authenticator accepting one token.
type tokens struct{ token string }

func (tokens) Authenticates() bool { return true }
func (a tokens) CheckBearer(_, tok, _ string) (bool, time.Duration) {
	return tok == a.token, 0
}

// bearer sends a token with every call.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearer) RequireTransportSecurity() bool { return false }

func TestBearerToken(t *testing.T) {
	const token = "0123456789abcdef0123"
	f := start(t, pubsubgrpc.Options{Auth: tokens{token}})
	ctx := context.Background()
	// The emulator client sends no token.
	if _, err := f.client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topicPath("t")}); status.Code(err) != codes.Unauthenticated ||
		!strings.Contains(err.Error(), "authorization: Bearer TOKEN") {
		t.Fatalf("without a token: %v", err)
	}
	dial := func(tok string) *gpubsub.Client {
		c, err := gpubsub.NewClient(ctx, project, option.WithEndpoint(f.addr), option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
			option.WithGRPCDialOption(grpc.WithPerRPCCredentials(bearer(tok))))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	if _, err := dial("wrong-token-wrong-token").TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topicPath("t")}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("with a wrong token: %v", err)
	}
	c := dial(token)
	if _, err := c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topicPath("t")}); err != nil {
		t.Fatalf("with the token: %v", err)
	}
	if _, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: subPath("s"), Topic: topicPath("t")}); err != nil {
		t.Fatal(err)
	}
	p := c.Publisher("t")
	defer p.Stop()
	if _, err := p.Publish(ctx, &gpubsub.Message{Data: []byte("x")}).Get(ctx); err != nil {
		t.Fatalf("publish with the token: %v", err)
	}
	// The streaming pull is authenticated too.
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var got string
	if err := c.Subscriber("s").Receive(rctx, func(_ context.Context, m *gpubsub.Message) {
		got = string(m.Data)
		m.Ack()
		cancel()
	}); err != nil || got != "x" {
		t.Fatalf("Receive with the token: %q %v", got, err)
	}
}

func TestSnapshotsAndSeekToSnapshot(t *testing.T) {
	f := start(t, pubsubgrpc.Options{})
	ctx := context.Background()
	sc := f.client.SubscriptionAdminClient
	f.topic(t, "t")
	f.topic(t, "other")
	f.subscription(t, "s", "t", false, 0)
	f.subscription(t, "o", "other", false, 0)
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
	f.receive(t, "s", 2, nil)
	f.settled(t, "s") // the snapshot is taken once the broker has the acknowledgements
	snap, err := sc.CreateSnapshot(ctx, &pubsubpb.CreateSnapshotRequest{Name: "projects/" + project + "/snapshots/snap", Subscription: subPath("s")})
	if err != nil {
		t.Fatalf("CreateSnapshot: %v", err)
	}
	if snap.GetTopic() != topicPath("t") || time.Until(snap.GetExpireTime().AsTime()) < 6*24*time.Hour {
		t.Fatalf("snapshot %v", snap)
	}
	if _, err := sc.CreateSnapshot(ctx, &pubsubpb.CreateSnapshotRequest{Name: "projects/" + project + "/snapshots/snap", Subscription: subPath("s")}); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("CreateSnapshot again: %v", err)
	}
	publish("c", "d")
	if got := datas(f.receive(t, "s", 2, nil)); got != "c,d" {
		t.Fatalf("got %s", got)
	}
	f.settled(t, "s")
	if _, err := sc.Seek(ctx, &pubsubpb.SeekRequest{Subscription: subPath("s"), Target: &pubsubpb.SeekRequest_Snapshot{Snapshot: snap.GetName()}}); err != nil {
		t.Fatalf("Seek to the snapshot: %v", err)
	}
	// What was unacknowledged when the snapshot was taken (c and d came
	// after it) is delivered again; a and b are not.
	if got := datas(f.receive(t, "s", 2, nil)); got != "c,d" {
		t.Fatalf("after seeking to the snapshot: %s", got)
	}
	if r, err := sc.Pull(ctx, &pubsubpb.PullRequest{Subscription: subPath("s"), MaxMessages: 10, ReturnImmediately: true}); err != nil || len(r.GetReceivedMessages()) != 0 {
		t.Fatalf("more after the seek: %v %v", r, err)
	}
	if _, err := sc.Seek(ctx, &pubsubpb.SeekRequest{Subscription: subPath("o"), Target: &pubsubpb.SeekRequest_Snapshot{Snapshot: snap.GetName()}}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Seek of another topic's subscription: %v", err)
	}
	var names []string
	it := sc.ListSnapshots(ctx, &pubsubpb.ListSnapshotsRequest{Project: "projects/" + project})
	for {
		s, err := it.Next()
		if err != nil {
			break
		}
		names = append(names, s.GetName())
	}
	if strings.Join(names, ",") != snap.GetName() {
		t.Fatalf("ListSnapshots: %v", names)
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
	if strings.Join(topicSnaps, ",") != snap.GetName() {
		t.Fatalf("ListTopicSnapshots: %v", topicSnaps)
	}
	if err := sc.DeleteSnapshot(ctx, &pubsubpb.DeleteSnapshotRequest{Snapshot: snap.GetName()}); err != nil {
		t.Fatalf("DeleteSnapshot: %v", err)
	}
	if _, err := sc.GetSnapshot(ctx, &pubsubpb.GetSnapshotRequest{Snapshot: snap.GetName()}); status.Code(err) != codes.NotFound {
		t.Fatalf("GetSnapshot after delete: %v", err)
	}
}

// More messages wait than a streaming pull's window holds, and the client
// acknowledges them outside the stream (Google's Go client uses
// Acknowledge): each acknowledgement frees a slot at once, so all arrive
// long before the 600 s deadline would have freed the window. (Before the
// fix, the stream sent 50 and then waited for the deadlines.)
func TestStreamWindowFreedByAcknowledge(t *testing.T) {
	f := start(t, pubsubgrpc.Options{})
	ctx := context.Background()
	f.topic(t, "t")
	f.subscription(t, "s", "t", false, 600)
	p := f.client.Publisher("t")
	defer p.Stop()
	const n = 400
	var results []*gpubsub.PublishResult
	for i := range n {
		results = append(results, p.Publish(ctx, &gpubsub.Message{Data: []byte(strconv.Itoa(i))}))
	}
	for _, r := range results {
		if _, err := r.Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	msgs := f.receive(t, "s", n, func(s *gpubsub.ReceiveSettings) { s.MaxOutstandingMessages = 50 })
	seen := map[string]bool{}
	for _, m := range msgs {
		seen[string(m.Data)] = true
	}
	if len(seen) != n {
		t.Fatalf("received %d distinct messages of %d", len(seen), n)
	}
	f.settled(t, "s")
}

// TestPullOfMaxInt32Messages: a Pull asking for 2^31-1 messages returns
// at most MaxPullMessages — the broker's client allocated room for as many
// as it was asked for, and such a request ended the process for want of
// 32 GB — and the rest stays for the next pull.
func TestPullOfMaxInt32Messages(t *testing.T) {
	f := start(t, pubsubgrpc.Options{})
	ctx := context.Background()
	f.topic(t, "t")
	f.subscription(t, "s", "t", false, 60)
	p := f.client.Publisher("t")
	defer p.Stop()
	const n = pubsubgrpc.MaxPullMessages + 200
	results := make([]*gpubsub.PublishResult, n)
	for i := range results {
		results[i] = p.Publish(ctx, &gpubsub.Message{Data: []byte{byte(i)}})
	}
	for _, r := range results {
		if _, err := r.Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	sc := f.client.SubscriptionAdminClient
	got := 0
	for got < n {
		r, err := sc.Pull(ctx, &pubsubpb.PullRequest{Subscription: subPath("s"), MaxMessages: math.MaxInt32})
		if err != nil {
			t.Fatalf("Pull: %v", err)
		}
		k := len(r.GetReceivedMessages())
		if k == 0 || k > pubsubgrpc.MaxPullMessages {
			t.Fatalf("a pull returned %d messages after %d, want 1 to %d", k, got, pubsubgrpc.MaxPullMessages)
		}
		got += k
	}
	if got != n {
		t.Errorf("pulled %d messages, want %d", got, n)
	}
}
