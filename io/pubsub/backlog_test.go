package pubsub

import (
	"fmt"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/runner/contract"
)

// TestSourceBacklogThroughItsSplit: the backlog metrics of a source whose
// split is open ask the split's subscription directly (one JetStream API
// request) instead of looking the subscription up over every topic's
// stream, and answer nothing once the subscription is deleted.
func TestSourceBacklogThroughItsSplit(t *testing.T) {
	b := newTestBroker(t)
	ctx := tctx(t)
	setupTopic(t, b, "bl", "bl", 0)
	setupTopic(t, b, "other", "other", 0) // a second topic: a lookup searches both
	for i := range 5 {
		if _, err := b.Publish(ctx, "bl", []byte(fmt.Sprintf(`{"region":"N","amount":%d,"ts":"2026-03-01T00:00:00Z"}`, i)), nil, ""); err != nil {
			t.Fatal(err)
		}
	}
	src, err := NewSource(b, SourceConfig{Subscription: "bl", Schema: orderSchema, TimestampField: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	apiCalls := func() uint64 {
		t.Helper()
		ai, err := b.js.AccountInfo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ai.API.Total
	}
	// The broker counts a consumer's pending messages a moment after it
	// acknowledged their publish: wait until it has, then count the
	// requests of one sample.
	if !await.Until(10*time.Second, 5*time.Millisecond, func() bool { n, ok := src.BacklogElements(); return ok && n == 5 }) {
		n, ok := src.BacklogElements()
		t.Fatalf("backlog before the split opened: %d, %v; want 5", n, ok)
	}
	before := apiCalls()
	if n, ok := src.BacklogElements(); !ok || n != 5 {
		t.Fatalf("backlog before the split opened: %d, %v; want 5", n, ok)
	}
	lookup := apiCalls() - before - 1 // less the AccountInfo call itself

	sp := openSplit(t, src)
	buf := make([]contract.Element, 2)
	if res, err := sp.Read(ctx, buf); err != nil || res.N == 0 {
		t.Fatalf("read: %+v, %v", res, err)
	}
	before = apiCalls()
	if n, ok := src.BacklogElements(); !ok || n != 5 {
		t.Fatalf("backlog with the split open: %d, %v; want 5 (nothing acknowledged)", n, ok)
	}
	direct := apiCalls() - before - 1
	if direct != 1 || lookup <= direct {
		t.Fatalf("JetStream API requests for one backlog sample: %d through the split, %d by lookup; want 1 and more", direct, lookup)
	}
	if n, ok := src.BacklogBytes(); !ok || n <= 0 {
		t.Fatalf("backlog bytes: %d, %v", n, ok)
	}

	// The subscription deleted (the split's handle is stale).
	if err := b.DeleteSubscription(ctx, "bl"); err != nil {
		t.Fatal(err)
	}
	if _, ok := src.BacklogElements(); ok {
		t.Fatal("a backlog for a deleted subscription")
	}
}
