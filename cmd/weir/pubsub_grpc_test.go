package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	_ "modernc.org/sqlite"

	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/io/pubsub"
)

var grpcLine = regexp.MustCompile(`Pub/Sub gRPC API on (\S+) `)

// grpcAddr waits for the server's line naming its Pub/Sub gRPC address.
func (p *serverProc) grpcAddr() string {
	p.t.Helper()
	var addr string
	if !await.Until(20*time.Second, 10*time.Millisecond, func() bool {
		m := grpcLine.FindStringSubmatch(p.log())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	}) {
		p.t.Fatalf("the server named no Pub/Sub gRPC address\nlog:\n%s", p.log())
	}
	return addr
}

// TestGoogleClientAndWeirJob points Google's Go Pub/Sub client at `weir
// server` with PUBSUB_EMULATOR_HOST: the client publishes a stream that a
// weir job sums per key and window into SQLite, exactly once, and receives
// through streaming pull what the same job writes with WriteToPubSub.
func TestGoogleClientAndWeirJob(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	dir, work := t.TempDir(), t.TempDir()
	srv := startServer(t, dir)
	t.Setenv("PUBSUB_EMULATOR_HOST", srv.grpcAddr())
	ctx := context.Background()
	client, err := gpubsub.NewClient(ctx, "my-project")
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for _, topic := range []string{"clicks", "echo"} {
		if _, err := client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: "projects/my-project/topics/" + topic}); err != nil {
			t.Fatalf("CreateTopic %s: %v", topic, err)
		}
	}
	if _, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: "projects/my-project/subscriptions/echo-reader", Topic: "projects/my-project/topics/echo"}); err != nil {
		t.Fatalf("CreateSubscription: %v", err)
	}
	db := filepath.Join(work, "totals.db")
	pipeline := filepath.Join(work, "p.yaml")
	yaml := `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Clicks
      config: {topic: clicks, schema: {key: string, amount: int, ts: timestamp}, timestamp_field: ts, idle_timeout: 1h, max_out_of_orderness: 10m}
    - type: Combine
      name: Totals
      input: Clicks
      windowing: {type: fixed, size: 1m}
      config:
        group_by: key
        combine: {total: {value: amount, fn: sum}, n: {value: amount, fn: count}}
    - type: WriteToSql
      name: Write
      input: Totals
      config: {dsn: "` + db + `", table: totals, key: [key]}
    - type: WriteToPubSub
      name: Echo
      input: Clicks
      config: {topic: echo}
`
	if err := os.WriteFile(pipeline, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	r := srv.cli(work, "run", pipeline, "--job-name", "clicks")
	if r.code != ExitOK {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	id := string(regexp.MustCompile(`\S+`).Find([]byte(r.stdout)))
	srv.waitJob(id, "RUNNING", stateIs("RUNNING"))
	sub := pubsub.SubscriptionName("clicks", "Clicks")
	if !await.Until(30*time.Second, 20*time.Millisecond, func() bool { return srv.cli(work, "subscriptions", "describe", sub).code == ExitOK }) {
		t.Fatalf("the job's subscription %s was not created\nserver log:\n%s", sub, srv.log())
	}
	// The job's own subscription is weir's (cumulative): Google's client
	// is told so, with the job's name.
	_, err = client.SubscriptionAdminClient.Pull(ctx, &pubsubpb.PullRequest{Subscription: "projects/my-project/subscriptions/" + sub, MaxMessages: 1})
	if err == nil || !regexp.MustCompile(`FailedPrecondition.*weir job clicks`).MatchString(err.Error()) {
		t.Fatalf("pulling from the job's subscription: %v", err)
	}

	// Google's client sends batches concurrently, so the topic's order is
	// not the publish order: the watermark allows 10 minutes of disorder
	// (the stream spans 2.5), and no message is late.
	const total = 600
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	want := map[string]int64{}
	wantN := map[string]int64{}
	pub := client.Publisher("clicks")
	var results []*gpubsub.PublishResult
	for i := range total {
		k := fmt.Sprintf("k%d", i%5)
		ts := base.Add(time.Duration(i) * 250 * time.Millisecond)
		want[k+" "+ts.Truncate(time.Minute).Format(time.RFC3339)] += int64(i)
		wantN[k+" "+ts.Truncate(time.Minute).Format(time.RFC3339)]++
		data := fmt.Sprintf(`{"key": %q, "amount": %d, "ts": %q}`, k, i, ts.Format(time.RFC3339Nano))
		results = append(results, pub.Publish(ctx, &gpubsub.Message{Data: []byte(data), Attributes: map[string]string{"source": "go-client"}}))
	}
	for _, res := range results {
		if _, err := res.Get(ctx); err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
	pub.Stop()

	// What the job writes to echo arrives through streaming pull.
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	echoed := map[int]bool{}
	err = client.Subscriber("echo-reader").Receive(rctx, func(_ context.Context, m *gpubsub.Message) {
		var row struct {
			Key    string `json:"key"`
			Amount int    `json:"amount"`
		}
		if err := json.Unmarshal(m.Data, &row); err != nil {
			t.Errorf("echoed message %q: %v", m.Data, err)
		}
		m.Ack()
		mu.Lock()
		defer mu.Unlock()
		echoed[row.Amount] = true
		if len(echoed) == total {
			cancel()
		}
	})
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	if len(echoed) != total {
		t.Fatalf("received %d of the job's %d messages\nserver log:\n%s", len(echoed), total, srv.log())
	}

	// Drain: every window fires, and the table holds the exact sums.
	waitCaughtUp(t, srv, id)
	drainAndCheckTotals(t, srv, work, id, db, want, wantN)
	srv.stop(syscall.SIGTERM)
}
