package pubsubgrpc_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/weir-dev/weir/io/pubsub/pubsubgrpc"
)

// After a message of an ordering key is nacked, the key's later messages
// are held back until it is acknowledged, as Pub/Sub does with
// enable_message_ordering; other keys flow. Driven with the Go client's
// Pull, ModifyAckDeadline and Acknowledge, so every step is explicit.
func TestOrderingKeyHeldBackAfterRedelivery(t *testing.T) {
	f := start(t, pubsubgrpc.Options{PullWait: 300 * time.Millisecond})
	ctx := context.Background()
	sc := f.client.SubscriptionAdminClient
	f.topic(t, "t")
	f.subscription(t, "s", "t", true, 0)
	p := f.client.Publisher("t")
	p.EnableMessageOrdering = true
	defer p.Stop()
	publish := func(key string, data ...string) {
		t.Helper()
		for _, d := range data {
			if _, err := p.Publish(ctx, &gpubsub.Message{Data: []byte(d), OrderingKey: key}).Get(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	// pull pulls until it has want messages (or tries pulls of up to
	// 300 ms each passed), returning "data" in arrival order and their
	// ack IDs.
	pullN := func(want, tries int) ([]string, map[string]string) {
		t.Helper()
		var got []string
		ids := map[string]string{}
		for ; len(got) < want && tries > 0; tries-- {
			r, err := sc.Pull(ctx, &pubsubpb.PullRequest{Subscription: subPath("s"), MaxMessages: 10})
			if err != nil {
				t.Fatalf("Pull: %v", err)
			}
			for _, m := range r.GetReceivedMessages() {
				d := string(m.GetMessage().GetData())
				got = append(got, d)
				ids[d] = m.GetAckId()
			}
		}
		return got, ids
	}
	pull := func(want int) ([]string, map[string]string) { return pullN(want, 40) }
	// none pulls for a while (held-back messages come back every 250 ms)
	// and expects nothing.
	none := func() []string { got, _ := pullN(1, 6); return got }
	ack := func(id string) {
		t.Helper()
		if err := sc.Acknowledge(ctx, &pubsubpb.AcknowledgeRequest{Subscription: subPath("s"), AckIds: []string{id}}); err != nil {
			t.Fatalf("Acknowledge: %v", err)
		}
	}

	publish("k", "k0")
	got, ids := pull(1)
	if strings.Join(got, ",") != "k0" {
		t.Fatalf("first pull: %v", got)
	}
	if err := sc.ModifyAckDeadline(ctx, &pubsubpb.ModifyAckDeadlineRequest{Subscription: subPath("s"), AckIds: []string{ids["k0"]}, AckDeadlineSeconds: 0}); err != nil {
		t.Fatalf("nack: %v", err)
	}
	publish("k", "k1", "k2")
	publish("j", "j0")
	// k0 comes again and j0 flows; k1 and k2 wait for k0. (Without the
	// hold-back, this pull returns k1 and k2 too.)
	got, ids = pull(2)
	if strings.Join(sorted(got), ",") != "j0,k0" {
		t.Fatalf("after the nack: %v, want k0 again and j0, k1 and k2 held back", got)
	}
	if more := none(); len(more) != 0 {
		t.Fatalf("while k0 is unacknowledged: %v", more)
	}
	ack(ids["j0"])
	ack(ids["k0"])
	// Then the key's messages come in order, each once the one before it
	// is acknowledged.
	for _, want := range []string{"k1", "k2"} {
		got, ids = pull(1)
		if strings.Join(got, ",") != want {
			t.Fatalf("got %v, want %s", got, want)
		}
		ack(ids[want])
	}
	if more := none(); len(more) != 0 {
		t.Fatalf("after all were acknowledged: %v", more)
	}
}

// A redelivery after the ack deadline passed blocks the key too: k0's
// deadline (10 s, the minimum) passes unacknowledged, k0 comes again, and
// k1, published after that, waits until k0 is acknowledged.
func TestOrderingKeyHeldBackAfterDeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a 10 s ack deadline")
	}
	f := start(t, pubsubgrpc.Options{PullWait: 2 * time.Second})
	ctx := context.Background()
	sc := f.client.SubscriptionAdminClient
	f.topic(t, "t")
	f.subscription(t, "s", "t", true, 10)
	p := f.client.Publisher("t")
	p.EnableMessageOrdering = true
	defer p.Stop()
	publish := func(d string) {
		t.Helper()
		if _, err := p.Publish(ctx, &gpubsub.Message{Data: []byte(d), OrderingKey: "k"}).Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	pullOne := func(tries int) (string, string) {
		t.Helper()
		for ; tries > 0; tries-- {
			r, err := sc.Pull(ctx, &pubsubpb.PullRequest{Subscription: subPath("s"), MaxMessages: 10})
			if err != nil {
				t.Fatalf("Pull: %v", err)
			}
			if ms := r.GetReceivedMessages(); len(ms) > 0 {
				if len(ms) > 1 {
					t.Fatalf("pulled %d messages at once: %v", len(ms), ms)
				}
				return string(ms[0].GetMessage().GetData()), ms[0].GetAckId()
			}
		}
		return "", ""
	}
	publish("k0")
	if d, _ := pullOne(5); d != "k0" {
		t.Fatalf("first pull: %q", d)
	}
	// Not acknowledged: after its deadline it is delivered again.
	d, id := pullOne(15)
	if d != "k0" {
		t.Fatalf("after the deadline: %q, want k0 again", d)
	}
	publish("k1")
	if d, _ := pullOne(2); d != "" {
		t.Fatalf("while the redelivered k0 is unacknowledged: %q", d)
	}
	if err := sc.Acknowledge(ctx, &pubsubpb.AcknowledgeRequest{Subscription: subPath("s"), AckIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	if d, _ := pullOne(10); d != "k1" {
		t.Fatalf("after k0 was acknowledged: %q, want k1", d)
	}
}

// The same through the Go client's streaming pull: the first delivery of
// k0 is nacked, and while its redelivery is being processed the key's next
// messages are published (the server holds them back until k0 is
// acknowledged; the client would also hand them over one at a time). The
// application sees k0, k0 again, k1, k2, and nothing is left unacknowledged.
func TestOrderingKeyReceiveAfterNack(t *testing.T) {
	f := start(t, pubsubgrpc.Options{})
	ctx := context.Background()
	f.topic(t, "t")
	f.subscription(t, "s", "t", true, 0)
	p := f.client.Publisher("t")
	p.EnableMessageOrdering = true
	defer p.Stop()
	if _, err := p.Publish(ctx, &gpubsub.Message{Data: []byte("k0"), OrderingKey: "k"}).Get(ctx); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	var seen []string
	err := f.client.Subscriber("s").Receive(rctx, func(_ context.Context, m *gpubsub.Message) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, string(m.Data))
		switch len(seen) {
		case 1:
			m.Nack()
			return
		case 2:
			for _, d := range []string{"k1", "k2"} {
				if _, err := p.Publish(ctx, &gpubsub.Message{Data: []byte(d), OrderingKey: "k"}).Get(ctx); err != nil {
					t.Error(err)
				}
			}
		case 4:
			cancel()
		}
		m.Ack()
	})
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	if got := strings.Join(seen, ","); got != "k0,k0,k1,k2" {
		t.Fatalf("the application saw %s, want k0,k0,k1,k2", got)
	}
	f.settled(t, "s")
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
