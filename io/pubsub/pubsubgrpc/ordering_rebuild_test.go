package pubsubgrpc_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/io/pubsub/pubsubgrpc"
)

// fakeClock is an injectable clock (Options.Clock).
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestOrderingRebuildReleasesAckedMessages: a new server over the same
// broker (a restart of weir) rebuilds the ordering keys' blocks from the
// acknowledgement record. When the record lacks an acknowledgement the
// broker has (here message 1 is acknowledged behind weir's back, as a
// crash between the acknowledgement and its record leaves it) above the
// floor (message 0, of another key, is still unacknowledged), the key
// waits for a message that never comes again: message 2 is held back, and
// released once the rebuild's bound (the longest ack deadline plus a
// minute) has passed on the server's clock, rather than for ever.
func TestOrderingRebuildReleasesAckedMessages(t *testing.T) {
	f := start(t, pubsubgrpc.Options{})
	ctx := context.Background()
	f.topic(t, "t")
	f.subscription(t, "s", "t", true, 600)
	p := f.client.Publisher("t")
	p.EnableMessageOrdering = true
	for _, m := range []struct{ key, data string }{{"other", "0"}, {"k", "1"}, {"k", "2"}} {
		if _, err := p.Publish(ctx, &gpubsub.Message{Data: []byte(m.data), OrderingKey: m.key}).Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	p.Stop()
	// 0 stays unacknowledged (and holds the floor down), 1 is acknowledged.
	ids := pullN(t, f, "s", 2)
	reply, _, _ := strings.Cut(ids["1"], "#")
	nc := f.b.Conn()
	if err := nc.Publish(reply, []byte("+ACK")); err != nil {
		t.Fatal(err)
	}
	fctx, fcancel := context.WithTimeout(ctx, 10*time.Second)
	defer fcancel()
	if err := nc.FlushWithContext(fctx); err != nil {
		t.Fatal(err)
	}
	// The broker has it; the record does not. The first server stops (a
	// restart of weir): message 2, which it kept behind 1, goes back to
	// the broker.
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	defer scancel()
	f.srv.Stop(sctx)

	clock := &fakeClock{t: time.Now()}
	srv := pubsubgrpc.New(f.b, pubsubgrpc.Options{Logger: quiet(), Clock: clock.now, PullWait: 300 * time.Millisecond})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Stop(sctx)
		<-served
	}()
	t.Setenv("PUBSUB_EMULATOR_HOST", ln.Addr().String())
	c2, err := gpubsub.NewClient(ctx, project)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	// Each pull waits up to PullWait for a first message: longer than the
	// 250 ms after which the broker offers a held-back message again.
	pull := func() []string {
		t.Helper()
		r, err := c2.SubscriptionAdminClient.Pull(ctx, &pubsubpb.PullRequest{Subscription: subPath("s"), MaxMessages: 10})
		if err != nil {
			t.Fatalf("Pull from the new server: %v", err)
		}
		var got []string
		for _, rm := range r.GetReceivedMessages() {
			got = append(got, string(rm.GetMessage().GetData()))
		}
		return got
	}
	// Held back: for all the new server knows, 1 is still unacknowledged.
	for range 3 {
		if got := pull(); len(got) != 0 {
			t.Fatalf("before the bound the new server delivered %v; want message 2 held back behind 1", got)
		}
	}
	clock.add(pubsubgrpc.MaxAckDeadline + 2*time.Minute)
	var got []string
	if !await.Until(10*time.Second, 20*time.Millisecond, func() bool {
		got = append(got, pull()...)
		return len(got) > 0
	}) || strings.Join(got, ",") != "2" {
		t.Fatalf("after the bound the new server delivered %v; want 2", got)
	}
}
