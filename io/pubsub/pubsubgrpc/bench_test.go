package pubsubgrpc_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"

	"github.com/weir-dev/weir/io/pubsub/pubsubgrpc"
)

// BenchmarkClientPublishReceive publishes b.N 100-byte messages with
// Google's Go client (batched, as the client does) and receives them all
// through its streaming pull, acknowledging each: the per-message cost of
// the round trip through the gRPC API and the broker.
func BenchmarkClientPublishReceive(b *testing.B) {
	f := start(b, pubsubgrpc.Options{})
	f.topic(b, "bench")
	f.subscription(b, "bench-sub", "bench", false, 0)
	ctx := context.Background()
	payload := make([]byte, 100)
	p := f.client.Publisher("bench")
	defer p.Stop()
	b.ResetTimer()
	results := make([]*gpubsub.PublishResult, b.N)
	for i := range b.N {
		results[i] = p.Publish(ctx, &gpubsub.Message{Data: payload})
	}
	for _, r := range results {
		if _, err := r.Get(ctx); err != nil {
			b.Fatal(err)
		}
	}
	var n atomic.Int64
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	s := f.client.Subscriber("bench-sub")
	s.ReceiveSettings.MaxOutstandingMessages = 4000
	if err := s.Receive(rctx, func(_ context.Context, m *gpubsub.Message) {
		m.Ack()
		if n.Add(1) == int64(b.N) {
			cancel()
		}
	}); err != nil {
		b.Fatal(err)
	}
	if n.Load() < int64(b.N) {
		b.Fatalf("received %d of %d", n.Load(), b.N)
	}
}
