package pubsub

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// reloadingJS answers the first misses consumer lookups with "not found",
// as the broker does for a moment while it loads its streams and consumers
// again after a full disk: the stream is back, its consumers not yet.
type reloadingJS struct {
	jetstream.JetStream
	misses atomic.Int32
}

func (r *reloadingJS) Consumer(ctx context.Context, stream, name string) (jetstream.Consumer, error) {
	if r.misses.Add(-1) >= 0 {
		return nil, jetstream.ErrConsumerNotFound
	}
	return r.JetStream.Consumer(ctx, stream, name)
}

// TestSourceOpensSubscriptionDuringReload: a source whose subscription
// exists but is missing from the broker's view for a moment (its lookup
// says "not found", its creation "exists") opens it once the view is
// complete, instead of failing its job with "subscription already exists"
// (CI saw this when a job resumed after a full disk).
func TestSourceOpensSubscriptionDuringReload(t *testing.T) {
	b := newTestBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := b.CreateTopic(ctx, "orders", TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateSubscription(ctx, "orders--Read", "orders", SubscriptionConfig{}); err != nil {
		t.Fatal(err)
	}
	for _, misses := range []int32{1, 3, 10} {
		// A broker of its own on the same connection, whose lookups miss.
		view, err := newBroker(b.nc, b.srv, testLogger(), b.clock)
		if err != nil {
			t.Fatal(err)
		}
		r := &reloadingJS{JetStream: view.js}
		r.misses.Store(misses)
		view.js = r
		src, err := NewSource(view, SourceConfig{Step: "Read", Topic: "orders", Subscription: "orders--Read", Schema: orderSchema})
		if err != nil {
			t.Fatal(err)
		}
		topic, c, err := src.consumer(ctx, 0)
		if err != nil {
			t.Fatalf("%d missed lookups: %v", misses, err)
		}
		if topic != "orders" || c.CachedInfo().Name != NATSName("orders--Read") {
			t.Errorf("%d missed lookups: opened %s on %s", misses, c.CachedInfo().Name, topic)
		}
	}

	// A subscription of the name on another topic is refused, not waited
	// for.
	if _, err := b.CreateTopic(ctx, "other", TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	other, err := NewSource(b, SourceConfig{Step: "Read", Topic: "other", Subscription: "orders--Read", Schema: orderSchema})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = other.consumer(ctx, 0)
	if !errors.Is(err, ErrSubscriptionExists) || !strings.Contains(err.Error(), "belongs to topic orders") {
		t.Fatalf("opening a subscription of another topic: %v", err)
	}
}

// closedConsumerJS is a broker view in which a subscription stays missing
// to lookups (while its creation says "exists") until JetStream was loaded
// again for it: a consumer a storage failure left closed in its stream.
type closedConsumerJS struct {
	jetstream.JetStream
	rec *recovery
}

func (c *closedConsumerJS) Consumer(ctx context.Context, stream, name string) (jetstream.Consumer, error) {
	if c.rec.closedReloads.Load() == 0 {
		return nil, jetstream.ErrConsumerNotFound
	}
	return c.JetStream.Consumer(ctx, stream, name)
}

// TestSourceReloadsForClosedConsumer: a subscription that lookups keep
// missing while its creation says "exists" — a consumer a full disk left
// closed in its stream, which only a reload of JetStream clears — makes
// the source ask for one reload, and it opens the subscription after it,
// its messages still there (CI saw a job wait on such a consumer for good
// after a full disk).
func TestSourceReloadsForClosedConsumer(t *testing.T) {
	b := newTestBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := b.CreateTopic(ctx, "orders", TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateSubscription(ctx, "orders--Read", "orders", SubscriptionConfig{FromBeginning: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish(ctx, "orders", []byte(`{"id": "a", "amount": 1}`), nil, ""); err != nil {
		t.Fatal(err)
	}
	view, err := newBroker(b.nc, b.srv, testLogger(), b.clock)
	if err != nil {
		t.Fatal(err)
	}
	view.recovery = b.recovery
	view.js = &closedConsumerJS{JetStream: view.js, rec: b.recovery}
	src, err := NewSource(view, SourceConfig{Step: "Read", Topic: "orders", Subscription: "orders--Read", Schema: orderSchema})
	if err != nil {
		t.Fatal(err)
	}
	_, c, err := src.consumer(ctx, 0)
	if err != nil {
		t.Fatalf("opening the subscription: %v", err)
	}
	if n := b.recovery.closedReloads.Load(); n != 1 {
		t.Errorf("JetStream was loaded again %d times, want once", n)
	}
	info, err := c.Info(ctx)
	if err != nil || info.NumPending != 1 {
		t.Errorf("after the reload the subscription has %v pending (%v), want its 1 message", info, err)
	}
	// A second source meeting the same within the interval does not
	// reload again.
	if again, err := view.reloadForClosedConsumer("orders--Read"); again || err != nil {
		t.Errorf("a second reload within %v: %v %v, want none", closedConsumerReloadEvery, again, err)
	}
}
