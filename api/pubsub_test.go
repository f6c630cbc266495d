package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/errcode"

	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/service"
)

// newPubSubServer runs a service and a real embedded broker in temp
// directories behind httptest.
func newPubSubServer(t *testing.T) (*httptest.Server, *Client) {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx := context.Background()
	b, err := pubsub.StartEmbedded(ctx, pubsub.Options{StoreDir: t.TempDir(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.Open(ctx, service.Options{DataDir: t.TempDir(), CheckpointInterval: 50 * time.Millisecond, Logger: logger, Broker: b})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(NewServer(svc, logger, WithPubSub(b)))
	t.Cleanup(func() {
		ts.Close()
		if err := svc.Close(ctx); err != nil {
			t.Error(err)
		}
		if err := b.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	c, err := NewClient(ts.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ts, c
}

// TestAPIPubSubRequests checks the status and code of every route's
// success and failure, in order: each request sees the state the earlier
// ones left.
func TestAPIPubSubRequests(t *testing.T) {
	ts, _ := newPubSubServer(t)
	steps := []struct {
		name, method, path, body string
		wantStatus               int
		wantCode                 errcode.Code // for errors
		wantBody                 []string     // substrings of the reply
	}{
		{"create topic", "POST", "/v1/topics", `{"name": "orders", "retention": "48h"}`, 201, "", []string{`"name": "orders"`, `"retention": "48h0m0s"`, `"subject": "weir.topic.orders"`}},
		{"create topic, default retention", "POST", "/v1/topics", `{"name": "clicks"}`, 201, "", []string{`"retention": "168h0m0s"`, `"duplicate_window": "10m0s"`}},
		{"create topic twice", "POST", "/v1/topics", `{"name": "orders"}`, 409, errcode.TopicExists, []string{"orders"}},
		{"create topic, bad name", "POST", "/v1/topics", `{"name": "or ders"}`, 400, errcode.InvalidName, []string{"or ders"}},
		{"create topic, empty name", "POST", "/v1/topics", `{}`, 400, errcode.InvalidName, []string{"empty"}},
		{"create topic, bad retention", "POST", "/v1/topics", `{"name": "x", "retention": "a week"}`, 400, errcode.InvalidRequest, []string{"retention", "168h"}},
		{"create topic, negative retention", "POST", "/v1/topics", `{"name": "x", "retention": "-1h"}`, 400, errcode.InvalidConfig, []string{"retention"}},
		{"create topic, retention under the duplicate window", "POST", "/v1/topics", `{"name": "x", "retention": "1m"}`, 201, "", []string{`"duplicate_window": "1m0s"`}},
		{"create topic, unknown field", "POST", "/v1/topics", `{"name": "y", "partitions": 3}`, 400, errcode.InvalidRequest, []string{"partitions", "retention"}},
		{"create topic, bad JSON", "POST", "/v1/topics", `{"name": `, 400, errcode.InvalidRequest, []string{"not valid JSON"}},
		{"list topics", "GET", "/v1/topics", "", 200, "", []string{`"clicks"`, `"orders"`, `"x"`}},
		{"list topics, unknown parameter", "GET", "/v1/topics?prefix=o", "", 400, errcode.InvalidRequest, []string{"prefix"}},
		{"get topic", "GET", "/v1/topics/orders", "", 200, "", []string{`"messages": 0`}},
		{"get missing topic", "GET", "/v1/topics/nope", "", 404, errcode.TopicNotFound, []string{"nope"}},
		{"get publish action", "GET", "/v1/topics/orders:publish", "", 405, errcode.MethodNotAllowed, []string{"needs POST"}},
		{"put topic", "PUT", "/v1/topics/orders", "{}", 405, errcode.MethodNotAllowed, nil},

		{"publish", "POST", "/v1/topics/orders:publish", `{"messages": [{"data": {"id": 1}, "attributes": {"src": "test"}, "id": "m1"}, {"data": "plain text"}]}`, 200, "",
			[]string{`"published": 2`, `"duplicates": 0`, `"sequence": 1`, `"sequence": 2`}},
		{"publish a duplicate ID", "POST", "/v1/topics/orders/publish", `{"messages": [{"data": {"id": 1}, "id": "m1"}]}`, 200, "", []string{`"published": 0`, `"duplicates": 1`, `"duplicate": true`}},
		{"publish to a missing topic", "POST", "/v1/topics/nope:publish", `{"messages": [{"data": "x"}]}`, 404, errcode.TopicNotFound, []string{"nope"}},
		{"publish without messages", "POST", "/v1/topics/orders:publish", `{"messages": []}`, 400, errcode.InvalidRequest, []string{"messages"}},
		{"publish without data", "POST", "/v1/topics/orders:publish", `{"messages": [{"data": "a"}, {"id": "x"}]}`, 400, errcode.InvalidRequest, []string{"message 1", "data"}},
		{"create topic, retention under the minimum", "POST", "/v1/topics", `{"name": "tiny", "retention": "1ns"}`, 400, errcode.InvalidConfig, []string{"retention 1ns", "minimum 1s"}},
		{"publish a message ID over the limit", "POST", "/v1/topics/orders:publish", `{"messages": [{"data": "a", "id": "` + strings.Repeat("i", 100000) + `"}]}`, 400, errcode.InvalidConfig, []string{"message ID of 100000 bytes", "1024"}},
		{"publish a payload over the limit", "POST", "/v1/topics/orders:publish", `{"messages": [{"data": "` + strings.Repeat("x", 12<<20) + `"}]}`, 413, errcode.RequestTooLarge, []string{"8388608 bytes"}}, // the body limit comes first: the embedded broker takes 11 MiB
		{"publish a reserved attribute", "POST", "/v1/topics/orders:publish", `{"messages": [{"data": "a", "attributes": {"Nats-Expected-Stream": "x"}}]}`, 400, errcode.InvalidName, []string{"reserved"}},
		{"unknown topic action", "POST", "/v1/topics/orders:purge", `{}`, 404, errcode.NotFound, []string{"purge"}},
		{"post topic without action", "POST", "/v1/topics/orders", `{}`, 405, errcode.MethodNotAllowed, []string{":publish"}},

		{"create subscription", "POST", "/v1/subscriptions", `{"name": "orders-all", "topic": "orders", "from_beginning": true, "ack_wait": "30s"}`, 201, "",
			[]string{`"topic": "orders"`, `"ack_wait": "30s"`, `"num_pending": 2`}},
		{"create subscription, new messages only", "POST", "/v1/subscriptions", `{"name": "orders-new", "topic": "orders"}`, 201, "", []string{`"num_pending": 0`, `"ack_wait": "1m0s"`}},
		{"create subscription twice", "POST", "/v1/subscriptions", `{"name": "orders-all", "topic": "clicks"}`, 409, errcode.SubscriptionExists, []string{"orders-all"}},
		{"create subscription, missing topic", "POST", "/v1/subscriptions", `{"name": "s", "topic": "nope"}`, 404, errcode.TopicNotFound, []string{"nope"}},
		{"create subscription, no topic", "POST", "/v1/subscriptions", `{"name": "s"}`, 400, errcode.InvalidRequest, []string{"topic"}},
		{"create subscription, bad name", "POST", "/v1/subscriptions", `{"name": "-s", "topic": "orders"}`, 400, errcode.InvalidName, []string{"-s"}},
		{"create subscription, bad ack wait", "POST", "/v1/subscriptions", `{"name": "s", "topic": "orders", "ack_wait": "soon"}`, 400, errcode.InvalidRequest, []string{"ack_wait"}},
		{"list subscriptions", "GET", "/v1/subscriptions", "", 200, "", []string{`"orders-all"`, `"orders-new"`}},
		{"list subscriptions of a topic", "GET", "/v1/subscriptions?topic=clicks", "", 200, "", []string{`"subscriptions": []`}},
		{"list subscriptions of a missing topic", "GET", "/v1/subscriptions?topic=nope", "", 404, errcode.TopicNotFound, nil},
		{"get subscription", "GET", "/v1/subscriptions/orders-all", "", 200, "", []string{`"backlog": 2`}},
		{"get missing subscription", "GET", "/v1/subscriptions/nope", "", 404, errcode.SubscriptionNotFound, []string{"nope"}},
		{"pull, bad max", "POST", "/v1/subscriptions/orders-all:pull", `{"max": -1}`, 400, errcode.InvalidRequest, []string{"max"}},
		{"pull, missing subscription", "POST", "/v1/subscriptions/nope:pull", `{}`, 404, errcode.SubscriptionNotFound, nil},
		{"pull, default one message", "POST", "/v1/subscriptions/orders-all:pull", "", 200, "", []string{`"data": "{\"id\":1}"`, `"id": "m1"`}},
		{"unknown subscription action", "POST", "/v1/subscriptions/orders-all:purge", `{}`, 404, errcode.NotFound, []string{"purge", "seek"}},

		{"snapshot", "POST", "/v1/subscription-snapshots", `{"name": "s1", "subscription": "orders-all"}`, 201, "", []string{`"name": "s1"`, `"topic": "orders"`, `"ack_floor": 0`, `"expire_time"`}},
		{"snapshot twice", "POST", "/v1/subscription-snapshots", `{"name": "s1", "subscription": "orders-all"}`, 409, errcode.SubscriptionSnapshotExists, []string{"s1"}},
		{"snapshot without subscription", "POST", "/v1/subscription-snapshots", `{"name": "s2"}`, 400, errcode.InvalidRequest, []string{"subscription"}},
		{"snapshot of a missing subscription", "POST", "/v1/subscription-snapshots", `{"name": "s2", "subscription": "nope"}`, 404, errcode.SubscriptionNotFound, nil},
		{"snapshot, bad name", "POST", "/v1/subscription-snapshots", `{"name": "s*2", "subscription": "orders-all"}`, 400, errcode.InvalidName, nil},
		{"list snapshots", "GET", "/v1/subscription-snapshots?topic=orders", "", 200, "", []string{`"s1"`}},
		{"list snapshots, unknown parameter", "GET", "/v1/subscription-snapshots?sub=x", "", 400, errcode.InvalidRequest, nil},
		{"get snapshot", "GET", "/v1/subscription-snapshots/s1", "", 200, "", []string{`"subscription": "orders-all"`}},
		{"get missing snapshot", "GET", "/v1/subscription-snapshots/nope", "", 404, errcode.SubscriptionSnapshotNotFound, nil},
		{"pull with ack", "POST", "/v1/subscriptions/orders-all:pull", `{"max": 10, "ack": true}`, 200, "", []string{`"sequence": 2`}},
		{"seek to the snapshot", "POST", "/v1/subscriptions/orders-all:seek", `{"snapshot": "s1"}`, 200, "", []string{`"ack_floor": 0`, `"backlog": 2`}},
		{"seek to a time", "POST", "/v1/subscriptions/orders-all/seek", `{"time": "2999-01-01T00:00:00Z"}`, 200, "", []string{`"ack_floor": 2`, `"backlog": 0`}},
		{"seek to both", "POST", "/v1/subscriptions/orders-all:seek", `{"snapshot": "s1", "time": "2999-01-01T00:00:00Z"}`, 400, errcode.InvalidRequest, []string{"exactly one"}},
		{"seek to a bad time", "POST", "/v1/subscriptions/orders-all:seek", `{"time": "noon"}`, 400, errcode.InvalidRequest, []string{"RFC 3339"}},
		{"seek to a missing snapshot", "POST", "/v1/subscriptions/orders-all:seek", `{"snapshot": "nope"}`, 404, errcode.SubscriptionSnapshotNotFound, nil},
		{"seek a missing subscription", "POST", "/v1/subscriptions/nope:seek", `{"snapshot": "s1"}`, 404, errcode.SubscriptionNotFound, nil},
		{"delete snapshot", "DELETE", "/v1/subscription-snapshots/s1", "", 204, "", nil},
		{"delete snapshot twice", "DELETE", "/v1/subscription-snapshots/s1", "", 404, errcode.SubscriptionSnapshotNotFound, nil},
		{"delete subscription", "DELETE", "/v1/subscriptions/orders-new", "", 204, "", nil},
		{"delete subscription twice", "DELETE", "/v1/subscriptions/orders-new", "", 404, errcode.SubscriptionNotFound, nil},
		{"delete topic", "DELETE", "/v1/topics/clicks", "", 204, "", nil},
		{"delete topic twice", "DELETE", "/v1/topics/clicks", "", 404, errcode.TopicNotFound, nil},
		{"delete topic, bad name", "DELETE", "/v1/topics/a*b", "", 400, errcode.InvalidName, nil},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			var body io.Reader
			if st.body != "" {
				body = strings.NewReader(st.body)
			}
			req, err := http.NewRequest(st.method, ts.URL+st.path, body)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != st.wantStatus {
				t.Fatalf("%s %s: status %d, want %d\n%s", st.method, st.path, resp.StatusCode, st.wantStatus, b)
			}
			if st.wantCode != "" {
				var eb ErrorBody
				if err := json.Unmarshal(b, &eb); err != nil || eb.Error.Code != st.wantCode {
					t.Errorf("%s %s: reply %s, want code %s", st.method, st.path, b, st.wantCode)
				}
			}
			for _, s := range st.wantBody {
				if !strings.Contains(string(b), s) {
					t.Errorf("%s %s: reply lacks %s:\n%s", st.method, st.path, s, b)
				}
			}
		})
	}
}

// TestAPIPubSubRoundTrip publishes through the client and pulls the same
// payloads, attributes and IDs back, then checks acknowledgement.
func TestAPIPubSubRoundTrip(t *testing.T) {
	_, c := newPubSubServer(t)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, CreateTopicRequest{Name: "events"}); err != nil {
		t.Fatal(err)
	}
	sub, err := c.CreateSubscription(ctx, CreateSubscriptionRequest{Name: "events-sub", Topic: "events"})
	if err != nil {
		t.Fatal(err)
	}
	if sub.Topic != "events" || sub.Backlog != 0 {
		t.Errorf("new subscription %+v", sub)
	}
	msgs := []PublishMessage{
		{Data: json.RawMessage(`{"user": "ann", "amount": 3}`), Attributes: map[string]string{"source": "test", "ts": "2026-01-01T00:00:00Z"}, ID: "e1"},
		{Data: json.RawMessage(`"a line, as it is"`), Attributes: map[string]string{"source": "test"}},
		{Data: json.RawMessage(`[1, 2]`)},
	}
	res, err := c.Publish(ctx, "events", msgs)
	if err != nil {
		t.Fatal(err)
	}
	if res.Published != 3 || res.Duplicates != 0 || len(res.Results) != 3 || res.Results[2].Sequence != 3 {
		t.Errorf("publish result %+v", res)
	}
	if res, err = c.Publish(ctx, "events", msgs[:1]); err != nil || res.Duplicates != 1 || res.Published != 0 {
		t.Errorf("republishing e1: %+v, %v", res, err)
	}
	topic, err := c.GetTopic(ctx, "events")
	if err != nil || topic.Messages != 3 || topic.Subscriptions != 1 {
		t.Errorf("topic %+v, %v", topic, err)
	}

	// Without ack, the messages stay in the backlog.
	got, err := c.Pull(ctx, "events-sub", PullRequest{Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	want := []PulledMessage{
		{Data: `{"user":"ann","amount":3}`, Attributes: map[string]string{"source": "test", "ts": "2026-01-01T00:00:00Z"}, ID: "e1", Sequence: 1, NumDelivered: 1},
		{Data: "a line, as it is", Attributes: map[string]string{"source": "test"}, Sequence: 2, NumDelivered: 1},
		{Data: "[1,2]", Sequence: 3, NumDelivered: 1},
	}
	checkPulled(t, got, want)
	if s, err := c.GetSubscription(ctx, "events-sub"); err != nil || s.Backlog != 3 || s.NumAckPending != 3 {
		t.Errorf("after a pull without ack: %+v, %v", s, err)
	}

	// A second subscription from the beginning reads the same messages;
	// pulling with ack empties its backlog.
	if _, err := c.CreateSubscription(ctx, CreateSubscriptionRequest{Name: "events-replay", Topic: "events", FromBeginning: true}); err != nil {
		t.Fatal(err)
	}
	got, err = c.Pull(ctx, "events-replay", PullRequest{Max: 2, Ack: true})
	if err != nil {
		t.Fatal(err)
	}
	checkPulled(t, got, want[:2])
	got, err = c.Pull(ctx, "events-replay", PullRequest{Max: 10, Ack: true})
	if err != nil {
		t.Fatal(err)
	}
	checkPulled(t, got, want[2:])
	if s, err := c.GetSubscription(ctx, "events-replay"); err != nil || s.Backlog != 0 || s.AckFloor != 3 {
		t.Errorf("after pulls with ack: %+v, %v", s, err)
	}
	if got, err = c.Pull(ctx, "events-replay", PullRequest{Max: 10, Ack: true}); err != nil || len(got) != 0 {
		t.Errorf("pull of an empty subscription: %v, %v", got, err)
	}

	subs, err := c.ListSubscriptions(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range subs {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"events-replay", "events-sub"}) {
		t.Errorf("subscriptions %v", names)
	}

	// Deleting the topic deletes its subscriptions; typed client errors.
	if err := c.DeleteTopic(ctx, "events"); err != nil {
		t.Fatal(err)
	}
	var ae *Error
	if _, err := c.GetSubscription(ctx, "events-sub"); !errors.As(err, &ae) || ae.Code != errcode.SubscriptionNotFound || ae.Status != 404 {
		t.Errorf("subscription of a deleted topic: %v", err)
	}
	if topics, err := c.ListTopics(ctx); err != nil || len(topics) != 0 {
		t.Errorf("topics after delete: %v, %v", topics, err)
	}
}

func checkPulled(t *testing.T, got, want []PulledMessage) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("pulled %d messages, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g := got[i]
		if g.PublishTime.IsZero() {
			t.Errorf("message %d has no publish time", i)
		}
		g.PublishTime = time.Time{}
		if g.Data != want[i].Data || g.ID != want[i].ID || g.Sequence != want[i].Sequence || g.NumDelivered != want[i].NumDelivered ||
			len(g.Attributes) != len(want[i].Attributes) {
			t.Errorf("message %d = %+v, want %+v", i, g, want[i])
			continue
		}
		for k, v := range want[i].Attributes {
			if g.Attributes[k] != v {
				t.Errorf("message %d attribute %s = %q, want %q (all: %v)", i, k, g.Attributes[k], v, g.Attributes)
			}
		}
	}
}

// TestAPIPubSubUnavailable: a server without a broker answers every topic
// and subscription route with 503 PUBSUB_UNAVAILABLE.
func TestAPIPubSubUnavailable(t *testing.T) {
	ts, c := newTestServer(t)
	for _, r := range []struct{ method, path string }{
		{"GET", "/v1/topics"}, {"POST", "/v1/topics"}, {"GET", "/v1/topics/a"}, {"DELETE", "/v1/topics/a"}, {"POST", "/v1/topics/a:publish"},
		{"GET", "/v1/subscriptions"}, {"POST", "/v1/subscriptions"}, {"GET", "/v1/subscriptions/a"}, {"POST", "/v1/subscriptions/a:pull"},
	} {
		req, _ := http.NewRequest(r.method, ts.URL+r.path, strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var eb ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&eb)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || eb.Error.Code != errcode.PubSubUnavailable {
			t.Errorf("%s %s: %d %+v, want 503 %s", r.method, r.path, resp.StatusCode, eb, errcode.PubSubUnavailable)
		}
	}
	var ae *Error
	if _, err := c.ListTopics(context.Background()); !errors.As(err, &ae) || ae.Code != errcode.PubSubUnavailable {
		t.Errorf("client: %v", err)
	}
}

// TestAPIPubSubCodes: every Pub/Sub code has a 4xx or 503 status and does
// not collide with the service's registry.
func TestAPIPubSubCodes(t *testing.T) {
	svc := service.Codes()
	for _, c := range PubSubCodes() {
		if slices.Contains(svc, c) {
			t.Errorf("code %s is also a service code", c)
		}
		if st := StatusOf(c); st < 400 || st >= 500 && st != http.StatusServiceUnavailable {
			t.Errorf("code %s has status %d", c, st)
		}
	}
}
