package pubsubgrpc_test

import (
	"context"
	"fmt"
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

// BenchmarkReceiveBacklog publishes a backlog of unacknowledged messages
// (1k, 5k, 20k) and then receives and acknowledges all of them with the Go
// client's streaming pull (flow control at 4,000 outstanding): msgs/s is
// the receive phase's rate. Throughput must not fall once the backlog
// exceeds the flow-control window.
func BenchmarkReceiveBacklog(b *testing.B) {
	for _, backlog := range []int{1000, 5000, 20000} {
		b.Run(fmt.Sprintf("unacked=%d", backlog), func(b *testing.B) {
			f := start(b, pubsubgrpc.Options{})
			f.topic(b, "bench")
			f.subscription(b, "bench-sub", "bench", false, 0)
			ctx := context.Background()
			payload := make([]byte, 100)
			p := f.client.Publisher("bench")
			defer p.Stop()
			var elapsed time.Duration
			for range b.N {
				results := make([]*gpubsub.PublishResult, backlog)
				for i := range backlog {
					results[i] = p.Publish(ctx, &gpubsub.Message{Data: payload})
				}
				for _, r := range results {
					if _, err := r.Get(ctx); err != nil {
						b.Fatal(err)
					}
				}
				var n atomic.Int64
				rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
				s := f.client.Subscriber("bench-sub")
				s.ReceiveSettings.MaxOutstandingMessages = 4000
				t0 := time.Now()
				err := s.Receive(rctx, func(_ context.Context, m *gpubsub.Message) {
					m.Ack()
					if n.Add(1) == int64(backlog) {
						cancel()
					}
				})
				elapsed += time.Since(t0)
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				if n.Load() < int64(backlog) {
					b.Fatalf("received %d of %d", n.Load(), backlog)
				}
			}
			b.ReportMetric(float64(backlog*b.N)/elapsed.Seconds(), "msgs/s")
		})
	}
}
